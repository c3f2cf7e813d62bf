""".ci/cpu.py: the CPU table at the end of .ci/run, from a process accounting file (acct v3
records, written here by hand as the kernel writes them: the table's figures are checked)."""

from __future__ import annotations

import os
import struct
import subprocess
import sys
from datetime import datetime
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
RECORD = struct.Struct("<BBHIIIIIIf8H16s")


def comp_t(ticks: int) -> int:
    """A tick count as the kernel's comp_t (13-bit mantissa, base-8 exponent)."""
    exponent = 0
    while ticks > 0x1FFF:
        ticks >>= 3
        exponent += 1
    return (exponent << 13) | ticks


def record(comm: str, pid: int, ppid: int, user_s: float, system_s: float = 0.0) -> bytes:
    utime, stime = comp_t(round(user_s * 100)), comp_t(round(system_s * 100))
    return RECORD.pack(
        0, 3, 0, 0, 0, 0, pid, ppid, 0, 1.0, utime, stime, 0, 0, 0, 0, 0, 0, comm.encode()
    )


def table(path: Path) -> str:
    done = subprocess.run(
        [sys.executable, str(REPO / ".ci" / "cpu.py"), str(path)],
        capture_output=True,
        text=True,
        check=True,
    )
    return done.stdout + done.stderr


def test_processes_are_placed_by_their_ancestors(tmp_path: Path) -> None:
    # Children end before their parents: a local job (bash, torchrun, two ranks), a Slurm
    # step's torchrun and rank, a jobkit call; pid 10 is used twice.
    pacct = tmp_path / "pacct"
    pacct.write_bytes(
        b"".join(
            [
                record("python", 12, 11, 4.0, 0.5),
                record("python", 13, 11, 4.0, 0.5),
                record("pt_elastic", 11, 10, 3.0, 0.25),
                record("bash", 10, 1, 0.0),
                record("python3", 22, 21, 6.0),
                record("pt_elastic", 21, 20, 3.25),
                record("slurmstepd", 20, 1, 0.0),
                record("jobkit", 10, 9, 0.5),
            ]
        )
    )
    text = table(pacct)
    lines = text.splitlines()
    assert lines[0].startswith("22 CPU-s in 8 processes"), text
    assert "       9  40.9%         2    4.50  rank under torchrun, host" in lines, text
    assert "       6  27.3%         1    6.00  rank under torchrun, Slurm job" in lines, text
    assert "       3  14.8%         1    3.25  torchrun agent, host" in lines, text
    assert "       3  14.8%         1    3.25  torchrun agent, Slurm job" in lines, text
    assert "       0   2.3%         1    0.50  jobkit CLI, host" in lines, text


def test_large_tick_counts_are_decoded(tmp_path: Path) -> None:
    pacct = tmp_path / "pacct"
    pacct.write_bytes(record("mypy", 5, 1, 300.0))  # 30,000 ticks: past comp_t's mantissa
    assert "     300 100.0%         1  300.00  lint and types, host" in table(pacct)


def test_no_accounting_file_is_one_line_and_no_failure(tmp_path: Path) -> None:
    text = table(tmp_path / "missing")
    assert text.strip() == f"no process accounting in {tmp_path / 'missing'}: no CPU table"


def timed(comm: str, pid: int, ppid: int, user_s: float, began: int, elapsed_s: float) -> bytes:
    """A record with its start (whole seconds since the epoch) and elapsed time (ticks)."""
    return RECORD.pack(
        0, 3, 0, 0, 0, 0, pid, ppid, began, elapsed_s * 100, comp_t(round(user_s * 100)), 0,
        0, 0, 0, 0, 0, 0, comm.encode(),
    )  # fmt: skip


def test_cpu_by_test_places_job_processes_by_time(tmp_path: Path) -> None:
    """.ci/cpu_by_test.py: a test's own figure (cpu_s) plus the job processes that ended while
    it ran, in the reports that could have started them; pytest's own tree left out."""
    t0 = 1_800_000_000
    hosts = tmp_path / "cluster-2.xml"  # the lane with the ssh hosts
    hosts.write_text(
        f'<testsuites><testsuite timestamp="{datetime.fromtimestamp(t0).isoformat()}">'
        '<testcase classname="tests.e2e.test_ssh" name="test_a" time="10">'
        '<properties><property name="cpu_s" value="1.5"/></properties></testcase>'
        '<testcase classname="tests.e2e.test_ssh" name="test_b" time="10"/>'
        "</testsuite></testsuites>"
    )
    others = tmp_path / "others-0.xml"
    others.write_text(
        f'<testsuites><testsuite timestamp="{datetime.fromtimestamp(t0).isoformat()}">'
        '<testcase classname="tests.train.test_c" name="test_c" time="20"/>'
        "</testsuite></testsuites>"
    )
    for report in (hosts, others):
        os.utime(report, (t0 + 20, t0 + 20))
    (tmp_path / "pacct").write_bytes(
        b"".join(
            [
                timed("python3", 31, 30, 4.0, t0 + 12, 3.0),  # an ssh job's rank, ends at +15
                timed("sshd", 30, 1, 0.0, t0 + 11, 5.0),
                timed("python", 41, 40, 4.0, t0 + 1, 4.0),  # a local job's, ends at +5
                timed("bash", 40, 1, 0.0, t0, 6.0),
                timed("python", 51, 50, 9.0, t0 + 1, 4.0),  # pytest's child: its own figure
                timed("python", 50, 1, 0.0, t0, 30.0),
            ]
        )
    )
    done = subprocess.run(
        [sys.executable, str(REPO / ".ci" / "cpu_by_test.py"), str(tmp_path)],
        capture_output=True,
        text=True,
        check=True,
    )
    lines = done.stdout.splitlines()
    assert lines[0] == (
        "10 CPU-s placed: 2 in the tests' own processes, 8 in jobs placed by time (0 not placed)"
    ), done.stdout
    tests = lines[lines.index(f"{'CPU-s':>8} {'own':>6}  test") + 1 :]
    assert tests == [
        "       4      0  tests.e2e.test_ssh::test_b",
        "       4      2  tests.e2e.test_ssh::test_a",
        "       2      0  tests.train.test_c::test_c",
    ], done.stdout
