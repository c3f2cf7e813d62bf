"""Evaluation (eval.*), the validation split and checkpoint.keep_best, on CPU with gloo."""

from __future__ import annotations

import json
import math
import re
from pathlib import Path
from typing import Any

import pytest
import torch
import torch.nn.functional as F

from tests.train.launch import REPO_ROOT, SMALL_MLP, TINY_LM, Launcher
from tests.train.plugin_data import make_val
from tests.train.test_resume import assert_same_tensors, final_state
from train.config.load import ModelConfig
from train.loop.evaluate import Evaluator, is_better, shard
from train.parts.data import CharWindows, SyntheticBlobs, holdout_split
from train.parts.models import build_model
from train.resume.checkpoint import best_path, checkpoint_path, list_checkpoints, load_checkpoint

PLUGIN_CONFIG = """\
name: plug
model:
  name: mlp
  args: {hidden: 16, depth: 2}
data:
  name: tests.train.plugin_data:make_train
  val: tests.train.plugin_data:make_val
  args: {samples: 64, val_samples: 7}
  batch_size_per_rank: 8
optim: {lr: 0.05, warmup_steps: 0}
train: {steps: 4}
eval: {every_steps: 2, batch_size_per_rank: 2}
checkpoint: {every_steps: 2, keep_last: 5, keep_best: val_loss}
logging: {every_steps: 1}
"""


def val_records(run_dir: Path) -> list[dict[str, Any]]:
    lines = (run_dir / "metrics.jsonl").read_text().splitlines()
    return [r for r in map(json.loads, lines) if r.get("split") == "val"]


def test_shards_are_disjoint_and_uneven() -> None:
    assert [list(shard(7, rank, 2)) for rank in (0, 1)] == [[0, 2, 4, 6], [1, 3, 5]]
    assert [len(shard(10, rank, 3)) for rank in range(3)] == [4, 3, 3]


def test_the_held_out_part_is_disjoint_and_fixed() -> None:
    blobs = SyntheticBlobs(samples=1010, features=3, classes=2, separation=1.0, seed=5)
    train, val = holdout_split(blobs, 0.1)
    assert (len(train), len(val)) == (909, 101)
    assert list(val.indices) == list(range(909, 1010))  # type: ignore[attr-defined]
    chars = CharWindows(path=None, context=16, stride=None)
    train, val = holdout_split(chars, 0.1)
    starts = chars.starts
    first_val = starts[val.indices[0]]  # type: ignore[attr-defined]
    last_train_end = starts[train.indices[-1]] + 16 + 1  # type: ignore[attr-defined]
    assert last_train_end <= first_val  # not one character in both
    assert len(val) == max(1, int(len(starts) * 0.1))
    assert len(train) + len(val) == len(starts) - 1  # only the window across the cut is lost
    assert holdout_split(chars, 0.1)[1].indices == val.indices  # type: ignore[attr-defined]


def test_due_by_steps_epochs_and_the_end() -> None:
    data = SyntheticBlobs(samples=8, features=2, classes=2, separation=1.0, seed=0)

    def evaluator(every_steps: int, every_epochs: int) -> Evaluator:
        return Evaluator(
            data,
            rank=0,
            world_size=1,
            batch_size=4,
            max_batches=0,
            num_workers=0,
            loss_kind="cross_entropy",
            perplexity=False,
            device=torch.device("cpu"),
            amp_dtype=None,
            every_steps=every_steps,
            every_epochs=every_epochs,
            epoch=0,
        )

    by_steps = evaluator(3, 0)
    assert [s for s in range(1, 11) if by_steps.due(s, 0, 10)] == [3, 6, 9, 10]
    by_epochs = evaluator(0, 2)  # 2.5 steps per epoch: epoch 2 ends during step 5
    epochs = {s: (s * 2) // 5 for s in range(1, 11)}
    assert [s for s in range(1, 11) if by_epochs.due(s, epochs[s], 12)] == [5, 10]


def test_better_is_strict_and_by_the_metric() -> None:
    assert is_better("val_loss", 1.0, None) and not is_better("val_loss", math.nan, None)
    assert is_better("val_loss", 0.5, 1.0) and not is_better("val_loss", 1.0, 1.0)
    assert is_better("val_acc", 0.9, 0.8) and not is_better("val_acc", 0.7, 0.8)


def hand_metrics(checkpoint: dict[str, Any]) -> tuple[float, float]:
    """val_loss and val_acc of a checkpoint's model on the plug-in's 7 validation samples,
    one sample at a time in float64: the sum of the losses over the count."""
    val = make_val(samples=64, val_samples=7)
    model = build_model(ModelConfig(name="mlp", args={"hidden": 16, "depth": 2}), val.info)
    model.load_state_dict(checkpoint["model"])
    model.eval()
    total, correct = 0.0, 0
    with torch.no_grad():
        for index in range(len(val)):
            inputs, target = val[index]
            logits = model(inputs[None]).double()
            total += float(F.cross_entropy(logits, target[None], reduction="sum"))
            correct += int(logits.argmax(dim=-1).item() == int(target))
    return total / len(val), correct / len(val)


def test_eval_equals_a_hand_computation_on_two_ranks(launcher: Launcher, tmp_path: Path) -> None:
    """7 validation samples on 2 gloo ranks (4 and 3, in batches of 2): the all-reduced
    metrics are the whole set's; best.pt holds the best evaluation's model."""
    config = tmp_path / "plug.yaml"
    config.write_text(PLUGIN_CONFIG)
    run = launcher.run("plug", str(config), ranks=2, env={"PYTHONPATH": str(REPO_ROOT)})
    assert run.returncode == 0, run.explain()
    assert (
        "eval: every 2 steps and after the last step, on 7 validation samples (4 on this rank"
        " of 2, batch 2)"
    ) in run.stdout
    assert "(3 on this rank of 2, batch 2)" in run.rank_log(1)
    records = val_records(run.run_dir)
    assert [r["step"] for r in records] == [2, 4]
    folder = run.run_dir / "checkpoints"
    for record in records:
        loss, accuracy = hand_metrics(load_checkpoint(checkpoint_path(folder, record["step"])))
        assert record["val_loss"] == pytest.approx(loss, rel=1e-6)
        assert record["val_acc"] == accuracy
        assert record["val_samples"] == 7
        assert f"eval step {record['step']}/4: val_loss {record['val_loss']:.6g}" in run.stdout
    best = min(records, key=lambda r: r["val_loss"])
    saved = load_checkpoint(best_path(folder))
    assert saved["step"] == best["step"]
    assert saved["best"] == {"metric": "val_loss", "value": best["val_loss"], "step": best["step"]}
    assert_same_tensors(saved["model"], final_state(run.run_dir, best["step"])["model"])


def test_keep_best_survives_resume_and_rotation(launcher: Launcher) -> None:
    """The best of the first run stays best.pt after a resume whose evaluations are no better
    (the model frozen: the cosine ends at 0, then a learning rate of 1e-12), and keep_last
    never deletes it."""
    common = (
        *SMALL_MLP,
        "optim.min_lr_ratio=0",
        "eval.every_steps=2",
        "checkpoint.keep_best=val_loss",
        "checkpoint.every_steps=2",
        "checkpoint.keep_last=1",
    )
    first = launcher.run("best", "mlp", (*common, "train.steps=6"))
    assert first.returncode == 0, first.explain()
    folder = first.run_dir / "checkpoints"
    before = val_records(first.run_dir)
    best = min(before, key=lambda r: r["val_loss"])
    saved = re.findall(
        r"^best checkpoint saved: (\S+) \(step (\d+), val_loss (\S+)\)$", first.stdout, re.M
    )
    assert saved[-1] == (str(best_path(folder)), str(best["step"]), repr(best["val_loss"]))
    best_bytes = best_path(folder).read_bytes()

    frozen = ("optim.lr=1.0e-12", "optim.schedule=constant", "optim.warmup_steps=0")
    second = launcher.run("best", "mlp", (*common, *frozen, "train.steps=12"))
    assert second.returncode == 0, second.explain()
    assert (
        f"best so far: val_loss {best['val_loss']!r} at step {best['step']} ({best_path(folder)})"
    ) in second.stdout
    after = val_records(second.run_dir)[len(before) :]
    assert [r["step"] for r in after] == [8, 10, 12]
    assert all(r["val_loss"] >= best["val_loss"] for r in after), after
    assert "best checkpoint saved" not in second.stdout
    assert best_path(folder).read_bytes() == best_bytes
    assert [s for s, _ in list_checkpoints(folder)] == [12]  # keep_last 1, best.pt kept too
    assert load_checkpoint(checkpoint_path(folder, 12))["best"]["step"] == best["step"]


@pytest.mark.slow  # three 2-rank trainings: about 30 s
def test_resume_is_still_bit_exact_with_eval_and_keep_best(launcher: Launcher) -> None:
    """As test_resume's equality test, with evaluation every 3 steps and keep_best on."""
    overrides = (
        *TINY_LM,
        "train.steps=10",
        "train.grad_accum_steps=2",
        "checkpoint.every_steps=0",
        "eval.every_steps=3",
        "eval.batches=2",
        "checkpoint.keep_best=val_loss",
    )
    whole = launcher.run("whole", "tiny-lm", overrides, ranks=2)
    assert whole.returncode == 0, whole.explain()
    first = launcher.run("split", "tiny-lm", (*overrides, "train.stop_after_step=5"), ranks=2)
    assert "stopped after step 5" in first.stdout, first.explain()
    second = launcher.run("split", "tiny-lm", overrides, ranks=2)
    assert second.returncode == 0, second.explain()

    assert second.final_loss == whole.final_loss != ""
    assert second.losses() == whole.losses()[5:]
    drop_time = [{k: v for k, v in r.items() if k != "time"} for r in val_records(whole.run_dir)]
    split = [{k: v for k, v in r.items() if k != "time"} for r in val_records(second.run_dir)]
    assert [r["step"] for r in drop_time] == [3, 6, 9, 10] and split == drop_time
    assert "val_ppl" in drop_time[0]  # token data
    resumed, uninterrupted = final_state(second.run_dir, 10), final_state(whole.run_dir, 10)
    for part in ("model", "optimizer", "scheduler", "rng", "best"):
        assert_same_tensors(resumed[part], uninterrupted[part], part)
    best_split = load_checkpoint(best_path(second.run_dir / "checkpoints"))
    best_whole = load_checkpoint(best_path(whole.run_dir / "checkpoints"))
    assert_same_tensors(best_split, best_whole, "best.pt")
