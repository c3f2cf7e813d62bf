"""The exceptions jobkit.api raises: jobkit's own (the same `file:line: key: message` text the
CLI prints after `jobkit: `), and those of waiting for a job and of its function's result."""

from __future__ import annotations

from jobkit.core.errors import JobkitError, SchedulerError, SpecError, UsageError

__all__ = [
    "CheckFailed",
    "FunctionError",
    "JobFailed",
    "JobkitError",
    "NoResult",
    "SchedulerError",
    "SpecError",
    "UsageError",
    "WaitTimeout",
]


class CheckFailed(JobkitError):
    """The checks before queueing found problems (`jobkit check`): nothing was submitted.
    `problems` holds one `file:line: key: message` line each, as `jobkit submit` prints them."""

    exit_code = 2

    def __init__(self, problems: list[str]) -> None:
        self.problems = problems
        count = len(problems)
        self.summary = f"not submitted: {count} problem{'s' if count > 1 else ''}"
        super().__init__("\n".join([*problems, self.summary]))

    def lines(self) -> list[str]:
        return [*self.problems, self.summary]

    def show(self) -> str:
        return f"{self.summary}: {self.problems[0]}" if self.problems else self.summary


class WaitTimeout(JobkitError):
    """`Job.wait(timeout=...)` ran out of time; the job goes on (cancel it if unwanted)."""


class JobFailed(JobkitError):
    """The job ended without success, so it has no result (its state, exit code, reason)."""


class NoResult(JobkitError):
    """The job ended but left no result file: not a function job, or its result was lost."""


class FunctionError(JobFailed):
    """The function raised in the job: on `rank` (on `host`), with the remote traceback.

    `exception` is the remote exception itself when it could be unpickled here (it is also
    this error's `__cause__`); `remote_traceback` is its traceback text as printed there."""

    def __init__(
        self,
        job_id: str,
        rank: int,
        host: str,
        summary: str,
        remote_traceback: str,
        exception: BaseException | None,
    ) -> None:
        self.job_id = job_id
        self.rank = rank
        self.host = host
        self.summary = summary
        self.remote_traceback = remote_traceback
        self.exception = exception
        super().__init__(
            f"job {job_id}: the function raised on rank {rank} ({host}): {summary}\n\n"
            f"Remote traceback (rank {rank}, {host}):\n{remote_traceback.rstrip()}"
        )

    def show(self) -> str:
        where = f"rank {self.rank} ({self.host})"
        return f"job {self.job_id}: the function raised on {where}: {self.summary}"
