"""sweep.max_parallel on the local and ssh backends: at most N tasks of a sweep run at once.

Every task is its own launcher, started at submit. A task of a sweep gets JOBKIT_SLOT_DIR
and JOBKIT_MAX_PARALLEL; its script (templates/ssh/launch.sh.j2, block `wait_for_slot`)
then waits until it holds an flock on one of the folder's N slot files `slot-I`, and keeps
that lock open for as long as anything of the task runs. The kernel releases a lock when the
last process holding it ends, however it ends (killed included): no slot is ever lost.

While it waits, the file `waiting-<jobkit id>` (made here before the launch, removed by the
script once it holds a slot) tells `poll` to show the task QUEUED rather than RUNNING.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass
from pathlib import Path

from jobkit.backends.base import Observation, SubmitRequest, TrackedJob
from jobkit.core.states import State

SLOTS_FOLDER = "slots"
"""Inside the sweep's folder `<home>/jobs/<sweep id>/`."""
WAITING_PREFIX = "waiting-"
DEFAULT_MAX_PARALLEL = 1
"""Without sweep.max_parallel, tasks on one set of hosts run in turn (they would otherwise
compete for the same CPUs, GPUs and ports)."""


@dataclass(frozen=True)
class TaskLaunch:
    """What a task's launcher gets (its environment) and what the job keeps (extra)."""

    env: dict[str, str]
    extra: dict[str, str]


def max_parallel(request: SubmitRequest) -> int:
    """The sweep's max_parallel (spec.sweep.max_parallel), DEFAULT_MAX_PARALLEL without one."""
    sweep = getattr(request.spec, "sweep", None)
    value = getattr(sweep, "max_parallel", None)
    return value if isinstance(value, int) and value > 0 else DEFAULT_MAX_PARALLEL


def slot_dir(request: SubmitRequest) -> Path:
    """The folder of the sweep's slot files: `<home>/jobs/<sweep id>/slots`. Without a sweep
    id, one folder per spec and submission directory (tasks of the same sweep file share it)."""
    jobs_dir = request.job_dir.parent
    if request.sweep_id:
        return jobs_dir / request.sweep_id / SLOTS_FOLDER
    spec = json.dumps(request.spec.model_dump(mode="json"), sort_keys=True)
    digest = hashlib.sha256(f"{request.workdir}\0{spec}".encode()).hexdigest()[:16]
    return jobs_dir / f"sweep-{digest}" / SLOTS_FOLDER


def task_launch(request: SubmitRequest) -> TaskLaunch:
    """JOBKIT_TASK_ID and the slot variables for a task of a sweep; nothing for a plain job.

    Makes the slot folder and the task's `waiting-` file (so that the task shows QUEUED from
    the moment it is launched until its script holds a slot).
    """
    if request.task is None:
        return TaskLaunch({}, {})
    folder = slot_dir(request)
    folder.mkdir(parents=True, exist_ok=True)
    (folder / f"{WAITING_PREFIX}{request.jobkit_id}").touch()
    limit = str(max_parallel(request))
    env = {
        "JOBKIT_TASK_ID": request.task,
        "JOBKIT_SLOT_DIR": str(folder),
        "JOBKIT_MAX_PARALLEL": limit,
    }
    return TaskLaunch(env, {"task": request.task, "slot_dir": str(folder), "max_parallel": limit})


def waiting(job: TrackedJob) -> Observation | None:
    """QUEUED while the task's launcher waits for a free slot (its `waiting-` file is there);
    None otherwise. Call only while the launcher is alive."""
    folder = job.extra.get("slot_dir")
    if not folder or not (Path(folder) / f"{WAITING_PREFIX}{job.jobkit_id}").exists():
        return None
    limit = job.extra.get("max_parallel", "?")
    return Observation(
        State.QUEUED,
        "waiting",
        "pidfile",
        reason=f"waiting for a free slot (sweep.max_parallel {limit})",
    )
