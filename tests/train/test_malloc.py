"""train/loop/malloc.py: glibc's thresholds are set for CPU training, unless the user set theirs."""

from __future__ import annotations

import platform
import subprocess
import sys
from pathlib import Path

import pytest

from train.loop.malloc import ENV_KNOBS, keep_freed_memory


@pytest.mark.parametrize("name", ENV_KNOBS)
def test_users_own_setting_wins(name: str) -> None:
    assert keep_freed_memory({name: "131072"}) is False


@pytest.mark.skipif(platform.libc_ver()[0] != "glibc", reason="mallopt is glibc's")
def test_sets_both_thresholds_on_glibc() -> None:
    # In a child process: the thresholds are process-wide and stay set.
    code = "from train.loop.malloc import keep_freed_memory as k; print(k({}))"
    done = subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        check=True,
        timeout=60,
        cwd=Path(__file__).resolve().parents[2],
    )
    assert done.stdout.strip() == "True"
