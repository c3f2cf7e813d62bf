"""Interactive Slurm: `salloc` with the batch script's own #SBATCH options (`jobkit shell`),
and the allocation this process runs in (`jobkit run --here`).

The options come from the rendered script, so salloc asks for exactly what sbatch would
(scheduler.extra included); only those that mean something to a batch job alone are left out.
"""

from __future__ import annotations

import re
import shlex
from collections.abc import Mapping, Sequence

from jobkit.backends.base import Allocation
from jobkit.core.errors import JobkitError

BATCH_ONLY = frozenset(
    {"--output", "--error", "--open-mode", "--requeue", "--no-requeue", "--array", "--signal"}
)
"""sbatch options salloc does not take or that only concern the batch script (its files, its
requeue, its warning signal to the batch shell: an interactive allocation has none)."""

STEP_VARIABLES = (
    "SLURM_NNODES",
    "SLURM_NPROCS",
    "SLURM_NTASKS",
    "SLURM_TASKS_PER_NODE",
    "SLURM_DISTRIBUTION",
    "SLURM_STEP_ID",
    "SLURM_STEPID",
    "SLURM_STEP_NODELIST",
    "SLURM_STEP_NUM_NODES",
    "SLURM_STEP_NUM_TASKS",
    "SLURM_STEP_TASKS_PER_NODE",
    "SLURM_STEP_LAUNCHER_PORT",
    "SLURM_SRUN_COMM_HOST",
    "SLURM_SRUN_COMM_PORT",
)
"""What a job step (the shell's `srun --pty`) sets for itself and srun reads as options: left
in place, the job's own `srun --nodes=2` inside that shell would be told `--ntasks=1`."""

_DIRECTIVE = re.compile(r"^#SBATCH\s+(.*)$")


def sbatch_options(script: str) -> list[str]:
    """The words of every `#SBATCH` line sbatch would read: those before the first command."""
    words: list[str] = []
    for line in script.split("\n"):
        stripped = line.strip()
        if not stripped or (stripped.startswith("#") and not stripped.startswith("#SBATCH")):
            continue
        match = _DIRECTIVE.match(stripped)
        if match is None:
            break  # sbatch stops at the first command
        try:
            words += shlex.split(match.group(1), comments=True)
        except ValueError as err:
            raise JobkitError(f"cannot read the script's line {line!r}: {err}") from None
    return words


def salloc_argv(script: str, inner: Sequence[str]) -> list[str]:
    """`salloc <the script's options, batch-only ones left out> srun --overlap --pty ... inner`:
    one task with a terminal on the allocation's first node. --overlap lets the steps the
    user starts from that shell (srun, `jobkit run --here`) use the same CPUs."""
    options = [word for word in sbatch_options(script) if _option_name(word) not in BATCH_ONLY]
    step = ["srun", "--overlap", "--pty", "--nodes=1", "--ntasks=1", "--quiet"]
    unset = [word for name in STEP_VARIABLES for word in ("-u", name)]
    return ["salloc", *options, *step, "env", *unset, *inner]


def _option_name(word: str) -> str:
    return word.split("=", 1)[0]


def current_allocation(environ: Mapping[str, str]) -> Allocation | None:
    """The allocation salloc, srun or sbatch put this process in: its id as the Slurm script
    names it (array task: `A_T`) and the environment without a job step's own variables;
    None outside an allocation."""
    job = environ.get("SLURM_JOB_ID")
    if not job:
        return None
    array_job = environ.get("SLURM_ARRAY_JOB_ID")
    if array_job:
        job = f"{array_job}_{environ.get('SLURM_ARRAY_TASK_ID', '')}"
    kept = dict(environ)
    if "SLURM_STEP_ID" in environ:  # inside a job step (a shell started by srun --pty)
        kept = {name: value for name, value in kept.items() if name not in STEP_VARIABLES}
    return Allocation(job_id=job, environ=kept, nodes=environ.get("SLURM_JOB_NODELIST", ""))
