"""What `jobkit submit` records (jobkit/provenance/record.py) and the note it prints when
the code cannot be frozen."""

from __future__ import annotations

import json
import shutil
import tempfile
from collections.abc import Mapping
from dataclasses import replace
from pathlib import Path
from typing import Any, ClassVar

import pytest

from jobkit.backends import registry
from jobkit.backends.honours import How
from jobkit.backends.local import LocalBackend
from jobkit.manager.submit import plan_submission
from jobkit.provenance.record import (
    freeze,
    recorded_code,
    registry_summary,
    with_code,
    write_for_job,
)
from jobkit.spec.load import load_spec
from tests.provenance.repo import make_repo


@pytest.fixture(autouse=True)
def home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("JOBKIT_HOME", str(tmp_path / "home"))
    return tmp_path / "home"


def _plan(sub: Path, *sets: str) -> Any:
    spec = load_spec(sub / "job.yaml", sets=sets, profile_dirs=[]).spec
    return plan_submission(spec, workdir=sub)


def test_submit_side_record_and_patch(tmp_path: Path) -> None:
    sub = make_repo(tmp_path)
    (sub / "prog.py").write_text('print("v2")\n')
    plan = _plan(sub)
    frozen = freeze(plan, spec_file=sub / "job.yaml")
    assert frozen.note is None and frozen.code_dir is not None
    job_dir = tmp_path / "job"
    job_dir.mkdir()
    code_dir, path = write_for_job(with_code(plan, frozen), "jkabc", job_dir)
    assert code_dir == frozen.code_dir and (code_dir / "prog.py").read_text() == 'print("v2")\n'
    data = json.loads(path.read_text())
    assert data["jobkit_id"] == "jkabc" and data["spec"]["name"] == "frozen"
    assert data["spec_as_written"] == (sub / "job.yaml").read_text()
    assert data["code"]["changed"] == ["sub/prog.py"] and data["code"]["branch"] == "main"
    assert '+print("v2")' in (job_dir / "code.patch").read_text()
    assert path.stat().st_mode & 0o077 == 0
    again = recorded_code(job_dir)
    assert again is not None and again.code_dir == code_dir and again.patch == frozen.patch
    summary = registry_summary(frozen)["code"]
    assert summary["changed"] == 1 and summary["tree"] == frozen.facts["tree"]


class NoSnapshotBackend(LocalBackend):
    """A plug-in backend whose jobs cannot run from a snapshot (every built-in one can)."""

    honours: ClassVar[Mapping[str, How]] = {
        k: v for k, v in LocalBackend.honours.items() if not k.startswith("code.")
    }


def test_a_backend_that_cannot_run_snapshots_says_so_and_records_the_code(
    tmp_path: Path, home: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Registered as plug-ins are, through an entry point (docs/design.md)."""
    info = tmp_path / "site" / "nosnap_plugin-0.dist-info"
    info.mkdir(parents=True)
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: nosnap-plugin\nVersion: 0\n")
    (info / "entry_points.txt").write_text(
        "[jobkit.backends]\nnosnap = tests.provenance.test_record:NoSnapshotBackend\n"
    )
    monkeypatch.syspath_prepend(str(tmp_path / "site"))
    registry._plugins.cache_clear()
    try:
        sub = make_repo(tmp_path)
        plan = replace(_plan(sub), backend="nosnap")
        frozen = freeze(plan, spec_file=None)
    finally:
        registry._plugins.cache_clear()
        registry.backend_class.cache_clear()
    assert frozen.code_dir is None and frozen.facts["commit"]
    assert frozen.note == (
        "the nosnap backend runs the submit folder as it is when the job starts: code not"
        " frozen (commit and changes recorded; docs/provenance.md)"
    )
    assert not (home / "snapshots").exists()


def test_snapshot_off_and_outside_git_are_quiet_and_the_run_says_why(tmp_path: Path) -> None:
    sub = make_repo(tmp_path)
    off = freeze(_plan(sub, "code.snapshot=false"), spec_file=None)
    assert off.note is None and off.code_dir is None and off.facts["git"] is True
    plain = tmp_path / "plain"
    plain.mkdir()
    (plain / "job.yaml").write_text((sub / "job.yaml").read_text())
    outside = freeze(_plan(plain), spec_file=None)
    assert outside.note is None and outside.code_dir is None
    assert outside.facts == {"git": False, "why": f"{plain} is not inside a git work tree"}


def test_a_container_job_runs_from_the_snapshot_where_the_runtime_can_mount_it(
    tmp_path: Path, home: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """podman (and charliecloud with JOBKIT_HOME under /tmp, bound by ch-run) get the
    snapshot; pyxis, and charliecloud with snapshots elsewhere, say in one line that they
    run the submit folder (the code's facts are recorded all the same)."""
    sub = make_repo(tmp_path)
    (sub / "prog.py").write_text('print("v2")\n')
    for runtime in ("podman", "charliecloud"):
        plan = _plan(sub, "container.image=/img/torch", f"container.runtime={runtime}")
        frozen = freeze(plan, spec_file=sub / "job.yaml")
        assert frozen.note is None and frozen.code_dir is not None
        assert (frozen.code_dir / "prog.py").read_text() == 'print("v2")\n'
    pyxis_plan = _plan(sub, "backend=slurm", "container.image=x", "container.runtime=pyxis")
    pyxis = freeze(pyxis_plan, spec_file=None)
    assert pyxis.code_dir is None and pyxis.facts["changed"] == ["sub/prog.py"] and pyxis.patch
    assert pyxis.note == (
        "a pyxis container job runs the submit folder as it is when it starts: code not"
        " frozen (commit and changes recorded; docs/provenance.md)"
    )
    elsewhere = tempfile.mkdtemp(prefix="jobkit-home-", dir="/var/tmp")  # not under /tmp
    try:
        monkeypatch.setenv("JOBKIT_HOME", elsewhere)
        plan = _plan(sub, "container.image=/img/torch", "container.runtime=charliecloud")
        charliecloud = freeze(plan, spec_file=None)
        assert charliecloud.code_dir is None and not Path(elsewhere, "snapshots").exists()
        assert charliecloud.note is not None and charliecloud.note.startswith(
            "a charliecloud job runs the submit folder as it is when it starts (ch-run can"
            f" mount the snapshot only under /tmp; JOBKIT_HOME's snapshots are in {elsewhere}"
        )
    finally:
        shutil.rmtree(elsewhere)
