"""Issue 22 item 1: `kill -9` of `jobkit submit` at random points of a sweep's submission, on
the real Slurm and the real Grid Engine. Afterwards every task is tracked under its own id
(Slurm `A_i`, Grid Engine `A.(i+1)`) with its own task's state, or (nothing reached the
scheduler) is FAILED "submission lost" once the grace has passed; never a task row under the
array's id, never a lost row whose job ran.

The kill comes at a random moment: from a timer (anywhere from start-up to the end of the
submission) or from the submit command itself, a random short while after the scheduler
answered (while jobkit records the tasks). The trials are cheap: held tasks (their state is
HELD until the test cancels them) and, on Slurm, tasks of `true` that end at once (their
state is the one sacct reports). The grace (LOST_AFTER_S) is passed by reconciling with a
later `now`, as the other crash tests do; the adoption itself runs in a real `jobkit status`.
"""

from __future__ import annotations

import contextlib
import os
import random
import signal
import subprocess
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from jobkit.backends.sge.parse import FinishedRun, parse_qacct
from jobkit.manager.reconcile import LOST_AFTER_S, reconcile_submissions
from jobkit.manager.submit import SUBMIT_STARTED
from jobkit.registry.store import Store
from tests.reliability.helpers import (
    JOBKIT,
    executable,
    path_with,
    real,
    run_jobkit,
    slurm,
    wait_for,
    write_spec,
)

TASKS = 3
SEED = int(os.environ.get("JOBKIT_CRASH_SEED", "0")) or random.randrange(1, 10**6)


@dataclass(frozen=True)
class Trial:
    """One crashed submission: where its files are and what the submit command printed."""

    home: Path
    log: Path

    def answers(self) -> list[str]:
        """The scheduler ids the submit command printed (empty: it was never run, or it
        was refused); waits until every submit command started has ended."""
        if not self._lines() and any((self.home / "jobs").glob(f"*/{SUBMIT_STARTED}")):
            # jobkit was about to run it when killed: it may have been forked just before
            with contextlib.suppress(AssertionError):
                wait_for("it to start", lambda: bool(self._lines()), timeout=2, interval=0.05)
        wait_for("the submit command to end", self._settled, timeout=60)
        return [line.removeprefix("id ") for line in self._lines() if line.startswith("id ")]

    def _lines(self) -> list[str]:
        return self.log.read_text().splitlines() if self.log.exists() else []

    def _settled(self) -> bool:
        lines = self._lines()
        started = sum(1 for line in lines if line == "start")
        return started == sum(1 for line in lines if line.startswith(("id ", "rc ")))


def crashing_submit(folder: Path, command: str, real_path: str, log: Path, delay: float) -> Path:
    """`command` first on PATH: runs the real one, logs its answer, prints it, and SIGKILLs its
    caller (jobkit submit): at once (delay 0, before jobkit can read the answer: the issue's
    reproduction), or `delay` seconds later from the background (delay < 0: never)."""
    kill, now = "", ""
    if delay > 0:
        kill = f'( sleep {delay:.3f}; kill -9 "$PPID" ) </dev/null >/dev/null 2>&1 &\n'
    elif delay == 0:
        now = 'kill -9 "$PPID"\n'
    body = (
        f'echo start >>"{log}"\n'
        f'out=$("{real_path}" "$@"); rc=$?\n'
        f'if [ "$rc" = 0 ]; then echo "id $out" >>"{log}"; else echo "rc $rc" >>"{log}"; fi\n'
        f'{kill}echo "$out"\n{now}exit "$rc"\n'
    )
    wrapper = executable(folder / command, "#!/bin/bash\n" + body)
    if command == "qsub":
        # jobkit runs Grid Engine's commands from their own folder, never from PATH
        # (backends/commands.py): this folder becomes that folder (JOBKIT_SGE_BIN, see
        # command_env), the wrapper beside links to the real others.
        for other in Path(real_path).parent.iterdir():
            if other.name != command and not (folder / other.name).exists():
                (folder / other.name).symlink_to(other)
    return wrapper


def command_env(home: Path, folder: Path) -> dict[str, str]:
    """The environment of a `jobkit submit` whose submit command is the wrapper in FOLDER."""
    return {"JOBKIT_HOME": str(home), "PATH": path_with(folder), "JOBKIT_SGE_BIN": str(folder)}


def kill_submit(trial: Trial, spec: Path, command: str, real_path: str, rng: random.Random) -> str:
    """Start `jobkit submit SPEC` and SIGKILL it at a random point; returns how."""
    folder = trial.home.parent / "bin"
    env = command_env(trial.home, folder)
    if rng.random() < 0.5:
        delay = rng.choice([0.0, rng.uniform(0.0, 0.3)])
        crashing_submit(folder, command, real_path, trial.log, delay)
        done = run_jobkit("submit", str(spec), cwd=spec.parent, env=env)
        assert done.returncode in (-signal.SIGKILL, 0), done.stderr
        return f"killed {delay:.2f} s after {command} answered"
    crashing_submit(folder, command, real_path, trial.log, -1.0)
    after = rng.uniform(0.0, 2.5)
    proc = subprocess.Popen(
        [*JOBKIT, "submit", str(spec)],
        cwd=spec.parent,
        env={**os.environ, **env},
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    time.sleep(after)
    proc.kill()
    proc.wait()
    return f"killed {after:.2f} s after start"


def sweep_rows(home: Path) -> list[dict[str, object]]:
    """The trial's task rows, by task, after a real `jobkit status` (which adopts)."""
    done = run_jobkit("status", "--all", cwd=home.parent, env={"JOBKIT_HOME": str(home)})
    assert done.returncode in (0, 3), done.stderr
    assert "Traceback" not in done.stderr
    with Store() as store:
        rows = store.list_jobs(recent_final_s=None)
        return [r.to_dict() for r in sorted(rows, key=lambda r: int(r.task or 0))]


def settle_lost(home: Path) -> None:
    """Reconcile as `jobkit status` would after the grace (LOST_AFTER_S) has passed."""
    with Store() as store:
        rows = store.submitting()
        if rows:
            later = max(r.created_at for r in rows) + LOST_AFTER_S + 1
            assert not reconcile_submissions(store, now=later).errors


def check_trial(
    trial: Trial,
    how: str,
    task_id: Callable[[str, str], str],
    truth: Callable[[str], dict[str, str]],
    cleanup: list[str],
    *,
    unsure_ok: bool = False,
) -> str:
    """Every row under its own task's id with its true state, or lost when nothing was
    submitted; returns the array id (or ""). The ids the scheduler gave go to `cleanup`."""
    answers = trial.answers()
    cleanup.extend(answers)
    assert len(answers) <= 1, (how, answers)
    rows = sweep_rows(trial.home)
    if not answers:
        settle_lost(trial.home)
        rows = sweep_rows(trial.home)
        started = list((trial.home / "jobs").glob(f"*/{SUBMIT_STARTED}"))
        for row in rows:
            if row["state"] == "UNKNOWN" and unsure_ok and started:
                # Killed after jobkit noted that qsub was about to run: Grid Engine cannot
                # show an ended job's script, so the fate is unknown (kept looked for).
                assert str(row["reason"]).startswith("submission reply lost"), (how, row)
                continue
            assert row["state"] == "FAILED", (how, row)
            assert str(row["reason"]).startswith(("submission lost", "submission failed")), row
        return ""
    array = answers[0].split(".")[0].split(";")[0]
    assert len(rows) == TASKS, (how, rows)
    for row in rows:  # adopted at once (the first `jobkit status`) under its task's id
        expected_id = task_id(array, str(row["task"]))
        assert row["scheduler_id"] == expected_id, (how, row)
        out = row["log_paths"]["out"]  # type: ignore[index]
        assert out.endswith(f"-{expected_id}.out"), (how, out)  # its own files
    states = truth(array)
    for row in sweep_rows(trial.home):
        expected_id = task_id(array, str(row["task"]))
        assert row["scheduler_id"] == expected_id, (how, row)
        assert row["state"] == states[expected_id], (how, row, states)
    return array


# ---- Slurm ----------------------------------------------------------------------------------


def slurm_spec(folder: Path, name: str, *, held: bool) -> Path:
    return write_spec(
        folder / f"{name}.yaml",
        {
            "name": name,
            "backend": "slurm",
            "resources": {"partition": "debug", "time": "00:02:00"},
            "launch": {"launcher": "srun"},
            "run": {"command": ["true"]},
            "scheduler": {"extra": ["--hold"] if held else []},
            "sweep": {"grid": {"optim.lr": ["1", "2", "3"][:TASKS]}},
        },
    )


def slurm_truth(array: str, *, held: bool) -> dict[str, str]:
    """jobkit's state of each task by Slurm's own record: held tasks are HELD (squeue); tasks
    that ran are what sacct says, once every task has ended."""
    if held:
        return {f"{array}_{i}": "HELD" for i in range(TASKS)}
    ended: dict[str, str] = {}

    def all_ended() -> bool:
        done = slurm(["sacct", "-X", "-n", "-P", "-j", array, "--format=JobID,State"])
        ended.clear()
        for line in done.stdout.splitlines():
            job, _, state = line.partition("|")
            ended[job] = state.split()[0] if state else ""
        return len(ended) == TASKS and all(
            s in ("COMPLETED", "FAILED", "CANCELLED") for s in ended.values()
        )

    wait_for(f"Slurm array {array} to end", all_ended, timeout=180, interval=1.0)
    words = {"COMPLETED": "SUCCEEDED", "FAILED": "FAILED", "CANCELLED": "CANCELLED"}
    return {job: words[state] for job, state in ended.items()}


@pytest.fixture
def slurm_arrays() -> Iterator[list[str]]:
    """Slurm array ids cancelled when the test ends."""
    ids: list[str] = []
    yield ids
    if ids:
        slurm(["scancel", *ids])


@pytest.mark.slurm
def test_sweep_submission_killed_at_random_points_keeps_every_slurm_task(
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    slurm_arrays: list[str],
    tally: Callable[[str, int], None],
    slurm_cluster: object,
) -> None:
    rng = random.Random(SEED)
    sbatch = real("sbatch")
    cancelled_one = False
    for number in range(6):
        held = number % 3 != 2  # two of six trials run their tasks to the end
        folder = tmp_path / f"trial{number}"
        folder.mkdir()
        trial = Trial(folder / "home", folder / "submits.log")
        monkeypatch.setenv("JOBKIT_HOME", str(trial.home))
        spec = slurm_spec(folder, f"swk{number}", held=held)
        how = f"seed {SEED} trial {number}: " + kill_submit(trial, spec, "sbatch", sbatch, rng)
        array = check_trial(
            trial,
            how,
            lambda job, task: f"{job}_{task}",
            lambda job, held=held: slurm_truth(job, held=held),  # type: ignore[misc]
            slurm_arrays,
        )
        if array and held and not cancelled_one:
            cancel_one_task(trial, array)
            cancelled_one = True
    tally("crashes: sweep submission SIGKILLed at a random point (Slurm)", 6)


@pytest.mark.slurm
def test_a_sweep_that_ended_before_anyone_looked_is_found_in_sacct(
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    slurm_arrays: list[str],
    slurm_cluster: object,
) -> None:
    """Killed right after sbatch answered; the tasks run, end and leave squeue (MinJobAge)
    before the next jobkit command: it finds the array in sacct by the token in the submit
    line (this cluster's accounting stores no comments) and each task gets its own end."""
    trial = Trial(tmp_path / "home", tmp_path / "submits.log")
    monkeypatch.setenv("JOBKIT_HOME", str(trial.home))
    crashing_submit(tmp_path / "bin", "sbatch", real("sbatch"), trial.log, 0.0)
    spec = slurm_spec(tmp_path, "swgone", held=False)
    env = command_env(trial.home, tmp_path / "bin")
    done = run_jobkit("submit", str(spec), cwd=tmp_path, env=env)
    assert done.returncode == -signal.SIGKILL, done.stderr
    (array,) = trial.answers()
    slurm_arrays.append(array)
    truth = slurm_truth(array, held=False)
    wait_for(
        "squeue to forget the array",
        lambda: not slurm(["squeue", "-h", "--states=all", "-j", array]).stdout.strip(),
        timeout=120,
        interval=1.0,
    )
    rows = sweep_rows(trial.home)
    assert [(r["scheduler_id"], r["state"]) for r in rows] == [
        (f"{array}_{i}", truth[f"{array}_{i}"]) for i in range(TASKS)
    ]


def cancel_one_task(trial: Trial, array: str) -> None:
    """`jobkit cancel` of an adopted task row stops that task only."""
    with Store() as store:
        row = next(r for r in store.list_jobs(recent_final_s=None) if r.task == "1")
    done = run_jobkit("cancel", row.jobkit_id, cwd=trial.home.parent)
    assert done.returncode == 0, done.stderr
    live = slurm(["squeue", "-h", "--array", "-j", array, "--states=all", "--format=%i %T"])
    states = dict(line.split() for line in live.stdout.splitlines())
    assert states.get(f"{array}_0") == "PENDING" and states.get(f"{array}_2") == "PENDING", states


# ---- Grid Engine ------------------------------------------------------------------------------


def sge_spec(folder: Path, name: str, pe: str) -> Path:
    return write_spec(
        folder / f"{name}.yaml",
        {
            "name": name,
            "backend": "sge",
            "resources": {"time": "00:02:00"},
            "sge": {"pe": pe},
            "run": {"command": ["true"]},
            "scheduler": {"extra": ["-h"]},
            "sweep": {"grid": {"optim.lr": ["1", "2", "3"][:TASKS]}},
        },
    )


@pytest.mark.sge
def test_sweep_submission_killed_at_random_points_keeps_every_sge_task(
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    tally: Callable[[str, int], None],
    sge_cluster: object,
) -> None:
    rng = random.Random(SEED)
    qsub = real("qsub")  # Grid Engine's: the sge_cluster fixture put its commands first
    pe = getattr(sge_cluster, "pe", "jobkit")
    arrays: list[str] = []
    cancelled_one = False
    try:
        for number in range(4):
            folder = tmp_path / f"trial{number}"
            folder.mkdir()
            trial = Trial(folder / "home", folder / "submits.log")
            monkeypatch.setenv("JOBKIT_HOME", str(trial.home))
            spec = sge_spec(folder, f"sgk{number}", pe)
            how = f"seed {SEED} trial {number}: " + kill_submit(trial, spec, "qsub", qsub, rng)
            array = check_trial(
                trial,
                how,
                lambda job, task: f"{job}.{int(task) + 1}",  # Grid Engine counts from 1
                lambda job: {f"{job}.{i + 1}": "HELD" for i in range(TASKS)},
                arrays,
                unsure_ok=True,
            )
            if array and not cancelled_one:
                cancel_one_sge_task(trial, array)
                cancelled_one = True
    finally:
        if arrays:
            numbers = [a.split(".")[0] for a in arrays]  # qsub -terse: `12.1-3:1`
            subprocess.run(["qdel", *numbers], capture_output=True, check=False)
    tally("crashes: sweep submission SIGKILLed at a random point (Grid Engine)", 4)


def exiting_spec(folder: Path, name: str, pe: str, codes: list[str], **fields: object) -> Path:
    """A Grid Engine job whose program exits with its sweep value `code` (a sweep of several
    codes), or with codes[0] (one code: a single job)."""
    spec: dict[str, object] = {
        "name": name,
        "backend": "sge",
        "sge": {"pe": pe},
        "launch": {"launcher": "none"},
        "run": {"command": ["bash", "-c", 'exit "${1#code=}"', "job", *codes[:1]]},
        **fields,
    }
    if len(codes) > 1:
        spec["run"] = {"command": ["bash", "-c", 'exit "${1#code=}"', "job"]}
        spec["sweep"] = {"grid": {"code": codes}}
    return write_spec(folder / f"{name}.yaml", spec)


def submit_killed_after_qsub(tmp_path: Path, spec: Path) -> tuple[Trial, str]:
    """`jobkit submit SPEC` SIGKILLed as qsub answers (the issue's reproduction); returns the
    trial and the job number qsub printed."""
    trial = Trial(tmp_path / "home", tmp_path / "submits.log")
    crashing_submit(tmp_path / "bin", "qsub", real("qsub"), trial.log, 0.0)
    env = command_env(trial.home, tmp_path / "bin")
    done = run_jobkit("submit", str(spec), cwd=tmp_path, env=env)
    assert done.returncode == -signal.SIGKILL, done.stderr
    (answer,) = trial.answers()
    return trial, answer.split(".")[0]


def ended_in_qacct(number: str, records: int) -> dict[str | None, FinishedRun]:
    """Grid Engine's own record of each task (None: a single job) once `records` of them are
    in qacct, i.e. every task ended and left qstat before the next jobkit command."""
    runs: dict[str | None, FinishedRun] = {}

    def written() -> bool:
        done = subprocess.run(["qacct", "-j", number], capture_output=True, text=True)
        runs.clear()
        runs.update({run.task: run for run in parse_qacct(done.stdout)})
        return len(runs) == records

    wait_for(f"qacct to hold job {number}", written, timeout=180, interval=1.0)
    assert subprocess.run(["qstat", "-j", number], capture_output=True).returncode != 0
    return runs


@pytest.mark.sge
def test_sge_tasks_that_ended_unseen_are_adopted_from_qacct(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, sge_cluster: object
) -> None:
    """Killed right after qsub answered; the three tasks (exit 0, 3, 5) run and end before the
    next jobkit command, so only qacct knows them. The token is the job's account string,
    which qacct keeps: each row is adopted under its own task's id with the state and exit
    code Grid Engine recorded for that task."""
    monkeypatch.setenv("JOBKIT_HOME", str(tmp_path / "home"))
    pe = getattr(sge_cluster, "pe", "jobkit")
    spec = exiting_spec(tmp_path, "sgegone", pe, ["0", "3", "5"])
    trial, number = submit_killed_after_qsub(tmp_path, spec)
    runs = ended_in_qacct(number, TASKS)
    with Store() as store:
        token = store.list_jobs(recent_final_s=None)[0].extra["array_token"]
    assert {run.account for run in runs.values()} == {f"jobkit.{token}"}
    assert [(t, runs[t].exit_status) for t in ("1", "2", "3")] == [("1", 0), ("2", 3), ("3", 5)]
    rows = sweep_rows(trial.home)
    assert [(r["scheduler_id"], r["state"], r["exit_code"]) for r in rows] == [
        (f"{number}.1", "SUCCEEDED", 0),
        (f"{number}.2", "FAILED", 3),
        (f"{number}.3", "FAILED", 5),
    ]
    for row in rows:
        assert row["extra"]["adopted"] is True, row  # type: ignore[index]
        out = row["log_paths"]["out"]  # type: ignore[index]
        assert out.endswith(f"-{row['scheduler_id']}.out") and Path(out).exists(), out


@pytest.mark.sge
def test_a_single_sge_job_that_ended_unseen_is_adopted_from_qacct(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, sge_cluster: object
) -> None:
    monkeypatch.setenv("JOBKIT_HOME", str(tmp_path / "home"))
    spec = exiting_spec(tmp_path, "sgeone", getattr(sge_cluster, "pe", "jobkit"), ["4"])
    trial, number = submit_killed_after_qsub(tmp_path, spec)
    assert ended_in_qacct(number, 1)[None].exit_status == 4
    (row,) = sweep_rows(trial.home)
    assert (row["scheduler_id"], row["state"], row["exit_code"]) == (number, "FAILED", 4), row
    assert row["extra"]["adopted"] is True  # type: ignore[index]


@pytest.mark.sge
def test_with_the_users_own_account_an_unseen_end_stays_of_unknown_fate(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, sge_cluster: object
) -> None:
    """resources.account is the user's: qsub gets no `-A jobkit.<token>` over it, so qacct
    holds nothing of jobkit's. Tasks that ended unseen cannot be told apart: after the
    grace each row is UNKNOWN "submission reply lost" (still looked for), never FAILED
    "submission lost" for tasks that ran (the known limit, docs/reliability.md)."""
    monkeypatch.setenv("JOBKIT_HOME", str(tmp_path / "home"))
    pe = getattr(sge_cluster, "pe", "jobkit")
    spec = exiting_spec(tmp_path, "sgeacct", pe, ["0", "2"], resources={"account": "proj7"})
    trial, number = submit_killed_after_qsub(tmp_path, spec)
    runs = ended_in_qacct(number, 2)
    assert {run.account for run in runs.values()} == {"proj7"}  # the user's, kept
    assert {r["state"] for r in sweep_rows(trial.home)} == {"SUBMITTING"}
    settle_lost(trial.home)
    for row in sweep_rows(trial.home):
        assert (row["state"], row["scheduler_id"]) == ("UNKNOWN", None), row
        assert str(row["reason"]).startswith("submission reply lost"), row


def cancel_one_sge_task(trial: Trial, array: str) -> None:
    """`jobkit cancel` of an adopted task row deletes that task only (qstat -g d lists the
    array's tasks one per line, the task number last)."""
    with Store() as store:
        row = next(r for r in store.list_jobs(recent_final_s=None) if r.task == "1")
    done = run_jobkit("cancel", row.jobkit_id, cwd=trial.home.parent)
    assert done.returncode == 0, done.stderr
    listed = subprocess.run(["qstat", "-g", "d"], capture_output=True, text=True, check=True)
    left = [line.split()[-1] for line in listed.stdout.splitlines() if line.split()[:1] == [array]]
    assert left == ["1", "3"], listed.stdout


def test_trial_log_reads_ids_and_refusals(tmp_path: Path) -> None:
    """The helper that reads what the submit command answered (no cluster needed)."""
    log = tmp_path / "submits.log"
    log.write_text("start\nid 12;c\nstart\nrc 1\n")
    assert Trial(tmp_path, log).answers() == ["12;c"]
    assert Trial(tmp_path, tmp_path / "none").answers() == []
