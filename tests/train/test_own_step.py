"""Your own loss (`model.loss`) and training step (`train.step`) plug-ins, and `train.fit`:
they train like the bundled loss, resume bit-exactly, and their mistakes are one line."""

from __future__ import annotations

import subprocess

import pytest
import torch

from tests.train.launch import PYTHON, REPO_ROOT, SMALL_MLP, Launcher, clean_env
from tests.train.test_resume import RESUMED, assert_same_tensors, final_state
from tests.train.test_runs import assert_loss_falls
from train.config.load import ConfigError, load_config
from train.parts.userstep import StepError, build_step, checked_step

PLUGINS = "tests.train.plugin_step"


def test_plugin_loss_and_step_equal_the_bundled_loss(launcher: Launcher) -> None:
    """Cross entropy written as a plug-in loss and as a plug-in step: the same bits."""
    overrides = (*SMALL_MLP, "train.steps=12")
    bundled = launcher.run("bundled", "mlp", overrides)
    loss = launcher.run("loss", "mlp", (*overrides, f"model.loss={PLUGINS}:make_cross_entropy"))
    step = launcher.run("step", "mlp", (*overrides, f"train.step={PLUGINS}:make_plain_step"))
    for result in (bundled, loss, step):
        assert result.returncode == 0, result.explain()
    assert "your own parts" not in bundled.stdout
    assert f"your own parts: model.loss {PLUGINS}:make_cross_entropy" in loss.stdout
    assert f"your own parts: train.step {PLUGINS}:make_plain_step" in step.stdout
    assert len(bundled.losses()) == 12
    assert loss.losses() == bundled.losses() == step.losses()
    expected = final_state(bundled.run_dir, 12)
    for result in (loss, step):
        assert_same_tensors(final_state(result.run_dir, 12)["model"], expected["model"], "model")


def test_plugin_loss_trains_and_resumes_bit_exact(launcher: Launcher) -> None:
    overrides = (
        *SMALL_MLP,
        "train.steps=30",
        "checkpoint.every_steps=0",
        f"model.loss={PLUGINS}:make_smoothed",
        "model.loss_args={smoothing: 0.1}",
    )
    whole = launcher.run("whole", "mlp", overrides)
    assert whole.returncode == 0, whole.explain()
    assert_loss_falls(whole.losses())
    first = launcher.run("split", "mlp", (*overrides, "train.stop_after_step=15"))
    assert first.returncode == 75, first.explain()
    second = launcher.run("split", "mlp", overrides)
    assert second.returncode == 0, second.explain()
    assert RESUMED.findall(second.stdout) == ["15"]
    assert second.losses() == whole.losses()[15:]
    assert second.final_loss == whole.final_loss != ""
    resumed, uninterrupted = final_state(second.run_dir, 30), final_state(whole.run_dir, 30)
    for part in ("model", "optimizer", "scheduler", "rng"):
        assert_same_tensors(resumed[part], uninterrupted[part], part)


@pytest.mark.slow
def test_plugin_step_trains_and_resumes_bit_exact_on_two_ranks(launcher: Launcher) -> None:
    """DDP, accumulation, dropout, a step drawing random numbers, evaluation and keep_best."""
    overrides = (
        *SMALL_MLP,
        "model.args={hidden: 32, depth: 2, dropout: 0.1}",
        "train.steps=16",
        "train.grad_accum_steps=2",
        "checkpoint.every_steps=0",
        "eval.every_steps=4",
        "checkpoint.keep_best=val_loss",
        f"train.step={PLUGINS}:make_two_view_step",
        "train.step_args={noise: 0.5}",
    )
    whole = launcher.run("whole", "mlp", overrides, ranks=2)
    assert whole.returncode == 0, whole.explain()
    assert_loss_falls(whole.losses())
    evals = [line for line in whole.stdout.splitlines() if line.startswith("eval step")]
    assert len(evals) == 4 and "val_loss" in evals[0] and "val_acc" not in evals[0]
    first = launcher.run("split", "mlp", (*overrides, "train.stop_after_step=8"), ranks=2)
    assert "stopped after step 8 (train.stop_after_step): exiting with 75" in first.stdout
    second = launcher.run("split", "mlp", overrides, ranks=2)
    assert second.returncode == 0, second.explain()
    assert RESUMED.findall(second.stdout) == ["8"]
    assert second.losses() == whole.losses()[8:]
    resumed, uninterrupted = final_state(second.run_dir, 16), final_state(whole.run_dir, 16)
    for part in ("model", "optimizer", "scheduler", "rng"):
        assert_same_tensors(resumed[part], uninterrupted[part], part)
    best = (second.run_dir / "checkpoints" / "best.pt", whole.run_dir / "checkpoints" / "best.pt")
    assert_same_tensors(torch.load(best[0])["model"], torch.load(best[1])["model"], "best")


def _config_error(*overrides: str) -> str:
    with pytest.raises(ConfigError) as caught:
        loaded = load_config("mlp", list(overrides))
        build_step(loaded, {}, torch.device("cpu"))
    return caught.value.show()


@pytest.mark.parametrize(
    ("overrides", "expected"),
    [
        (
            ["train.step=nocolon"],
            "--set train.step: must be package.module:factory (got 'nocolon')",
        ),
        (
            ["model.loss=hinge"],
            "--set model.loss: must be one of cross_entropy, mse or package.module:factory"
            " (got 'hinge')",
        ),
        (
            [f"train.step={PLUGINS}:make_plain_step", "model.loss=mse"],
            f"--set model.loss: train.step {PLUGINS}:make_plain_step computes the loss itself:"
            " drop model.loss",
        ),
        (
            ["model.loss_args={smoothing: 0.1}"],
            "--set model.loss_args: is for a plug-in loss (package.module:factory);"
            " cross_entropy takes no arguments",
        ),
        (
            [f"train.step={PLUGINS}:not_callable"],
            f"--set train.step: {PLUGINS}:not_callable returned int, not a callable"
            " training_step(model, batch)",
        ),
        (
            [f"model.loss={PLUGINS}:not_callable"],
            f"--set model.loss: {PLUGINS}:not_callable returned int, not a callable"
            " loss(outputs, targets)",
        ),
        (
            [f"model.loss={PLUGINS}:make_weighted"],
            f"--set model.loss: {PLUGINS}:make_weighted returned a loss with 6 trainable"
            " parameters that the optimizer would not see: make them part of the model and"
            " compute the loss in a training step",
        ),
        (
            [f"model.loss={PLUGINS}:nope"],
            f"--set model.loss: '{PLUGINS}' has no attribute 'nope' ('{PLUGINS}:nope')",
        ),
        (
            ["model.loss=nosuchpkg.mod:make"],
            "--set model.loss: cannot import 'nosuchpkg.mod' for 'nosuchpkg.mod:make':"
            " No module named 'nosuchpkg'",
        ),
        (
            [f"model.loss={PLUGINS}:make_smoothed", "model.loss_args={weight: 2}"],
            f"--set model.loss_args: {PLUGINS}:make_smoothed: got an unexpected keyword"
            " argument 'weight'",
        ),
    ],
)
def test_plugin_mistakes_are_one_line(overrides: list[str], expected: str) -> None:
    assert _config_error(*overrides) == expected


def test_a_step_that_returns_no_scalar_stops_in_one_line(launcher: Launcher) -> None:
    step = checked_step(lambda model, batch: torch.ones(3), "train.step x")
    with pytest.raises(StepError, match=r"^train.step x returned a tensor of shape \(3,\), not"):
        step(torch.nn.Identity(), None)
    result = launcher.run("vector", "mlp", (f"train.step={PLUGINS}:make_vector_step",))
    assert result.returncode == 2, result.explain()
    assert "Traceback" not in result.stderr
    assert result.stderr.splitlines()[-1] == (
        f"train: train.step {PLUGINS}:make_vector_step returned a tensor of shape (64,), not a"
        " scalar tensor (the loss)"
    )


def test_fit_refuses_wrong_objects_in_one_line(capsys: pytest.CaptureFixture[str]) -> None:
    import train

    assert train.fit("mlp", model=42) == 2  # type: ignore[arg-type]
    assert capsys.readouterr().err == "train.fit: model= must be an nn.Module (got int)\n"
    assert train.fit("mlp", loss=len, step=len) == 2  # type: ignore[arg-type]
    assert capsys.readouterr().err.startswith("train.fit: give loss= or step=, not both")


def test_the_fit_api_example_runs(tmp_path) -> None:
    """examples/own_step.py: train.fit with the script's own model object and step."""
    result = subprocess.run(
        [PYTHON, str(REPO_ROOT / "examples" / "own_step.py"), "--steps", "30"],
        cwd=tmp_path,
        env=clean_env(JOBKIT_RUN_DIR=str(tmp_path / "run")),
        capture_output=True,
        text=True,
        timeout=180,
        check=False,
    )
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    assert "your own parts: model Sequential (train.fit), step function (train.fit)" in (
        result.stdout
    )
    losses = [float(line.split()[3]) for line in result.stdout.splitlines() if line[:5] == "step "]
    assert len(losses) == 3 and losses[-1] < 0.6 * losses[0], losses
    assert (tmp_path / "run" / "finished").exists()
