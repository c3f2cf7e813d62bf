"""Copying what a job needs to the cluster: the code snapshot, the job folder (script,
provenance) and jobkit's own `train` package (the cluster needs no jobkit install).

Everything travels as paths relative to $JOBKIT_HOME, which map one to one under the
cluster's workdir (`snapshots/<tree>`, `jobs/<id>`, `lib`): rsync -R over the cluster's ssh
connection, or tar over ssh when rsync is missing on either side. Files arrive private
(group and others get no rights), as they are on the laptop.
"""

from __future__ import annotations

import shlex
import shutil
import subprocess
from collections.abc import Sequence
from pathlib import Path, PurePosixPath

from jobkit.core import private, proc
from jobkit.core.errors import JobkitError
from jobkit.remote.transport import Transport

LIB = "lib"
"""$JOBKIT_HOME/lib and <workdir>/lib: the packages the job imports from jobkit (train, and
jobkit itself for the job-side provenance record); on the job's PYTHONPATH."""
SHIP_TIMEOUT_S = 600.0
_NOT_FOUND = ("command not found", "not found")


def remote_path(transport: Transport, local: Path) -> str:
    """Where a path under $JOBKIT_HOME is on the cluster (under its workdir)."""
    from jobkit.registry.db import jobkit_home

    relative = Path(local).resolve().relative_to(jobkit_home().resolve())
    return str(PurePosixPath(transport.cluster.workdir, *relative.parts))


def remote_lib(transport: Transport) -> str:
    """The cluster's copy of jobkit's packages (the job's PYTHONPATH)."""
    return f"{transport.cluster.workdir}/{LIB}"


def stage_lib() -> Path:
    """$JOBKIT_HOME/lib with this jobkit's `train` and `jobkit` packages (sources only)."""
    import train
    from jobkit.registry.db import jobkit_home

    lib = jobkit_home() / LIB
    private.make_dir(lib)
    ignore = shutil.ignore_patterns("__pycache__", "*.pyc")
    jobkit_package = Path(__file__).resolve().parents[1]  # not `import jobkit`: the top layer
    for source in (Path(train.__file__ or "").parent, jobkit_package):
        shutil.copytree(source, lib / source.name, ignore=ignore, dirs_exist_ok=True)
    return lib


def ship(transport: Transport, paths: Sequence[Path], folders: Sequence[str] = ()) -> str:
    """Copy these $JOBKIT_HOME paths (and the staged lib) to the cluster, creating the
    cluster's `folders` (logs.dir) first; says how."""
    from jobkit.registry.db import jobkit_home

    home = jobkit_home().resolve()
    relative = [str(Path(p).resolve().relative_to(home)) for p in paths]
    relative.append(str(stage_lib().resolve().relative_to(home)))
    if shutil.which("rsync"):
        done = _rsync(transport, home, relative, folders)
        if done.returncode == 0:
            return "rsync"
        if not _rsync_missing_there(done):
            raise _failed(transport, "rsync", done)
    done = _tar(transport, home, relative, folders)
    if done.returncode != 0:
        raise _failed(transport, "tar over ssh", done)
    return "tar"


def _mkdir(transport: Transport, folders: Sequence[str]) -> str:
    """`mkdir -p WORKDIR FOLDERS...`, quoted."""
    return shlex.join(["mkdir", "-p", "--", transport.cluster.workdir, *folders])


def _rsync(
    transport: Transport, home: Path, relative: list[str], folders: Sequence[str]
) -> subprocess.CompletedProcess[str]:
    workdir = transport.cluster.workdir
    argv = [
        "rsync",
        "-a",
        "-R",
        "--chmod=go-rwx",
        "-e",
        shlex.join(transport.ssh_argv()),
        f"--rsync-path={_mkdir(transport, folders)} && rsync",
        *[f"{home}/./{path}" for path in relative],
        f"{transport.cluster.host}:{workdir}/",
    ]
    return _run(argv)


def _tar(
    transport: Transport, home: Path, relative: list[str], folders: Sequence[str]
) -> subprocess.CompletedProcess[str]:
    """`tar -cf - PATHS | ssh HOST 'umask 077; mkdir -p W && tar -xf - -C W && chmod'`
    (POSIX options only: the laptop's tar may be bsdtar; tar run by root keeps the archive's
    modes whatever the umask, so chmod -R go-rwx makes them private as rsync's --chmod)."""
    workdir = shlex.quote(transport.cluster.workdir)
    tops = shlex.join(dict.fromkeys(path.split("/")[0] for path in relative))
    remote = (
        f"umask 077; {_mkdir(transport, folders)} && tar -xf - -C {workdir}"
        f" && cd {workdir} && chmod go-rwx -- {tops} && chmod -R go-rwx -- {shlex.join(relative)}"
    )
    ssh = [*transport.ssh_argv(), transport.cluster.host, shlex.join(["sh", "-c", remote])]
    pack = subprocess.Popen(
        ["tar", "-cf", "-", "--", *relative],
        cwd=home,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    assert pack.stdout is not None
    try:
        done = subprocess.run(
            ssh,
            stdin=pack.stdout,
            capture_output=True,
            text=True,
            errors="replace",
            timeout=SHIP_TIMEOUT_S,
            check=False,
        )
    finally:
        pack.stdout.close()
        packed_err = pack.communicate()[1].decode(errors="replace")
    if pack.returncode != 0:
        return subprocess.CompletedProcess(ssh, pack.returncode, "", packed_err)
    return done


def _run(argv: list[str]) -> subprocess.CompletedProcess[str]:
    """rsync through proc: its timeout, and JOBKIT_PROC_LOG counts it among the round trips."""
    try:
        done = proc.run(argv, timeout=SHIP_TIMEOUT_S, check=False)
    except proc.SchedulerTimeout:
        return subprocess.CompletedProcess(argv, 124, "", f"timed out after {SHIP_TIMEOUT_S:g} s")
    return subprocess.CompletedProcess(argv, done.returncode, done.stdout, done.stderr)


def _rsync_missing_there(done: subprocess.CompletedProcess[str]) -> bool:
    """rsync ran here but the cluster has none (it then fails with 12 or 127)."""
    return done.returncode in (12, 127) and any(word in done.stderr for word in _NOT_FOUND)


def _failed(transport: Transport, how: str, done: subprocess.CompletedProcess[str]) -> JobkitError:
    from jobkit.core.display import first_line

    detail, _ = first_line(done.stderr or done.stdout)
    return JobkitError(
        f"cannot copy the job's files to cluster {transport.cluster.name}"
        f" ({transport.cluster.host}:{transport.cluster.workdir}) with {how}: exit"
        f" {done.returncode}: {detail or 'no message'}"
    )
