"""The trainer on the real Slurm cluster (n1, n2): ranks from srun, and torchrun under srun."""

from __future__ import annotations

import re
import sys
from pathlib import Path

import pytest

from tests.train.launch import TORCHRUN

pytestmark = pytest.mark.slurm

MLP = "--set train.steps=20 --set logging.every_steps=5 --set data.args.samples=512"

SCRIPT = """#!/bin/bash
#SBATCH --nodes=2
#SBATCH --ntasks-per-node=1
#SBATCH --time=5
#SBATCH --job-name=train-two-nodes
#SBATCH --output={out}/slurm-%j.out
set -eu
cd {out}
unset RANK WORLD_SIZE LOCAL_RANK MASTER_ADDR MASTER_PORT JOBKIT_RUN_DIR JOBKIT_JOB_ID
export OMP_NUM_THREADS=1 PYTHONUNBUFFERED=1
first=$(scontrol show hostnames "$SLURM_JOB_NODELIST" | head -n 1)
echo "first host $first"

# 1. srun starts one trainer per node: ranks come from SLURM_PROCID & co.
JOBKIT_RUN_DIR={out}/srun srun --kill-on-bad-exit=1 {python} -m train --config mlp {mlp}

# 2. srun starts one torchrun per node (static rendezvous on the first host).
port=$((20000 + SLURM_JOB_ID % 10000))
JOBKIT_RUN_DIR={out}/torchrun srun --kill-on-bad-exit=1 --ntasks-per-node=1 bash -c \\
  'exec {torchrun} --nnodes 2 --nproc-per-node 1 --node-rank "$SLURM_NODEID" \\
     --master-addr '"$first"' --master-port '"$port"' \\
     --no-python {python} -m train --config mlp {mlp}'
"""


def test_srun_and_torchrun_under_srun_on_two_nodes(slurm_submit, wait_slurm_job, tmp_path: Path):
    script = tmp_path / "job.sh"
    script.write_text(
        SCRIPT.format(out=tmp_path, python=sys.executable, torchrun=TORCHRUN, mlp=MLP)
    )
    job_id = slurm_submit(str(script), cwd=tmp_path)
    end = wait_slurm_job(job_id, timeout=300)
    output = (tmp_path / f"slurm-{job_id}.out").read_text()
    assert end.state == "COMPLETED", output[-3000:]
    found = re.search(r"^first host (\S+)$", output, re.M)
    assert found, output[-3000:]
    first = found[1]

    port = 15000 + int(job_id) % 15000  # docs/design.md "Ports"
    for rank in (0, 1):
        log = (tmp_path / "srun" / f"rank-{rank}.log").read_text()
        assert (
            f"launch: launcher=slurm rank={rank} local_rank=0 world_size=2 local_world_size=1"
            f" node_rank={rank} num_nodes=2 master={first}:{port} job_id={job_id}"
        ) in log
        assert "strategy: ddp" in log
    torchrun_port = 20000 + int(job_id) % 10000
    for rank in (0, 1):
        log = (tmp_path / "torchrun" / f"rank-{rank}.log").read_text()
        assert (
            f"launch: launcher=torchrun rank={rank} local_rank=0 world_size=2 local_world_size=1"
            f" node_rank={rank} num_nodes=2 master={first}:{torchrun_port} job_id={job_id}"
        ) in log
    finals = re.findall(r"^final loss (\S+)$", output, re.M)
    assert len(finals) == 2
    # same config, same data order and world size: both launchers train the same model
    assert finals[0] == finals[1]
