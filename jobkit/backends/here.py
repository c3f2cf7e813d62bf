"""Jobs that `jobkit run SPEC --here` ran in the allocation it was typed in (docs/interactive.md).

Such a job is the spec's own script (`jobkit render`'s text), started by jobkit in the
foreground on this machine inside an allocation the user already holds (salloc, `jobkit
shell`). The registry keeps it as a launcher job: its pid, process group and start time, and
the run folder's `exit_code` file, which tell its state without asking the scheduler (whose
answer would be the allocation's, not this run's). Not a `backend:` a spec can name: the
registry lists it apart (backends/registry.py, INTERNAL).
"""

from __future__ import annotations

from collections.abc import Sequence

from jobkit.backends import launcher_files
from jobkit.backends.base import SubmitRequest, Submitted, TrackedJob
from jobkit.core.errors import UsageError

NAME = "here"
STOP_GRACE_S = 30.0
"""Seconds between SIGTERM to the script's group and SIGKILL (srun passes SIGTERM on to the
step's tasks at once)."""


class HereBackend(launcher_files.LauncherJobs):
    """A run in the current allocation: state from its pid and exit-code file."""

    name = NAME

    def submit(self, request: SubmitRequest) -> Submitted:
        """Never submitted: `jobkit run --here` starts these (manager/here.py)."""
        raise UsageError("a job of the here kind is started by `jobkit run SPEC --here`")

    def on_node_argv(
        self, job: TrackedJob, node: str, node_index: int | None, argv: Sequence[str]
    ) -> list[str] | None:
        """Inside a Slurm allocation: `srun --overlap` on that node (`jobkit doctor`)."""
        allocation = job.extra.get("allocation", "")
        if job.extra.get("allocation_backend") != "slurm" or not allocation:
            return None
        from jobkit.backends.slurm.overlap import overlap_argv

        return overlap_argv(allocation.split("_")[0], node, argv)

    def cancel(self, jobs: Sequence[TrackedJob]) -> None:
        """SIGTERM each run's process group (the script and its srun), SIGKILL after a grace."""
        launcher_files.stop_launchers(jobs, STOP_GRACE_S)
