"""`jobkit shell SPEC --on CLUSTER`: the allocation asked for on the login node, with a
terminal, through the cluster's one connection (`ssh -t`, the ControlMaster's).

The shell's rc file holds the job's environment (env.vars included), so it never travels in
a command line (another user on the login node could read it in `ps`): it goes first, on
stdin, into a file only the user can read in the cluster's workdir; the interactive command
reads it into JOBKIT_SHELL_RC (what srun passes to the node) and removes it before salloc.
"""

from __future__ import annotations

import shlex
from collections.abc import Sequence

from jobkit.core.errors import JobkitError
from jobkit.remote.transport import Transport

_STAGE = r"""
umask 077
mkdir -p -- "$1" || exit 1
rc=$(mktemp "$1/.jobkit-shell-rc.XXXXXX") || exit 1
cat > "$rc" || exit 1
printf '%s\n' "$rc"
"""

_OPEN = r"""
cd -- "$1" || exit 1
JOBKIT_SHELL_RC=$(cat -- "$2") || exit 1
rm -f -- "$2"
export JOBKIT_SHELL_RC
shift 2
exec "$@"
"""


def stage_rc(transport: Transport, rc: str) -> str:
    """Write the rc text into a private file in the cluster's workdir; its path there."""
    done = transport.run_script(_STAGE, transport.cluster.workdir, input=rc)
    path = done.stdout.strip()
    if not path.startswith(transport.cluster.workdir + "/"):
        raise JobkitError(f"shell: cluster {transport.cluster.name}: no rc file made ({path!r})")
    return path


def terminal_argv(transport: Transport, rc_path: str, argv: Sequence[str]) -> list[str]:
    """`ssh -t HOST sh -c '<read the rc, remove it, exec ARGV>'` from the cluster's workdir."""
    words = ["sh", "-c", _OPEN, "jobkit-shell", transport.cluster.workdir, rc_path, *argv]
    return [*transport.ssh_argv(), "-t", transport.cluster.host, shlex.join(words)]
