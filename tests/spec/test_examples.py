"""Every example is a valid spec; the trainer accepts its config and overrides."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from jobkit.spec.load import load_spec

ROOT = Path(__file__).resolve().parents[2]
EXAMPLES = sorted((ROOT / "examples").glob("*.yaml"))
REQUIRED = {
    "quickstart.yaml",
    "slurm-2node.yaml",
    "slurm-gpu.yaml",
    "pbs-pro.yaml",
    "pbs-torque.yaml",
    "ssh-2node.yaml",
    "submitit.yaml",
    "own-script.yaml",
}


def test_every_required_example_exists() -> None:
    assert {path.name for path in EXAMPLES} >= REQUIRED


@pytest.mark.parametrize("path", EXAMPLES, ids=lambda path: path.name)
def test_example_is_valid(path: Path) -> None:
    spec = load_spec(path, profile_dirs=[]).spec
    assert spec.name
    # Copied anywhere, an example runs with the Python jobkit runs from (env.python auto):
    # none names a venv that exists only in this repository's checkout.
    assert spec.env.venv is None and spec.env.python == "auto"


TRAINER_EXAMPLES = [path for path in EXAMPLES if "run:\n  train:" in path.read_text("utf-8")]


def test_most_examples_use_the_bundled_trainer() -> None:
    assert len(TRAINER_EXAMPLES) == len(EXAMPLES) - 1  # all but own-script.yaml


@pytest.mark.parametrize("path", TRAINER_EXAMPLES, ids=lambda path: path.name)
def test_trainer_accepts_the_example_config(path: Path) -> None:
    """run.train.config and its overrides exist in train/configs (checked by the trainer)."""
    from jobkit.spec.trainer_check import trainer_overrides
    from train.config.load import load_config, parse_set_value

    spec = load_spec(path, profile_dirs=[]).spec
    assert spec.run.train is not None
    loaded = load_config(spec.run.train.config, trainer_overrides(spec.run.train.overrides))
    for key, value in spec.run.train.overrides.items():
        section, name = key.split(".")
        assert getattr(getattr(loaded.config, section), name) == parse_set_value(str(value))


def test_examples_ask_for_what_the_brief_says() -> None:
    def spec(name: str):  # type: ignore[no-untyped-def]
        return load_spec(ROOT / "examples" / name, profile_dirs=[]).spec

    quick = spec("quickstart.yaml")
    assert (quick.backend, quick.resources.nodes, quick.procs_per_node) == ("local", 1, 2)
    two = spec("slurm-2node.yaml")
    assert (two.backend, two.resources.nodes, two.procs_per_node) == ("slurm", 2, 1)
    assert (two.resources.partition, two.scheduler.requeue, two.scheduler.signal) == (
        "debug",
        True,
        "USR2@60",
    )
    gpu = spec("slurm-gpu.yaml")
    assert (gpu.resources.gpus_per_node, gpu.resources.cpus_per_process) == (2, 4)
    assert gpu.cpus_per_scheduler_task == 8  # one torchrun task per node starts both
    assert (gpu.resources.mem, gpu.resources.time, gpu.resources.partition) == (
        32 * 1024,
        24 * 3600,
        "gpu",
    )
    assert spec("pbs-pro.yaml").pbs.flavor == "pro"
    assert spec("pbs-torque.yaml").pbs.flavor == "torque"
    ssh = spec("ssh-2node.yaml")
    assert (ssh.ssh.hosts, ssh.resources.nodes) == (["n1", "n2"], 2)
    assert spec("submitit.yaml").backend == "submitit"
    own = spec("own-script.yaml")
    assert own.run.command is not None
    assert own.run.command[:2] == ["python3", "examples/own_ddp.py"]


def test_own_script_knows_nothing_of_jobkit() -> None:
    source = (ROOT / "examples" / "own_ddp.py").read_text(encoding="utf-8")
    imported = set()
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            imported |= {alias.name.split(".")[0] for alias in node.names}
        elif isinstance(node, ast.ImportFrom) and node.module:
            imported.add(node.module.split(".")[0])
    assert imported <= {"__future__", "argparse", "os", "datetime", "torch"}
    assert "JOBKIT" not in source
