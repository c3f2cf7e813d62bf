"""Slurm's pending-job reasons as data: each exact code and each sentence Slurm writes
instead of one, with its meaning and fix (docs/why.md is the same table for people;
reasons.py looks a reason up here)."""

from __future__ import annotations

from dataclasses import dataclass


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
