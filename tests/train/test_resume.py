"""Checkpoint, resume and preemption: exact equality, signals, kills and corrupt files."""

from __future__ import annotations

import os
import re
import signal
from pathlib import Path

import pytest
import torch

from tests.train.launch import SMALL_MLP, TINY_LM, Launcher, wait_for
from train.ranks.votes import steps_between_votes
from train.resume.checkpoint import checkpoint_path, list_checkpoints, load_checkpoint

RESUMED = re.compile(r"^resumed from step (\d+) \(", re.MULTILINE)


def final_state(run_dir: Path, step: int) -> dict:
    return load_checkpoint(checkpoint_path(run_dir / "checkpoints", step))


def assert_same_tensors(left: object, right: object, where: str = "") -> None:
    """Equal structure, and bit-identical tensors."""
    if isinstance(left, torch.Tensor):
        assert isinstance(right, torch.Tensor) and torch.equal(left, right), where
    elif isinstance(left, dict):
        assert isinstance(right, dict) and left.keys() == right.keys(), where
        for key in left:
            assert_same_tensors(left[key], right[key], f"{where}.{key}")
    elif isinstance(left, (list, tuple)):
        assert isinstance(right, (list, tuple)) and len(left) == len(right), where
        for index, (a, b) in enumerate(zip(left, right, strict=True)):
            assert_same_tensors(a, b, f"{where}[{index}]")
    else:
        assert left == right, (where, left, right)


def test_interrupted_and_resumed_equals_uninterrupted(launcher: Launcher) -> None:
    """2 ranks, dropout, gradient accumulation: stop at step 5 of 10, resume, compare bits."""
    overrides = (*TINY_LM, "train.steps=10", "train.grad_accum_steps=2", "checkpoint.every_steps=0")
    whole = launcher.run("whole", "tiny-lm", overrides, ranks=2)
    assert whole.returncode == 0, whole.explain()

    first = launcher.run("split", "tiny-lm", (*overrides, "train.stop_after_step=5"), ranks=2)
    assert "stopped after step 5 (train.stop_after_step): exiting with 75 (requeue)" in first.stdout
    assert (first.run_dir / "requeue-requested").read_text() == "step 5 train.stop_after_step\n"
    assert [s for s, _ in list_checkpoints(first.run_dir / "checkpoints")] == [5]
    for rank in (0, 1):
        assert "exiting with 75" in first.rank_log(rank)

    second = launcher.run("split", "tiny-lm", overrides, ranks=2)
    assert second.returncode == 0, second.explain()
    assert RESUMED.findall(second.stdout) == ["5"]
    assert not (second.run_dir / "requeue-requested").exists()  # a finished run clears it

    assert second.final_loss == whole.final_loss != ""
    assert second.losses() == whole.losses()[5:]
    resumed, uninterrupted = final_state(second.run_dir, 10), final_state(whole.run_dir, 10)
    for part in ("model", "optimizer", "scheduler", "rng"):
        assert_same_tensors(resumed[part], uninterrupted[part], part)


def test_preemption_signal_saves_and_exits_75(launcher: Launcher) -> None:
    """SIGUSR2 to a plain `python -m train`: finish the step, checkpoint, marker, exit 75."""
    overrides = (*SMALL_MLP, "train.steps=100000", "checkpoint.every_steps=0")
    process, run_dir = launcher.start("preempt", "mlp", overrides)
    try:
        assert wait_for(
            lambda: (
                "step 20/" in (run_dir / "rank-0.log").read_text()
                if (run_dir / "rank-0.log").exists()
                else False
            ),
            timeout=120,
        )
        process.send_signal(signal.SIGUSR2)
        stdout, stderr = process.communicate(timeout=120)
    finally:
        if process.poll() is None:
            os.killpg(process.pid, signal.SIGKILL)
    assert process.returncode == 75, stderr
    stopped = re.search(r"^stopped after step (\d+) \(preempted by SIGUSR2\)", stdout, re.M)
    assert stopped, stdout[-2000:]
    step = int(stopped[1])
    assert (run_dir / "requeue-requested").read_text() == f"step {step} preempted by SIGUSR2\n"
    assert not (run_dir / "finished").exists()  # stopped, not finished
    assert [s for s, _ in list_checkpoints(run_dir / "checkpoints")] == [step]

    requeued = {"SLURM_RESTART_COUNT": "1"}  # what a requeued Slurm job sees
    resumed = launcher.run("preempt", "mlp", (*SMALL_MLP, f"train.steps={step + 5}"), env=requeued)
    assert resumed.returncode == 0, resumed.explain()
    assert "requeue count: 1 (SLURM_RESTART_COUNT)" in resumed.stdout
    assert RESUMED.findall(resumed.stdout) == [str(step)]
    assert resumed.stdout.count("\nstep ") == 5
    assert list_checkpoints(run_dir / "checkpoints")[0][0] == step + 5
    # Complete: rank 0 says so in the run folder (the job script trusts it over a signal).
    final = re.findall(r"^final loss (\S+)$", resumed.stdout, re.M)
    assert (run_dir / "finished").read_text() == f"step {step + 5} final loss {final[-1]}\n"


def test_sigterm_to_torchrun_stops_every_rank_at_one_step(launcher: Launcher) -> None:
    """What Slurm does at a time limit: SIGTERM to torchrun, which passes it to the workers."""
    overrides = (*SMALL_MLP, "train.steps=100000", "checkpoint.every_steps=0")
    process, run_dir = launcher.start("term", "mlp", overrides, nproc=2)
    log0 = run_dir / "rank-0.log"
    try:
        assert wait_for(lambda: log0.exists() and "step 20/" in log0.read_text(), timeout=120)
        process.send_signal(signal.SIGTERM)
        process.communicate(timeout=120)
    finally:
        if process.poll() is None:
            os.killpg(process.pid, signal.SIGKILL)
    marker = re.match(
        r"step (\d+) preempted by SIGTERM", (run_dir / "requeue-requested").read_text()
    )
    assert marker
    step = int(marker[1])
    for rank in (0, 1):
        log = (run_dir / f"rank-{rank}.log").read_text()
        assert f"stopped after step {step} (preempted by SIGTERM)" in log, log[-1500:]
    state = load_checkpoint(checkpoint_path(run_dir / "checkpoints", step))
    assert state["step"] == step and len(state["rng"]) == 2


def kill_while_writing(launcher: Launcher, name: str, overrides: tuple[str, ...]):
    """Start a trainer that checkpoints every step; once one checkpoint is complete, SIGKILL
    it as soon as the temp file of a later one shows. Returns the run folder and the temp
    files left behind."""
    process, run_dir = launcher.start(name, "mlp", overrides)
    folder = run_dir / "checkpoints"

    def writing() -> bool:
        """A complete checkpoint exists and the next one is being written."""
        if not folder.is_dir() or not list_checkpoints(folder):
            return False
        return any(p.name.startswith(".step-") for p in folder.iterdir())

    try:
        seen = wait_for(writing, timeout=120, interval=0.001)
        process.send_signal(signal.SIGKILL)
        process.wait(timeout=60)
    finally:
        if process.poll() is None:
            os.killpg(process.pid, signal.SIGKILL)
    assert seen, "no checkpoint write started"
    return run_dir, [p.name for p in folder.iterdir() if p.name.startswith(".step-")]


def test_sigkill_during_checkpoint_write_resumes_from_the_previous(launcher: Launcher) -> None:
    """Kill -9 the trainer while it writes a checkpoint; the next run resumes from the last
    complete one and cleans up the partial write."""
    overrides = (
        "logging.every_steps=1",
        "model.args={hidden: 1024, depth: 4}",  # ~40 MB per checkpoint: writes take a while
        "train.steps=100000",
        "checkpoint.every_steps=1",
        "checkpoint.keep_last=2",
    )
    for attempt in range(3):
        run_dir, leftovers = kill_while_writing(launcher, f"kill{attempt}", overrides)
        if leftovers:  # killed mid-write (not just after the rename): the case under test
            break
    assert leftovers, "never caught the trainer inside a checkpoint write"
    folder = run_dir / "checkpoints"
    complete = [s for s, _ in list_checkpoints(folder)]
    for step in complete:  # every file under a final name is whole
        assert load_checkpoint(checkpoint_path(folder, step))["step"] == step
    newest = complete[0]

    resumed = launcher.run(
        run_dir.name,
        "mlp",
        (*overrides[:2], f"train.steps={newest + 2}", "checkpoint.every_steps=0"),
    )
    assert resumed.returncode == 0, resumed.explain()
    assert f"removed a partial checkpoint write: {folder / leftovers[0]}" in resumed.stdout
    assert RESUMED.findall(resumed.stdout) == [str(newest)]
    assert not [p for p in folder.iterdir() if p.name.startswith(".step-")]


def test_a_resumed_run_deletes_what_is_beyond_keep_last(launcher: Launcher) -> None:
    """A run stopped between a save and its prune (a SIGKILL after a requeue's checkpoint)
    leaves more files than checkpoint.keep_last: the next run deletes them when it resumes,
    before its first save, so repeated requeues cannot add one file each. Here the extra
    files come from a first run with a larger keep_last."""
    first = launcher.run(
        "keep",
        "mlp",
        (*SMALL_MLP, "train.steps=10", "checkpoint.every_steps=2", "checkpoint.keep_last=5"),
    )
    assert first.returncode == 0, first.explain()
    folder = first.run_dir / "checkpoints"
    assert [s for s, _ in list_checkpoints(folder)] == [10, 8, 6, 4, 2]
    resumed = launcher.run("keep", "mlp", (*SMALL_MLP, "train.steps=11", "checkpoint.keep_last=2"))
    assert resumed.returncode == 0, resumed.explain()
    removed = re.findall(r"^removed (\S+): beyond checkpoint.keep_last 2$", resumed.stdout, re.M)
    assert sorted(Path(path).name for path in removed) == [
        "step-00000002.pt",
        "step-00000004.pt",
        "step-00000006.pt",
    ]
    assert resumed.stdout.index("removed ") < resumed.stdout.index("resumed from step 10")
    assert [s for s, _ in list_checkpoints(folder)] == [11, 10]


def test_corrupt_or_partial_newest_checkpoint_is_skipped(launcher: Launcher) -> None:
    overrides = (*SMALL_MLP, "train.steps=10", "checkpoint.every_steps=5")
    first = launcher.run("corrupt", "mlp", overrides)
    assert first.returncode == 0, first.explain()
    folder = first.run_dir / "checkpoints"
    newest = checkpoint_path(folder, 10)
    newest.write_bytes(newest.read_bytes()[:1000])  # truncated: a partial copy
    checkpoint_path(folder, 11).write_bytes(b"\0" * 64)  # garbage under a newer name

    resumed = launcher.run("corrupt", "mlp", (*SMALL_MLP, "train.steps=12"))
    assert resumed.returncode == 0, resumed.explain()
    skipped = re.findall(r"^skipping checkpoint (\S+): (.+)$", resumed.stdout, re.M)
    assert [Path(path).name for path, _ in skipped] == ["step-00000011.pt", "step-00000010.pt"]
    assert all(why.startswith("cannot be loaded: ") for _, why in skipped)
    assert skipped[0][1].endswith("(renamed to step-00000011.pt.corrupt)")
    assert RESUMED.findall(resumed.stdout) == ["5"]
    assert resumed.stdout.count("\nstep ") == 7
    # set aside, so keep_last cannot prefer them over this run's own checkpoints
    assert [s for s, _ in list_checkpoints(folder)] == [12, 5]
    assert (folder / "step-00000010.pt.corrupt").exists()


def test_resume_from_an_explicit_path_and_a_bad_one(launcher: Launcher) -> None:
    first = launcher.run("explicit", "mlp", (*SMALL_MLP, "train.steps=4"))
    path = checkpoint_path(first.run_dir / "checkpoints", 4)
    again = launcher.run(
        "explicit2", "mlp", (*SMALL_MLP, "train.steps=6", f"checkpoint.resume={path}")
    )
    assert again.returncode == 0, again.explain()
    assert RESUMED.findall(again.stdout) == ["4"]
    bad = launcher.run("explicit3", "mlp", (*SMALL_MLP, f"checkpoint.resume={path}.missing"))
    assert bad.returncode == 2
    assert bad.stderr.splitlines()[-1].startswith(
        f"--set checkpoint.resume: {path}.missing cannot be loaded: "
    )


def test_already_complete_run_reports_its_final_loss(launcher: Launcher) -> None:
    first = launcher.run("done", "mlp", (*SMALL_MLP, "train.steps=4"))
    again = launcher.run("done", "mlp", (*SMALL_MLP, "train.steps=4"))
    assert again.returncode == 0, again.explain()
    assert "training already complete at step 4 (train.steps = 4)" in again.stdout
    assert again.final_loss == first.final_loss != ""


def test_a_fresh_run_refuses_a_folder_with_newer_checkpoints(launcher: Launcher) -> None:
    first = launcher.run("reuse", "mlp", (*SMALL_MLP, "train.steps=4"))
    assert first.returncode == 0, first.explain()
    again = launcher.run("reuse", "mlp", (*SMALL_MLP, "train.steps=4", "checkpoint.resume=never"))
    assert again.returncode == 2
    folder = again.run_dir / "checkpoints"
    assert again.stderr.splitlines()[-1] == (
        f"--set checkpoint.resume: never: {folder} already holds checkpoints up to step 4,"
        " newer than this run's start (step 0); use resume: auto, another checkpoint.dir,"
        " or remove them"
    )


def test_resume_on_another_world_size_maps_the_data_position(launcher: Launcher) -> None:
    overrides = (*SMALL_MLP, "train.steps=8", "data.batch_size_per_rank=16")
    first = launcher.run("grow", "mlp", (*overrides, "train.stop_after_step=4"), ranks=1)
    assert "stopped after step 4" in first.stdout, first.explain()
    second = launcher.run("grow", "mlp", overrides, ranks=2)
    assert second.returncode == 0, second.explain()
    assert (
        "warning: checkpoint was written by 1 ranks x batch 16, this run has 2 x 16: data"
        " position mapped to batch 2 of epoch 0, RNG reseeded (not bit-identical to one run)"
    ) in second.stdout
    assert RESUMED.findall(second.stdout) == ["4"]
    assert second.stdout.count("\nstep ") == 4


def _worker_pids(parent: int) -> dict[int, int]:
    """rank -> pid of the trainer processes torchrun `parent` started (from /proc)."""
    found: dict[int, int] = {}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            ppid = int((entry / "stat").read_text().rsplit(")", 1)[1].split()[1])
            environ = (entry / "environ").read_bytes().split(b"\0")
        except (OSError, IndexError, ValueError):
            continue
        if ppid != parent:
            continue
        for item in environ:
            if item.startswith(b"RANK="):
                found[int(item[5:])] = int(entry.name)
    return found


def test_signal_to_one_rank_stops_both_at_a_vote_between_steps(launcher: Launcher) -> None:
    """Fast steps, rare log lines: the ranks vote every N steps (N > 1 from the timed steps),
    and a signal that reaches rank 1 only still stops both ranks after the same vote step."""
    overrides = (
        "logging.every_steps=100000",
        "data.args={samples: 1024}",
        "train.steps=1000000",
        "checkpoint.every_steps=0",
        "train.stop_vote_every_s=0.2",
    )
    process, run_dir = launcher.start("cadence", "mlp", overrides, nproc=2)
    log0, log1 = run_dir / "rank-0.log", run_dir / "rank-1.log"
    try:
        assert wait_for(lambda: log1.exists() and "stop votes every" in log1.read_text(), 120)
        pids = _worker_pids(process.pid)
        assert sorted(pids) == [0, 1], pids
        os.kill(pids[1], signal.SIGUSR2)
        process.communicate(timeout=120)
    finally:
        if process.poll() is None:
            os.killpg(process.pid, signal.SIGKILL)
    text0, text1 = log0.read_text(), log1.read_text()
    cadence = re.search(r"stop votes every (\d+) step\(s\): ([\d.]+) ms per step", text0)
    assert cadence, text0[-1500:]
    every, step_ms = int(cadence[1]), float(cadence[2])
    # about 0.2 s of steps (the log rounds the step time to 0.1 ms)
    assert 1 < every <= 1000, cadence[0]
    assert int(200 / (step_ms + 0.05)) <= every <= int(200 / max(step_ms - 0.05, 0.01)), cadence[0]
    assert f"stop votes every {every} step(s)" in text1  # the same on both ranks
    # rank 0 writes the marker: it stops for its peer's signal
    marker = re.match(
        r"step (\d+) preempted by a signal on another rank\n$",
        (run_dir / "requeue-requested").read_text(),
    )
    assert marker
    step = int(marker[1])
    assert step % every == 0, (step, every)
    assert f"stopped after step {step} (preempted by a signal on another rank)" in text0
    assert f"stopped after step {step} (preempted by SIGUSR2)" in text1
    assert [s for s, _ in list_checkpoints(run_dir / "checkpoints")] == [step]


@pytest.mark.parametrize(
    ("step_s", "every_s", "expected"),
    [
        (0.005, 0.25, 50),  # fast steps: a vote every 50
        (0.3, 0.25, 1),  # a step longer than the interval: every step
        (0.0001, 0.25, 1000),  # capped
        (0.005, 0.0, 1),  # 0 turns the cadence off
        (0.0, 0.25, 1),  # no time measured: every step
    ],
)
def test_steps_between_votes(step_s: float, every_s: float, expected: int) -> None:
    assert steps_between_votes(step_s, every_s, 1000) == expected
