"""The Slurm status queries of a cluster's jobs, fetched together (remote/query.py).

They are word for word what SlurmBackend's poll runs (its squeue for every job, its sacct
for those squeue does not settle), sacct here asked for all of them: Slurm's poll then
finds its own two commands already answered (transport.ClusterRoute: a `--jobs=` subset
is served from the whole). Should SlurmBackend change its words, its poll asks over ssh
again: slower (tests/remote count the round trips), never wrong.
"""

from __future__ import annotations

from collections.abc import Sequence

from jobkit.backends.base import TrackedJob


def status_queries(jobs: Sequence[TrackedJob]) -> list[list[str]]:
    """[squeue argv, sacct argv] for these jobs (one cluster, no federation)."""
    from jobkit.backends.slurm.parse import SACCT_FIELDS, SQUEUE_FORMAT, SlurmId

    numbers = list(dict.fromkeys(SlurmId.parse(job.scheduler_id).base for job in jobs))
    joined = ",".join(numbers)
    squeue = ["squeue", "--noheader", "--array", "--states=all"]
    squeue += [f"--jobs={joined}", f"--Format={SQUEUE_FORMAT}"]
    sacct = ["sacct", "--noheader", "--parsable2", "--duplicates"]
    sacct += [f"--jobs={joined}", f"--format={SACCT_FIELDS}"]
    return [squeue, sacct]
