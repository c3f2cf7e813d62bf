"""Values derived from a job spec (processes per node, tasks, CPUs), as pure functions.

JobSpec's properties (spec/schema.py) and the remembered spec's stand-in (spec/view.py) both
answer from here, so the two cannot drift; this module imports no pydantic.
"""

from __future__ import annotations

from typing import Any

from jobkit.backends.registry import backend_class

NODE_LAUNCHERS = ("torchrun", "distributed-launch", "spawn", "none")
"""Launchers started once per node, which start that node's processes themselves (`none`: the
program itself, once per node)."""


def procs_per_node(spec: Any) -> int:
    """Processes per node after resolving `auto`."""
    if spec.launch.nproc_per_node != "auto":
        return int(spec.launch.nproc_per_node)
    return int(spec.resources.gpus_per_node or 1)


def tasks_per_node(spec: Any) -> int:
    """Scheduler tasks per node: one launcher per node (torchrun, distributed-launch, spawn),
    else one task per process."""
    if spec.resources.tasks_per_node is not None:
        return int(spec.resources.tasks_per_node)
    return 1 if spec.launch.launcher in NODE_LAUNCHERS else procs_per_node(spec)


def world_size(spec: Any) -> int:
    """Total training processes."""
    return int(spec.resources.nodes) * procs_per_node(spec)


def cpus_per_process(spec: Any) -> int | None:
    """CPU cores of each training process: cpus_per_process, else cpus_per_task read the same
    way (a seed's "cores per GPU"); None when neither is given."""
    res = spec.resources
    found = res.cpus_per_process if res.cpus_per_process is not None else res.cpus_per_task
    return None if found is None else int(found)


def cpus_per_scheduler_task(spec: Any) -> int | None:
    """CPUs to ask for each scheduler task: the CPUs per process times the processes a task
    starts (all of a node's with torchrun, one with srun, mpirun and submitit)."""
    per_process = cpus_per_process(spec)
    if per_process is None:
        return None
    if backend_class(spec.backend).task_per_process:
        return per_process
    return per_process * procs_per_node(spec) // tasks_per_node(spec)


def cpus_per_task_reinterpreted(spec: Any) -> bool:
    """cpus_per_task is given where one scheduler task starts several processes: it is taken
    per process, so the task asks for more than the number written."""
    if spec.resources.cpus_per_task is None or backend_class(spec.backend).task_per_process:
        return False
    return procs_per_node(spec) > tasks_per_node(spec)


class DerivedValues:
    """The derived values as properties, for JobSpec and the remembered SpecView alike (one
    definition: both read the same functions above)."""

    @property
    def procs_per_node(self) -> int:
        """Processes per node after resolving `auto`."""
        return procs_per_node(self)

    @property
    def tasks_per_node(self) -> int:
        """Scheduler tasks per node (one per node for torchrun and the like)."""
        return tasks_per_node(self)

    @property
    def world_size(self) -> int:
        """Total training processes."""
        return world_size(self)

    @property
    def cpus_per_scheduler_task(self) -> int | None:
        """CPUs to ask for each scheduler task."""
        return cpus_per_scheduler_task(self)

    @property
    def cpus_per_process(self) -> int | None:
        """CPU cores of each training process (None when not given)."""
        return cpus_per_process(self)

    @property
    def cpus_per_task_reinterpreted(self) -> bool:
        """cpus_per_task is taken per process where one task starts several."""
        return cpus_per_task_reinterpreted(self)
