"""proc.run: the one runner of scheduler commands; errors carry argv, rc, stdout, stderr."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

from jobkit.core import proc
from jobkit.core.errors import SchedulerError


def test_success_returns_output() -> None:
    done = proc.run(
        [sys.executable, "-c", "import sys; print('out'); print('err', file=sys.stderr)"]
    )
    assert (done.returncode, done.stdout, done.stderr) == (0, "out\n", "err\n")


def test_nonzero_exit_raises_with_everything_verbatim() -> None:
    refusal = "sbatch: error: Batch job submission failed: Invalid partition name specified"
    code = f"import sys; print('partial'); sys.stderr.write({refusal!r} + '\\n'); sys.exit(1)"
    argv = [sys.executable, "-c", code]
    with pytest.raises(SchedulerError) as err:
        proc.run(argv)
    assert err.value.argv == argv and err.value.returncode == 1
    assert err.value.stdout == "partial\n"
    assert err.value.stderr.endswith("Invalid partition name specified\n")
    assert err.value.show().endswith(
        ": exit 1: sbatch: error: Batch job submission failed: Invalid partition name specified"
    )


def test_check_false_returns_nonzero() -> None:
    done = proc.run([sys.executable, "-c", "raise SystemExit(3)"], check=False)
    assert done.returncode == 3


def test_missing_executable() -> None:
    with pytest.raises(SchedulerError) as err:
        proc.run(["jobkit-no-such-command-xyz", "-j", "1"])
    assert err.value.returncode is None
    assert err.value.show() == (
        "jobkit-no-such-command-xyz -j 1: command not found: jobkit-no-such-command-xyz"
        " (is it installed and on PATH?)"
    )


def test_timeout() -> None:
    with pytest.raises(SchedulerError) as err:
        proc.run([sys.executable, "-c", "import time; time.sleep(5)"], timeout=0.3)
    assert "timed out after 0.3 s" in err.value.show()


def test_no_shell_is_involved(tmp_path: Path) -> None:
    marker = tmp_path / "pwned"
    done = proc.run(["echo", f"$(touch {marker}); rm -rf /"])
    assert done.stdout == f"$(touch {marker}); rm -rf /\n"
    assert not marker.exists()


def test_env_is_added_and_invocations_logged(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    log = tmp_path / "calls.jsonl"
    monkeypatch.setenv(proc.PROC_LOG_ENV, str(log))
    done = proc.run(
        [sys.executable, "-c", "import os; print(os.environ['A'], os.environ['PATH'] != '')"],
        env={"A": "x y"},
    )
    assert done.stdout == "x y True\n"
    with pytest.raises(SchedulerError):
        proc.run(["jobkit-no-such-command-xyz"])
    calls = [json.loads(line) for line in log.read_text().splitlines()]
    assert [c["argv"][0] for c in calls] == [sys.executable, "jobkit-no-such-command-xyz"]
    assert [c["rc"] for c in calls] == [0, None]
