"""`jobkit render SPEC --node-rank N`: the command a user runs by hand on node N (pure).

The job's environment (modules, venv, env.python, exported variables) and the launcher's line
with static rendezvous: --nnodes, --node-rank N, the master address and port. Launchers the
scheduler starts (srun, mpirun) have no such command.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from jobkit.core.errors import UsageError
from jobkit.render.engine import render
from jobkit.spec.derived import NODE_LAUNCHERS

if TYPE_CHECKING:
    from jobkit.spec.schema import JobSpec

TEMPLATE = "common/by-hand.sh.j2"
DEFAULT_PORT = 29500
"""torch's own default master port, when neither --port nor launch.master_port gives one."""


def default_master(spec: JobSpec) -> str | None:
    """Node 0's address where the spec names its hosts (Backend.spec_hosts: ssh.hosts[0]);
    None: the user must say."""
    from jobkit.backends.registry import backend_class

    hosts = backend_class(spec.backend).spec_hosts(spec)
    return hosts[0] if hosts else None


def node_script(
    spec: JobSpec,
    node_rank: int,
    master: str | None = None,
    port: int | None = None,
    template_dir: Path | None = None,
) -> str:
    """The bash for node `node_rank`; UsageError (one line) for a rank out of range or a
    launcher the scheduler starts."""
    launcher = spec.launch.launcher
    if launcher not in NODE_LAUNCHERS:
        raise UsageError(
            f"--node-rank: launcher {launcher} is started by the scheduler, one task per"
            f" process; by hand needs launcher {', '.join(NODE_LAUNCHERS)}"
        )
    nodes = spec.resources.nodes
    if not 0 <= node_rank < nodes:
        raise UsageError(
            f"--node-rank {node_rank}: the job has {nodes} node(s), so give 0 to {nodes - 1}"
        )
    if port is None:
        port = spec.launch.master_port if isinstance(spec.launch.master_port, int) else None
    static = spec.model_copy(update={"launch": spec.launch.model_copy(update={"rdzv": "static"})})
    extra = {
        "node_rank": node_rank,
        "by_hand_nodes": nodes,
        "master_addr": master or default_master(spec),
        "master_port": port or DEFAULT_PORT,
    }
    return render(static, template_dir, template_name=TEMPLATE, extra=extra)
