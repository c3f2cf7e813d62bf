"""The laptop side without what only Linux has: the submitter's identity without /proc."""

from __future__ import annotations

import os
import subprocess
import sys

from jobkit.manager.submit import _ps_start_time


def test_a_process_start_time_comes_from_ps_where_there_is_no_proc() -> None:
    """macOS has no /proc: `ps -o lstart=` tells a live submitter from a reused pid."""
    mine = _ps_start_time(os.getpid())
    assert mine and mine == _ps_start_time(os.getpid())
    child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(30)"])
    try:
        assert _ps_start_time(child.pid)
    finally:
        child.kill()
        child.wait()
    assert _ps_start_time(child.pid) is None
