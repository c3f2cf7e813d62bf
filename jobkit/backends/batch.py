"""What the batch schedulers (Slurm, PBS, Grid Engine) share: one submit command, run in the
submission directory, whose output names the job; the shared log-path rule; the run folder
kept with the job so its `exit_code` file can answer when the scheduler has forgotten it.
"""

from __future__ import annotations

import re
from abc import abstractmethod
from collections.abc import Iterable
from typing import TYPE_CHECKING, ClassVar

from jobkit.backends.base import Backend, Observation, SubmitRequest, Submitted, TrackedJob
from jobkit.core.errors import SpecError
from jobkit.core.run_files import read_exit_file
from jobkit.core.states import State

if TYPE_CHECKING:
    from jobkit.core.errors import SchedulerError

UNSURE_SUBMIT = re.compile(
    r"timed? ?out|zero bytes were transmitted|failed receiving|unexpected message"
    r"|connection (?:reset|closed)|end of file|broken pipe|receive error|interrupted",
    re.IGNORECASE,
)
"""Words of a failed submit command that may come after the scheduler took the job (the
request was sent, the reply lost: Slurm's "Socket timed out on send/recv operation" or "Zero
Bytes were transmitted or received", Grid Engine's "failed receiving gdi request response",
a connection reset or closed): its outcome is unknown, whatever else the command said. A
connection that was never made ("Unable to contact slurm controller (connect failure)",
"Connection refused") sent nothing: that is a refusal."""
_MAIL_LETTERS = {"BEGIN": "b", "END": "e", "FAIL": "a", "ALL": "abe", "NONE": "n"}


def mail_letters(mail_types: Iterable[str]) -> str:
    """The `pbs_mail` filter of the PBS and Grid Engine templates: Slurm-style mail types
    ([END, FAIL]) as `-m` letters (ea)."""
    letters = ""
    for mail_type in mail_types:
        mapped = _MAIL_LETTERS.get(str(mail_type).upper())
        if mapped is None:
            known = ", ".join(_MAIL_LETTERS)
            raise SpecError(
                f"{mail_type!r} has no PBS equivalent (use {known})", key="scheduler.mail_type"
            )
        letters += "".join(ch for ch in mapped if ch not in letters)
    return letters


class BatchScheduler(Backend):
    """A scheduler reached through commands (sbatch/qsub...), each bounded by a timeout."""

    sweep_mode: ClassVar[str] = "array"
    """A sweep is one array job; each task row is tracked by the task's own id."""
    submit_timeout_s: ClassVar[float] = 120.0
    """How long the submit command may take before the submission's fate is unknown."""
    query_timeout_s: ClassVar[float] = 60.0
    """How long a query (poll, cancel, finding a lost submission) may take."""

    refusal_marks: ClassVar[re.Pattern[str]] = re.compile(r"(?!)")
    """A submit command's own words for a refusal it is certain of (an invalid option or
    partition, a job rejected for a stated reason); each scheduler states its own."""

    def submission_refused(self, err: SchedulerError) -> bool:
        """Certain only where the submit command said, in its scheduler's words for a
        refusal (`refusal_marks`), why it refused, and nothing that may come after acceptance
        (UNSURE_SUBMIT); or where it never ran. Anything else (a timeout, a signal, no words,
        a garbled reply, a lost connection) leaves the outcome unknown."""
        from jobkit.core.proc import SchedulerTimeout

        if isinstance(err, SchedulerTimeout):
            return False
        if err.returncode is None:
            return True  # the command could not be started
        said = f"{err.stderr}\n{err.stdout}"
        if err.returncode <= 0 or UNSURE_SUBMIT.search(said):
            return False
        return self.refusal_marks.search(said) is not None

    @abstractmethod
    def parse_submit_output(self, argv: list[str], stdout: str, stderr: str) -> str:
        """The scheduler id in the submit command's output; SchedulerError if there is none."""

    def check_submission(self, request: SubmitRequest) -> None:
        """Refuse, before anything is submitted, what would make the job fail (raise)."""
        return None

    def submit_env(self, request: SubmitRequest) -> dict[str, str]:
        """Variables added to the submit command's environment."""
        return {}

    def own_command(self, argv: list[str]) -> list[str]:
        """argv with its command made this scheduler's own where another scheduler's tools
        share its name (Grid Engine's and PBS's qsub: backends/commands.py)."""
        return argv

    def submit(self, request: SubmitRequest) -> Submitted:
        """Run the submit command in the submission directory; the id, log paths, facts."""
        from jobkit.core import proc  # loaded when a command runs: render stays quick

        self.check_submission(request)
        argv = self.own_command(self.submit_argv(request))
        done = proc.run(
            argv,
            timeout=self.submit_timeout_s,
            cwd=request.workdir,
            env=self.submit_env(request) or None,
        )
        scheduler_id = self.parse_submit_output(argv, done.stdout, done.stderr)
        return Submitted(
            scheduler_id=scheduler_id,
            argv=argv,
            log_paths=self.log_paths(request, scheduler_id),
            extra=self.submit_extra(request, scheduler_id),
        )

    def submit_extra(self, request: SubmitRequest, scheduler_id: str) -> dict[str, str]:
        """The run folder (for the exit-code fallback) and the array range, if any."""
        extra = super().submit_extra(request, scheduler_id)
        if request.spec.scheduler.array:
            extra["array"] = request.spec.scheduler.array
        return extra


def exit_file_observation(job: TrackedJob, reason: str) -> Observation | None:
    """SUCCEEDED or FAILED from the run folder's exit_code file (None without one), for a job
    the scheduler no longer reports."""
    code = read_exit_file(job.extra.get("run_dir"), job.scheduler_id)
    if code is None:
        return None
    return Observation(
        state=State.SUCCEEDED if code == 0 else State.FAILED,
        raw_state="",
        source="exit-file",
        exit_code=code,
        reason=reason,
    )
