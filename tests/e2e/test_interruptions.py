"""Interrupted 2-node Slurm runs: requeue, time limit with a warning signal, a killed worker,
a node going down. The run must resume from its checkpoint (or, for the node, never be
reported as a success).

Training is paced by the plug-in dataset tests/e2e/paced_data.py (a sleep per sample), so
a run is still training when it is interrupted and its length hardly depends on how busy
the machine is. Slurm holds a requeued job for its credential lifetime (Reason=BeginTime;
AuthInfo cred_expire=30 on the test cluster, 120 s by default) before it runs again: the
requeue and time-limit checks share one test, whose two jobs overlap their waits (A's hold
and B's first run).

Only the killed-worker test is about torchrun (it restarts the workers): the requeue and
time-limit jobs run their ranks as srun tasks (launch.launcher srun, no torchrun agent: ~3 CPU-s
less per node and run; the signals reach the trainer straight from Slurm), and the node that
goes down takes a job of one small sleeping process per node (its subject is Slurm's NODE_FAIL,
not training). The torchrun path of the warning signal (SIGTERM to torchrun, passed on to the
workers) is tests/render/test_cluster.py's test_warning_signal_reaches_workers_as_sigterm_and_
requeues; the bundled trainer stopped by SIGTERM under torchrun on Slurm, test_containers.py's
cancel test.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.e2e import hosts, requeue_hold, runs
from tests.e2e.cli import Jobkit, trainer_sets
from tests.e2e.conftest import Figures

pytestmark = [pytest.mark.slurm, pytest.mark.slow]

SPEC = "examples/slurm-2node.yaml"
SRUN = ["--set", "launch.launcher=srun"]
"""One srun task per rank, no torchrun agent (the requeue and time-limit jobs)."""
STEPS = 100
B_STEPS = 300
QUEUE_WAIT_S = 480  # a job may wait behind others before it trains (a shared cluster)
PACED = dict(
    data__name="tests.e2e.paced_data:paced_chars",
    data__args__delay_s=0.01,  # 16 samples per rank per step: about 0.25 s a step
    checkpoint__every_steps=10,
    logging__every_steps=5,
)


@dataclass
class Reference:
    """An uninterrupted run of the same training: 2 local gloo ranks (torchrun), started in
    the background once per module and waited for when its final loss is needed."""

    jobkit: Jobkit
    process: subprocess.Popen[str]
    output: Path

    def final_loss(self) -> float:
        """The reference run's final loss (waits for it)."""
        code = self.process.wait(timeout=500)
        assert code == 0, self.output.read_text()
        jobkit_id, _ = self.jobkit.submitted(self.output)
        record = self.jobkit.status(jobkit_id)
        assert record["state"] == "SUCCEEDED", record
        run_dir = Path(record["log_paths"]["run_dir"])
        assert runs.last_step(run_dir) == STEPS and runs.resumed_steps(run_dir) == []
        return runs.final_loss(run_dir)


@pytest.fixture(scope="module")
def reference(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Reference]:
    """The same spec and trainer settings as the interrupted runs, backend local, 1 x 2 ranks."""
    folder = tmp_path_factory.mktemp("reference")
    jobkit = Jobkit(home=folder / "jobkit-home", logs_dir=folder / "logs")
    output = folder / "submit.out"
    process = jobkit.start(
        SPEC,
        "--backend",
        "local",
        "--ignore-unsupported",  # the Slurm example's partition, requeue and signal
        "--set",
        "resources.nodes=1",
        "--set",
        "launch.nproc_per_node=2",
        *trainer_sets(train__steps=STEPS, **PACED),
        output=output,
    )
    yield Reference(jobkit, process, output)
    if process.poll() is None:
        process.kill()
        process.wait()


@dataclass
class Background:
    """A `jobkit submit --wait` running in the background, and its job."""

    process: subprocess.Popen[str]
    output: Path
    jobkit_id: str
    scheduler_id: str
    run_dir: Path

    def finish(self, timeout: float) -> int:
        """Wait for `submit --wait` to end; its exit code."""
        return self.process.wait(timeout=timeout)

    def stop(self) -> None:
        """Kill the waiting submit (test clean-up; the job itself is scancel'ed apart)."""
        if self.process.poll() is None:
            self.process.kill()
            self.process.wait()


def start_job(
    jobkit: Jobkit, tmp_path: Path, label: str, *options: str, spec: str = SPEC
) -> Background:
    """Submit `spec` with OPTIONS and --wait in the background; return once it is submitted."""
    output = tmp_path / f"{label}.out"
    process = jobkit.start(spec, *options, output=output)
    jobkit_id, scheduler_id = jobkit.submitted(output)
    run_dir = Path(jobkit.status(jobkit_id)["log_paths"]["run_dir"])
    return Background(process, output, jobkit_id, scheduler_id, run_dir)


def scancel_quietly(*job_ids: str) -> None:
    """Cancel leftover jobs of a failed test (no error when they ended)."""
    subprocess.run(["scancel", *job_ids], capture_output=True, timeout=60, check=False)


def in_order(history: list[str], wanted: list[str]) -> bool:
    """True when `wanted` appears in `history` as a subsequence."""
    position = iter(history)
    return all(any(state == item for state in position) for item in wanted)


@pytest.mark.timeout(1500)
def test_requeue_and_time_limit_preemption_resume_the_run(
    jobkit: Jobkit,
    slurm_cluster: object,
    figures: Figures,
    tmp_path: Path,
    reference: Reference,
) -> None:
    """Two 2-node jobs: A is requeued, B runs to its time limit's warning and requeues itself.
    Slurm's two-minute hold of a requeued job is skipped (tests/e2e/requeue_hold.py): waiting
    it out proves nothing and held both nodes from every other test for minutes.

    Both run their 2 ranks as srun tasks (launch.launcher srun).

    A: `scontrol requeue` while it trains: same id, requeue count 1, resumes from its last
    checkpoint, ends at STEPS with the same final loss as the uninterrupted reference.
    B: --time=3 with USR2@60 and requeue on: the warning reaches the trainer (scancel
    --signal=USR2 to the step's tasks), which checkpoints and exits 75; the script requeues
    the job itself; the next run resumes and finishes. B's steps are paced to outlast its
    first run's warning.
    """
    started = time.monotonic()
    a = start_job(jobkit, tmp_path, "a", *SRUN, *trainer_sets(train__steps=STEPS, **PACED))
    jobs = [a.scheduler_id]
    try:
        # A's history must show it back in the queue: jobkit looks while it is held.
        look = {a.scheduler_id: a.jobkit_id}
        seen_held = lambda job: job in look and jobkit.status(look[job])  # noqa: E731
        with requeue_hold.skipped(lambda: list(jobs), seen_held) as released:
            _requeue_and_time_limit(jobkit, tmp_path, figures, reference, started, a, jobs)
        assert a.scheduler_id in released, released  # A was held after its requeue
    finally:
        a.stop()
        scancel_quietly(*jobs)


def _requeue_and_time_limit(
    jobkit: Jobkit,
    tmp_path: Path,
    figures: Figures,
    reference: Reference,
    started: float,
    a: Background,
    jobs: list[str],
) -> None:
    """The test's steps; `jobs` gets B's id once it is submitted (for the hold's release)."""
    b: Background | None = None
    try:
        runs.wait_for(lambda: runs.last_step(a.run_dir) >= 25, QUEUE_WAIT_S, "job A at step 25")
        a_checkpoints = runs.checkpoint_steps(a.run_dir)
        a_step_at_requeue = runs.last_step(a.run_dir)
        requeued = subprocess.run(
            ["scontrol", "requeue", a.scheduler_id], capture_output=True, text=True, timeout=60
        )
        assert requeued.returncode == 0, requeued.stderr
        a_requeued_at = time.monotonic()

        # B runs before or after A's second run, whichever Slurm starts first. Slurm sends
        # the warning of a 3-minute limit with USR2@60 between 90 and 120 s after the start
        # (its time checks run every 30 s).
        # 4 samples a step at 0.1 s each: at least 0.43 s a step, so 300 steps (130 s or
        # more) outlast the first run's warning, and what is left usually fits before the
        # second run's. When it does not (a very busy machine), the job is warned, requeued
        # and resumed once more: slower, and checked the same way.
        b = start_job(
            jobkit,
            tmp_path,
            "b",
            *SRUN,
            "--set",
            "resources.time=3",
            "--set",
            "scheduler.signal=USR2@60",
            *trainer_sets(
                train__steps=B_STEPS,
                **{**PACED, "data__args__delay_s": 0.1, "data__batch_size_per_rank": 4},
            ),
        )
        jobs.append(b.scheduler_id)

        # --- A comes back after its hold, resumes and finishes ---------------------------
        assert a.finish(timeout=600) == 0, a.output.read_text()
        a_seconds = time.monotonic() - started
        record = jobkit.status(a.jobkit_id)
        assert record["scheduler_id"] == a.scheduler_id
        assert (record["state"], record["exit_code"], record["requeues"]) == ("SUCCEEDED", 0, 1)
        history = [change["state"] for change in record["history"]]
        assert in_order(history, ["RUNNING", "QUEUED", "RUNNING", "SUCCEEDED"]), history
        resumed = runs.resumed_steps(a.run_dir)
        assert len(resumed) == 1, runs.rank_log(a.run_dir, 0)
        a_resume = resumed[0]
        # The last checkpoint: the one saved on Slurm's SIGTERM, or the last periodic one.
        assert max(a_checkpoints) <= a_resume < STEPS, (a_checkpoints, a_resume)
        assert "requeue count: 1 (SLURM_RESTART_COUNT)" in runs.rank_log(a.run_dir, 0)
        assert "restart count 1" in Path(record["log_paths"]["out"]).read_text()
        assert runs.last_step(a.run_dir) == STEPS
        a_loss = runs.final_loss(a.run_dir)
        reference_loss = reference.final_loss()
        assert a_loss == reference_loss, (a_loss, reference_loss)
        figures(
            job="A (scontrol requeue)",
            slurm_id=a.scheduler_id,
            step_at_requeue=a_step_at_requeue,
            resumed_at_step=a_resume,
            requeues=record["requeues"],
            final_loss=a_loss,
            reference_final_loss=reference_loss,
            requeue_to_succeeded_s=round(time.monotonic() - a_requeued_at, 1),
            submit_to_succeeded_s=round(a_seconds, 1),
        )

        # --- B: warned, checkpointed, requeued itself, resumed, finished -----------------
        assert b.finish(timeout=900) == 0, b.output.read_text()
        record = jobkit.status(b.jobkit_id)
        assert record["scheduler_id"] == b.scheduler_id
        assert (record["state"], record["exit_code"]) == ("SUCCEEDED", 0), record
        assert record["requeues"] >= 1, record
        out = Path(record["log_paths"]["out"]).read_text()
        err = Path(record["log_paths"]["err"]).read_text()
        assert "received SIGUSR2" in err, err
        assert "the program asked to be requeued: scontrol requeue" in out, out
        log = runs.rank_log(b.run_dir, 0)
        resumed = runs.resumed_steps(b.run_dir)
        assert len(resumed) == record["requeues"], log
        # Each resume starts where the warning's checkpoint was saved (srun tasks get the
        # warning signal itself).
        for step in resumed:
            assert f"(step {step}, preempted by SIGUSR2)" in log, log
        assert runs.last_step(b.run_dir) == B_STEPS
        figures(
            job="B (time limit, USR2@60)",
            slurm_id=b.scheduler_id,
            resumed_at_steps=resumed,
            requeues=record["requeues"],
            final_loss=runs.final_loss(b.run_dir),
            submit_to_succeeded_s=round(time.monotonic() - started, 1),
        )
    finally:
        if b is not None:
            b.stop()


@pytest.mark.timeout(900)
def test_killed_worker_is_restarted_by_torchrun_and_resumes(
    jobkit: Jobkit,
    slurm_cluster: object,
    figures: Figures,
    tmp_path: Path,
    reference: Reference,
) -> None:
    """kill -9 of rank 1's process: torchrun (max_restarts 3) restarts the workers of both
    nodes, which resume from the last checkpoint and end with the reference's final loss."""
    marker = hosts.unique_marker("e2e-kill9")
    job = start_job(
        jobkit,
        tmp_path,
        "kill9",
        "--set",
        "launch.max_restarts=3",
        "--set",
        "env.vars.TORCH_DISABLE_SHARE_RDZV_TCP_STORE=1",
        *trainer_sets(train__steps=STEPS, name=marker, **PACED),
    )
    try:
        runs.wait_for(lambda: runs.last_step(job.run_dir) >= 25, QUEUE_WAIT_S, "step 25")
        victims = [pid for pid, env in hosts.workers(marker).items() if env.get("RANK") == "1"]
        assert len(victims) == 1, hosts.local_pgrep(marker)
        checkpoints_before = runs.checkpoint_steps(job.run_dir)
        step_at_kill = runs.last_step(job.run_dir)
        os.kill(victims[0], signal.SIGKILL)

        assert job.finish(timeout=400) == 0, job.output.read_text()
        record = jobkit.status(job.jobkit_id)
        assert (record["state"], record["exit_code"], record["requeues"]) == ("SUCCEEDED", 0, 0)
        resumed = runs.resumed_steps(job.run_dir)
        assert len(resumed) == 1 and max(checkpoints_before) <= resumed[0] <= step_at_kill, (
            checkpoints_before,
            resumed,
            step_at_kill,
        )
        for rank in (0, 1):  # every worker was started again and resumed
            assert runs.resumed_steps(job.run_dir, rank) == resumed
        node_outputs = "".join((job.run_dir / f"node-{n}.out").read_text() for n in (0, 1))
        assert "exitcode: -9" in node_outputs, node_outputs
        assert runs.last_step(job.run_dir) == STEPS
        loss = runs.final_loss(job.run_dir)
        reference_loss = reference.final_loss()
        assert loss == reference_loss, (loss, reference_loss)
        figures(
            slurm_id=job.scheduler_id,
            step_at_kill=step_at_kill,
            resumed_at_step=resumed[0],
            final_loss=loss,
            reference_final_loss=reference_loss,
        )
    finally:
        job.stop()
        scancel_quietly(job.scheduler_id)
        hosts.kill_leftovers(marker)


def node_states() -> dict[str, str]:
    """sinfo's state of each node."""
    done = subprocess.run(
        ["sinfo", "-h", "-N", "-o", "%N %T"], capture_output=True, text=True, timeout=30
    )
    return dict(line.split(maxsplit=1) for line in done.stdout.splitlines() if line.strip())


def steps_left(job_id: str) -> list[int]:
    """The slurmstepd processes of JOB_ID still on this machine (both test nodes run here)."""
    done = subprocess.run(
        ["pgrep", "-f", rf"slurmstepd: \[{job_id}\."], capture_output=True, text=True, timeout=30
    )
    return [int(pid) for pid in done.stdout.split()]


def resume_n2() -> None:
    """`scontrol update nodename=n2 state=resume` (refused, harmlessly, when n2 is up)."""
    subprocess.run(
        ["scontrol", "update", "nodename=n2", "state=resume"],
        capture_output=True,
        timeout=60,
        check=False,
    )


@pytest.fixture
def restore_n2() -> Iterator[list[str]]:
    """Whatever happens, n2 is resumed and both nodes are idle again afterwards, with no step
    of the test's jobs (the list it yields) left on them: a step still ending when the next
    test stops slurmctld is killed by its slurmd as unkillable, and Slurm then drains the node
    ("Kill task failed") under every later test. Seen once in CI; resumed again if so."""
    jobs: list[str] = []
    yield jobs
    resume_n2()
    runs.wait_for(
        lambda: not any(steps_left(job) for job in jobs),
        timeout=150,
        what=f"no step of jobs {jobs} left on the nodes",
        poll_s=1.0,
    )

    def both_idle() -> bool:
        states = node_states()
        if states.get("n2", "").startswith(("drain", "down")):
            resume_n2()
        return all(states.get(n) == "idle" for n in ("n1", "n2"))

    runs.wait_for(both_idle, timeout=120, what="n1 and n2 idle again", poll_s=1.0)


SLEEPER = (
    "import os, pathlib, time;"
    ' pathlib.Path(os.environ["JOBKIT_RUN_DIR"], "up-" + os.environ["NODE_RANK"]).touch();'
    " time.sleep(3600)"
)
"""Notes that it runs on its node (run folder, up-N), then sleeps: no torch, no torchrun."""


def sleeper_spec(folder: Path, marker: str) -> Path:
    """2 nodes of the Slurm example, requeue off, one SLEEPER per node (launcher none); its
    command line carries `--set name=MARKER` for hosts.kill_leftovers."""
    spec = folder / "nodedown.yaml"
    command = ["python3", "-c", SLEEPER, "--set", f"name={marker}"]
    spec.write_text(
        "name: nodedown\nbackend: slurm\n"
        "resources:\n  nodes: 2\n  partition: debug\n  time: '00:15:00'\n"
        "scheduler:\n  requeue: false\n"
        "launch:\n  launcher: none\n  nproc_per_node: 1\n"
        f"run:\n  command: {json.dumps(command)}\n"
    )
    return spec


@pytest.mark.cluster_alone  # takes n2 down
@pytest.mark.timeout(900)
def test_node_down_is_reported_as_node_fail(
    jobkit: Jobkit,
    slurm_cluster: object,
    figures: Figures,
    tmp_path: Path,
    restore_n2: list[str],
) -> None:
    """n2 is set down while the job runs on both nodes (requeue off): NODE_FAIL, never a
    success. The job is one sleeping process per node: what is checked is Slurm's node failure
    and jobkit's report of it, whatever the program."""
    marker = hosts.unique_marker("e2e-nodedown")
    job = start_job(jobkit, tmp_path, "nodedown", spec=str(sleeper_spec(tmp_path, marker)))
    restore_n2.append(job.scheduler_id)
    try:
        runs.wait_for(
            lambda: all((job.run_dir / f"up-{n}").exists() for n in (0, 1)),
            QUEUE_WAIT_S,
            "the program running on both nodes",
        )
        down = subprocess.run(
            ["scontrol", "update", "nodename=n2", "state=down", "reason=jobkit-e2e-node-down"],
            capture_output=True,
            text=True,
            timeout=60,
        )
        assert down.returncode == 0, down.stderr
        downed_at = time.monotonic()
        code = job.finish(timeout=300)
        reported_s = time.monotonic() - downed_at
        record = jobkit.status(job.jobkit_id)
        assert code != 0, job.output.read_text()
        assert record["state"] == "NODE_FAIL", record
        assert "SUCCEEDED" not in [change["state"] for change in record["history"]]
        leftovers = hosts.kill_leftovers(marker)
        figures(
            slurm_id=job.scheduler_id,
            raw_state=record["raw_state"],
            down_to_reported_s=round(reported_s, 1),
            processes_left_behind=len(leftovers),
        )
    finally:
        job.stop()
        scancel_quietly(job.scheduler_id)
        hosts.kill_leftovers(marker)
