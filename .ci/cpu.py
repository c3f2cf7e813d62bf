"""Where a CI run's CPU went, from the kernel's process accounting (issue 25).

.ci/run turns accounting on (`accton FILE`, Debian's acct package) once the cluster is up and
off at the end, then prints this table: the CPU seconds (user + system) of every process that
ended meanwhile, by what it was and where it ran. Each process is placed by its ancestors:
a torchrun agent (its name is `pt_elastic`), a rank it started, a `jobkit` CLI call, and so on,
inside a Slurm job step, an ssh session, a Podman container, a Grid Engine job or on the host.
Daemons still running at the end (slurmctld, sshd, ...) are not in it.

Usage: python .ci/cpu.py PACCT [ROWS]
"""

from __future__ import annotations

import bisect
import struct
import sys
from collections import Counter, defaultdict
from dataclasses import dataclass
from pathlib import Path

RECORD = struct.Struct("<BBHIIIIIIf8H16s")
"""struct acct_v3 (linux/acct.h): flag, version, tty, exitcode, uid, gid, pid, ppid, btime,
etime (float), utime, stime, mem, io, rw, minflt, majflt, swaps (comp_t), comm[16]."""
TICKS = 100  # AHZ: comp_t times are in 1/100 s
WHERE = (
    ("slurmstepd", "Slurm job"),
    ("conmon", "Podman"),
    ("sge_shepherd", "Grid Engine job"),
    ("sshd", "ssh"),
)
"""The first of these among a process's ancestors says where it ran (else: the host)."""
LINT = frozenset({"mypy", "ruff", "shellcheck"})
SCHEDULER = frozenset(
    {"squeue", "sacct", "sbatch", "scancel", "scontrol", "srun", "sinfo", "qsub", "qstat", "qdel"}
)


@dataclass(frozen=True)
class Process:
    """One accounting record."""

    comm: str
    cpu_s: float
    pid: int
    ppid: int
    ended: float = 0.0
    """When it ended (seconds since the epoch: its start, whole seconds, plus its elapsed time)."""


def comp_t(value: int) -> int:
    """A comp_t: 13-bit mantissa, 3-bit base-8 exponent."""
    return (value & 0x1FFF) << (3 * (value >> 13))


def read(path: Path) -> list[Process]:
    """The records of an accounting file (v3 records only), in the order processes ended."""
    data = path.read_bytes()
    records = []
    for offset in range(0, len(data) - RECORD.size + 1, RECORD.size):
        fields = RECORD.unpack_from(data, offset)
        if fields[1] != 3:
            continue
        cpu = (comp_t(fields[10]) + comp_t(fields[11])) / TICKS
        comm = fields[-1].split(b"\0", 1)[0].decode("ascii", "replace")
        ended = fields[8] + fields[9] / TICKS  # btime (s) + etime (ticks, as a float)
        records.append(Process(comm, cpu, fields[6], fields[7], ended))
    return records


def ancestors(records: list[Process]) -> list[list[str]]:
    """For each record, the names of its ancestors, nearest first. A parent ends after its
    children, so it is the first later record with that pid (pids are reused)."""
    ended_at: dict[int, list[int]] = defaultdict(list)
    for index, process in enumerate(records):
        ended_at[process.pid].append(index)

    def parent(index: int) -> int | None:
        later = ended_at.get(records[index].ppid, [])
        position = bisect.bisect_right(later, index)
        return later[position] if position < len(later) else None

    chains = []
    for index in range(len(records)):
        names: list[str] = []
        step = parent(index)
        while step is not None and len(names) < 16:
            names.append(records[step].comm)
            step = parent(step)
        chains.append(names)
    return chains


def kind(process: Process, chain: list[str]) -> str:
    """What a process was."""
    if process.comm == "pt_elastic":
        return "torchrun agent"
    if process.comm.startswith("python"):
        if chain[:1] == ["pt_elastic"]:
            return "rank under torchrun"
        return "python, 2 s CPU or more" if process.cpu_s >= 2 else "python, under 2 s"
    if process.comm == "jobkit":
        return "jobkit CLI"
    if process.comm in LINT:
        return "lint and types"
    if process.comm in SCHEDULER:
        return "scheduler commands"
    return "other"


def where(chain: list[str]) -> str:
    """Where a process ran, by its nearest telling ancestor."""
    for name in chain:
        for ancestor, label in WHERE:
            if name == ancestor:
                return label
    return "host"


def table(records: list[Process], rows: int = 18) -> str:
    """The report: total, then CPU by (what, where), largest first."""
    chains = ancestors(records)
    seconds: Counter[tuple[str, str]] = Counter()
    counts: Counter[tuple[str, str]] = Counter()
    for process, chain in zip(records, chains, strict=True):
        key = (kind(process, chain), where(chain))
        seconds[key] += process.cpu_s
        counts[key] += 1
    total = sum(seconds.values())
    lines = [
        f"{total:,.0f} CPU-s in {len(records):,} processes that ended during the run"
        " (user + system; daemons still running are not counted)",
        f"{'CPU-s':>8} {'share':>6} {'processes':>9} {'s each':>7}  what, where",
    ]
    for (what, place), value in seconds.most_common(rows):
        count = counts[(what, place)]
        share = 100 * value / total if total else 0.0
        lines.append(
            f"{value:8,.0f} {share:5.1f}% {count:9,d} {value / count:7.2f}  {what}, {place}"
        )
    return "\n".join(lines)


def main(argv: list[str]) -> int:
    """Print the table of ARGV[1] (ARGV[2]: rows, default 18)."""
    if len(argv) < 2:
        print(__doc__.strip().splitlines()[-1], file=sys.stderr)
        return 2
    path = Path(argv[1])
    if not path.is_file() or path.stat().st_size == 0:
        print(f"no process accounting in {path}: no CPU table", file=sys.stderr)
        return 0
    print(table(read(path), int(argv[2]) if len(argv) > 2 else 18))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
