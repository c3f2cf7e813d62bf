"""Slurm's answers before queueing (`jobkit check`, `jobkit submit`), each about one spec key.

Fast (submit runs these; a few ms each): the memory directives of `scheduler.extra` against
`resources.mem` (no command), `scontrol show partition --oneliner` (MaxTime, MaxNodes,
MaxMemPerNode, State, the default partition) and `sinfo --Node` (each node's partitions, GRES,
RealMemory). Thorough (`jobkit check` only): `sacctmgr show assoc` for this user and
`sacctmgr show qos` (MaxWall, MaxTRES, MaxTRESPerNode; slurmdbd answers in about 0.4 s each),
then `sbatch --test-only` of the rendered script (its refusal translated to the key at fault;
at submit the real sbatch refuses the same at once). MaxJobs and MaxSubmitJobs are not
checked: they depend on what else is queued at the time.
"""

from __future__ import annotations

import getpass
import re
import shlex
from pathlib import Path
from typing import TYPE_CHECKING

from jobkit.backends.preflight import Finding, Preflight
from jobkit.backends.slurm.limits import (
    Node,
    Request,
    loosest,
    node_fit,
    only_one,
    parse_tres,
    partition_limits,
    slurm_seconds,
    tres_limits,
)
from jobkit.backends.waiting import ESTIMATE_LABEL
from jobkit.core.errors import SchedulerError
from jobkit.core.units import format_slurm_time

if TYPE_CHECKING:
    from jobkit.spec.schema import JobSpec

FAST_TIMEOUT_S = 10.0
"""The longest the fast queries may take at submit (a slurmctld that does not answer makes
them a note, and sbatch then says what is wrong)."""
_FIELD = re.compile(r"(\w+)=(.*?)(?=\s+\w+=|$)")
_MEM_FLAGS = ("--mem", "--mem-per-cpu", "--mem-per-gpu")
_TEST_ONLY_OK = re.compile(r"Job \d+ to start at (\S+) using .* on nodes (\S+) in partition (\S+)")
_SBATCH_WORDS: tuple[tuple[str, str, str], ...] = (
    # (words in sbatch's refusal, lower case; the key at fault; what it means)
    ("invalid partition", "resources.partition", "Slurm has no such partition"),
    ("generic resource", "resources.gpu_type", "no node offers this GPU request (gres)"),
    ("time limit", "resources.time", "the time is over a limit of the partition or QoS"),
    ("invalid account", "resources.account", "Slurm knows no such account for you"),
    ("invalid qos", "resources.qos", "Slurm knows no such QoS for you"),
    ("qos", "resources.qos", "the QoS refuses the job"),
    ("memory", "resources.mem", "no node has this much memory"),
    ("node count", "resources.nodes", "the partition cannot give this many nodes"),
    ("node configuration", "resources", "no node of the partition has what the job asks for"),
)


def preflight(
    spec: JobSpec, script: str, workdir: Path, *, thorough: bool, timeout: float
) -> Preflight:
    """Every problem Slurm's fast answers (and with `thorough` its accounting limits) show."""
    request = Request.of(spec)
    timeout = timeout if thorough else min(timeout, FAST_TIMEOUT_S)
    findings = list(memory_conflicts(spec))
    checked = ["memory directives"]
    notes: list[str] = []
    partitions = _partitions(timeout)
    nodes = _nodes(timeout)
    checked += ["partition limits", "node GRES and memory"]
    name = request.partition or next(
        (p for p, f in partitions.items() if f.get("Default") == "YES"), None
    )
    if request.partition and request.partition not in partitions:
        known = ", ".join(sorted(partitions)) or "none"
        findings.append(
            Finding(
                "resources.partition",
                f"Slurm has no partition {request.partition!r} (partitions: {known})",
            )
        )
    elif name is not None:
        findings += partition_limits(request, name, partitions[name])
        findings += node_fit(request, name, [n for n in nodes if n.partition == name])
    if thorough:
        found, note = accounting_limits(request, name, timeout)
        findings += found
        checked.append("association and QoS limits")
        notes += [note] if note else []
        tested, note = test_only(script, workdir, timeout, request)
        checked.append("sbatch --test-only")
        findings += [t for t in tested if not any(_same_key(t.key, f.key) for f in findings)]
        notes += [note] if note else []
    return Preflight(tuple(findings), tuple(checked), tuple(notes))


def memory_conflicts(spec: JobSpec) -> list[Finding]:
    """`--mem`, `--mem-per-cpu`, `--mem-per-gpu` are exclusive: in scheduler.extra beside
    resources.mem (or each other), sbatch refuses the script."""
    found: list[Finding] = []
    seen: list[str] = ["resources.mem (--mem)"] if spec.resources.mem else []
    for index, item in enumerate(spec.scheduler.extra):
        for word in shlex.split(item):
            flag = word.split("=", 1)[0]
            if flag in _MEM_FLAGS:
                if seen:
                    found.append(
                        Finding(
                            f"scheduler.extra.{index}",
                            f"{flag} conflicts with {seen[0]}: Slurm takes only one of --mem,"
                            " --mem-per-cpu and --mem-per-gpu",
                        )
                    )
                seen.append(f"{flag} (scheduler.extra)")
    return found


def test_only(
    script: str, workdir: Path, timeout: float, request: Request | None = None
) -> tuple[list[Finding], str | None]:
    """`sbatch --test-only` of the script: its refusal as findings, or its start estimate."""
    from jobkit.core import proc

    argv = ["sbatch", "--test-only"]
    done = proc.run(argv, input=script, cwd=workdir, timeout=timeout, check=False)
    said = " ".join((done.stderr + "\n" + done.stdout).split())
    if done.returncode == 0:
        match = _TEST_ONLY_OK.search(said)
        if match:
            start, nodes, partition = match.groups()
            note = f"sbatch --test-only: would start at {start} on {nodes} in partition {partition}"
            return [], f"{note} ({ESTIMATE_LABEL})"
        return [], None
    return [translate_refusal(said, request)], None


def translate_refusal(said: str, request: Request | None = None) -> Finding:
    """sbatch's refusal -> the key at fault and what it means, sbatch's words kept. With the
    request, a GPU refusal names the key the user set (gpus_per_node when no gpu_type)."""
    words = said
    for prefix in ("sbatch: error: ", "sbatch: fatal: ", "Batch job submission failed: "):
        words = words.replace(prefix, "")
    lower = words.lower()
    for needle, key, meaning in _SBATCH_WORDS:
        if needle in lower:
            if key == "resources.gpu_type" and request is not None:
                key = request.gpu_key
            return Finding(key, f"{meaning} (sbatch --test-only: {words})")
    if "mutually exclusive" in lower and "--mem" in lower:
        return Finding(
            "scheduler.extra", f"Slurm takes only one memory request (sbatch --test-only: {words})"
        )
    return Finding("resources", f"sbatch --test-only refused the job: {words}")


def _same_key(first: str, second: str) -> bool:
    """One key is the other or holds it (`scheduler.extra` and `scheduler.extra.0`)."""
    return first == second or second.startswith(first + ".") or first.startswith(second + ".")


def _partitions(timeout: float) -> dict[str, dict[str, str]]:
    from jobkit.core import proc

    text = proc.run(["scontrol", "show", "partition", "--oneliner"], timeout=timeout).stdout
    found: dict[str, dict[str, str]] = {}
    for line in text.splitlines():
        fields = dict(_FIELD.findall(line.strip()))
        if "PartitionName" in fields:
            found[fields["PartitionName"]] = fields
    return found


def _nodes(timeout: float) -> list[Node]:
    from jobkit.core import proc

    argv = ["sinfo", "--noheader", "--Node", "--format=%N|%R|%G|%m|%c"]
    nodes = []
    for line in proc.run(argv, timeout=timeout).stdout.splitlines():
        parts = line.strip().split("|")
        if len(parts) == 5 and parts[3].isdigit() and parts[4].isdigit():
            nodes.append(Node(parts[0], parts[1], parts[2], int(parts[3]), int(parts[4])))
    return nodes


def _sacctmgr(args: list[str], timeout: float) -> list[list[str]]:
    from jobkit.core import proc

    text = proc.run(["sacctmgr", "--noheader", "--parsable2", *args], timeout=timeout).stdout
    return [line.split("|") for line in text.splitlines() if line.strip()]


def accounting_limits(
    request: Request, partition: str | None, timeout: float
) -> tuple[list[Finding], str | None]:
    """The request against this user's associations and their QoS (MaxWall, MaxTRES,
    MaxTRESPerNode). A limit counts only when every association the job may
    use sets it (the loosest applies)."""
    user = getpass.getuser()
    try:
        assoc = _sacctmgr(
            [
                "show",
                "assoc",
                "where",
                f"user={user}",
                "format=Account,Partition,MaxWall,MaxTRES,QOS,DefaultQOS",
            ],
            timeout,
        )
        qos_rows = _sacctmgr(["show", "qos", "format=Name,MaxWall,MaxTRES,MaxTRESPerNode"], timeout)
    except SchedulerError as err:
        return [], f"association and QoS limits not checked: {err.show()}"
    rows = [
        r
        for r in assoc
        if (not request.account or r[0] == request.account) and r[1] in ("", partition)
    ]
    if not rows:
        return [], f"association limits not checked: sacctmgr shows no association of {user}" + (
            f" with account {request.account}" if request.account else ""
        )
    found: list[Finding] = []
    wall = loosest([slurm_seconds(r[2]) for r in rows])
    if request.time_s and wall is not None and request.time_s > wall:
        found.append(
            Finding(
                "resources.time",
                f"{format_slurm_time(request.time_s)} is over your association's MaxWall"
                f" {format_slurm_time(wall)}",
            )
        )
    found += tres_limits(
        request, [parse_tres(r[3]) for r in rows], "your association's MaxTRES", per_node=False
    )
    qos = (
        request.qos
        or only_one({r[5] for r in rows if r[5]})
        or only_one({q for r in rows for q in r[4].split(",") if q})
    )
    by_name = {r[0]: r for r in qos_rows}
    if qos and qos in by_name:
        row = by_name[qos]
        wall = slurm_seconds(row[1])
        if request.time_s and wall is not None and request.time_s > wall:
            found.append(
                Finding(
                    "resources.time",
                    f"{format_slurm_time(request.time_s)} is over QoS {qos}'s MaxWall"
                    f" {format_slurm_time(wall)}",
                )
            )
        found += tres_limits(request, [parse_tres(row[2])], f"QoS {qos}'s MaxTRES", per_node=False)
        found += tres_limits(
            request, [parse_tres(row[3])], f"QoS {qos}'s MaxTRESPerNode", per_node=True
        )
    return found, None
