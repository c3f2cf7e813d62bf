"""`jobkit submit SPEC --on CLUSTER`: the spec rendered with the cluster's facts, the job
recorded here as `slurm@<cluster>`, its files copied there and sbatch run there.

The cluster's facts go in as `--set` layers under the user's own: backend, env.python, its
defaults, and PYTHONPATH naming the cluster's copy of jobkit's `train` package (so the
cluster needs nothing of jobkit installed). The code is frozen here, from the laptop's git
work tree, exactly as for a local submission (docs/provenance.md); then the plan's
submission folder becomes the cluster's workdir.
"""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING

from jobkit.core.errors import UsageError
from jobkit.remote.clusters import Cluster

if TYPE_CHECKING:
    from jobkit.manager.submit import Plan
    from jobkit.registry.store import JobRecord, Store
    from jobkit.spec.load import LoadedSpec


def cluster_sets(cluster: Cluster, user_backend: str | None) -> list[str]:
    """The `--set` layers that put the cluster's facts under the user's own --set."""
    from jobkit.remote.ship import LIB

    if user_backend is not None and user_backend != cluster.backend:
        raise UsageError(
            f"--backend {user_backend} with --on {cluster.name}: that cluster runs"
            f" {cluster.backend} (clusters.yaml)"
        )
    return [*cluster.default_sets(), f"env.vars.PYTHONPATH={cluster.workdir}/{LIB}"]


def remote_plan(plan: Plan, loaded: LoadedSpec, cluster: Cluster) -> tuple[Plan, str | None]:
    """The plan with its code frozen here, then made the cluster's: submitted from its
    workdir, recorded as `slurm@<cluster>`; and the note when the code cannot be frozen."""
    from jobkit.manager.prepare import freeze_code
    from jobkit.remote.backend import remote_name

    frozen, note = freeze_code(plan, loaded)
    return replace(frozen, workdir=Path(cluster.workdir), backend=remote_name(cluster)), note


def submit_remote(store: Store, plan: Plan) -> JobRecord:
    """Record, copy, submit (manager/submit.py's pipeline with the remote backend)."""
    from jobkit.manager.submit import submit

    return submit(store, plan)
