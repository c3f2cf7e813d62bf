"""What Slurm jobs used, from ONE `sacct --parsable2` call for all of them: each step's
CPUs, elapsed time, exact CPU time (TotalCPU) and the per-task extremes Slurm samples
(TRESUsageInMax/Min and their nodes), turned into per-node shares where they determine
them. The formula is explained in docs/report.md."""

from __future__ import annotations

import re
from collections import defaultdict
from collections.abc import Callable, Sequence

from jobkit.backends.base import TrackedJob
from jobkit.core.units import parse_clock
from jobkit.core.usage import NodeShare, StepUsage, Usage

USAGE_FIELDS = (
    "JobID",
    "State",
    "ElapsedRaw",
    "TimelimitRaw",
    "NodeList",
    "AllocCPUS",
    "NTasks",
    "TotalCPU",
    "MaxRSS",
    "TRESUsageInTot",
    "TRESUsageInMax",
    "TRESUsageInMaxNode",
    "TRESUsageInMin",
    "TRESUsageInMinNode",
)
"""The columns asked for, in this order (`--format`)."""

_SIZE = re.compile(r"^(?P<n>\d+(?:\.\d+)?)(?P<unit>[KMGTP]?)$")
_SIZE_MB = {"": 1 / (1 << 20), "K": 1 / 1024, "M": 1, "G": 1024, "T": 1 << 20, "P": 1 << 30}
SAMPLED_NOTE = (
    "per-node shares come from Slurm's samples (JobAcctGatherFrequency), scaled to the exact"
    " TotalCPU"
)


def usage_argv(job_ids: Sequence[str], cluster: str | None = None) -> list[str]:
    """The one sacct call for these jobs (latest run of each: no --duplicates)."""
    argv = ["sacct", "--noheader", "--parsable2"]
    if cluster:
        argv.append(f"--clusters={cluster}")
    return [*argv, f"--jobs={','.join(job_ids)}", f"--format={','.join(USAGE_FIELDS)}"]


def expand_nodelist(text: str) -> tuple[str, ...]:
    """`n[1-2,5],gpu01` -> ('n1', 'n2', 'n5', 'gpu01'); zero padding kept; blank -> ().

    One host-list reader for jobkit and the trainer (train/env/hostlist.py, stdlib only); a list
    Slurm would not write is kept as one name, so a report still shows what sacct said."""
    from train.env.hostlist import HostlistError, expand_hostlist

    text = text.strip()
    if not text or text in ("None assigned", "(null)"):
        return ()
    try:
        return tuple(expand_hostlist(text))
    except HostlistError:
        return (text,)


def parse_cpu_time(text: str) -> float | None:
    """Seconds from sacct's TotalCPU / TRES cpu: `[D-][HH:]MM:SS[.mmm]`; None if blank."""
    return parse_clock(text)


def parse_size_mb(text: str) -> float | None:
    """Megabytes from sacct's `436420K` / `1.5G` / bytes; None if blank or unreadable."""
    match = _SIZE.match(text.strip())
    if not match:
        return None
    return float(match["n"]) * _SIZE_MB[match["unit"]]


def parse_tres(text: str) -> dict[str, str]:
    """`cpu=00:00:03,mem=436420K,...` -> {'cpu': '00:00:03', 'mem': '436420K', ...}."""
    found: dict[str, str] = {}
    for item in text.split(","):
        key, sep, value = item.partition("=")
        if sep:
            found[key.strip()] = value.strip()
    return found


def _int(text: str) -> int | None:
    return int(text) if text.strip().isdigit() else None


def parse_usage(stdout: str) -> dict[str, Usage]:
    """sacct rows (USAGE_FIELDS, parsable2) -> job id (`123`, `123_4`) -> Usage."""
    jobs: dict[str, dict[str, str]] = {}
    steps: dict[str, list[StepUsage]] = defaultdict(list)
    for line in stdout.splitlines():
        fields = line.split("|")
        if len(fields) < len(USAGE_FIELDS) or line.startswith("CLUSTER:"):
            continue
        row = dict(zip(USAGE_FIELDS, (f.strip() for f in fields), strict=False))
        job_id, dot, step = row["JobID"].partition(".")
        if dot:
            steps[job_id].append(step_usage(step, row))
        else:
            jobs[job_id] = row
    result: dict[str, Usage] = {}
    for job_id, row in jobs.items():
        limit = _int(row["TimelimitRaw"])
        elapsed = _int(row["ElapsedRaw"])
        found = steps.get(job_id, [])
        notes = []
        if row["State"] in ("RUNNING", "REQUEUED", "SUSPENDED"):
            notes.append("the job is running: Slurm records a step's CPU time when the step ends")
        result[job_id] = Usage(
            source="sacct",
            state=row["State"].split()[0] if row["State"] else None,
            elapsed_s=float(elapsed) if elapsed is not None else None,
            time_limit_s=float(limit * 60) if limit is not None else None,
            nodes=expand_nodelist(row["NodeList"]),
            cpus=_int(row["AllocCPUS"]),
            steps=tuple(found),
            notes=tuple(notes),
            requeued_run=row["State"].startswith("REQUEUED"),
        )
    return result


def step_usage(name: str, row: dict[str, str]) -> StepUsage:
    """One step line: its totals, and the per-node shares its sampled extremes determine."""
    nodes = expand_nodelist(row["NodeList"])
    tasks = _int(row["NTasks"])
    tot, high, low = (
        parse_tres(row[k]) for k in ("TRESUsageInTot", "TRESUsageInMax", "TRESUsageInMin")
    )
    high_at, low_at = parse_tres(row["TRESUsageInMaxNode"]), parse_tres(row["TRESUsageInMinNode"])
    sampled_total = parse_cpu_time(tot.get("cpu", ""))
    cpu_s = parse_cpu_time(row["TotalCPU"])
    if not cpu_s and sampled_total:  # Slurm 25.05 records TotalCPU 0 in steps
        cpu_s = sampled_total
    max_rss = parse_size_mb(row["MaxRSS"]) or parse_size_mb(high.get("mem", ""))
    per_node: dict[str, NodeShare] = {}
    note = None
    if len(nodes) == 1:
        per_node[nodes[0]] = NodeShare(cpu_s=cpu_s, rss_mb=parse_size_mb(tot.get("mem", "")))
    elif nodes and tasks == len(nodes):
        cpu = _extremes(nodes, high, low, high_at, low_at, "cpu", parse_cpu_time)
        # The samples lag and are whole seconds; the exact total fixes their sum: every
        # node's share when all are known, else the sampled total's.
        known = sum(cpu.values()) if len(cpu) == len(nodes) else sampled_total
        scale = cpu_s / known if cpu_s is not None and known else None
        mem = _extremes(nodes, high, low, high_at, low_at, "mem", parse_size_mb)
        for node in nodes:
            share_cpu = cpu.get(node)
            if node in cpu or node in mem:
                per_node[node] = NodeShare(
                    cpu_s=share_cpu * scale if share_cpu is not None and scale else None,
                    rss_mb=mem.get(node),
                )
        if scale is not None and cpu:
            note = SAMPLED_NOTE
        elif cpu_s:
            note = "Slurm took no sample of this step (shorter than JobAcctGatherFrequency?)"
    elif nodes:
        note = (
            f"{tasks} tasks on {len(nodes)} nodes: sacct keeps the largest and smallest task,"
            " not each node's sum"
        )
    return StepUsage(
        name=name,
        nodes=nodes,
        cpus=_int(row["AllocCPUS"]),
        tasks=tasks,
        elapsed_s=float(row["ElapsedRaw"]) if row["ElapsedRaw"].isdigit() else None,
        cpu_s=cpu_s,
        max_task_rss_mb=max_rss,
        per_node=per_node,
        note=note,
    )


def _extremes(
    nodes: Sequence[str],
    high: dict[str, str],
    low: dict[str, str],
    high_at: dict[str, str],
    low_at: dict[str, str],
    key: str,
    parse: Callable[[str], float | None],
) -> dict[str, float]:
    """node -> value for one TRES of a one-task-per-node step: the largest and smallest
    task's nodes; every node when the two are equal (all tasks then used the same)."""
    top, bottom = parse(high.get(key, "")), parse(low.get(key, ""))
    found: dict[str, float] = {}
    if top is None:
        return found
    if bottom is not None and bottom == top:
        return dict.fromkeys(nodes, float(top))
    if high_at.get(key) in nodes:
        found[high_at[key]] = float(top)
    if bottom is not None and low_at.get(key) in nodes:
        found[low_at[key]] = float(bottom)
    return found


def query_usage(jobs: Sequence[TrackedJob], timeout: float) -> dict[str, Usage]:
    """One sacct for all these jobs (one per Slurm cluster named in their ids), keyed by
    scheduler_id. Jobs sacct does not know are left out."""
    from jobkit.backends.slurm.parse import SlurmId
    from jobkit.core import proc

    groups: dict[str | None, list[TrackedJob]] = defaultdict(list)
    for job in jobs:
        groups[SlurmId.parse(job.scheduler_id).cluster].append(job)
    result: dict[str, Usage] = {}
    for cluster, group in groups.items():
        ids = [SlurmId.parse(j.scheduler_id).job for j in group]
        found = parse_usage(proc.run(usage_argv(ids, cluster), timeout=timeout).stdout)
        for job, number in zip(group, ids, strict=True):
            if number in found:
                result[job.scheduler_id] = found[number]
    return result
