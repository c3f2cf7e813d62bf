"""What the rendered script does that a spec written the seeds' way may not expect: one line
each, printed by `jobkit render`, `jobkit submit` and `jobkit check` (stderr), never silent.

Pure: reads the spec and env.python's choice, runs nothing.
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING

from jobkit.backends.registry import backend_class
from jobkit.render.interpreter import Interpreter, spec_interpreter
from jobkit.spec.derived import NODE_LAUNCHERS

if TYPE_CHECKING:
    from jobkit.spec.schema import JobSpec

_PYTHON_MODULE = re.compile(r"python|conda|torch", re.IGNORECASE)
"""A module that brings a Python (python/3.11, anaconda3, pytorch/2.3): not cuda or gcc."""


def spec_notes(spec: JobSpec, interpreter: Interpreter | None = None) -> list[str]:
    """The notes for `spec`, each a line without the `jobkit: ` prefix."""
    notes = _cpu_notes(spec)
    python_note = _python_note(spec, interpreter or spec_interpreter(spec))
    if python_note:
        notes.append(python_note)
    return notes


def _cpu_notes(spec: JobSpec) -> list[str]:
    res, launcher = spec.resources, spec.launch.launcher
    procs = spec.procs_per_node
    if spec.cpus_per_task_reinterpreted:
        return [
            f"resources.cpus_per_task {res.cpus_per_task} is taken per process (as"
            f" resources.cpus_per_process): each node's one {launcher} task asks for"
            f" {res.cpus_per_task} x {procs} = {spec.cpus_per_scheduler_task} CPUs"
        ]
    no_request = res.cpus_per_task is None and res.cpus_per_process is None
    asks = backend_class(spec.backend).chooses_nodes  # a scheduler's default; launchers ask nobody
    if no_request and asks and procs > 1 and launcher in NODE_LAUNCHERS:
        return [
            f"no CPU request (resources.cpus_per_process): the scheduler's default (often"
            f" 1 CPU per task) is shared by the {procs} processes of each node; set"
            f" resources.cpus_per_process: N for N cores each"
        ]
    return []


def _python_note(spec: JobSpec, chosen: Interpreter) -> str | None:
    """env.python auto with env.modules: the submitting environment's bin/ goes first on PATH,
    before the Python a `module load` puts there."""
    env = spec.env
    pythons = [name for name in env.modules if _PYTHON_MODULE.search(name)]
    if env.python != "auto" or not pythons or chosen.path is None:
        return None
    return (
        f"env.python auto: the job runs {chosen.path} (the environment jobkit runs"
        f" from), ahead of the Python that env.modules ({', '.join(pythons)}) puts on PATH;"
        " env.python: system uses the module's"
    )
