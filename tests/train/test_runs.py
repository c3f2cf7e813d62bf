"""Whole training runs on CPU (gloo): 1 and 2 ranks under torchrun, logs, metrics, AMP, plug-ins."""

from __future__ import annotations

import json
import textwrap
from pathlib import Path

import torch

from tests.train.launch import SMALL_MLP, TINY_LM, Launcher
from train.config.load import CONFIG_DIR
from train.resume.checkpoint import checkpoint_path, load_checkpoint


def assert_loss_falls(losses: list[float]) -> None:
    assert len(losses) >= 10, losses
    first, last = sum(losses[:3]) / 3, sum(losses[-3:]) / 3
    assert last < 0.8 * first, (first, last)


def test_one_rank_under_torchrun(launcher: Launcher) -> None:
    result = launcher.run("one", "tiny-lm", (*TINY_LM, "train.steps=30"), nproc=1)
    assert result.returncode == 0, result.explain()
    assert_loss_falls(result.losses())
    assert "launch: launcher=torchrun rank=0 local_rank=0 world_size=1" in result.stdout
    assert (
        "batch: 8 per rank x 1 ranks x 1 accumulation steps = 8 samples per optimizer step"
        in result.stdout
    )
    # The console names the config and where its full dump is; the rank's log holds the dump.
    assert f"(in full in {result.run_dir / 'rank-0.log'})" in result.stdout
    assert "  activation_checkpointing: false" not in result.stdout
    assert "  activation_checkpointing: false" in (result.run_dir / "rank-0.log").read_text()
    records = [
        json.loads(line) for line in (result.run_dir / "metrics.jsonl").read_text().splitlines()
    ]
    assert repr(records[-1]["loss"]) == result.final_loss


def test_two_ranks_under_torchrun(launcher: Launcher) -> None:
    result = launcher.run("two", "tiny-lm", (*TINY_LM, "train.steps=30"), nproc=2)
    assert result.returncode == 0, result.explain()
    assert_loss_falls(result.losses())
    run_dir = result.run_dir
    # rank 0 prints; every rank keeps its own log with its own launch line
    assert result.stdout.count("launch: ") == 1
    for rank in (0, 1):
        log = result.rank_log(rank)
        assert f"launch: launcher=torchrun rank={rank} local_rank={rank} world_size=2" in log
        assert "strategy: ddp" in log
    assert (
        "batch: 8 per rank x 2 ranks x 1 accumulation steps = 16 samples per optimizer step"
        " (global)" in result.stdout
    )
    records = [json.loads(line) for line in (run_dir / "metrics.jsonl").read_text().splitlines()]
    assert [r["step"] for r in records] == list(range(1, 31))
    assert {"loss", "lr", "grad_norm", "samples_per_s", "tokens_per_s", "epoch"} <= set(records[0])
    assert records[-1]["loss"] == float(result.final_loss)
    final = load_checkpoint(checkpoint_path(run_dir / "checkpoints", 30))
    assert final["world_size"] == 2 and len(final["rng"]) == 2
    # the two ranks drew different dropout masks: their saved RNG states differ
    assert not torch.equal(final["rng"][0]["torch"], final["rng"][1]["torch"])


def test_forked_runs_train_exactly_as_fresh_processes_and_torchrun(launcher: Launcher) -> None:
    """The trainer's other tests fork their runs from this process (tests/train/warm.py):
    one process, and 2 ranks of the `env` launch under a small supervisor. Both must train
    bit for bit as a fresh `python -m train` and 2 ranks under torchrun do."""
    overrides = (*SMALL_MLP, "train.steps=6", "checkpoint.every_steps=0")
    fresh = launcher.run("fresh", "mlp", overrides, fresh=True)
    forked = launcher.run("forked", "mlp", overrides)
    for result in (fresh, forked):
        assert result.returncode == 0, result.explain()
    assert forked.losses() == fresh.losses() and len(fresh.losses()) == 6
    assert forked.final_loss == fresh.final_loss != ""
    assert "launch: launcher=single rank=0 local_rank=0 world_size=1" in forked.stdout

    torchrun = launcher.run("torchrun", "mlp", overrides, nproc=2)
    ranks = launcher.run("ranks", "mlp", overrides, ranks=2)
    for result in (torchrun, ranks):
        assert result.returncode == 0, result.explain()
    assert ranks.losses() == torchrun.losses() and len(torchrun.losses()) == 6
    assert ranks.final_loss == torchrun.final_loss != ""
    for rank in (0, 1):
        assert f"launch: launcher=env rank={rank} local_rank={rank} world_size=2" in (
            ranks.rank_log(rank)
        )


def test_global_batch_size_and_accumulation(launcher: Launcher) -> None:
    overrides = (
        *SMALL_MLP,
        "data.batch_size_per_rank=null",
        "data.global_batch_size=64",
        "train.grad_accum_steps=2",
        "train.steps=12",
    )
    result = launcher.run("accum", "mlp", overrides, ranks=2)
    assert result.returncode == 0, result.explain()
    assert (
        "batch: 16 per rank x 2 ranks x 2 accumulation steps = 64 samples per optimizer step"
        " (global)" in result.stdout
    )
    assert_loss_falls(result.losses())


def test_bf16_and_fp16_autocast_on_cpu(launcher: Launcher) -> None:
    bf16 = launcher.run("bf16", "tiny-lm", (*TINY_LM, "train.steps=20", "amp.dtype=bf16"))
    assert bf16.returncode == 0, bf16.explain()
    assert "amp: bf16" in bf16.stdout
    assert_loss_falls(bf16.losses())
    fp16 = launcher.run("fp16", "mlp", (*SMALL_MLP, "train.steps=3", "amp.dtype=fp16"))
    assert fp16.returncode == 0, fp16.explain()
    # torch 2.13 runs fp16 autocast and a GradScaler on the CPU (older torch: bf16, warned)
    assert "amp: fp16 (GradScaler)" in fp16.stdout
    assert " loss_scale " in fp16.stdout


def test_activation_checkpointing_gives_the_same_losses(launcher: Launcher) -> None:
    overrides = (*TINY_LM, "train.steps=6")
    plain = launcher.run("plain", "tiny-lm", overrides)
    recomputed = launcher.run(
        "recomputed", "tiny-lm", (*overrides, "model.activation_checkpointing=true")
    )
    assert plain.returncode == 0 and recomputed.returncode == 0, recomputed.explain()
    assert recomputed.losses() == plain.losses()
    assert recomputed.final_loss == plain.final_loss


def write_user_package(root: Path) -> None:
    """A user package with a dataset and a model factory (and a broken dataset factory)."""
    package = root / "userpkg"
    package.mkdir()
    (package / "__init__.py").write_text("")
    (package / "parts.py").write_text(
        textwrap.dedent(
            """
            import torch
            from torch.utils.data import Dataset

            class Line(Dataset):
                def __init__(self, n, slope):
                    self.x = torch.linspace(-1, 1, n).unsqueeze(1)
                    self.y = slope * self.x
                    self.info = {"in_features": 1}

                def __len__(self):
                    return len(self.x)

                def __getitem__(self, i):
                    return self.x[i], self.y[i]

            def make_data(n=256, slope=3.0):
                return Line(n, slope)

            def not_a_dataset():
                return 42

            def make_model(info, hidden=8):
                return torch.nn.Sequential(
                    torch.nn.Linear(info["in_features"], hidden),
                    torch.nn.Tanh(),
                    torch.nn.Linear(hidden, 1),
                )
            """
        )
    )


def test_user_model_and_dataset_plugins(launcher: Launcher, tmp_path: Path) -> None:
    write_user_package(tmp_path)
    overrides = (
        "model.name=userpkg.parts:make_model",
        "model.args={hidden: 16}",
        "model.loss=mse",
        "data.name=userpkg.parts:make_data",
        "data.args={n: 256, slope: 2.0}",
        "optim.grad_clip=0",
        "train.steps=40",
        "logging.every_steps=1",
    )
    result = launcher.run("plugin", "mlp", overrides, env={"PYTHONPATH": str(tmp_path)})
    assert result.returncode == 0, result.explain()
    assert_loss_falls(result.losses())


def test_plugin_mistakes_are_one_line_errors(launcher: Launcher, tmp_path: Path) -> None:
    write_user_package(tmp_path)
    env = {"PYTHONPATH": str(tmp_path)}
    bundled = CONFIG_DIR / "mlp.yaml"
    wrong_args = launcher.run("args", "mlp", ("data.name=userpkg.parts:make_data",), env=env)
    assert wrong_args.returncode == 2
    assert wrong_args.stderr.splitlines()[-1] == (
        f"{bundled}:8: data.args: userpkg.parts:make_data: got an unexpected keyword argument"
        " 'samples'"
    )
    user_data = ("data.name=userpkg.parts:make_data", "data.args={}")
    no_info = launcher.run("noinfo", "mlp", user_data, env=env)
    assert no_info.returncode == 2
    assert no_info.stderr.splitlines()[-1] == (
        f"{bundled}:4: model.name: mlp needs the dataset to give num_classes in its `info`"
        " dict (it gives: in_features)"
    )
    not_data = launcher.run(
        "notdata", "mlp", ("data.name=userpkg.parts:not_a_dataset", "data.args={}"), env=env
    )
    assert not_data.returncode == 2
    assert not_data.stderr.splitlines()[-1] == (
        "--set data.name: userpkg.parts:not_a_dataset returned int, not a map-style Dataset"
        " (with __len__ and __getitem__)"
    )
    missing = launcher.run("missing", "mlp", ("data.name=userpkg.parts:nope",), env=env)
    assert missing.stderr.splitlines()[-1] == (
        "--set data.name: 'userpkg.parts' has no attribute 'nope' ('userpkg.parts:nope')"
    )
    errors = wrong_args.stderr + no_info.stderr + not_data.stderr + missing.stderr
    assert "Traceback" not in errors
