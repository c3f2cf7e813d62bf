"""`slurm@<cluster>`: the Slurm backend with every command run on the cluster's login node.

The scheduler logic is SlurmBackend's, unchanged: each method runs inside
`proc.routed(ClusterRoute)`, so its sbatch, squeue, sacct and scancel go through the
cluster's one ssh connection (remote/transport.py). Two things are this module's own:
submit first copies the job's files there (remote/ship.py) and gives the scheduler the
cluster's paths; poll fetches squeue and sacct for all of the cluster's jobs in ONE round
trip (remote/query.py), which SlurmBackend's own poll then reads as if it had asked.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import replace
from pathlib import Path, PurePosixPath
from typing import TYPE_CHECKING

from jobkit.backends.base import Observation, SubmitRequest, Submitted, TrackedJob
from jobkit.backends.slurm.backend import SlurmBackend
from jobkit.core import proc
from jobkit.remote.clusters import Cluster, get_cluster
from jobkit.remote.transport import ClusterRoute, Transport

if TYPE_CHECKING:
    from jobkit.backends.waiting import WaitInfo
    from jobkit.core.usage import Usage
    from jobkit.spec.schema import JobSpec

CLUSTER_KEY = "cluster"
"""extra key of a remote job's row: the cluster's name (its backend is `slurm@<name>`)."""


def remote_backend(name: str) -> RemoteSlurmBackend:
    """The backend of a `slurm@<cluster>` row or plan (backends/registry.py get_backend)."""
    scheduler, _, cluster = name.partition("@")
    found = get_cluster(cluster)
    if scheduler != found.backend:
        from jobkit.core.errors import JobkitError

        raise JobkitError(
            f"cluster {cluster} now uses backend {found.backend}, this job {scheduler}:"
            " change clusters.yaml back to follow it"
        )
    return RemoteSlurmBackend(found)


def remote_name(cluster: Cluster) -> str:
    """`slurm@mycluster`: the registry's backend name of the cluster's jobs."""
    return f"{cluster.backend}@{cluster.name}"


class RemoteSlurmBackend(SlurmBackend):
    """Slurm on a cluster reached over ssh."""

    def __init__(self, cluster: Cluster) -> None:
        self.cluster = cluster
        self.transport = Transport(cluster)

    @contextmanager
    def _there(self, answers: Sequence[proc.Completed] = ()) -> Iterator[None]:
        with proc.routed(ClusterRoute(self.transport, list(answers))):
            yield

    def submit(self, request: SubmitRequest) -> Submitted:
        """Copy the code snapshot, the job folder and jobkit's packages, then sbatch there
        (in the cluster's workdir, with the cluster's paths)."""
        from jobkit.remote.ship import remote_path, ship

        shipped = [request.job_dir]
        if request.code_dir is not None:
            shipped.append(_snapshot_root(request.code_dir))
        logs_dir = PurePosixPath(self.cluster.workdir, request.spec.logs.dir)
        ship(self.transport, shipped, [str(logs_dir)])

        def there(path: Path | None) -> Path | None:
            return None if path is None else Path(remote_path(self.transport, path))

        job_dir = Path(remote_path(self.transport, request.job_dir))
        remote = replace(
            request,
            job_dir=job_dir,
            script_path=job_dir / request.script_path.name,
            workdir=Path(self.cluster.workdir),
            code_dir=there(request.code_dir),
            provenance_file=there(request.provenance_file),
        )
        with self._there():
            submitted = super().submit(remote)
        return replace(submitted, extra={**submitted.extra, CLUSTER_KEY: self.cluster.name})

    def submit_extra(self, request: SubmitRequest, scheduler_id: str) -> dict[str, str]:
        """Slurm's facts and the cluster's name (an adopted job gets it too)."""
        return {**super().submit_extra(request, scheduler_id), CLUSTER_KEY: self.cluster.name}

    def poll(self, jobs: Sequence[TrackedJob]) -> dict[str, Observation]:
        """squeue and sacct of all these jobs in one ssh round trip, read by Slurm's poll."""
        from jobkit.remote.query import run_batched
        from jobkit.remote.slurm_queries import status_queries

        answers = run_batched(self.transport, status_queries(jobs))
        with self._there(answers):
            return super().poll(jobs)

    def cancel(self, jobs: Sequence[TrackedJob]) -> None:
        """scancel on the login node."""
        with self._there():
            super().cancel(jobs)

    def find_lost(
        self, requests: Mapping[str, SubmitRequest | None], since: float
    ) -> dict[str, str]:
        """Jobs by their submission token (squeue, then sacct) on the login node."""
        with self._there():
            return super().find_lost(requests, since)

    def explain_waiting(self, jobs: Sequence[TrackedJob]) -> dict[str, WaitInfo]:
        """`jobkit why`: Slurm's squeue and sacct on the login node."""
        with self._there():
            return super().explain_waiting(jobs)

    def usage(self, jobs: Sequence[TrackedJob]) -> dict[str, Usage]:
        """`jobkit report`: one sacct on the login node."""
        with self._there():
            return super().usage(jobs)

    def on_node_argv(
        self, job: TrackedJob, node: str, node_index: int | None, argv: Sequence[str]
    ) -> list[str] | None:
        """`jobkit doctor`'s py-spy dumps: Slurm's `srun --overlap` run on the login node,
        through the connection (ssh ... sh -c '<srun ...>'); run in parallel per node."""
        inner = super().on_node_argv(job, node, node_index, argv)
        return None if inner is None else self.transport.local_argv(inner)

    def usable_nodes(self, spec: JobSpec) -> tuple[str, ...] | None:
        """sinfo on the login node (bad nodes left out: docs/nodes.md)."""
        with self._there():
            return super().usable_nodes(spec)


def _snapshot_root(code_dir: Path) -> Path:
    """$JOBKIT_HOME/snapshots/<tree> of a code folder inside it (the whole tree is shipped:
    the job's working folder may be a subfolder of the repository)."""
    from jobkit.provenance.snapshot import snapshots_dir

    store = snapshots_dir().resolve()
    relative = code_dir.resolve().relative_to(store)
    return store / relative.parts[0]
