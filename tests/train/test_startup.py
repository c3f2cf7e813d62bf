"""train/startup.py: `python -m train` imports with the garbage collector paused, freezes
what the imports built and trains with the collector on; train.fit's import leaves the
caller's collector as it was."""

from __future__ import annotations

import gc
import re

from tests.train.launch import SMALL_MLP, Launcher
from train.startup import import_torch_quietly

PROBE = "tests.train.plugin_step:make_collector_probe_step"
PROBE_LINE = re.compile(r"^probe: collector (\w+), (\d+) frozen$", re.MULTILINE)


def test_python_m_train_trains_with_the_collector_on_and_its_imports_frozen(
    launcher: Launcher,
) -> None:
    """A fresh process (the pause is the entry point's): the probe step sees the collector
    on, and torch's, torch._dynamo's and the trainer's objects frozen (~480,000 here)."""
    overrides = (*SMALL_MLP, "train.steps=2", f"train.step={PROBE}")
    result = launcher.run("probe", "mlp", overrides, fresh=True)
    assert result.returncode == 0, result.explain()
    assert [
        (state, int(frozen) > 100_000) for state, frozen in PROBE_LINE.findall(result.stdout)
    ] == [("on", True)], result.stdout


def test_the_import_without_the_pause_freezes_nothing() -> None:
    """train.fit's path: a caller's objects are never frozen, its collector stays on."""
    before = gc.get_freeze_count()
    import_torch_quietly(for_training=True)
    assert gc.isenabled()
    assert gc.get_freeze_count() == before
