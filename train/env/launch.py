"""Who am I in this distributed job? Rank, world size, node and master, from any launcher.

Importable by user programs (`from train.env import detect_launch_env`): stdlib only (and
jobkit.core.ports, stdlib only too: the one rule for the auto port).

Detection order (the first launcher whose variables are present wins):

1. torchrun / torchelastic: TORCHELASTIC_RUN_ID (RANK, LOCAL_RANK, WORLD_SIZE, GROUP_RANK,
   LOCAL_WORLD_SIZE, GROUP_WORLD_SIZE, MASTER_ADDR, MASTER_PORT).
2. env: RANK and WORLD_SIZE set by hand or by a wrapper (LOCAL_RANK, LOCAL_WORLD_SIZE,
   GROUP_RANK optional).
3. Open MPI: OMPI_COMM_WORLD_RANK / _SIZE / _LOCAL_RANK / _LOCAL_SIZE.
4. PMI (MPICH, Intel MPI hydra): PMI_RANK / PMI_SIZE with MPI_LOCALRANKID / MPI_LOCALNRANKS.
5. Slurm srun: SLURM_PROCID inside a job step (SLURM_STEP_ID), not the batch shell.
6. PBS pbsdsh: PBS_VNODENUM with PBS_NODEFILE and PBS_JOBID.
7. single: one process.

MPI comes before Slurm on purpose: `mpirun` inside a Slurm job starts its daemons with
srun, so its ranks inherit the daemon's SLURM_PROCID (the node index, not the rank).

LaunchEnv and the reads the launchers share are in train/env/common.py, one detector per
launcher in train/env/detect.py; this module is the public face (train.env re-exports it).
"""

from __future__ import annotations

import os
import socket
from collections.abc import Mapping, MutableMapping
from pathlib import Path

from train.env.common import (
    DEFAULT_PORT,
    EnvVars,
    LaunchEnv,
    LaunchEnvError,
    Reader,
    Resolver,
    port_from_job_id,
)
from train.env.detect import DETECTION_ORDER

__all__ = [
    "DEFAULT_PORT",
    "DETECTION_ORDER",
    "LaunchEnv",
    "LaunchEnvError",
    "Reader",
    "Resolver",
    "apply_to_environ",
    "detect_launch_env",
    "port_from_job_id",
]


def _default_resolve(host: str) -> object:
    return socket.getaddrinfo(host, None, type=socket.SOCK_STREAM)


def _default_read_text(path: str) -> str:
    return Path(path).read_text(encoding="utf-8")


def detect_launch_env(
    environ: Mapping[str, str] | None = None,
    *,
    resolve: Resolver | None = None,
    read_text: Reader | None = None,
) -> LaunchEnv:
    """This process's LaunchEnv from `environ` (default os.environ); see the module doc.

    Raises LaunchEnvError (one line) when the variables contradict each other or a
    multi-node job has no resolvable master address. `resolve(host)` must raise OSError
    for an unknown host (default: socket.getaddrinfo); `read_text(path)` reads PBS_NODEFILE.
    """
    env = EnvVars(os.environ if environ is None else environ)
    resolver = resolve or _default_resolve
    reader = read_text or _default_read_text
    for _name, detector in DETECTION_ORDER:
        found = detector(env, resolver, reader)
        if found is not None:
            return found
    raise AssertionError("the single-process detector always answers")


def apply_to_environ(env: LaunchEnv, environ: MutableMapping[str, str] | None = None) -> None:
    """Export RANK, WORLD_SIZE, LOCAL_RANK, LOCAL_WORLD_SIZE, GROUP_RANK, GROUP_WORLD_SIZE,
    MASTER_ADDR and MASTER_PORT so torch.distributed's `init_method="env://"` sees this job."""
    target = os.environ if environ is None else environ
    target["RANK"] = str(env.rank)
    target["WORLD_SIZE"] = str(env.world_size)
    target["LOCAL_RANK"] = str(env.local_rank)
    target["LOCAL_WORLD_SIZE"] = str(env.local_world_size)
    target["GROUP_RANK"] = str(env.node_rank)
    target["GROUP_WORLD_SIZE"] = str(env.num_nodes)
    target["MASTER_ADDR"] = env.master_addr
    target["MASTER_PORT"] = str(env.master_port)
