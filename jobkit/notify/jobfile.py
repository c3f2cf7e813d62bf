"""`notify.from: job`, the submit side: the job's notify section (its webhook URL resolved,
the secret) written to a 0600 file in a 0700 folder of logs.dir, which the job reaches
wherever it runs; its path travels in the job's environment (JOBKIT_NOTIFY_FILE), never in
the script or an argument (docs/notify.md, "Sent by the job")."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import TYPE_CHECKING, Any

from jobkit.core import private
from jobkit.core.errors import JobkitError
from jobkit.notify.spec import sender

if TYPE_CHECKING:
    from jobkit.spec.schema import JobSpec

NOTIFY_DIR = ".jobkit-notify"
"""logs.dir/NOTIFY_DIR/<jobkit id>.json: one file per job, removed by the job at its end."""


def job_webhook(spec: JobSpec) -> str | None:
    """The webhook URL the job gets (a `$NAME` read from this environment); JobkitError in
    one line when NAME is not set (checked before anything is submitted)."""
    if spec.notify is None or sender(spec.notify) != "job" or not spec.notify.webhook:
        return None
    webhook = spec.notify.webhook
    if not webhook.startswith("$"):
        return webhook
    url = os.environ.get(webhook[1:], "")
    if not url:
        raise JobkitError(
            f"notify.webhook: the environment variable {webhook[1:]} is not set here, and"
            " notify.from: job hands the URL to the job at submit (export it first)"
        )
    return url


def job_notify_file(spec: JobSpec, jobkit_id: str, logs_dir: Path) -> Path | None:
    """Write the file for a job whose notify.from is job; its path (None: the watcher
    sends). A `$NAME` webhook is read here, from the submitter's environment."""
    if spec.notify is None or sender(spec.notify) != "job":
        return None
    section: dict[str, Any] = spec.notify.model_dump(mode="json")
    section["webhook"] = job_webhook(spec)
    facts = {
        "jobkit_id": jobkit_id,
        "name": spec.name,
        "backend": spec.backend,
        "spec": spec.model_dump(mode="json", exclude={"notify"}),
        "notify": section,
    }
    folder = logs_dir / NOTIFY_DIR
    try:
        private.make_dir(folder)
        os.chmod(folder, private.DIR_MODE)  # made before by an older jobkit: tighten it
        path = folder / f"{jobkit_id}.json"
        private.write_file(path, json.dumps(facts), private.FILE_MODE)
    except OSError as err:
        raise JobkitError(
            f"notify.from: job: cannot write {folder}: {err.strerror or err}"
        ) from None
    return path
