"""A run outlives its job (docs/runs.md): the bundled trainer in the `norequeue` partition
(PreemptMode=CANCEL: Slurm cancels a preempted job, it does not requeue it) is preempted by a
job in `urgent`; `jobkit status` resubmits it as attempt 2, which resumes from the run's
checkpoint in the same run folder, with the same JOBKIT_RUN_ID, and ends with the final loss
of an uninterrupted run.

Preemption sends SIGTERM to the job step during the partition's GraceTime (30 s): the trainer
checkpoints and exits 75, and the job script asks `scontrol requeue`. Where Slurm allows that,
the job requeues itself (same job id) and jobkit has nothing to do; this site refuses it, as
one with JobRequeue=0 does, modelled here by `--no-requeue` in scheduler.extra ("Requested
operation is presently disabled"). The job ends PREEMPTED (or FAILED with the script's
`requeue-refused` note), and jobkit resubmits. Training is paced by tests/e2e/paced_data.py
as in test_interruptions.py.

The Slurm attempts run the trainer as one srun task and the local reference as the one process
of launcher none: one process each, no torchrun agent (~3 CPU-s a run); the subject is the
run's attempts, not torchrun. While a job queues, squeue is polled (tests/e2e/squeue_wait.py),
not `jobkit status`.
"""

from __future__ import annotations

import re
import subprocess
import time
from pathlib import Path

import pytest

from jobkit.registry.store import JobRecord, Store
from tests.e2e import runs, squeue_wait
from tests.e2e.cli import Jobkit, _submission, trainer_sets
from tests.e2e.conftest import Figures

pytestmark = [pytest.mark.slurm, pytest.mark.slow]

SPEC = "examples/slurm-2node.yaml"
STEPS = 100
QUEUE_WAIT_S = 300  # the shared cluster may hold our jobs behind others' for a while
PACED = dict(
    data__name="tests.e2e.paced_data:paced_chars",
    data__args__delay_s=0.01,  # 16 samples per step: about 0.25 s a step
    checkpoint__every_steps=10,
    logging__every_steps=5,
)
ONE_NODE = [
    "--set",
    "resources.nodes=1",
    *trainer_sets(train__steps=STEPS, **PACED),
]
SLURM_LAUNCH = ["--set", "launch.launcher=srun"]
LOCAL_LAUNCH = ["--set", "launch.launcher=none"]
REFUSED = ["--set", "resources.partition=norequeue", "--set", 'scheduler.extra=["--no-requeue"]']
_RUN_ID = re.compile(r"run id: (\S+), attempt (\d+) \(JOBKIT_RUN_ID\)")


def attempts(jobkit: Jobkit, run_id: str) -> list[JobRecord]:
    """The run's attempts as the registry holds them."""
    with Store(jobkit.home) as store:
        return store.attempts(run_id)


@pytest.mark.preemption  # norequeue and urgent jobs (tests/plugins/groups.py)
@pytest.mark.timeout(600)
def test_preempted_run_is_resubmitted_and_resumes(
    jobkit: Jobkit, slurm_cluster: object, figures: Figures, tmp_path: Path
) -> None:
    started = time.monotonic()
    reference = Jobkit(home=tmp_path / "reference-home", logs_dir=tmp_path / "reference-logs")
    ref_output = tmp_path / "reference.out"
    ref = reference.start(
        SPEC,
        "--backend",
        "local",
        "--ignore-unsupported",
        *LOCAL_LAUNCH,
        *ONE_NODE,
        output=ref_output,
    )
    urgent = ""
    try:
        done = jobkit.run("submit", SPEC, *jobkit.common_sets(), *REFUSED, *SLURM_LAUNCH, *ONE_NODE)
        first = _submission(done.returncode, done.stdout, done.stderr, 0.0)
        assert first.returncode == 0, first.explain()
        squeue_wait.while_in(first.scheduler_id, {"PENDING"}, QUEUE_WAIT_S, poll_s=1.0)
        record = jobkit.wait_state(first.jobkit_id, {"RUNNING"}, QUEUE_WAIT_S)
        run_dir = Path(record["log_paths"]["run_dir"])
        runs.wait_for(lambda: runs.last_step(run_dir) >= 30, 180, "attempt 1 at step 30")
        step_at_preemption = runs.last_step(run_dir)
        # An urgent job on that very node: Slurm preempts ours (partition_prio, CANCEL).
        urgent = subprocess.run(
            ["sbatch", "--parsable", "-p", "urgent", "-w", record["nodes"], "-o", "/dev/null",
             "--wrap", "sleep 1"],
            capture_output=True, text=True, timeout=60, check=True,
        ).stdout.strip()  # fmt: skip

        # `jobkit status` notices the preemption and resubmits (one line on stderr).
        deadline = time.monotonic() + 180
        lines: list[str] = []
        while len(attempts(jobkit, first.jobkit_id)) < 2:
            assert time.monotonic() < deadline, f"no attempt 2; status said: {lines}"
            status = jobkit.run("status", first.jobkit_id)
            lines += [line for line in status.stderr.splitlines() if line]
            time.sleep(2)
        old, new = attempts(jobkit, first.jobkit_id)
        assert old.state in ("PREEMPTED", "FAILED") and new.attempt == 2, (old, new)
        said = re.compile(
            rf"jobkit: {old.jobkit_id} \({old.scheduler_id}\) (was preempted|could not be"
            rf" requeued \(scontrol requeue failed\)); resubmitted as attempt 2:"
            rf" {new.jobkit_id} \({new.scheduler_id}\)$"
        )
        assert any(said.match(line) for line in lines), lines

        assert new.scheduler_id, new
        squeue_wait.while_in(new.scheduler_id, {"PENDING", "RUNNING", "COMPLETING"}, 300, 2.0)
        final = jobkit.wait_state(new.jobkit_id, {"SUCCEEDED", "FAILED", "CANCELLED"}, 300)
        assert final["state"] == "SUCCEEDED", final
        assert final["log_paths"]["run_dir"] == str(run_dir)
        resumed = runs.resumed_steps(run_dir)
        assert len(resumed) == 1 and 10 <= resumed[0] < STEPS, resumed
        ids = _RUN_ID.findall(runs.rank_log(run_dir, 0))
        assert ids == [(run_dir.name, "1"), (run_dir.name, "2")], ids
        assert runs.last_step(run_dir) == STEPS
        loss = runs.final_loss(run_dir)
        assert ref.wait(timeout=300) == 0, ref_output.read_text()
        ref_id, _ = reference.submitted(ref_output)
        ref_dir = Path(reference.status(ref_id)["log_paths"]["run_dir"])
        assert runs.resumed_steps(ref_dir) == []
        assert loss == runs.final_loss(ref_dir), (loss, runs.final_loss(ref_dir))
        figures(
            attempt_1_state=old.state,
            preempted_at_step=step_at_preemption,
            resumed_at_step=resumed[0],
            seconds=round(time.monotonic() - started, 1),
        )
    finally:
        if ref.poll() is None:
            ref.kill()
            ref.wait()
        if urgent:
            subprocess.run(["scancel", urgent], capture_output=True, timeout=60, check=False)
