"""The local backend: the launcher script runs on this machine, detached, tracked by pid.

The scheduler id is the jobkit id (exported to the script as JOBKIT_JOB_ID), so the job's
files are `{logs.dir}/{name}-{jobkit id}.out|.err` and `{logs.dir}/{name}-{jobkit id}/`.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from jobkit.backends import chain_wait, launcher_files, slots
from jobkit.backends.base import SubmitRequest, Submitted, TrackedJob
from jobkit.core.errors import CrossFieldError
from jobkit.spec.schema import JobSpec

DEFAULT_GRACE_S = 75.0
"""Seconds between SIGTERM to the launcher and SIGKILL to what is left: more than the
launcher's own grace for stopping torchrun in order (JOBKIT_STOP_GRACE_S, 60 s), so workers
can write their checkpoint. Cancel returns as soon as everything has stopped."""


class LocalBackend(launcher_files.LauncherJobs):
    """Runs `bash <script>` in its own session; state from its pid and exit-code file."""

    name = "local"
    runs_here = True
    launchers = ("torchrun", "spawn", "distributed-launch", "none")

    @classmethod
    def template_context(cls, spec: JobSpec) -> dict[str, Any]:
        """The ssh launcher's template, with this machine as the one host."""
        return {"local": True, "hosts": ["127.0.0.1"]}

    @classmethod
    def validate(cls, spec: JobSpec) -> None:
        """One node: this machine."""
        if spec.resources.nodes != 1:
            raise CrossFieldError(
                "resources.nodes",
                f"the local backend runs on one node (got {spec.resources.nodes})",
            )

    def __init__(self, grace_s: float = DEFAULT_GRACE_S) -> None:
        self.grace_s = grace_s

    def submit(self, request: SubmitRequest) -> Submitted:
        """Start the launcher; its pid, process group and start time go into `extra`."""
        argv = self.submit_argv(request)
        files = launcher_files.job_files(request.spec, request.jobkit_id, request.workdir)
        task = slots.task_launch(request)  # a sweep's task: JOBKIT_TASK_ID, its slot
        chain_wait.prepare(request)  # a chain's stage: it waits for the previous one
        launched = launcher_files.launch_detached(
            argv,
            cwd=request.workdir,
            files=files,
            env={"JOBKIT_JOB_ID": request.jobkit_id, **task.env, **request.code_env()},
        )
        return Submitted(
            scheduler_id=request.jobkit_id,
            argv=argv,
            log_paths=files.as_log_paths(),
            extra={**launched.as_extra(), "run_dir": str(files.run_dir), **task.extra},
        )

    # -- adoption of launchers whose `jobkit submit` stopped before recording them --------

    def submit_extra(self, request: SubmitRequest, scheduler_id: str) -> dict[str, str]:
        """What `submit` would have recorded, read back from the run folder and /proc."""
        return launcher_files.adopted_extra(request)

    def on_node_argv(
        self, job: TrackedJob, node: str, node_index: int | None, argv: Sequence[str]
    ) -> list[str] | None:
        """This machine runs every rank: `argv` as it is."""
        return list(argv)

    def interactive_argv(
        self, spec: JobSpec, script: str, inner: Sequence[str]
    ) -> list[str] | None:
        """No allocation to ask for: `inner` runs on this machine."""
        return list(inner)

    def cancel(self, jobs: Sequence[TrackedJob]) -> None:
        """SIGTERM each launcher's process group, SIGKILL after the grace period."""
        launcher_files.stop_launchers(jobs, self.grace_s)
