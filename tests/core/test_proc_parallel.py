"""core/proc.run_parallel, the one fan-out (envcheck's hosts, ssh cleanup, stack dumps):
every command at once under one deadline, output decoded with replacement characters, a
straggler killed with its whole process group, a command that cannot start reported."""

from __future__ import annotations

import time
from pathlib import Path

from jobkit.core.proc import run_parallel


def _alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().split(") ", 1)[1][0]
    except (FileNotFoundError, IndexError):
        return False
    return state != "Z"


def test_the_commands_run_at_the_same_time(tmp_path: Path) -> None:
    flag = tmp_path / "flag"
    waits = f"while [ ! -e {flag} ]; do sleep 0.02; done; echo waited"
    # The first ends only once the second has run: one after the other would time out.
    first, second = run_parallel(
        [["sh", "-c", waits], ["sh", "-c", f"touch {flag}; echo made"]], timeout=60
    )
    assert (first.returncode, first.stdout, first.timed_out) == (0, "waited\n", False)
    assert (second.returncode, second.stdout, second.error) == (0, "made\n", None)


def test_input_goes_to_each_and_bytes_are_decoded_with_replacement() -> None:
    catted, latin = run_parallel(
        [["cat"], ["sh", "-c", r"printf 'caf\351 \377\n' >&2; exit 3"]],
        timeout=60,
        input="héllo\n",
    )
    assert catted.stdout == "héllo\n" and catted.returncode == 0
    assert latin.returncode == 3 and latin.stderr == "caf\ufffd \ufffd\n"


def test_a_straggler_is_killed_with_its_process_group(tmp_path: Path) -> None:
    pid_file = tmp_path / "child"
    straggler = f"sleep 300 & echo $! > {pid_file}; echo started; wait"
    quick, slow = run_parallel([["true"], ["sh", "-c", straggler]], timeout=1.5)
    assert quick.returncode == 0 and not quick.timed_out
    assert slow.timed_out and slow.returncode == -9
    assert slow.stdout == "started\n"  # what it printed before the deadline is kept
    child = int(pid_file.read_text())
    deadline = time.monotonic() + 10
    while _alive(child) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not _alive(child), "the straggler's child (its process group) was left running"


def test_a_command_that_cannot_start_does_not_stop_the_others(tmp_path: Path) -> None:
    missing = tmp_path / "no-such-program"
    gone, ran = run_parallel([[str(missing)], ["echo", "ok"]], timeout=60)
    assert gone.returncode is None and gone.error is not None
    assert gone.error.startswith("cannot run: ") and str(missing) in gone.error
    assert (ran.returncode, ran.stdout) == (0, "ok\n")
    assert run_parallel([], timeout=1) == []
