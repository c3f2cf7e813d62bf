"""One multiplexed OpenSSH connection per cluster, and commands run through it.

The ssh argv is the ssh backend's (backends/ssh.py ssh_command: BatchMode, ConnectTimeout),
with ControlMaster=auto and ControlPersist, the ControlPath in a private 0700 folder: the
first command logs in (once, for a 2FA login too: `jobkit clusters check --login`), later
ones reuse that connection. Nothing else is overridden: ~/.ssh/config's User, ProxyJump,
keys and StrictHostKeyChecking apply. A remote command is one argument, `sh -c SCRIPT`
quoted with shlex, whatever the login shell; every word a user gave is a quoted word.
Nothing here is Linux-only (macOS laptops): no /proc, only POSIX and OpenSSH options.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import shlex
import stat
import tempfile
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from jobkit.core import private, proc
from jobkit.core.errors import JobkitError, SchedulerError
from jobkit.remote.clusters import Cluster

CONTROL_PERSIST_S = 600
"""How long the master connection stays after its last use (a later verb reuses it)."""
SOCKET_PATH_MAX = 100
"""A Unix socket path is at most 104 bytes on macOS (108 on Linux): %C is 40 more."""
REMOTE_TIMEOUT_S = 120.0
_HOST_KEY_WORDS = ("REMOTE HOST IDENTIFICATION HAS CHANGED", "Host key verification failed")
SSH_FAILED = 255
"""ssh's own exit code for a failure of the connection (not of the remote command)."""


class HostKeyRefused(SchedulerError):
    """The cluster's host key is not the one known: refused, in one line."""

    def show(self) -> str:
        return self.reason or "host key refused"


class Unreachable(SchedulerError):
    """ssh could not reach the cluster (or lost the connection): nothing is known of it."""

    def show(self) -> str:
        return self.reason or "unreachable"


def control_dir() -> Path:
    """The private folder of the master sockets: $JOBKIT_HOME/ssh, or (when that path is
    too long for a socket) a 0700 folder of ours in the temporary directory."""
    from jobkit.registry.db import jobkit_home

    home = jobkit_home()
    folder = home / "ssh"
    if len(str(folder)) + 41 <= SOCKET_PATH_MAX:
        private.make_dir(folder)
        os.chmod(folder, private.DIR_MODE)
        return folder
    digest = hashlib.sha256(str(home.resolve()).encode()).hexdigest()[:10]
    short = Path(tempfile.gettempdir()) / f"jobkit-ssh-{os.getuid()}-{digest}"
    with contextlib.suppress(FileExistsError):
        short.mkdir(mode=0o700)
    info = short.lstat()
    if not stat.S_ISDIR(info.st_mode) or info.st_uid != os.getuid():
        raise JobkitError(f"{short} is not a folder of this user's: ssh sockets cannot go there")
    os.chmod(short, 0o700)
    return short


@dataclass(frozen=True)
class Transport:
    """ssh to one cluster's login node, through its one master connection."""

    cluster: Cluster
    timeout_s: float = REMOTE_TIMEOUT_S

    def ssh_argv(self, *, interactive: bool = False) -> list[str]:
        """`ssh -o ControlMaster=auto ... -o BatchMode=yes ...` (BatchMode=no: a login that
        may ask for a password or a second factor)."""
        from jobkit.backends.ssh import ssh_command
        from jobkit.backends.ssh_options import Ssh

        options = [
            "ControlMaster=auto",
            f"ControlPersist={CONTROL_PERSIST_S}",
            f"ControlPath={control_dir()}/%C",
            "ServerAliveInterval=15",
            "ServerAliveCountMax=4",
        ]
        if interactive:
            options.insert(0, "BatchMode=no")
        return ssh_command(Ssh.model_construct(options=options, port=None, user=None))

    def command(
        self, argv: Sequence[str], env: Mapping[str, str] | None = None, cwd: str | None = None
    ) -> str:
        """The remote command line: `sh -c 'cd DIR && env K=V ARGV'`, every word quoted."""
        words = shlex.join(argv)
        if env:
            words = f"env {' '.join(shlex.quote(f'{k}={v}') for k, v in env.items())} {words}"
        if cwd:
            words = f"cd {shlex.quote(cwd)} && exec {words}"
        return shlex.join(["sh", "-c", words])

    def local_argv(
        self, argv: Sequence[str], env: Mapping[str, str] | None = None, cwd: str | None = None
    ) -> list[str]:
        """The local ssh command that runs argv on the login node."""
        return [*self.ssh_argv(), self.cluster.host, self.command(argv, env, cwd)]

    def run_script(
        self, script: str, *args: str, input: str | None = None, check: bool = True
    ) -> proc.Completed:
        """Run a POSIX sh script on the login node (`sh -c SCRIPT jobkit ARGS`): one round
        trip; Unreachable / HostKeyRefused when ssh itself failed."""
        argv = [
            *self.ssh_argv(),
            self.cluster.host,
            shlex.join(["sh", "-c", script, "jobkit", *args]),
        ]
        done = proc.run(argv, timeout=self.timeout_s, input=input, check=False)
        self.settle(done)
        if check and done.returncode != 0:
            raise SchedulerError(argv, done.returncode, done.stdout, done.stderr)
        return done

    def settle(self, done: proc.Completed) -> None:
        """Raise HostKeyRefused or Unreachable when ssh failed; note a success."""
        if done.returncode != SSH_FAILED:
            reachable(self.cluster.name)
            return
        stderr = done.stderr
        if any(word in stderr for word in _HOST_KEY_WORDS):
            raise HostKeyRefused(
                done.argv,
                done.returncode,
                done.stdout,
                stderr,
                reason=f"cluster {self.cluster.name}: the host key of {self.cluster.host} is"
                " not the one ~/.ssh/known_hosts knows: refused (if its admins changed it,"
                f" check the new key, then `ssh-keygen -R {self.cluster.host}`)",
            )
        since = unreachable_since(self.cluster.name)
        detail = _last_line(stderr) or "ssh failed"
        raise Unreachable(
            done.argv,
            done.returncode,
            done.stdout,
            stderr,
            reason=f"cluster {self.cluster.name} ({self.cluster.host}) unreachable since"
            f" {time.strftime('%Y-%m-%d %H:%M:%S', time.localtime(since))}: {detail}",
        )


@dataclass
class ClusterRoute:
    """proc.Route for one cluster: commands run on its login node; `answers` are outputs
    already fetched in one batched round trip (remote/query.py)."""

    transport: Transport
    answers: list[proc.Completed] = field(default_factory=list)

    def answer(self, argv: list[str]) -> proc.Completed | None:
        for known in self.answers:
            if _same_query(known.argv, argv):
                return known
        return None

    def wrap(self, argv: list[str], env: Mapping[str, str] | None, cwd: str | None) -> list[str]:
        return self.transport.local_argv(argv, env, cwd)

    def settle(self, done: proc.Completed) -> None:
        self.transport.settle(done)


def _same_query(fetched: list[str], asked: list[str]) -> bool:
    """`asked` is `fetched` for a subset of its jobs: the same words but `--jobs=`, whose
    ids are among the fetched ones (squeue and sacct print one block per job)."""
    if len(fetched) != len(asked) or fetched[0] != asked[0]:
        return False
    for have, want in zip(fetched, asked, strict=True):
        if have.startswith("--jobs=") and want.startswith("--jobs="):
            if not set(want[7:].split(",")) <= set(have[7:].split(",")):
                return False
        elif have != want:
            return False
    return True


def _state_file(cluster: str) -> Path:
    return control_dir() / f"{cluster}.unreachable"


def unreachable_since(cluster: str) -> float:
    """When the cluster was first found unreachable in the current run of failures."""
    path = _state_file(cluster)
    try:
        return float(path.read_text().strip())
    except (OSError, ValueError):
        now = time.time()
        private.write_file(path, f"{now}\n")
        return now


def reachable(cluster: str) -> None:
    """The cluster answered: the next failure starts a new `unreachable since`."""
    with contextlib.suppress(FileNotFoundError):
        _state_file(cluster).unlink()


def _last_line(text: str) -> str:
    from jobkit.core.display import printable

    lines = [line.strip() for line in text.splitlines() if line.strip()]
    return printable(lines[-1]) if lines else ""
