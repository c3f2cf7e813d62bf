"""train.steps or train.epochs: exactly one, the other derived from the data and the batch."""

from __future__ import annotations

import json
from fractions import Fraction
from pathlib import Path

import pytest

from tests.train.launch import Launcher
from train.config.load import ConfigError, load_config
from train.loop.length import derive_length


@pytest.mark.parametrize(
    ("world", "batches", "steps", "line"),
    [
        (
            1,
            64,  # 4096 samples / 64 per rank
            128,
            "128 steps = 2 epochs of 4096 samples at global batch 64 (train.epochs given;"
            " 64 steps per epoch)",
        ),
        (
            2,
            32,  # 2048 samples per rank / 64
            64,
            "64 steps = 2 epochs of 4096 samples at global batch 128 (train.epochs given;"
            " 32 steps per epoch)",
        ),
    ],
)
def test_epochs_make_steps_on_one_and_two_ranks(
    world: int, batches: int, steps: int, line: str
) -> None:
    length = derive_length(
        steps=None,
        epochs=2,
        samples=4096,
        batches_per_epoch=batches,
        batch_size=64,
        world_size=world,
        grad_accum_steps=1,
    )
    assert (length.steps, length.epochs, length.global_batch) == (steps, 2, 64 * world)
    assert length.describe() == line


def test_steps_make_epochs_and_partial_steps_round_up() -> None:
    given = derive_length(
        steps=100,
        epochs=None,
        samples=4096,
        batches_per_epoch=64,
        batch_size=64,
        world_size=1,
        grad_accum_steps=1,
    )
    assert given.epochs == Fraction(100, 64)
    assert given.describe() == (
        "100 steps = 1.5625 epochs of 4096 samples at global batch 64 (train.steps given;"
        " 64 steps per epoch)"
    )
    # 900 samples on 2 ranks: 450 each, 7 batches of 64 (2 x 2 samples left out), 2
    # micro-steps per step: 3.5 steps an epoch; 0.1 epochs is 0.35 steps: one step.
    odd = derive_length(
        steps=None,
        epochs=0.1,
        samples=900,
        batches_per_epoch=7,
        batch_size=64,
        world_size=2,
        grad_accum_steps=2,
    )
    assert (odd.steps, odd.epochs) == (1, Fraction(2, 7))
    assert odd.describe() == (
        "1 steps = ~0.285714 epochs of 900 samples at global batch 256 (train.epochs given;"
        " 3.5 steps per epoch; 4 samples of each shuffled epoch left out: not a full batch)"
    )


CONFIG = "data:\n  batch_size_per_rank: 8\ntrain:\n  seed: 1\n{length}"
BOTH = "give steps or epochs, not both (steps is 20)"
NEITHER = "give train.steps or train.epochs (neither is set)"


@pytest.mark.parametrize(
    ("length", "overrides", "expected"),
    [
        ("  steps: 20\n  epochs: 2\n", (), "{f}:6: train.epochs: " + BOTH),
        ("", (), "{f}:3: train.steps: " + NEITHER),
        ("", ("train.steps=20", "train.epochs=2"), "--set train.epochs: " + BOTH),
        ("", ("train.epochs=2", "train.steps=20"), "--set train.epochs: " + BOTH),
        (
            "  steps: 20\n",
            ("train.steps=null",),
            "--set train.steps: " + NEITHER,
        ),
    ],
)
def test_both_or_neither_is_one_line(
    length: str, overrides: tuple[str, ...], expected: str, tmp_path: Path
) -> None:
    path = tmp_path / "c.yaml"
    path.write_text(CONFIG.format(length=length))
    with pytest.raises(ConfigError) as caught:
        load_config(str(path), overrides)
    assert caught.value.show() == expected.format(f=path)


def test_an_override_of_one_replaces_the_files_other() -> None:
    """tiny-lm gives steps: 200; `--set train.epochs=3` means 3 epochs."""
    by_epochs = load_config("tiny-lm", ["train.epochs=3"]).config.train
    assert (by_epochs.steps, by_epochs.epochs) == (None, 3)
    by_steps = load_config("tiny-lm", ["train.epochs=3", "train.steps=null"]).config.train
    assert (by_steps.steps, by_steps.epochs) == (None, 3)
    with pytest.raises(ConfigError) as caught:  # both overridden: both given
        load_config("tiny-lm", ["train.epochs=3", "train.steps=9"])
    assert caught.value.show() == "--set train.epochs: give steps or epochs, not both (steps is 9)"


JOB = """\
name: train
backend: slurm
run:
  train:
    config: {config}
    overrides:
      optim.lr: 0.001
      {length}
"""


def test_render_names_the_job_file_line_and_key(jobkit, workdir: Path) -> None:
    """Through `jobkit render`: at the override's line in the job file, or at
    run.train.config with the config file's line."""
    both = "train.steps: 20\n      train.epochs: 2"
    (workdir / "job.yaml").write_text(JOB.format(config="tiny-lm", length=both))
    result = jobkit("render", "job.yaml")
    assert (result.code, result.out) == (2, "")
    assert result.err == f"jobkit: job.yaml:9: run.train.overrides.train.epochs: {BOTH}\n"
    mine = workdir / "mine.yaml"
    mine.write_text(CONFIG.format(length=""))
    (workdir / "job.yaml").write_text(JOB.format(config="mine.yaml", length="train.seed: 2"))
    neither = jobkit("render", "job.yaml")
    assert neither.code == 2
    assert neither.err == (
        f"jobkit: job.yaml:5: run.train.config: {mine}:3: train.steps: {NEITHER}\n"
    )
    epochs = JOB.format(config="tiny-lm", length="train.epochs: 2")
    (workdir / "job.yaml").write_text(epochs)
    assert jobkit("render", "job.yaml").code == 0


@pytest.mark.parametrize(("nproc", "steps"), [(0, 28), (2, 14)])
def test_a_run_by_epochs_logs_its_length_and_evaluates_each_epoch(
    launcher: Launcher, nproc: int, steps: int
) -> None:
    """1000 samples, 100 held out: 900 to train on, batch 64 per rank. One rank: 14
    batches an epoch; two: 450 samples each, 7 batches. Two epochs either way."""
    ranks = max(nproc, 1)
    overrides = (
        "data.args={samples: 1000}",
        "train.steps=null",
        "train.epochs=2",
        "eval.every_epochs=1",
        "logging.every_steps=100",
        "checkpoint.every_steps=0",
    )
    run = launcher.run(f"epochs{ranks}", "mlp", overrides, ranks=nproc)
    assert run.returncode == 0, run.explain()
    left_out = 900 - (steps // 2) * 64 * ranks
    assert (
        f"length: {steps} steps = 2 epochs of 900 samples at global batch {64 * ranks}"
        f" (train.epochs given; {steps // 2} steps per epoch; {left_out} samples of each"
        " shuffled epoch left out: not a full batch)"
    ) in run.stdout
    records = [json.loads(line) for line in (run.run_dir / "metrics.jsonl").open()]
    evals = [(r["step"], r["epoch"]) for r in records if r.get("split") == "val"]
    assert evals == [(steps // 2, 1), (steps, 2)]
    assert f"step {steps}/{steps} loss" in run.stdout
