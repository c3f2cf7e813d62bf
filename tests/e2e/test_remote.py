"""A laptop submits to the Slurm cluster over ssh (docs/remote.md), and sees nothing else.

The "laptop" is every jobkit command run by this test: each runs in its own mount namespace
(`unshare -m`) with an empty tmpfs over the cluster's workdir and over Slurm's config, so
no test passes by reading the cluster's files or asking Slurm directly. The "login node" is
n1 through the project's sshd, which runs outside the namespace and sees the real files.
"""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from tests.e2e import runs
from tests.e2e.cli import JOBKIT, REPO, VENV, trainer_sets
from tests.e2e.conftest import Figures

pytestmark = [pytest.mark.slurm, pytest.mark.ssh]

STEPS = 40
SMALL_TRAINING = trainer_sets(train__steps=STEPS, logging__every_steps=5)
CLUSTER = "testcluster"
HOST = "n1"
_HIDE = (
    'n=$1; shift; while [ "$n" -gt 0 ]; do mount -t tmpfs -o size=1m none "$1" || exit 97;'
    ' shift; n=$((n - 1)); done; exec "$@"'
)
_SUBMITTED = re.compile(r"^submitted (?P<id>\S+) \(slurm@\S+ job (?P<sched>\d+)\)", re.M)


@dataclass(frozen=True)
class Laptop:
    """jobkit as the laptop runs it: the cluster's workdir and Slurm hidden from it."""

    home: Path
    workdir: Path

    def hidden(self) -> list[str]:
        conf = Path(os.environ.get("SLURM_CONF", "/etc/slurm/slurm.conf")).parent
        return [
            str(p) for p in dict.fromkeys([self.workdir, conf, Path("/etc/slurm")]) if p.is_dir()
        ]

    def argv(self, *args: str) -> list[str]:
        hidden = self.hidden()
        return ["unshare", "-m", "sh", "-c", _HIDE, "laptop", str(len(hidden)), *hidden, *args]

    def env(self, **more: str) -> dict[str, str]:
        env = {k: v for k, v in os.environ.items() if not k.startswith(("SLURM_", "PBS_"))}
        return {**env, "JOBKIT_HOME": str(self.home), **more}

    def run(
        self, *args: str, timeout: float = 120.0, **env: str
    ) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            self.argv(str(JOBKIT), *args),
            cwd=REPO,
            env=self.env(**env),
            capture_output=True,
            text=True,
            timeout=timeout,
            check=False,
        )

    def start(self, *args: str, output: Path) -> subprocess.Popen[str]:
        with output.open("w") as sink:
            return subprocess.Popen(
                self.argv(str(JOBKIT), *args),
                cwd=REPO,
                env=self.env(),
                stdout=sink,
                stderr=subprocess.STDOUT,
                text=True,
            )

    def status(self, job: str) -> dict[str, Any]:
        done = self.run("status", "--json", job)
        assert done.returncode == 0, done.stderr
        data = json.loads(done.stdout)
        return dict(data[0] if isinstance(data, list) else data)


@pytest.fixture
def laptop(tmp_path: Path, slurm_cluster: object, ssh_hosts: object) -> Laptop:
    """A laptop with the cluster added (its python: this repository's venv there)."""
    workdir = tmp_path / "cluster-workdir"
    workdir.mkdir()
    (workdir / "seen-by-the-cluster-only").write_text("x")
    machine = Laptop(tmp_path / "laptop-home", workdir)
    added = machine.run(
        "clusters", "add", CLUSTER, "--host", HOST, "--workdir", str(workdir),
        "--python", str(VENV / "bin" / "python"), "--default", "resources.partition=debug",
    )  # fmt: skip
    assert added.returncode == 0, added.stderr
    return machine


def test_the_laptop_sees_neither_the_workdir_nor_slurm(laptop: Laptop) -> None:
    """The namespace works: the cluster's files and Slurm's commands are out of reach."""
    looked = subprocess.run(
        laptop.argv("sh", "-c", 'ls -A "$1"; squeue -h -o %i', "x", str(laptop.workdir)),
        capture_output=True,
        text=True,
        check=False,
    )
    assert "seen-by-the-cluster-only" not in looked.stdout
    assert looked.returncode != 0 and looked.stderr, looked  # squeue finds no config
    checked = laptop.run("clusters", "check", CLUSTER)
    assert checked.returncode == 0, checked.stderr
    assert re.search(r"^sbatch\s+/\S+/sbatch$", checked.stdout, re.M), checked.stdout
    assert f"workdir  {laptop.workdir}: writable" in checked.stdout
    assert f"jobkit: cluster {CLUSTER} is ready" in checked.stdout


@pytest.mark.slow
def test_a_two_node_job_submitted_on_the_cluster_is_followed_and_plotted_here(
    laptop: Laptop, tmp_path: Path, figures: Figures
) -> None:
    started = time.monotonic()
    sub = laptop.run("submit", "examples/slurm-2node.yaml", "--on", CLUSTER, *SMALL_TRAINING)
    assert sub.returncode == 0, sub.stderr
    match = _SUBMITTED.search(sub.stdout)
    assert match, sub.stdout
    job = match["id"]
    assert f"slurm@{CLUSTER}" in sub.stdout
    # The files reached the cluster (seen from outside the laptop's namespace).
    assert (laptop.workdir / "jobs" / job / "job.sh").is_file()
    assert (laptop.workdir / "lib" / "train" / "__main__.py").is_file()

    followed = laptop.run("logs", "-f", job, timeout=400)
    assert followed.returncode == 0, followed.stderr
    shown = re.search(rf"^(\[node \d\] )?step {STEPS}/{STEPS} loss \d", followed.stdout, re.M)
    assert shown, followed.stdout
    record = laptop.status(job)
    assert (record["state"], record["exit_code"], record["nodes"]) == ("SUCCEEDED", 0, "n[1-2]")
    assert record["backend"] == f"slurm@{CLUSTER}"
    assert record["log_paths"]["run_dir"].startswith(f"{laptop.workdir}/logs/")
    # The run on the cluster trained; the laptop's copy of its metrics is what plot draws.
    first, last = runs.assert_loss_fell(Path(record["log_paths"]["run_dir"]))
    png = tmp_path / "loss.png"
    plotted = laptop.run("plot", job, "-o", str(png))
    assert plotted.returncode == 0, plotted.stderr
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    copy = laptop.home / "remote" / CLUSTER / str(laptop.workdir).lstrip("/")
    assert (copy / "logs").is_dir(), sorted(laptop.home.rglob("*"))[:20]
    # report: sacct's usage through the connection, throughput from the copied metrics.
    reported = laptop.run("report", job)
    assert reported.returncode == 0, reported.stderr
    # sacct's CPU time per step came through the connection; its memory peak is a sample
    # (JobAcctGatherFrequency=30 here), which a 28 s step may not get: then report says so.
    assert re.search(r"^cpu\s+[\d.]+ s CPU time", reported.stdout, re.M), reported.stdout
    assert re.search(r"^memory\s+\S+ peak per node", reported.stdout, re.M) or (
        "Slurm took no sample of this step" in reported.stdout
    ), reported.stdout
    assert re.search(r"^throughput\s+[\d.]+ samples/s", reported.stdout, re.M), reported.stdout
    diagnosed = laptop.run("doctor", job)
    assert diagnosed.returncode == 0, diagnosed.stderr
    assert "the job succeeded: nothing to diagnose" in diagnosed.stdout
    figures(first_loss=first, final_loss=last, submit_to_end_s=round(time.monotonic() - started, 1))


def test_status_of_100_remote_jobs_is_one_ssh_round_trip(
    laptop: Laptop, tmp_path: Path, figures: Figures
) -> None:
    """100 rows on the cluster (real jobs from its accounting), one `jobkit status`: one
    ssh command, and no squeue or sacct run on the laptop."""
    from jobkit.registry.store import Store

    ids = _recent_job_ids(100)
    os.environ["JOBKIT_HOME"] = str(laptop.home)
    try:
        with Store() as store:
            for number in ids:
                row = store.create_intent(
                    backend=f"slurm@{CLUSTER}", name="seen", spec={}, script="",
                    workdir=laptop.workdir,
                )  # fmt: skip
                store.mark_submitted(row.jobkit_id, scheduler_id=number, argv=[], log_paths={})
    finally:
        del os.environ["JOBKIT_HOME"]
    log = tmp_path / "proc.jsonl"
    shown = laptop.run("status", "--all", JOBKIT_PROC_LOG=str(log))
    assert shown.returncode == 0, shown.stderr
    commands = [json.loads(line)["argv"] for line in log.read_text().splitlines()]
    assert [argv[0] for argv in commands] == ["ssh"], commands
    assert "squeue" in commands[0][-1] and "sacct" in commands[0][-1]
    settled = [line for line in shown.stdout.splitlines() if " seen " in f" {line} "]
    assert len(settled) == 100
    final = [line for line in settled if re.search(r"SUCCEEDED|FAILED|CANCELLED|TIMEOUT", line)]
    assert len(final) >= 95, shown.stdout  # accounting knows them: their states came back
    figures(jobs=100, ssh_round_trips=len(commands))


HELD_SPEC = """\
name: held
resources: {nodes: 1, time: "00:05:00"}
launch: {launcher: none}
run: {command: [sleep, "300"]}
"""


def test_a_connection_killed_during_sbatch_loses_nothing_and_submits_once(
    laptop: Laptop, tmp_path: Path, figures: Figures
) -> None:
    """sbatch is held on the cluster while the laptop's ControlMaster is killed: the laptop
    never gets the reply; the next `jobkit status` adopts the job by its token.

    The hold: the shipped job.sh is swapped (on the cluster's side) for a FIFO holding the
    same bytes, so sbatch waits reading it; the master is killed once sbatch has it open.
    The job only has to exist until it is cancelled: one node sleeping (launcher none), no
    training to start.
    """
    warm = laptop.run("clusters", "check", CLUSTER)  # the master connection is up
    assert warm.returncode == 0, warm.stderr
    spec = tmp_path / "held.yaml"
    spec.write_text(HELD_SPEC)
    output = tmp_path / "submit.out"
    submitter = laptop.start("submit", str(spec), "--on", CLUSTER, output=output)
    script, fifo = _swap_script_for_fifo(laptop.workdir, timeout=120)
    writer = _wait_for_reader(fifo, timeout=60)
    _kill_master(laptop)
    os.write(writer, script)
    os.close(writer)
    assert submitter.wait(timeout=120) != 0, output.read_text()
    said = output.read_text()
    assert "submitted" not in said and "is unknown" in said, said
    job = fifo.parent.name
    runs.wait_for(lambda: _with_token(laptop, job) != [], 60, "the held sbatch's job")
    record = laptop.status(job)  # reconciles: the job is found by its token and adopted
    found = _with_token(laptop, job)
    assert len(found) == 1, found  # submitted once
    assert record["scheduler_id"] == found[0], record
    assert record["extra"].get("adopted") is True, record
    assert len(_with_token(laptop, job)) == 1  # a second status submits nothing either
    explained = laptop.run("why", job)  # squeue and sacct through the connection
    assert explained.returncode == 0, explained.stderr
    assert f"{job}  held  (slurm@{CLUSTER} {found[0]})" in explained.stdout
    cancelled = laptop.run("cancel", job)  # scancel through the connection, which is back
    assert cancelled.returncode == 0, cancelled.stderr
    runs.wait_for(lambda: _slurm_state(found[0]).startswith("CANCELLED"), 60, "scancel")
    assert laptop.status(job)["state"] == "CANCELLED"
    retried = laptop.run("retry", job)  # attempt 2, submitted on the cluster again
    assert retried.returncode == 0, retried.stderr
    again = re.search(r"resubmitted as attempt 2: (\S+) \((\d+)\)", retried.stdout + retried.stderr)
    assert again, retried.stdout + retried.stderr
    assert laptop.status(again[1])["backend"] == f"slurm@{CLUSTER}"
    assert _slurm_state(again[2]) in ("PENDING", "RUNNING", "COMPLETING", "COMPLETED")
    assert laptop.run("cancel", again[1]).returncode == 0
    figures(adopted=found[0], retried=again[2])


SWEEP_SPEC = f"""\
name: rsweep
cluster: {CLUSTER}
resources: {{nodes: 1, time: "00:05:00"}}
launch: {{launcher: srun}}
run:
  train:
    config: tiny-lm
    overrides: {{train.steps: 4, logging.every_steps: 2}}
sweep:
  grid:
    optim.lr: [1e-3, 3e-4]
"""


def test_a_sweep_keyed_to_the_cluster_runs_there_as_one_array_and_is_watched_to_its_end(
    laptop: Laptop, tmp_path: Path, figures: Figures
) -> None:
    """`cluster:` in the spec (no --on): one Slurm array there; `jobkit watch` of the sweep
    follows both tasks through the connection to their end; one status of the sweep is one
    ssh round trip; each task's log comes back with its own overrides. Each task trains as
    one srun task (launcher srun: no torchrun agent to start)."""
    spec = tmp_path / "sweep.yaml"
    spec.write_text(SWEEP_SPEC)
    started = time.monotonic()
    sub = laptop.run("submit", str(spec))
    assert sub.returncode == 0, sub.stderr
    head = re.match(
        r"submitted sweep (jk\w+): 2 tasks as Slurm array (\d+): rsweep$", sub.stdout, re.M
    )
    assert head, sub.stdout
    sweep, array = head[1], head[2]
    tasks = dict(re.findall(r"^  task (\d)  (jk\w+)  " + array + r"_\d  lr=", sub.stdout, re.M))
    assert sorted(tasks) == ["0", "1"], sub.stdout
    assert (laptop.workdir / "jobs" / sweep / "job.sh").is_file()  # shipped there
    log = tmp_path / "proc.jsonl"  # status while the tasks are unfinished: they are asked
    early = laptop.run("status", "--json", sweep, JOBKIT_PROC_LOG=str(log))
    assert early.returncode == 0, early.stderr
    commands = [json.loads(line)["argv"] for line in log.read_text().splitlines()]
    assert [argv[0] for argv in commands] == ["ssh"], commands  # both tasks: one round trip
    assert len(json.loads(early.stdout)[0]["tasks"]) == 2, early.stdout
    watched = laptop.run("watch", sweep, "--interval", "1", timeout=400)
    assert watched.returncode == 0, watched.stderr
    for task, job in tasks.items():
        assert f"jobkit: {job} ({array}_{task}) SUCCEEDED" in watched.stderr, watched.stderr
    rows = {row["task"]: row for row in laptop.status(sweep)["tasks"]}
    for task, job in tasks.items():
        row = rows[task]
        assert (row["jobkit_id"], row["state"], row["exit_code"]) == (job, "SUCCEEDED", 0), row
        assert (row["backend"], row["scheduler_id"]) == (f"slurm@{CLUSTER}", f"{array}_{task}")
    logged = laptop.run("logs", tasks["1"])
    assert logged.returncode == 0, logged.stderr
    assert "jobkit: sweep task 1: optim.lr=3e-4" in logged.stdout + logged.stderr, logged
    figures(tasks=2, submit_to_end_s=round(time.monotonic() - started, 1))


@pytest.mark.slow
def test_doctor_dumps_the_stacks_of_a_hung_remote_job_through_the_connection(
    laptop: Laptop, tmp_path: Path, figures: Figures
) -> None:
    """tests/e2e/test_hang.py's stuck 2-node job, submitted --on the cluster: the laptop
    reads the heartbeats from its copy of the run folder, and py-spy runs on each node by
    `srun --overlap` on the login node, through the same connection."""
    from tests.e2e.test_hang import SPEC, check_stuck_rank_named

    spec = tmp_path / "hang.yaml"  # stuck at step 20 (test_hang's 200 take ~45 s here)
    resources = 'resources:\n  nodes: 2\n  time: "00:05:00"'
    spec.write_text(
        SPEC.format(name="rhang", backend="slurm", resources=resources, nproc=1, hang_step=20)
    )
    sub = laptop.run("submit", str(spec), "--on", CLUSTER)
    assert sub.returncode == 0, sub.stderr
    match = _SUBMITTED.search(sub.stdout)
    assert match, sub.stdout
    job = match["id"]
    try:
        hang = _wait_hang_named(laptop, job, timeout=300)
        log = tmp_path / "proc.jsonl"
        started = time.monotonic()
        text = laptop.run("doctor", job, timeout=180, JOBKIT_PROC_LOG=str(log))
        took = time.monotonic() - started
        assert text.returncode == 0, text.stderr
        check_stuck_rank_named(hang, text.stdout)
        assert sorted(s["node"] for s in hang["stacks"]) == ["n1", "n2"], text.stdout
        commands = [json.loads(line)["argv"] for line in log.read_text().splitlines()]
        assert {argv[0] for argv in commands} <= {"ssh", "rsync"}, commands
        dumps = [argv[-1] for argv in commands if "py-spy" in argv[-1]]
        assert len(dumps) == 2 and all("srun" in words for words in dumps), dumps
        figures(doctor_s=round(took, 2))
    finally:
        assert laptop.run("cancel", job).returncode == 0
    runs.wait_for(lambda: laptop.status(job)["state"] == "CANCELLED", 120, "the cancel")


def test_shell_opens_in_an_allocation_on_the_cluster_through_the_connection(
    laptop: Laptop, tmp_path: Path
) -> None:
    """`jobkit shell SPEC --on CLUSTER` on a pseudo-terminal: `ssh -t` to the login node,
    salloc there, the shell on the node with the job's environment; its exit code back."""
    import shutil

    from tests.e2e.test_interactive import _drive, _got  # types its TYPED line

    spec = tmp_path / "one.yaml"
    spec.write_text(
        "name: one\nresources: {nodes: 1, time: '00:05:00'}\n"
        "env: {nccl: {preset: ethernet}}\nrun: {command: [hostname]}\n"
    )
    argv = laptop.argv(str(JOBKIT), "shell", str(spec), "--on", CLUSTER)
    unshare = shutil.which("unshare")
    assert unshare is not None
    code, shown = _drive([unshare, *argv[1:]], laptop.env(), REPO, timeout=300)
    assert code == 3, shown  # the remote shell's own exit code, through ssh
    assert f"jobkit: on {CLUSTER} ({HOST}:{laptop.workdir}): asking for the allocation" in shown
    granted = re.search(r"Granted job allocation (\d+)", shown)
    assert granted, shown
    got = _got(shown)
    assert got["job"] == granted[1] == got["jobkit_job"], got
    assert got["node"] in ("n1", "n2") and got["nccl"] == "1", got
    assert got["run_dir"] == f"{laptop.workdir}/logs/one-{granted[1]}", got
    assert not list(laptop.workdir.glob(".jobkit-shell-rc.*"))  # read, then removed


def _wait_hang_named(laptop: Laptop, job: str, timeout: float) -> dict[str, Any]:
    """`jobkit doctor --json JOB`'s hang section, once it has named the stuck rank (a slow
    start-up on a loaded machine can look stalled in setup first)."""
    deadline = time.monotonic() + timeout
    while True:
        done = laptop.run("doctor", "--json", job, timeout=180)
        assert done.returncode == 0, done.stderr
        hang = json.loads(done.stdout).get("hang") or {}
        if hang.get("stalled") and hang.get("stuck_ranks") == [1]:
            return dict(hang)
        assert time.monotonic() < deadline, f"{job}: no stuck rank named: {done.stdout}"
        time.sleep(1.0)


def _slurm_state(job: str) -> str:
    """The job's state as Slurm itself says (squeue, else sacct), seen from the cluster."""
    queued = subprocess.run(["squeue", "-h", "-j", job, "-o", "%T"], capture_output=True, text=True)
    if queued.stdout.strip():
        return queued.stdout.strip()
    done = subprocess.run(
        ["sacct", "-X", "-n", "-P", "-j", job, "-o", "State"], capture_output=True, text=True
    )
    return done.stdout.strip()


def _swap_script_for_fifo(workdir: Path, timeout: float) -> tuple[bytes, Path]:
    """As soon as a job.sh arrives in the cluster's jobs/ folder: its bytes, and a FIFO in
    its place."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        for script in (workdir / "jobs").glob("*/job.sh"):
            data = script.read_bytes()
            script.unlink()
            os.mkfifo(script, 0o600)
            return data, script
        time.sleep(0.0005)
    raise AssertionError("no job.sh reached the cluster")


def _wait_for_reader(fifo: Path, timeout: float) -> int:
    """A write end of the FIFO, once sbatch has opened it (ENXIO until a reader has)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            return os.open(fifo, os.O_WRONLY | os.O_NONBLOCK)
        except OSError:
            time.sleep(0.01)
    raise AssertionError("sbatch never opened the script")


def _recent_job_ids(count: int) -> list[str]:
    """`count` plain jobs of the accounting, not the 10 newest (those may still run). The
    lanes' other tests made them; where they made too few so far (a fresh cluster, this test
    early in its lane), the missing ones are made: each cancelled as soon as it is submitted
    (CANCELLED, or COMPLETED where it ran `true` first). A held job would not do: accounting
    lists a job by its time window only once it was eligible to start."""
    ids = _accounted_ids()
    missing = count + 10 - len(ids)
    if missing > 0:
        made = [_cancelled_job() for _ in range(missing)]
        runs.wait_for(
            lambda: set(made) <= set(_accounted_ids()), 60, f"the {missing} cancelled jobs in sacct"
        )
        ids = _accounted_ids()
    return ids[-count - 10 : -10]


def _accounted_ids() -> list[str]:
    """The plain jobs (no arrays) sacct holds from the last week, oldest first."""
    done = subprocess.run(
        ["sacct", "-X", "-n", "-P", "-o", "JobID", "--starttime=now-7days"],
        capture_output=True, text=True, check=True, timeout=60,
    )  # fmt: skip
    return [line for line in dict.fromkeys(done.stdout.split()) if line.isdigit()]


def _cancelled_job() -> str:
    """The Slurm id of a one-line job cancelled as soon as it was submitted."""
    done = subprocess.run(
        ["sbatch", "--parsable", "-J", "accounted", "-o", "/dev/null", "--wrap", "true"],
        capture_output=True, text=True, check=True, timeout=60,
    )  # fmt: skip
    job = done.stdout.strip().split(";")[0]
    subprocess.run(["scancel", job], check=True, timeout=60)
    return job


def _kill_master(laptop: Laptop) -> None:
    """kill -9 the laptop's ControlMaster process for the cluster (its socket is in the
    laptop's own socket folder: transport.control_dir for its JOBKIT_HOME)."""
    from jobkit.remote.transport import control_dir

    os.environ["JOBKIT_HOME"] = str(laptop.home)
    try:
        sockets = [p for p in control_dir().iterdir() if p.is_socket()]
    finally:
        del os.environ["JOBKIT_HOME"]
    for sock in sockets:
        check = subprocess.run(
            ["ssh", "-o", f"ControlPath={sock}", "-O", "check", HOST],
            capture_output=True, text=True, check=False,
        )  # fmt: skip
        match = re.search(r"pid=(\d+)", check.stderr)
        if match:
            os.kill(int(match.group(1)), signal.SIGKILL)
            return
    raise AssertionError(f"no ControlMaster among {sockets}")


def _with_token(laptop: Laptop, job: str) -> Sequence[str]:
    """The Slurm jobs whose comment carries this row's submission token (seen directly)."""
    from jobkit.registry.store import Store

    os.environ["JOBKIT_HOME"] = str(laptop.home)
    try:
        with Store() as store:
            token = store.get(job).token
    finally:
        del os.environ["JOBKIT_HOME"]
    done = subprocess.run(
        ["sacct", "-X", "-n", "-P", "-o", "JobIDRaw,Comment", "--starttime=now-1hours"],
        capture_output=True, text=True, check=True,
    )  # fmt: skip
    queued = subprocess.run(
        ["squeue", "-h", "--states=all", "-o", "%i|%k"], capture_output=True, text=True
    )
    found = {
        line.split("|")[0]
        for line in (done.stdout + queued.stdout).splitlines()
        if line.endswith(f"jobkit:{token}")
    }
    return sorted(found)
