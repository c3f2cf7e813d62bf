"""Parsers of Slurm's output: sbatch --parsable, squeue --Format, sacct --parsable2. Pure
functions, fed output captured from the real cluster in tests."""

from __future__ import annotations

import re
from collections import defaultdict
from dataclasses import dataclass, replace

from jobkit.core.errors import SchedulerError
from jobkit.core.units import parse_clock

SQUEUE_FIELDS = (
    "JobArrayID",
    "ArrayJobID",
    "ArrayTaskID",
    "State",
    "Reason",
    "NodeList",
    "TimeUsed",
    "RestartCnt",
)
"""Job id (123 or 123_4), array base id, task id, state, reason, nodes, elapsed, requeues."""
SQUEUE_FORMAT = ",".join(f"{name}:|" for name in SQUEUE_FIELDS)
"""`--Format` with `|` after each field and no width, so nothing is cut."""
SACCT_FIELDS = "JobID,JobIDRaw,State,ExitCode,Elapsed,NodeList,Reason,MaxRSS,TotalCPU"
ACCOUNTING_DISABLED = "accounting storage is disabled"

_SBATCH_ID = re.compile(r"^(?P<id>\d+)(?:;(?P<cluster>[A-Za-z0-9_.-]+))?$", re.ASCII)
_ARRAY_PENDING = re.compile(r"^\d+_\[")


@dataclass(frozen=True)
class SlurmId:
    """A Slurm job id as sbatch printed it: number and optional cluster."""

    job: str
    cluster: str | None = None

    @classmethod
    def parse(cls, text: str) -> SlurmId:
        """`123` or `123;cluster`."""
        job, _, cluster = text.partition(";")
        return cls(job, cluster or None)

    @property
    def base(self) -> str:
        """The array's (or plain job's) number: `123` of `123_4`."""
        return self.job.partition("_")[0]

    @property
    def task(self) -> str | None:
        """The task of one array task's id (`4` of `123_4`); None for a job or whole array."""
        return self.job.partition("_")[2] or None


def parse_sbatch_output(argv: list[str], stdout: str, stderr: str) -> str:
    """The job id from `sbatch --parsable` output (`123` or `123;cluster`)."""
    lines = [line.strip() for line in stdout.splitlines() if line.strip()]
    if lines and _SBATCH_ID.match(lines[-1]):
        return lines[-1]
    raise SchedulerError(argv, 0, stdout, stderr, reason="unexpected sbatch output")


def parse_elapsed(text: str) -> float | None:
    """Seconds from Slurm's `[D-][H:]M:S` (squeue %M, sacct Elapsed); None if not a time."""
    return parse_clock(text)


def parse_exit_code(text: str) -> tuple[int | None, int | None]:
    """(exit code, signal) from sacct's `code:signal`; zero signal becomes None."""
    code, _, sig = text.strip().partition(":")
    if not code.isdigit():
        return None, None
    signal = int(sig) if sig.isdigit() and int(sig) else None
    return int(code), signal


_RSS = re.compile(r"^(?P<n>\d+(?:\.\d+)?)(?P<unit>[KMGTP]?)$")
_RSS_FACTORS = {"": 1, "K": 1 << 10, "M": 1 << 20, "G": 1 << 30, "T": 1 << 40, "P": 1 << 50}


def _rss_bytes(text: str) -> float:
    match = _RSS.match(text.strip())
    if not match:
        return -1.0
    return float(match["n"]) * _RSS_FACTORS[match["unit"]]


def _none_if_blank(text: str) -> str | None:
    value = text.strip()
    return None if value in ("", "None", "(null)", "None assigned", "N/A") else value


@dataclass(frozen=True)
class SqueueRow:
    """One line of `squeue -o SQUEUE_FORMAT`."""

    job_id: str
    base_id: str
    task_id: str | None
    raw_state: str
    reason: str | None
    nodes: str | None
    elapsed_s: float | None
    restarts: int | None


_COMPLETING = frozenset({"COMPLETING", "CG"})
"""squeue(1), %N: "In the case of a COMPLETING job, the list of nodes will comprise only
those nodes that have not yet been returned to service". A 2-node job that ended in a second
showed `n1` alone: a completing row says nothing of the job's nodes (the earlier or later
row, or sacct, does)."""


def parse_squeue(stdout: str) -> list[SqueueRow]:
    """Rows of `squeue --noheader --array --Format=SQUEUE_FORMAT`; CLUSTER: lines skipped."""
    rows: list[SqueueRow] = []
    for line in stdout.splitlines():
        if not line.strip() or line.startswith("CLUSTER:"):
            continue
        fields = line.split("|")
        if len(fields) < len(SQUEUE_FIELDS):
            continue
        job_id, base, task, state, reason, nodes, elapsed, restarts = (
            f.strip() for f in fields[: len(SQUEUE_FIELDS)]
        )
        rows.append(
            SqueueRow(
                job_id=job_id,
                base_id=base or job_id.split("_")[0],
                task_id=_none_if_blank(task),
                raw_state=state,
                reason=_none_if_blank(reason),
                nodes=None if state in _COMPLETING else _none_if_blank(nodes),
                elapsed_s=parse_elapsed(elapsed),
                restarts=int(restarts) if restarts.isdigit() else None,
            )
        )
    return rows


@dataclass(frozen=True)
class SacctRun:
    """One allocation line of sacct (one run of one job or array task) with its steps."""

    job_id: str
    base_id: str
    task_id: str | None
    raw_state: str
    exit_code: int | None
    signal: int | None
    elapsed_s: float | None
    nodes: str | None
    reason: str | None
    max_rss: str | None
    cpu_time: str | None
    runs: int
    """How many allocation lines sacct -D showed for this id (1 + requeues)."""
    earlier_elapsed_s: float = 0.0
    """The elapsed of the earlier runs (the lines before the latest), summed."""


def parse_sacct(stdout: str) -> list[SacctRun]:
    """The latest run of each job / array task in `sacct -n -P -D --format=SACCT_FIELDS`.

    Step lines (`123.batch`, `123_4.0`) add their MaxRSS (the largest is kept);
    earlier runs of a requeued job count in `runs` and their elapsed in `earlier_elapsed_s`.
    """
    latest: dict[str, SacctRun] = {}
    runs: dict[str, int] = defaultdict(int)
    earlier: dict[str, float] = defaultdict(float)
    rss: dict[str, str] = {}
    order: list[str] = []
    for line in stdout.splitlines():
        if not line.strip() or line.startswith("CLUSTER:"):
            continue
        fields = line.split("|")
        if len(fields) < 9:
            continue
        job_id, _raw, state, exit_text, elapsed, nodes, reason, max_rss, cpu = (
            f.strip() for f in fields[:9]
        )
        alloc_id, dot, _step = job_id.partition(".")
        if dot:
            if _rss_bytes(max_rss) > _rss_bytes(rss.get(alloc_id, "")):
                rss[alloc_id] = max_rss
            continue
        base, _, task = alloc_id.partition("_")
        code, signal = parse_exit_code(exit_text)
        runs[alloc_id] += 1
        if alloc_id not in latest:
            order.append(alloc_id)
        else:  # sacct -D lists a job's runs oldest first: the one before ended
            earlier[alloc_id] += latest[alloc_id].elapsed_s or 0.0
        latest[alloc_id] = SacctRun(
            job_id=alloc_id,
            base_id=base,
            task_id=task or None,
            raw_state=state,
            exit_code=code,
            signal=signal,
            elapsed_s=parse_elapsed(elapsed),
            nodes=_none_if_blank(nodes),
            reason=_none_if_blank(reason),
            max_rss=None,
            cpu_time=_none_if_blank(cpu),
            runs=0,
        )
    return [
        replace(
            latest[key],
            runs=runs[key],
            max_rss=_none_if_blank(rss.get(key, "")),
            earlier_elapsed_s=earlier[key],
        )
        for key in order
    ]
