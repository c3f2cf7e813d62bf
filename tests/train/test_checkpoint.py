"""Checkpoint files: atomic writes, pruning, and choosing the newest loadable one."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
import torch

from tests.train.launch import clean_env, wait_for
from train.resume import checkpoint as ckpt


def state(step: int) -> dict:
    return {
        "format": ckpt.FORMAT,
        "version": ckpt.VERSION,
        "step": step,
        "epoch": 0,
        "position": step,
        "model": {"w": torch.full((4,), float(step))},
        "optimizer": {"state": {}, "param_groups": []},
        "rng": [{"torch": torch.get_rng_state(), "python": (3, tuple(range(625)), None)}],
    }


def test_save_is_atomic_and_leaves_no_temp(tmp_path: Path) -> None:
    path = ckpt.checkpoint_path(tmp_path, 12)
    ckpt.save_atomic(state(12), path)
    assert path.name == "step-00000012.pt"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["step-00000012.pt"]
    loaded = ckpt.load_checkpoint(path)
    assert loaded["step"] == 12 and torch.equal(loaded["model"]["w"], torch.full((4,), 12.0))
    assert loaded["rng"][0]["python"][1] == tuple(range(625))


def test_list_and_prune(tmp_path: Path) -> None:
    for step in (5, 10, 15, 20):
        ckpt.save_atomic(state(step), ckpt.checkpoint_path(tmp_path, step))
    (tmp_path / "notes.txt").write_text("not a checkpoint")
    assert [s for s, _ in ckpt.list_checkpoints(tmp_path)] == [20, 15, 10, 5]
    removed = ckpt.prune(tmp_path, keep_last=2)
    assert sorted(p.name for p in removed) == ["step-00000005.pt", "step-00000010.pt"]
    assert [s for s, _ in ckpt.list_checkpoints(tmp_path)] == [20, 15]
    assert (tmp_path / "notes.txt").exists()


def test_prune_up_to_a_resumed_step_keeps_the_newest_up_to_it(tmp_path: Path) -> None:
    """keep_last counts from the checkpoint resumed from: a newer file (one that could not
    be set aside) is neither counted nor deleted, so the resumed one always stays."""
    for step in (5, 10, 15, 20, 25):
        ckpt.save_atomic(state(step), ckpt.checkpoint_path(tmp_path, step))
    removed = ckpt.prune(tmp_path, keep_last=1, up_to_step=20)
    assert sorted(p.name for p in removed) == [
        "step-00000005.pt",
        "step-00000010.pt",
        "step-00000015.pt",
    ]
    assert [s for s, _ in ckpt.list_checkpoints(tmp_path)] == [25, 20]
    assert ckpt.prune(tmp_path, keep_last=1, up_to_step=20) == []


def test_newest_valid_skips_corrupt_partial_and_foreign(tmp_path: Path) -> None:
    for step in (5, 10):
        ckpt.save_atomic(state(step), ckpt.checkpoint_path(tmp_path, step))
    good = ckpt.checkpoint_path(tmp_path, 10).read_bytes()
    ckpt.checkpoint_path(tmp_path, 11).write_bytes(good[: len(good) // 2])  # partial copy
    ckpt.checkpoint_path(tmp_path, 12).write_bytes(os.urandom(2048))  # garbage
    torch.save({"weights": torch.ones(1)}, ckpt.checkpoint_path(tmp_path, 13))  # foreign
    skipped: list[tuple[str, str]] = []
    found = ckpt.find_latest_valid(tmp_path, lambda p, why: skipped.append((p.name, why)))
    assert found is not None and found[1]["step"] == 10
    assert [name for name, _ in skipped] == [
        "step-00000013.pt",
        "step-00000012.pt",
        "step-00000011.pt",
    ]
    assert skipped[0][1] == "lacks format, version, step, epoch, position, model, optimizer"
    assert skipped[1][1].startswith("cannot be loaded: ")


def test_weights_only_refuses_code(tmp_path: Path) -> None:
    path = ckpt.checkpoint_path(tmp_path, 1)
    torch.save({**state(1), "evil": Path("/")}, path)
    with pytest.raises(ckpt.CheckpointError, match=r"^cannot be loaded: "):
        ckpt.load_checkpoint(path)


def test_sigkill_while_writing_keeps_the_previous_checkpoint(tmp_path: Path) -> None:
    """A writer killed inside save_atomic leaves only a hidden temp file behind."""
    folder = tmp_path / "checkpoints"
    ckpt.save_atomic(state(5), ckpt.checkpoint_path(folder, 5))
    ready = tmp_path / "writing"
    script = textwrap.dedent(
        f"""
        import time, warnings
        from pathlib import Path
        warnings.filterwarnings("ignore")
        import torch
        from train.resume import checkpoint as ckpt

        class Stall:
            # Pickled in the middle of the checkpoint: announce, then hang until killed.
            def __reduce__(self):
                Path({str(ready)!r}).write_text("now")
                time.sleep(600)
                return (int, ())

        ckpt.save_atomic({{"big": torch.zeros(1 << 20), "stall": Stall()}},
                         ckpt.checkpoint_path(Path({str(folder)!r}), 10))
        """
    )
    writer = subprocess.Popen([sys.executable, "-c", script], env=clean_env())
    try:
        assert wait_for(ready.exists, timeout=60)
        temps = [p.name for p in folder.iterdir() if p.name.startswith(".")]
        assert temps == [f".step-00000010.pt.tmp-{writer.pid}"]
        writer.send_signal(signal.SIGKILL)
        writer.wait(timeout=30)
    finally:
        if writer.poll() is None:
            writer.kill()
    assert writer.returncode == -signal.SIGKILL
    assert [s for s, _ in ckpt.list_checkpoints(folder)] == [5]
    found = ckpt.find_latest_valid(folder, lambda p, why: None)
    assert found is not None and found[1]["step"] == 5
    removed = ckpt.remove_stale_temps(folder)
    assert [p.name for p in removed] == [f".step-00000010.pt.tmp-{writer.pid}"]
