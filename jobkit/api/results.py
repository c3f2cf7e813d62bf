"""A function job's result read back (`Job.result()`): rank 0's return value from the run
folder's `function/result.pkl`, or the first failing rank's error raised as FunctionError
(jobkit/api/functions.py writes the call, jobkit/api/runner.py runs it)."""

from __future__ import annotations

import json
import pickle
from pathlib import Path
from typing import TYPE_CHECKING, Any

from jobkit.api.errors import FunctionError, JobFailed, NoResult

if TYPE_CHECKING:
    from jobkit.api.handles import Job


FUNCTION_DIR = "function"
"""Under the run folder: call.pkl (rank 0's copy), result.pkl, error-rank-R.json/.pkl."""


RESULT_FILE = "result.pkl"


ERROR_GLOB = "error-rank-*.json"


def read_result(job: Job) -> Any:
    """The job's function result (the job must have ended): rank 0's return value, or the
    first failing rank's exception raised as FunctionError."""
    run_dir = job.run_dir
    if run_dir is None:
        raise NoResult(f"job {job.id} has no run folder recorded (still submitting?)")
    folder = run_dir / FUNCTION_DIR
    failure = _first_failure(folder)
    if failure is not None:
        raise _function_error(job.id, folder, failure) from _remote_exception(folder, failure)
    result = folder / RESULT_FILE
    if job.state != "SUCCEEDED":
        how = f" (exit {job.exit_code})" if job.exit_code is not None else ""
        why = f": {job.reason}" if job.reason else ""
        raise JobFailed(
            f"job {job.id} ended {job.state}{how}{why} without a result; job.diagnose() says why"
        )
    if not result.is_file():
        raise NoResult(f"job {job.id} left no {result} (not a function job?)")
    try:
        with open(result, "rb") as stream:
            return pickle.load(stream)
    except Exception as err:  # a class this Python cannot import, a damaged file
        raise NoResult(
            f"job {job.id}: its result {result} cannot be read here: {type(err).__name__}: {err}"
        ) from err


def _first_failure(folder: Path) -> dict[str, Any] | None:
    """The earliest error record of any rank (by time, then rank)."""
    found: list[dict[str, Any]] = []
    for path in folder.glob(ERROR_GLOB):
        try:
            record = json.loads(path.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            continue
        if isinstance(record, dict):
            found.append(record)
    if not found:
        return None
    return min(found, key=lambda r: (float(r.get("time") or 0), int(r.get("rank") or 0)))


def _function_error(job_id: str, folder: Path, failure: dict[str, Any]) -> FunctionError:
    return FunctionError(
        job_id,
        int(failure.get("rank") or 0),
        str(failure.get("host") or "?"),
        f"{failure.get('type', 'Exception')}: {failure.get('message', '')}",
        str(failure.get("traceback") or ""),
        _remote_exception(folder, failure),
    )


def _remote_exception(folder: Path, failure: dict[str, Any]) -> BaseException | None:
    """The rank's exception itself, when it was pickled and can be unpickled here."""
    path = folder / f"error-rank-{int(failure.get('rank') or 0)}.pkl"
    try:
        with open(path, "rb") as stream:
            value = pickle.load(stream)
    except Exception:  # its class may not exist here: the traceback text still says it all
        return None
    return value if isinstance(value, BaseException) else None
