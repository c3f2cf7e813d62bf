"""`jobkit show ID`: one page saying what ran, where, from which code and which software."""

from __future__ import annotations

import time
from typing import Any

from jobkit.core.display import printable
from jobkit.provenance.compare import settings
from jobkit.provenance.read import Provenance

PACKAGES_NAMED = ("torch", "numpy", "jobkit")
"""Packages named on the page (all of them are in --json)."""


def page(p: Provenance) -> list[str]:
    """The page's lines (user text made safe to print)."""
    record, submit, job = p.record, p.submit or {}, p.job
    state = record.state + (f" (exit {record.exit_code})" if record.exit_code is not None else "")
    lines = [
        f"{record.jobkit_id}  {record.name}  {record.backend} {record.scheduler_id or '-'}"
        f"  {state}  attempt {record.attempt} of run {record.run_key}",
        _row("submitted", f"{_when(record.submitted_at or record.created_at)} in {record.workdir}"),
        _row("command", submit.get("command_line") or "(not recorded)"),
        _row("spec", submit.get("spec_file") or "(not recorded)"),
        *_code_rows(p),
        *_software_rows(job),
        _row("run folder", record.run_dir or "-"),
    ]
    files = p.to_dict()["files"]
    lines.append(_row("provenance", files["started"] or files["submit"] or "(none recorded)"))
    return [printable(line) for line in lines]


def _row(label: str, value: str) -> str:
    return f"  {label:<11} {value}"


def _when(at: float | None) -> str:
    return time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(at)) if at else "-"


def _code_rows(p: Provenance) -> list[str]:
    code = p.code
    if not code:
        return [_row("code", "(not recorded: submitted before jobkit kept provenance)")]
    if not code.get("git"):
        why = code.get("why") or "not in a git work tree"
        return [_row("code", f"{why}: ran as the folder was when it started (no snapshot)")]
    commit = (code.get("commit") or "no commit yet")[:12]
    where = f"{code.get('branch') or 'detached HEAD'} @ {commit}"
    changed = code.get("changed") or []
    count = len(changed) if isinstance(changed, list) else int(changed)
    rows = [_row("code", f"{where}{', remote ' + code['remote'] if code.get('remote') else ''}")]
    if count:
        named = ", ".join(changed[:5]) if isinstance(changed, list) else ""
        more = f" (+{count - 5} more)" if count > 5 else ""
        rows.append(_row("changes", f"{count} file(s) not committed: {named}{more}".rstrip(": ")))
        rows.append(_row("patch", str(p.patch_path or "(gone)")))
    untracked = code.get("untracked_count") or 0
    if untracked:
        rows.append(_row("untracked", f"{untracked} file(s) (names in --json)"))
    snapshot = p.snapshot_dir
    if snapshot is None:
        rows.append(_row("snapshot", "none: ran the submit folder in place"))
    else:
        there = "present" if snapshot.is_dir() else "GONE"
        rows.append(_row("snapshot", f"{code.get('code_dir') or snapshot} ({there})"))
    return rows


def _software_rows(job: dict[str, Any] | None) -> list[str]:
    if job is None:
        return [_row("software", "(not recorded: not started yet, or not taken)")]
    python = job.get("python") or {}
    packages = job.get("packages") or {}
    named = ", ".join(f"{n} {packages[n]}" for n in PACKAGES_NAMED if n in packages)
    gpu = ", ".join(job.get("gpus") or []) or "none"
    # In a container job the job side runs on the host, before the launch: not the image's.
    host = " (the host's, outside the image)" if job.get("container") else ""
    rows = [
        _row("python", f"{python.get('version', '?')} {python.get('executable', '')}{host}"),
        _row("packages", f"{len(packages)}: {named}" if named else str(len(packages))),
        _row("cuda/nccl", f"{job.get('cuda') or '-'} / {job.get('nccl') or '-'}; GPUs: {gpu}"),
        *_environment_rows(job),
        _row("hosts", " ".join(job.get("hosts") or []) or job.get("host") or "-"),
    ]
    record = job.get("scheduler_record")
    if isinstance(record, dict):
        found = settings(record)
        keys = ("Partition", "QOS", "NumNodes", "NumCPUs", "TimeLimit", "queue")
        shown = " ".join(f"{k}={found[k]}" for k in keys if k in found)
        rows.append(_row("scheduler", f"{record.get('command', '')}: {shown or '(recorded)'}"))
    return rows


def _environment_rows(job: dict[str, Any]) -> list[str]:
    """conda, modules and container: each only where the job had one."""
    rows: list[str] = []
    conda = job.get("conda")
    if isinstance(conda, dict):
        exported = "exported (--json)" if conda.get("export") else conda.get("export_note")
        name = f" ({conda['name']})" if conda.get("name") else ""
        count = len(conda.get("packages") or {})
        rows.append(_row("conda", f"{conda.get('prefix')}{name}: {count} package(s); {exported}"))
    found = job.get("modules")
    if isinstance(found, dict):
        loaded = " ".join(found.get("loaded") or []) or "none loaded"
        rows.append(_row("modules", f"{found.get('system')}: {loaded}"))
    image = job.get("container")
    if isinstance(image, dict):
        digest = image.get("digest") or f"no digest: {image.get('note') or '?'}"
        rows.append(_row("container", f"{image.get('runtime')} {image.get('image')} {digest}"))
    return rows
