"""Slurm's pending-job reason codes in plain words, with what fixes each: data plus one
lookup, `explain(reason)` (pure; docs/why.md is the same table for people).

A reason is matched as Slurm prints it: an exact code (`Resources`), a code with details
after a comma (`ReqNodeNotAvail, UnavailableNodes:n1`), a family of limits by its parts
(`AssocGrpGRES`, `QOSMaxCpuPerUserLimit`: Assoc/QOS, Grp/Max/Min, the resource), or a
sentence Slurm writes instead of a code (`launch failed requeued held`). Anything else is
shown verbatim with a pointer to `man squeue`.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass

from jobkit.backends.waiting import Explanation, unknown_reason


@dataclass(frozen=True)
class Entry:
    """One row of the table: meaning and fix ({job}, {partition}, {qos} filled in)."""

    meaning: str
    fix: str
    never: bool = False


WAIT = "wait"
SHOW_ASSOC = (
    "`sacctmgr show assoc where user=$USER"
    " format=Account,Partition,QOS,GrpTRES,MaxTRES,MaxWall,MaxJobs`"
)
SHOW_QOS = (
    "`sacctmgr show qos {qos} format=Name,MaxWall,MaxTRES,MaxTRESPU,MaxJobsPU,GrpTRES,MinTRES`"
)
RESUBMIT = "cancel it (`jobkit cancel {job}`) and resubmit with "

REASONS: dict[str, Entry] = {
    "Resources": Entry(
        "the CPUs, memory, GPUs or nodes it asks for are in use by other jobs; it starts when"
        " enough are free",
        "wait; a shorter `--set resources.time=...` or fewer `resources.nodes` can let it start"
        " sooner (backfill fits short jobs into gaps)",
    ),
    "Priority": Entry(
        "jobs with a higher priority are ahead of it in the queue",
        "wait; `sprio -j {job}` shows its priority; a shorter `--set resources.time=...` can let"
        " backfill start it earlier",
    ),
    "Dependency": Entry(
        "it waits for the job(s) named in `scheduler.dependency` to reach the state it asks for",
        "wait for them (`squeue -j {job} -O Dependency` shows which); drop the dependency with"
        " `scontrol update jobid={job} dependency=`",
    ),
    "DependencyNeverSatisfied": Entry(
        "a job it depends on ended in a way that can no longer satisfy `scheduler.dependency`"
        " (e.g. afterok on a job that failed)",
        RESUBMIT + "a fixed `scheduler.dependency`, or `scontrol update jobid={job} dependency=`",
        never=True,
    ),
    "BeginTime": Entry(
        "it may not start before its begin time (sbatch --begin in `scheduler.extra`; Slurm also"
        " holds a requeued job for about 2 minutes this way)",
        "wait until its eligible time (`jobkit why {job}` shows it); `scontrol update"
        " jobid={job} starttime=now` starts it earlier",
    ),
    "JobHeldUser": Entry(
        "its owner held it (sbatch --hold or `scontrol hold`)",
        "`scontrol release {job}`",
    ),
    "JobHeldAdmin": Entry(
        "an administrator held it",
        "ask your administrators (`scontrol show job {job}` may say why)",
    ),
    "JobHoldMaxRequeue": Entry(
        "it was requeued more times than the cluster allows (MaxBatchRequeue) and is held",
        "find out why it keeps failing (`jobkit doctor {job}`), then `scontrol release {job}`",
        never=True,
    ),
    "QOSMaxWallDurationPerJobLimit": Entry(
        "its time limit is above its QOS's MaxWall",
        RESUBMIT + "`--set resources.time=...` at most the QOS's MaxWall (" + SHOW_QOS + "), or"
        " another `resources.qos`; or `scontrol update jobid={job} timelimit=...`",
        never=True,
    ),
    "AssocMaxWallDurationPerJobLimit": Entry(
        "its time limit is above its account association's MaxWall",
        RESUBMIT + "`--set resources.time=...` at most the MaxWall " + SHOW_ASSOC + " shows, or"
        " another `resources.account`; or `scontrol update jobid={job} timelimit=...`",
        never=True,
    ),
    "PartitionTimeLimit": Entry(
        "its time limit is above the partition's MaxTime",
        RESUBMIT + "`--set resources.time=...` at most the partition's MaxTime (`scontrol show"
        " partition {partition}`), or another `resources.partition`; or"
        " `scontrol update jobid={job} timelimit=...`",
        never=True,
    ),
    "PartitionNodeLimit": Entry(
        "the number of nodes it asks for is outside the partition's MinNodes..MaxNodes (or nodes"
        " it needs are down or drained)",
        RESUBMIT + "`--set resources.nodes=...` within the limits `scontrol show partition"
        " {partition}` shows, or another `resources.partition`",
        never=True,
    ),
    "PartitionDown": Entry(
        "its partition is down: no job in it starts until an administrator brings it back",
        "wait, or resubmit with another `resources.partition` (`sinfo -s` lists them)",
    ),
    "PartitionInactive": Entry(
        "its partition is inactive: no job in it starts until an administrator activates it",
        "wait, or resubmit with another `resources.partition` (`sinfo -s` lists them)",
    ),
    "PartitionConfig": Entry(
        "it asks for something its partition is not set up to give (e.g. GPUs or more memory"
        " than its nodes have)",
        RESUBMIT + "other `resources` or another `resources.partition` (`scontrol show"
        " partition {partition}`)",
        never=True,
    ),
    "ReqNodeNotAvail": Entry(
        "a node it requires is not available now: in use, reserved, down, drained or not"
        " responding",
        "wait; `sinfo -R` says why nodes are down; drop --nodelist/--exclude from"
        " `scheduler.extra` to let Slurm pick other nodes",
    ),
    "Reservation": Entry(
        "it waits for its advance reservation to start",
        "wait (`scontrol show reservation` shows when it starts)",
    ),
    "ReservationDeleted": Entry(
        "the reservation it asked for was deleted",
        RESUBMIT + "another reservation (or none) in `scheduler.extra`",
        never=True,
    ),
    "ReservationInvalid": Entry(
        "the reservation it asked for is not valid for it",
        RESUBMIT + "another reservation (or none) in `scheduler.extra`",
        never=True,
    ),
    "BadConstraints": Entry(
        "no node can satisfy its constraints (`resources.constraint`, or a combination of"
        " nodes, CPUs, memory and GPUs no node has)",
        RESUBMIT + "`--set resources.constraint=...` with features `sinfo -o '%N %f'` lists, or"
        " smaller `resources`",
        never=True,
    ),
    "Constraints": Entry(
        "no node can satisfy its constraints (`resources.constraint`)",
        RESUBMIT + "`--set resources.constraint=...` with features `sinfo -o '%N %f'` lists",
        never=True,
    ),
    "NodeDown": Entry(
        "a node it needs is down",
        "wait; `sinfo -R` says why; tell your administrators if it stays down",
    ),
    "InvalidAccount": Entry(
        "its account is not valid for you",
        RESUBMIT + "`--set resources.account=...` from " + SHOW_ASSOC,
        never=True,
    ),
    "InvalidQOS": Entry(
        "its QOS is not valid for you",
        RESUBMIT + "`--set resources.qos=...` from " + SHOW_ASSOC,
        never=True,
    ),
    "QOSNotAllowed": Entry(
        "its QOS may not be used with this partition or account",
        RESUBMIT + "another `resources.qos` or `resources.partition` (" + SHOW_ASSOC + ")",
        never=True,
    ),
    "AccountNotAllowed": Entry(
        "its account may not use this partition",
        RESUBMIT + "another `resources.account` or `resources.partition`",
        never=True,
    ),
    "MaxMemPerLimit": Entry(
        "the memory it asks for per CPU or node is above the partition's limit",
        RESUBMIT + "a smaller `resources.mem` (`scontrol show partition {partition}`)",
        never=True,
    ),
    "AssociationJobLimit": Entry(
        "your account association has as many jobs running as it may",
        "wait for your other jobs to end (" + SHOW_ASSOC + ")",
    ),
    "AssociationResourceLimit": Entry(
        "your account association uses all the resources it may",
        "wait for its other jobs to end (" + SHOW_ASSOC + ")",
    ),
    "AssociationTimeLimit": Entry(
        "your account association has used up its time",
        "ask your administrators, or use another `resources.account`",
    ),
    "QOSJobLimit": Entry(
        "its QOS has as many jobs running as it may",
        "wait for other jobs of the QOS to end (" + SHOW_QOS + ")",
    ),
    "QOSResourceLimit": Entry(
        "its QOS uses all the resources it may",
        "wait for other jobs of the QOS to end (" + SHOW_QOS + ")",
    ),
    "QOSTimeLimit": Entry(
        "its QOS has used up its time",
        "ask your administrators, or use another `resources.qos`",
    ),
    "QOSUsageThreshold": Entry(
        "its QOS's usage is above the threshold that lets new jobs start",
        "wait (usage decays over time), or use another `resources.qos`",
    ),
    "AccountingPolicy": Entry(
        "an accounting limit of its account or QOS stops it for now",
        "wait; " + SHOW_ASSOC + " shows the limits",
    ),
    "JobArrayTaskLimit": Entry(
        "its array already runs as many tasks at once as `scheduler.array`'s %N allows",
        "wait for the running tasks; `scontrol update jobid={job} arraytaskthrottle=N` raises"
        " the limit",
    ),
    "Licenses": Entry(
        "it waits for a license it asked for",
        "wait (`scontrol show licenses` shows what is free)",
    ),
    "Cleaning": Entry(
        "it was requeued and Slurm is still cleaning up its previous run",
        WAIT,
    ),
    "Prolog": Entry("its PrologSlurmctld program is still running", WAIT),
    "Configuring": Entry("its nodes are being booted or configured", WAIT),
    "FrontEndDown": Entry("no front-end node is up to run it", "wait; tell your administrators"),
    "SchedDefer": Entry("the scheduler deferred it (SchedulerParameters=defer)", WAIT),
    "FedJobLock": Entry("the federation's clusters are agreeing where to run it", WAIT),
    "BurstBufferResources": Entry("it waits for burst-buffer space", WAIT),
    "BurstBufferStageIn": Entry("its burst-buffer files are being staged in", WAIT),
    "PowerNotAvail": Entry("not enough power is available for it", WAIT),
    "PowerReserved": Entry("power is reserved for other jobs", WAIT),
    "WaitingForScheduling": Entry(
        "the scheduler has not looked at it yet", "wait a scheduling cycle"
    ),
    "None": Entry(
        "the scheduler has given no reason yet: it has not looked at it, or it is about to start",
        "wait a scheduling cycle",
    ),
}
"""Exact codes (Slurm's job_state_reason strings), with their meaning and fix."""

PHRASES: dict[str, Entry] = {
    "launch failed requeued held": Entry(
        "Slurm could not launch it on its node, requeued it and held it",
        "check `scontrol show job {job}` and the node (`sinfo -R`), then `scontrol release"
        " {job}`; tell your administrators if it repeats",
        never=True,
    ),
    "nodes required for job are down, drained or reserved": Entry(
        "nodes it could run on are down, drained, or reserved for jobs in higher-priority"
        " partitions",
        "wait; `sinfo -R` says why nodes are down; fewer `resources.nodes` or another"
        " `resources.partition` may start it sooner",
    ),
    "job's account not permitted": Entry(
        "its account may not use this partition",
        RESUBMIT + "another `resources.account` or `resources.partition`",
        never=True,
    ),
    "job's qos not permitted": Entry(
        "its QOS may not use this partition",
        RESUBMIT + "another `resources.qos` or `resources.partition`",
        never=True,
    ),
    "job held by user": Entry("its owner held it", "`scontrol release {job}`"),
}
"""Sentences Slurm writes in the reason field instead of a code (matched by prefix, any case)."""

_FAMILY = re.compile(
    r"^(?P<scope>Assoc|QOS|)(?P<kind>Grp|Max|Min)"
    r"(?P<what>Cpus?|CPUs?|Memory|Mem|Nodes?|GRES|SubmitJobs?|Jobs?|Wall|Billing|Energy"
    r"|License|BB|Unknown)(?P<rest>\w*)$"
)
_WHAT = {
    "cpu": ("CPUs", "`resources.cpus_per_task` or `resources.nodes`"),
    "mem": ("memory", "`resources.mem`"),
    "node": ("nodes", "`resources.nodes`"),
    "gres": ("GPUs (generic resources)", "`resources.gpus_per_node` or `resources.nodes`"),
    "job": ("running jobs", ""),
    "submitjob": ("queued jobs", ""),
    "wall": ("wall time", "`resources.time`"),
    "billing": ("billing units", "`resources`"),
    "energy": ("energy", "`resources`"),
    "license": ("licenses", "the licenses in `scheduler.extra`"),
    "bb": ("burst-buffer space", "the burst buffer in `scheduler.extra`"),
    "unknown": ("a resource", "`resources`"),
}


def _what_key(word: str) -> str:
    lowered = word.lower()
    if lowered in ("gres", "bb"):
        return lowered
    return "mem" if lowered == "memory" else lowered.removesuffix("s")


def family_entry(code: str) -> Entry | None:
    """The entry of an Assoc*/QOS* limit code, built from its parts; None if not one."""
    match = _FAMILY.match(code)
    if not match:
        return None
    scope, kind, rest = match["scope"], match["kind"], match["rest"]
    what, keys = _WHAT[_what_key(match["what"])]
    owner = "your account association" if scope == "Assoc" else "its QOS"
    show = SHOW_ASSOC if scope == "Assoc" else SHOW_QOS
    minutes = "Minutes" in rest
    if kind == "Min":
        return Entry(
            f"it asks for fewer {what} than {owner}'s minimum",
            RESUBMIT + f"more {what} ({keys}; {show})",
            never=True,
        )
    counts_jobs = what in ("running jobs", "queued jobs")
    if kind == "Grp" and counts_jobs:
        return Entry(
            f"{owner} already has as many {what} as its group limit allows",
            f"wait for some of them to end ({show})",
        )
    if kind == "Grp":
        if minutes and "Run" in rest:
            return Entry(
                f"{owner}'s running jobs together hold as many minutes of {what} as the"
                " group limit allows",
                f"wait for them to end ({show})",
            )
        if minutes:
            return Entry(
                f"{owner} has used up its budget of minutes of {what}; it starts only when the"
                " usage decays or an administrator raises the limit",
                f"ask your administrators, or use another account/QOS ({show})",
            )
        return Entry(
            f"{owner}'s jobs together already use all the {what} its group limit allows",
            f"wait for those jobs to end, or ask for less ({keys}; {show})",
        )
    if counts_jobs and not rest.startswith("PerJob"):
        whose = "your account" if "PerAccount" in rest else "you"
        return Entry(
            f"{whose} already {'has' if whose != 'you' else 'have'} as many {what} as"
            f" {owner}'s limit allows",
            f"wait for some of them to end ({show})",
        )
    if "PerUser" in rest or "PerAccount" in rest:
        whose = "your account's" if "PerAccount" in rest else "your"
        return Entry(
            f"{whose} other jobs already use all the {what} {owner}'s limit allows at once",
            f"wait for them to end, or ask for less ({keys}; {show})",
        )
    per = "per node" if "PerNode" in rest else "per job"
    if minutes:
        what = f"{what} x time"
        keys = f"{keys} or `resources.time`"
    return Entry(
        f"it asks for more {what} {per} than {owner}'s limit allows",
        RESUBMIT + f"less: {keys} ({show})",
        never=True,
    )


def _split(reason: str) -> tuple[str, str]:
    """`ReqNodeNotAvail, UnavailableNodes:n1` -> (`ReqNodeNotAvail`, `UnavailableNodes:n1`)."""
    code, _, details = reason.partition(",")
    return code.strip(), details.strip()


def lookup(reason: str) -> Entry | None:
    """The table's entry for a reason as Slurm printed it; None when unknown."""
    text = " ".join(reason.split())
    code, _ = _split(text)
    found = REASONS.get(code) or family_entry(code)
    if found is not None:
        return found
    lowered = text.lower()
    for phrase, entry in PHRASES.items():
        if lowered.startswith(phrase):
            return entry
    return None


def explain(reason: str, facts: Mapping[str, str | None] | None = None) -> Explanation:
    """A reason in plain words with its fix; facts (`job`, `partition`, `qos`) fill in the
    commands (defaults ID, PARTITION, QOS). An unknown reason is kept verbatim."""
    text = " ".join(reason.split())
    entry = lookup(text)
    if entry is None:
        return unknown_reason(text)
    values = {"job": "ID", "partition": "PARTITION", "qos": "QOS"}
    values.update({k: v for k, v in (facts or {}).items() if v})
    meaning = entry.meaning
    code, details = _split(text)
    if details and code in REASONS:
        meaning = f"{meaning} ({details})"
    return Explanation(
        code=text,
        meaning=meaning,
        fix=entry.fix.format_map(values),
        never=entry.never,
    )
