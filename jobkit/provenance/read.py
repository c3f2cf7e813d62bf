"""A job's provenance read back for `jobkit show` and `jobkit diff`: the submit side from the
job's folder (provenance.json), the job's side from its run folder
(provenance/<JOBKIT_JOB_ID>.json), the registry's summary when the files are gone."""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from jobkit.provenance.jobside import FOLDER
from jobkit.provenance.record import PATCH_FILE, read_submit_side
from jobkit.registry.record import JobRecord


@dataclass(frozen=True)
class Provenance:
    """What is known about how one job ran."""

    record: JobRecord
    submit: dict[str, Any] | None
    """provenance.json as `jobkit submit` wrote it (None: not recorded, or gone)."""
    job: dict[str, Any] | None
    """The job's own record taken at its start (None: not started, or not recorded)."""
    job_file: Path | None
    """Where `job` was read from."""

    @property
    def code(self) -> dict[str, Any]:
        """The code facts: the submit side's, else the registry's summary."""
        if self.submit and isinstance(self.submit.get("code"), dict):
            return dict(self.submit["code"])
        summary = self.record.extra.get("code")
        return dict(summary) if isinstance(summary, dict) else {}

    @property
    def spec(self) -> dict[str, Any]:
        """The resolved spec the job was submitted with."""
        if self.submit and isinstance(self.submit.get("spec"), dict):
            return dict(self.submit["spec"])
        return self.record.spec

    @property
    def patch_path(self) -> Path | None:
        """The uncommitted changes' patch, in the job's folder."""
        path = self.record.job_dir / PATCH_FILE
        return path if self.code.get("patch_file") and path.is_file() else None

    @property
    def snapshot_dir(self) -> Path | None:
        """The snapshot's top folder, when the job ran from one (it may be gone since)."""
        value = self.code.get("snapshot")
        return Path(value) if value else None

    def to_dict(self) -> dict[str, Any]:
        """`jobkit show --json`: the row, both sides, where they are."""
        snapshot = self.snapshot_dir
        return {
            "job": self.record.to_dict(),
            "submit": self.submit,
            "started": self.job,
            "files": {
                "submit": str(self.record.job_dir / "provenance.json") if self.submit else None,
                "started": str(self.job_file) if self.job_file else None,
                "patch": str(self.patch_path) if self.patch_path else None,
                "snapshot": str(snapshot) if snapshot else None,
                "snapshot_present": bool(snapshot and snapshot.is_dir()),
            },
        }


def provenance_of(record: JobRecord) -> Provenance:
    """Both sides of the record's provenance, as far as they can be read."""
    submit = read_submit_side(record.job_dir)
    job, path = _job_side(record)
    return Provenance(record, submit, job, path)


def _job_side(record: JobRecord) -> tuple[dict[str, Any] | None, Path | None]:
    """The job's own record in its run folder: the one of this attempt (a run's attempts
    share the folder), found by the jobkit id it copied or by the job's id."""
    from jobkit.manager.attempts import run_folder

    run_dir = run_folder(record)
    if not run_dir:
        return None, None
    names = _ids(record)
    found: tuple[dict[str, Any] | None, Path | None] = (None, None)
    for path in sorted((Path(run_dir) / FOLDER).glob("*.json")):
        data = _load(path)
        if data is None:
            continue
        submit = data.get("submit") or {}
        job = data.get("job") or {}
        if submit.get("jobkit_id") == record.jobkit_id and record.task is None:
            return job, path
        if job.get("job_id") in names:
            found = (job, path)
    return found


def _ids(record: JobRecord) -> set[str]:
    """The ids the job's script may know itself by (JOBKIT_JOB_ID)."""
    names = {record.jobkit_id}
    if record.scheduler_id:
        names.add(record.scheduler_id)
        names.add(record.scheduler_id.split(";")[0])
    return names


def _load(path: Path) -> dict[str, Any] | None:
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    return data if isinstance(data, dict) else None
