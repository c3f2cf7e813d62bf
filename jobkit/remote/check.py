"""`jobkit clusters check`: what the login node has, found in one ssh round trip.

The scheduler's commands, rsync and tar (how files travel), the cluster's Python (its
version) and whether the workdir can be written. Nothing is installed or left there.
"""

from __future__ import annotations

from dataclasses import dataclass

from jobkit.backends.registry import remote_commands
from jobkit.remote.transport import Transport

_PROBE = r"""
workdir=$1 python=$2; shift 2
for cmd in "$@"; do
  found=$(command -v "$cmd" 2>/dev/null) || found=
  printf 'command %s %s\n' "$cmd" "$found"
done
if [ -n "$python" ]; then
  version=$("$python" -c 'import sys; print("%d.%d.%d" % sys.version_info[:3])' 2>/dev/null)
  printf 'python %s\n' "${version:-}"
fi
if mkdir -p -- "$workdir" 2>/dev/null && [ -w "$workdir" ]; then
  echo "workdir writable"
else
  echo "workdir not-writable"
fi
"""

TRANSFER = ("rsync", "tar")


@dataclass(frozen=True)
class ClusterFacts:
    """What the probe found: command -> path ("" when missing), the Python's version."""

    commands: dict[str, str]
    python_version: str | None
    workdir_writable: bool

    def problems(self, backend: str, python: str | None) -> list[str]:
        """What stops jobs from running there, one line each."""
        found = []
        for cmd in remote_commands(backend):
            if not self.commands.get(cmd):
                found.append(f"{cmd} not found on the login node's PATH")
        if not self.commands.get("rsync") and not self.commands.get("tar"):
            found.append("neither rsync nor tar there: files cannot be copied")
        if python and not self.python_version:
            found.append(f"python {python} does not run there")
        if not self.workdir_writable:
            found.append("the workdir cannot be created or written")
        return found


def probe(transport: Transport) -> ClusterFacts:
    """One round trip: the commands, the Python's version, the workdir."""
    cluster = transport.cluster
    wanted = [*remote_commands(cluster.backend), *TRANSFER]
    done = transport.run_script(_PROBE, cluster.workdir, cluster.python or "", *wanted)
    commands: dict[str, str] = {}
    version: str | None = None
    writable = False
    for line in done.stdout.splitlines():
        kind, _, rest = line.partition(" ")
        if kind == "command":
            name, _, path = rest.partition(" ")
            commands[name] = path.strip()
        elif kind == "python":
            version = rest.strip() or None
        elif kind == "workdir":
            writable = rest.strip() == "writable"
    return ClusterFacts(commands, version, writable)
