"""What jobkit hands to submitit: picklable callables that run the program as one rank.

Imported when a submitit job is submitted and, on the compute node, when submitit unpickles
the callable; never by `jobkit status` (submitit is imported only here).

submitit starts one Slurm task per process (like `launcher: srun`); each task runs the
callable, which sets the variables torchrun would (RANK, LOCAL_RANK, WORLD_SIZE,
MASTER_ADDR, MASTER_PORT...) plus jobkit's own, then runs the program in a subprocess.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from submitit import JobEnvironment
from submitit.helpers import Checkpointable, CommandFunction, DelayedSubmission

from jobkit.core.ports import auto_port

CHECKPOINT_WAIT_S = 60.0
"""On preemption or time-out: how long the trainer may take to save a checkpoint."""
PROVENANCE_TIMEOUT_S = 120.0


@dataclass(frozen=True)
class RankProgram:
    """What every task runs and where: argv, working directory, exported variables."""

    argv: list[str]
    cwd: str
    exports: Mapping[str, str] = field(default_factory=dict)
    run_dir_pattern: str = ""
    """The submitit folder with `%j` for the job id: the job's run folder."""
    master_port: int | None = None
    """A fixed port, or None for the port derived from the job id."""


def rank_environment(program: RankProgram, job_env: Any) -> dict[str, str]:
    """This process's environment plus the program's exports and the launch variables."""
    env = dict(os.environ)
    env.update(program.exports)
    job_id = str(job_env.job_id)
    nodes = max(int(job_env.num_nodes), 1)
    tasks = max(int(job_env.num_tasks), 1)
    # $SLURM_JOB_ID differs for every array task (the job id A_T does not), as in the
    # Slurm template; the one rule of jobkit/core/ports.py.
    port = program.master_port or auto_port(os.environ.get("SLURM_JOB_ID") or job_id)
    env.update(
        {
            "JOBKIT_JOB_ID": job_id,
            "JOBKIT_RUN_DIR": program.run_dir_pattern.replace("%j", job_id),
            "JOBKIT_NNODES": str(nodes),
            "JOBKIT_NPROC_PER_NODE": str(tasks // nodes),
            "MASTER_ADDR": str(job_env.hostnames[0]),
            "MASTER_PORT": str(port),
            "RANK": str(job_env.global_rank),
            "LOCAL_RANK": str(job_env.local_rank),
            "WORLD_SIZE": str(tasks),
            "LOCAL_WORLD_SIZE": str(tasks // nodes),
            "GROUP_RANK": str(job_env.node),
        }
    )
    return env


def record_provenance(program: RankProgram, env: dict[str, str], job_env: Any) -> None:
    """Rank 0 takes the job's side of its provenance (docs/provenance.md), as the other
    backends' scripts do: `python -m jobkit.provenance.jobside HOST...` in the task's
    folder, its errors in provenance/jobside.err. It never stops the job."""
    if int(job_env.global_rank) != 0:
        return
    folder = os.path.join(env["JOBKIT_RUN_DIR"], "provenance")
    try:
        os.makedirs(folder, exist_ok=True)
        with open(os.path.join(folder, "jobside.err"), "wb") as errors:
            subprocess.run(
                [sys.executable, "-m", "jobkit.provenance.jobside", *job_env.hostnames],
                cwd=program.cwd,
                env=env,
                stdin=subprocess.DEVNULL,
                stdout=subprocess.DEVNULL,
                stderr=errors,
                timeout=PROVENANCE_TIMEOUT_S,
                check=False,
            )
    except (OSError, subprocess.TimeoutExpired) as err:
        print(f"jobkit: note: the job's software was not recorded: {err}", file=sys.stderr)


class CommandJob:
    """A user command, run through submitit's CommandFunction with the rank's environment."""

    def __init__(self, program: RankProgram) -> None:
        self.program = program

    def __call__(self) -> str:
        job_env = JobEnvironment()
        env = rank_environment(self.program, job_env)
        os.makedirs(env["JOBKIT_RUN_DIR"], exist_ok=True)
        record_provenance(self.program, env, job_env)
        output: str = CommandFunction(
            list(self.program.argv), verbose=True, cwd=self.program.cwd, env=env
        )()
        return output


class TrainerJob(Checkpointable):
    """The bundled trainer as a subprocess; requeued by submitit on preemption or time-out.

    On submitit's signal the trainer (which gets the signal too, and is sent it again here)
    finishes its step and saves a checkpoint; `checkpoint()` waits for that, then asks
    submitit to requeue a fresh copy of this callable, which resumes from the checkpoint.
    """

    def __init__(self, program: RankProgram) -> None:
        self.program = program
        self._child: subprocess.Popen[bytes] | None = None

    def __getstate__(self) -> dict[str, Any]:
        return {"program": self.program}

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.program = state["program"]
        self._child = None

    def __call__(self) -> int:
        job_env = JobEnvironment()
        env = rank_environment(self.program, job_env)
        os.makedirs(env["JOBKIT_RUN_DIR"], exist_ok=True)
        record_provenance(self.program, env, job_env)
        self._child = subprocess.Popen(list(self.program.argv), cwd=self.program.cwd, env=env)
        code = self._child.wait()
        if code != 0:
            raise subprocess.CalledProcessError(code, list(self.program.argv))
        return code

    def checkpoint(self, *args: Any, **kwargs: Any) -> DelayedSubmission:
        """Let the trainer save its checkpoint, then resubmit (submitit requeues the job)."""
        child = self._child
        if child is not None and child.poll() is None:
            child.send_signal(signal.SIGUSR2)
            deadline = time.monotonic() + CHECKPOINT_WAIT_S
            while child.poll() is None and time.monotonic() < deadline:
                time.sleep(0.5)
        return DelayedSubmission(TrainerJob(self.program), *args, **kwargs)
