"""Issue 24: on a multi-rank failure `jobkit doctor` names the FIRST failure by time (the rank
whose error came first), not what the others showed after it, nor the rank that printed last.

A real local job (torchrun, 2 ranks, gloo): rank 1 raises; rank 0's all-reduce then fails
and its process aborts as it tears down (libstdc++'s `terminate called without an active
exception`, the gloo/NCCL teardown race the issue saw). And srun's per-rank files, which
carry no time stamps of their own: the rank whose file was written first failed first.
"""

from __future__ import annotations

import json
import os
from datetime import datetime
from pathlib import Path

from jobkit.doctor.classify import diagnose_record
from tests.doctor.recorded import job_with_logs
from tests.manager.helpers import Invoke

PROGRAM = """\
import os, signal, sys, time
import torch, torch.distributed as dist

dist.init_process_group("gloo")
if dist.get_rank() == 1:
    time.sleep(0.5)
    raise KeyError("shard-7")
# torchrun stops the other ranks once rank 1 has failed: on a loaded machine its SIGTERM
# came before rank 0's abort (CI). Rank 0 ends by itself, as in the teardown race.
signal.signal(signal.SIGTERM, signal.SIG_IGN)
try:
    dist.all_reduce(torch.ones(1))
except RuntimeError:
    time.sleep(0.3)
    sys.stderr.write("terminate called without an active exception\\n")
    sys.stderr.flush()
    os.abort()
"""


def test_a_rank_that_raised_first_is_named_not_the_one_that_aborted_after_it(
    jobkit: Invoke, workdir: Path
) -> None:
    (workdir / "ddp.py").write_text(PROGRAM, encoding="utf-8")
    spec = workdir / "ddp.yaml"
    spec.write_text(
        "name: ddp\nbackend: local\nlaunch:\n  nproc_per_node: 2\n"
        "run:\n  command: [python, ddp.py]\n",
        encoding="utf-8",
    )
    submitted = jobkit("submit", str(spec), "--wait")
    assert submitted.code != 0, submitted.err
    shown = jobkit("doctor", "--last", "--json")
    assert shown.code == 0, shown.err
    found = json.loads(shown.out)
    assert (found["class"], found["rank"], found["summary"]) == (
        "python_exception",
        1,
        "KeyError: 'shard-7'",
    ), found
    assert "crashed at exit, after its work" in found["also"], found


TRACEBACK = 'Traceback (most recent call last):\n  File "train.py", line 9, in <module>\n'


def test_unstamped_rank_files_are_ordered_by_when_they_were_written(tmp_path: Path) -> None:
    """srun's rank-R.out hold a rank's own output only. Rank 1 raised at 10:00:00; rank 0
    raised at 10:00:03, then Slurm's step daemon stamped its file as it stopped the step.
    Before, the stamped file won over the unstamped one: rank 0, the last to fail."""
    stepd = "slurmstepd: error: *** STEP 1.0 ON n1 CANCELLED AT 2024-05-01T10:00:04 ***\n"
    record = job_with_logs(
        tmp_path,
        {
            "rank-0.out": TRACEBACK + "ValueError: rank 0 gave up later\n" + stepd,
            "rank-1.out": TRACEBACK + "KeyError: 'shard-7'\n",
        },
        nodes=2,
        launcher="srun",
    )
    run_dir = Path(record.log_paths["run_dir"])
    started = datetime(2024, 5, 1, 10, 0, 0).timestamp()  # local time, as the stamps are read
    os.utime(run_dir / "rank-1.out", (started, started))
    os.utime(run_dir / "rank-0.out", (started + 4, started + 4))
    found = diagnose_record(record)
    assert (found.cls, found.rank, found.summary) == ("python_exception", 1, "KeyError: 'shard-7'")
