"""Preemption of a plain `run.command` is PREEMPTED, not a program error (issue 22 item 6).

In the `norequeue` partition (PreemptMode=CANCEL, GraceTime=30) a job of `urgent` on the same
node preempts ours: Slurm signals the job step only (SIGTERM), the program dies of it,
torchrun's exit ends the script before the grace time, and accounting records FAILED. Before,
jobkit said FAILED ("a rank raised a Python exception... signal 15") and `scheduler.requeue:
true` never applied. The script now asks Slurm (PreemptTime) and leaves a `preempted` note:
the attempt is PREEMPTED, `jobkit doctor` says preempted, and the run goes on as attempt 2.

`jobkit watch` follows the run while `jobkit status` runs in a loop beside it: whichever
process resubmits, watch ends only once the newest attempt has ended (before, a watch could
end at attempt 1 while another process was submitting attempt 2). The status loop stops once
attempt 2 is in the registry (the race to resubmit is over; watch goes on alone), and while the
job queues squeue is polled (tests/e2e/squeue_wait.py), not `jobkit status` (~0.4 CPU-s a call).
"""

from __future__ import annotations

import json
import subprocess
import time
from pathlib import Path

import pytest

from jobkit.registry.store import JobRecord, Store
from tests.e2e import runs, squeue_wait
from tests.e2e.cli import JOBKIT, REPO, Jobkit

pytestmark = [pytest.mark.slurm, pytest.mark.slow]

QUEUE_WAIT_S = 300
PROGRAM = (
    'echo "attempt $JOBKIT_ATTEMPT" >>"$JOBKIT_RUN_DIR/program.log";'
    ' if [ "$JOBKIT_ATTEMPT" -gt 1 ]; then exit 0; fi; sleep 300'
)
"""Attempt 1 runs until it is preempted; attempt 2 ends at once with exit 0."""


def _spec(folder: Path) -> Path:
    spec = folder / "preempted.yaml"
    spec.write_text(
        "name: preempted\nbackend: slurm\n"
        "resources:\n  nodes: 1\n  partition: norequeue\n  time: '00:10:00'\n"
        "scheduler:\n  requeue: true\n"
        "launch:\n  launcher: torchrun\n  nproc_per_node: 1\n"
        f"run:\n  command: {json.dumps(['bash', '-c', PROGRAM])}\n"
    )
    return spec


def _attempts(jobkit: Jobkit, job: str) -> list[JobRecord]:
    with Store(jobkit.home) as store:
        return store.attempts(store.get(job).run_key)


@pytest.mark.preemption  # norequeue and urgent jobs (tests/plugins/groups.py)
@pytest.mark.timeout(600)
@pytest.mark.parametrize("moment", ["running", "first-seconds"])
def test_preempted_plain_command_is_preempted_and_goes_on(
    jobkit: Jobkit, slurm_cluster: object, tmp_path: Path, moment: str
) -> None:
    submitted = jobkit.run("submit", str(_spec(tmp_path)), *jobkit.common_sets(), "--json")
    assert submitted.returncode == 0, submitted.stderr
    data = json.loads(submitted.stdout)
    job, scheduler_id = data["jobkit_id"], data["scheduler_id"]
    urgent = ""
    watch: subprocess.Popen[str] | None = None
    try:
        squeue_wait.while_in(scheduler_id, {"PENDING"}, QUEUE_WAIT_S, poll_s=0.3)
        record = jobkit.wait_state(job, {"RUNNING"}, QUEUE_WAIT_S, poll_s=0.3)
        run_dir = Path(record["log_paths"]["run_dir"])
        if moment == "running":
            runs.wait_for(lambda: (run_dir / "program.log").exists(), 120, "the program")
        watch = subprocess.Popen(
            [str(JOBKIT), "watch", job, "--interval", "1"],
            cwd=REPO, env=jobkit.env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        )  # fmt: skip
        urgent = subprocess.run(
            ["sbatch", "--parsable", "-p", "urgent", "-w", record["nodes"], "-o", "/dev/null",
             "--wrap", "sleep 1"],
            capture_output=True, text=True, timeout=60, check=True,
        ).stdout.strip()  # fmt: skip
        deadline = time.monotonic() + 300
        while watch.poll() is None:  # `jobkit status` competes with watch to resubmit
            assert time.monotonic() < deadline, "jobkit watch did not end"
            if len(_attempts(jobkit, job)) < 2:
                jobkit.run("status", job)
            time.sleep(1)
        _, err = watch.communicate()
        assert watch.returncode == 0, err
        first, second = _attempts(jobkit, job)
        assert (first.state, second.attempt, second.state) == ("PREEMPTED", 2, "SUCCEEDED"), (
            first,
            second,
        )
        assert first.reason and first.reason.startswith("preempted by Slurm"), first.reason
        assert (run_dir / "preempted").exists() or first.raw_state.startswith("PREEMPTED")
        # watch followed the run to its newest attempt and said so last
        last = err.strip().splitlines()[-1]
        assert last.startswith(f"jobkit: {second.jobkit_id} (") and "attempt 2 SUCCEEDED" in last
        doctor = jobkit.run("doctor", first.jobkit_id, "--json")
        assert doctor.returncode == 0, doctor.stderr
        diagnosis = json.loads(doctor.stdout)
        diagnosis = diagnosis[0] if isinstance(diagnosis, list) else diagnosis
        assert diagnosis["class"] == "preempted", diagnosis
        assert (run_dir / "program.log").read_text().splitlines()[-1] == "attempt 2"
    finally:
        if watch is not None and watch.poll() is None:
            watch.kill()
            watch.communicate()
        if urgent:
            subprocess.run(["scancel", urgent], capture_output=True, timeout=60, check=False)
