"""What `jobkit submit` records about a submission's code and spec (docs/provenance.md).

`freeze(plan, ...)` takes the code snapshot the job runs from (or says in one line why there
is none) and gathers the submit side's provenance: commit, branch, remote, the uncommitted
changes as a patch, untracked names, the command line, the spec as written and resolved, the
script. `write_submit_side` leaves it in the job's folder (provenance.json, code.patch); the
job adds its own side at start (provenance/jobside.py). Environment values are never read.
"""

from __future__ import annotations

import shlex
import sys
import time
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from jobkit.core import private
from jobkit.core.errors import JobkitError
from jobkit.provenance.git import (
    EMPTY_TREE,
    NotInGit,
    branch,
    git_bytes,
    head_commit,
    remote_url,
    untracked_names,
    work_tree,
)
from jobkit.provenance.snapshot import Snapshot, stage_tree, take_snapshot

if TYPE_CHECKING:
    from jobkit.manager.submit import Plan

PROVENANCE_FILE = "provenance.json"
"""The submit side's record, in the job's folder (and copied into the run folder)."""
PATCH_FILE = "code.patch"
"""The uncommitted changes (HEAD -> the snapshot) as a patch, beside it."""
DOC = "docs/provenance.md"
UNTRACKED_LISTED = 1000
"""Untracked names recorded at most (a folder of data files would swamp the record)."""


@dataclass(frozen=True)
class FrozenCode:
    """The code a submission runs from and what is known about it at submit."""

    code_dir: Path | None
    """The snapshot's copy of the submit folder (the job's working folder); None: the job
    runs the submit folder itself."""
    facts: dict[str, Any] = field(default_factory=dict)
    """provenance.json's `code` part."""
    patch: bytes = b""
    """The uncommitted changes as a patch (code.patch)."""
    note: str | None = None
    """One line for stderr when the code is not frozen though it was not turned off."""
    spec_file: Path | None = None
    """The job file the user gave."""
    spec_text: str | None = None
    """Its text as it was at submit."""


def freeze(plan: Plan, *, spec_file: Path | None) -> FrozenCode:
    """The snapshot for this plan, taken now, with the code's facts (where the backend's jobs
    cannot run from a snapshot, the facts only, and a note saying so)."""
    from jobkit.backends.honours import runs_snapshots
    from jobkit.backends.registry import backend_class

    frozen_here = runs_snapshots(backend_class(plan.backend))
    container_note = container_not_frozen(plan)
    in_container = container_note is not None
    text = _read_text(spec_file)
    code = plan.spec.code
    folder = plan.workdir
    want = code.snapshot and frozen_here and not in_container
    try:
        top, index = work_tree(folder)
    except NotInGit as why:
        # Quiet at submit: most jobs outside git are on purpose, and a line on every submit
        # would be noise. The run says so: `jobkit show` reads the reason (docs/provenance.md).
        facts = {"git": False, "why": str(why)}
        return FrozenCode(None, facts, spec_file=spec_file, spec_text=text)
    if want:
        shot = take_snapshot(
            folder, include_untracked=code.include_untracked, max_bytes=code.max_size << 20
        )
        tree = shot.tree
    else:
        shot = None
        tree = stage_tree(top, index, include_untracked=code.include_untracked)
    facts, patch = code_facts(top, tree, shot)
    note = None
    if code.snapshot and not frozen_here:
        note = (
            f"the {plan.backend} backend runs the submit folder as it is when the job starts:"
            " code not frozen (commit and changes recorded; docs/provenance.md)"
        )
    elif code.snapshot and container_note:
        note = f"{container_note}: code not frozen (commit and changes recorded; {DOC})"
    return FrozenCode(shot.code_dir if shot else None, facts, patch, note, spec_file, text)


def container_not_frozen(plan: Plan) -> str | None:
    """Why this container job cannot run from a snapshot (None: it can, or no container).
    The snapshot's folder is mounted at its own path (container/words.py); ch-run needs that
    path to exist in a read-only image, which it does only under the host's /tmp (bound by
    ch-run): a snapshot per tree cannot be made in the image beforehand."""
    from jobkit.container.preflight import HOST_SHARED
    from jobkit.container.words import FROZEN_CODE_RUNTIMES
    from jobkit.provenance.snapshot import snapshots_dir

    container = plan.spec.container
    if container is None:
        return None
    if container.runtime not in FROZEN_CODE_RUNTIMES:
        return f"a {container.runtime} container job runs the submit folder as it is when it starts"
    store = snapshots_dir().resolve()
    if container.runtime == "charliecloud" and not any(
        store.is_relative_to(shared) for shared in HOST_SHARED
    ):
        return (
            f"a charliecloud job runs the submit folder as it is when it starts (ch-run can"
            f" mount the snapshot only under {', '.join(HOST_SHARED)}; JOBKIT_HOME's snapshots"
            f" are in {store})"
        )
    return None


def code_facts(top: Path, tree: str, shot: Snapshot | None) -> tuple[dict[str, Any], bytes]:
    """The `code` part of provenance.json, and the patch from HEAD to `tree`."""
    commit = head_commit(top)
    patch = git_bytes(
        top, "diff", "--binary", "--no-color", "--no-ext-diff", commit or EMPTY_TREE, tree
    )
    changed = git_bytes(top, "diff", "--name-only", "-z", commit or EMPTY_TREE, tree)
    untracked = untracked_names(top)
    facts: dict[str, Any] = {
        "git": True,
        "top": str(top),
        "commit": commit,
        "branch": branch(top),
        "remote": remote_url(top),
        "tree": tree,
        "changed": [n for n in changed.decode(errors="surrogateescape").split("\0") if n],
        "untracked": untracked[:UNTRACKED_LISTED],
        "untracked_count": len(untracked),
        "patch_file": PATCH_FILE if patch else None,
        "snapshot": str(shot.root) if shot else None,
        "code_dir": str(shot.code_dir) if shot else None,
        "size": shot.size if shot else None,
    }
    return facts, patch


def with_code(plan: Plan, frozen: FrozenCode) -> Plan:
    """The plan, to run from `frozen`."""
    return replace(plan, code=frozen)


def write_for_job(plan: Plan, jobkit_id: str, job_dir: Path) -> tuple[Path | None, Path]:
    """The submit side's provenance written into the job's folder: the code folder the job
    runs from (None: the submit folder) and provenance.json's path."""
    frozen = plan.code
    code_dir = frozen.code_dir if frozen else None
    if code_dir is not None and not code_dir.is_dir():
        raise JobkitError(f"the code snapshot {code_dir} is gone: nothing to run from")
    record = submit_side(plan, jobkit_id=jobkit_id)
    return code_dir, write_submit_side(job_dir, record, frozen.patch if frozen else b"")


def submit_side(plan: Plan, *, jobkit_id: str) -> dict[str, Any]:
    """provenance.json as written at submit."""
    frozen = plan.code
    spec_file = frozen.spec_file if frozen else None
    return {
        "version": 1,
        "jobkit_id": jobkit_id,
        "submitted_at": time.time(),
        "command_line": command_line(),
        "submit_folder": str(plan.workdir),
        "spec_file": str(spec_file) if spec_file else None,
        "spec_as_written": frozen.spec_text if frozen else None,
        "spec": plan.spec.model_dump(mode="json"),
        "script": plan.script,
        "code": frozen.facts if frozen else {"git": None},
    }


def command_line() -> str:
    """This process's command line as the user typed it (the jobkit command's name)."""
    words = [Path(sys.argv[0]).name or "jobkit", *sys.argv[1:]]
    return shlex.join(words)


def _read_text(path: Path | None) -> str | None:
    if path is None:
        return None
    try:
        return path.read_text(encoding="utf-8", errors="replace")
    except OSError:
        return None


def write_submit_side(job_dir: Path, record: dict[str, Any], patch: bytes) -> Path:
    """provenance.json (and code.patch) in the job's folder, its owner's only."""
    import json

    if patch:
        path = job_dir / PATCH_FILE
        private.create_empty(path)
        path.write_bytes(patch)
    target = job_dir / PROVENANCE_FILE
    private.write_file(target, json.dumps(record, indent=1, sort_keys=True) + "\n")
    return target


def registry_summary(frozen: FrozenCode | None) -> dict[str, Any]:
    """The registry's short form (extra['code']): commit, branch, changed count, snapshot."""
    if frozen is None or not frozen.facts.get("git"):
        return {"code": {"git": False}} if frozen is not None else {}
    facts = frozen.facts
    keep = ("commit", "branch", "tree", "snapshot", "code_dir")
    return {"code": {**{k: facts.get(k) for k in keep}, "changed": len(facts["changed"])}}


def read_submit_side(job_dir: Path) -> dict[str, Any] | None:
    """A job's provenance.json as `jobkit submit` wrote it (None: none, or unreadable)."""
    import json

    try:
        data = json.loads((job_dir / PROVENANCE_FILE).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    return data if isinstance(data, dict) else None


def recorded_code(job_dir: Path) -> FrozenCode | None:
    """The code an earlier submission ran from, to run again (a later attempt, a rerun):
    its snapshot and facts, the patch as recorded; None when nothing was recorded."""
    data = read_submit_side(job_dir)
    if data is None or not isinstance(data.get("code"), dict):
        return None
    facts: dict[str, Any] = data["code"]
    code_dir = facts.get("code_dir")
    try:
        patch = (job_dir / PATCH_FILE).read_bytes() if facts.get("patch_file") else b""
    except OSError:
        patch = b""
    spec_file = data.get("spec_file")
    return FrozenCode(
        Path(code_dir) if code_dir else None,
        facts,
        patch,
        spec_file=Path(spec_file) if spec_file else None,
        spec_text=data.get("spec_as_written"),
    )
