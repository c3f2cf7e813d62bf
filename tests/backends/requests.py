"""Building SubmitRequests for backend tests: a spec, a script written to disk, folders."""

from __future__ import annotations

import secrets
from pathlib import Path
from typing import Any

from jobkit.backends.base import SubmitRequest, TrackedJob
from jobkit.spec.schema import JobSpec


def make_request(
    tmp_path: Path, script: str, *, name: str = "job", **spec_fields: Any
) -> SubmitRequest:
    """A request for `script` with a fresh jobkit id; workdir and job folder under tmp_path."""
    jobkit_id = "jk" + secrets.token_hex(3)
    workdir = tmp_path / "work"
    job_dir = tmp_path / "home" / "jobs" / jobkit_id
    workdir.mkdir(parents=True, exist_ok=True)
    job_dir.mkdir(parents=True, exist_ok=True)
    script_path = job_dir / "job.sh"
    script_path.write_text(script)
    fields: dict[str, Any] = {"name": name, "run": {"command": ["true"]}}
    fields.update(spec_fields)
    return SubmitRequest(
        jobkit_id=jobkit_id,
        spec=JobSpec.model_validate(fields),
        script=script,
        script_path=script_path,
        job_dir=job_dir,
        workdir=workdir,
        token=secrets.token_hex(8),
    )


def tracked(request: SubmitRequest, scheduler_id: str, extra: dict[str, str]) -> TrackedJob:
    """The registry's view of a submitted request."""
    return TrackedJob(
        jobkit_id=request.jobkit_id,
        scheduler_id=scheduler_id,
        job_dir=request.job_dir,
        workdir=request.workdir,
        extra=dict(extra),
    )
