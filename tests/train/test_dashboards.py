"""Dashboards: TensorBoard event files read back, W&B's run id across a resume, lazy imports.

tensorboard and wandb are in the `test` extra, so none of these is skipped in CI. W&B runs
offline (its default here): nothing leaves the machine.
"""

from __future__ import annotations

import json
import struct
import subprocess
from pathlib import Path

from tests.train.launch import PYTHON, SMALL_MLP, Launcher, clean_env
from tests.train.test_resume import assert_same_tensors
from train.reporting.dashboards import WANDB_ID_FILE, scalars, wandb_run_id
from train.resume.checkpoint import checkpoint_path, load_checkpoint


def read_metrics(run_dir: Path) -> list[dict]:
    return [json.loads(line) for line in (run_dir / "metrics.jsonl").read_text().splitlines()]


def as_float32(value: float) -> float:
    """What a TensorBoard scalar event keeps of a number (a 32-bit float)."""
    return struct.unpack("f", struct.pack("f", value))[0]


def test_tensorboard_scalars_equal_the_metrics_records(launcher: Launcher) -> None:
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    overrides = (*SMALL_MLP, "train.steps=6", "logging.tensorboard=true", "amp.dtype=fp16")
    result = launcher.run("tb", "mlp", overrides, ranks=2)
    assert result.returncode == 0, result.explain()
    records = read_metrics(result.run_dir)
    assert [r["step"] for r in records] == list(range(1, 7))
    folders = list(result.run_dir.glob("tensorboard*"))
    assert folders == [result.run_dir / "tensorboard"]  # rank 0 only: one writer, one folder
    assert len(list(folders[0].glob("events.out.tfevents.*"))) == 1
    events = EventAccumulator(str(folders[0]))
    events.Reload()
    wanted = {"loss", "lr", "grad_norm", "samples_per_s", "loss_scale", "overflow_skips"}
    assert {f"train/{key}" for key in wanted} <= set(events.Tags()["scalars"])
    for tag in sorted(scalars(records[0])):
        key = tag.removeprefix("train/")
        logged = [(e.step, e.value) for e in events.Scalars(tag)]
        expected = [(r["step"], as_float32(r[key])) for r in records]
        assert logged == expected, tag


def test_wandb_keeps_one_run_id_across_a_resume(launcher: Launcher) -> None:
    """Stopped at step 2 and resumed: one W&B run; and with both dashboards on, the same
    weights and losses as a run without them (dashboards do not touch the RNG or the data)."""
    plain = (*SMALL_MLP, "train.steps=4", "model.args={dropout: 0.2}")
    overrides = (*plain, "logging.wandb={project: jobkit-test}", "logging.tensorboard=true")
    first = launcher.run("wb", "mlp", (*overrides, "train.stop_after_step=2"))
    assert first.returncode == 75, first.explain()
    run_id = (first.run_dir / WANDB_ID_FILE).read_text().strip()
    assert run_id.startswith("wb-")
    second = launcher.run("wb", "mlp", overrides)
    assert second.returncode == 0, second.explain()
    assert (second.run_dir / WANDB_ID_FILE).read_text().strip() == run_id
    # offline: one local run folder per start, both under the same id
    runs = sorted(p.name for p in (first.run_dir / "wandb").glob("offline-run-*"))
    assert len(runs) == 2 and all(name.endswith(f"-{run_id}") for name in runs), runs
    for name in runs:
        assert (first.run_dir / "wandb" / name / f"run-{run_id}.wandb").stat().st_size > 0

    whole = launcher.run("whole", "mlp", plain)
    assert second.final_loss == whole.final_loss != ""
    assert second.losses() == whole.losses()[2:]
    resumed = load_checkpoint(checkpoint_path(second.run_dir / "checkpoints", 4))
    uninterrupted = load_checkpoint(checkpoint_path(whole.run_dir / "checkpoints", 4))
    for part in ("model", "optimizer", "rng"):
        assert_same_tensors(resumed[part], uninterrupted[part], part)


def test_wandb_run_id_rules(tmp_path: Path) -> None:
    run_dir = tmp_path / "job-1234"
    derived = wandb_run_id(run_dir, {})
    assert derived.startswith("job-1234-") and len(derived) == len("job-1234-") + 8
    assert wandb_run_id(tmp_path / "job-1235", {}) != derived  # another job, another run
    assert wandb_run_id(run_dir, {"JOBKIT_RUN_ID": "mine"}) == "mine"
    assert wandb_run_id(run_dir, {"JOBKIT_RUN_ID": "sweep-7/a b"}) == "sweep-7-a-b"
    run_dir.mkdir()
    (run_dir / WANDB_ID_FILE).write_text("kept\n")  # an earlier start's id wins
    assert wandb_run_id(run_dir, {"JOBKIT_RUN_ID": "mine"}) == "kept"


PROBE = """
import os, sys
for name in filter(None, os.environ.get("BLOCK", "").split(",")):
    sys.modules[name] = None  # as if not installed: import and find_spec fail
from train.cli import main
code = main(sys.argv[1:])
loaded = sorted({name.split(".")[0] for name in sys.modules} & {"tensorboard", "wandb"})
print("dashboards imported:", ",".join(loaded) or "none")
sys.exit(code)
"""


def run_probe(
    tmp_path: Path, name: str, *overrides: str, block: str = ""
) -> subprocess.CompletedProcess[str]:
    args = ["--config", "mlp"]
    for item in (*SMALL_MLP, "train.steps=2", *overrides):
        args += ["--set", item]
    return subprocess.run(
        [PYTHON, "-c", PROBE, *args],
        cwd=tmp_path,
        env=clean_env(JOBKIT_RUN_DIR=str(tmp_path / name), BLOCK=block),
        capture_output=True,
        text=True,
        timeout=180,
    )


def test_dashboards_are_imported_only_when_asked_for(tmp_path: Path) -> None:
    plain = run_probe(tmp_path, "plain", "amp.dtype=bf16", "amp.growth_factor=3")
    assert plain.returncode == 0, plain.stderr[-2000:]
    assert "dashboards imported: none" in plain.stdout
    assert not (tmp_path / "plain" / "tensorboard").exists()
    # the fp16-only knobs are ignored, with a warning, under bf16
    assert (
        "warning: ignoring amp.growth_factor: GradScaler settings, and amp.dtype bf16 on cpu"
        " uses no GradScaler (fp16 only)"
    ) in plain.stdout
    asked = run_probe(tmp_path, "asked", "logging.tensorboard=true")
    assert asked.returncode == 0, asked.stderr[-2000:]
    assert "dashboards imported: tensorboard" in asked.stdout


def test_a_dashboard_that_is_not_installed_is_a_one_line_error(tmp_path: Path) -> None:
    missing = run_probe(tmp_path, "missing", "logging.wandb=true", block="wandb")
    assert missing.returncode == 2
    assert missing.stderr.splitlines()[-1] == (
        "--set logging.wandb: the wandb package is not installed (pip install 'jobkit[wandb]')"
    )
