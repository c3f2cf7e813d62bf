"""A remote job's files, copied to the laptop for the verbs that read them (logs, plot,
doctor, report): its .out/.err and its run folder without checkpoints, under
$JOBKIT_HOME/remote/<cluster>/ at their cluster path, in one round trip.

`local_view(record)` is the record with its paths pointing at those copies, so every
reader of files (logs/files.py, plot/, doctor/) works on it unchanged. Copies are made in
place (rsync --inplace), so `jobkit logs -f` reading a copy sees it grow like the file.
"""

from __future__ import annotations

import functools
import shlex
import shutil
import subprocess
from collections.abc import Sequence
from pathlib import Path, PurePosixPath
from typing import TYPE_CHECKING

from jobkit.core import private, proc
from jobkit.core.conventions import CHECKPOINTS_DIR
from jobkit.core.errors import JobkitError
from jobkit.remote.transport import Transport

if TYPE_CHECKING:
    from jobkit.registry.record import JobRecord

MIRROR = "remote"
FETCH_TIMEOUT_S = 300.0
_PARTIAL = (23, 24)
"""rsync: some files were missing (not written yet) or vanished: the rest came."""
PATH_KEYS = ("out", "err", "run_dir")


def is_remote(record: JobRecord) -> bool:
    """A job submitted with --on (its backend is `slurm@<cluster>`)."""
    return "@" in record.backend


def cluster_of(record: JobRecord) -> str:
    return record.backend.partition("@")[2]


def mirror_root(cluster: str) -> Path:
    """$JOBKIT_HOME/remote/<cluster>: the cluster's files as copied here."""
    from jobkit.registry.db import jobkit_home

    return jobkit_home() / MIRROR / cluster


def local_path(cluster: str, remote: str) -> str:
    """Where the copy of a cluster path is here."""
    return str(mirror_root(cluster) / str(PurePosixPath(remote)).lstrip("/"))


def cluster_path(cluster: str, path: str) -> str:
    """The cluster's path of a copy here (a path that is not a copy: as it is)."""
    root = mirror_root(cluster)
    try:
        return "/" + str(PurePosixPath(Path(path).relative_to(root)))
    except ValueError:
        return path


def local_view(record: JobRecord, *, fetch: bool = True) -> JobRecord:
    """The record with its files' paths on their copies here (fetched first)."""
    if not is_remote(record) or not record.log_paths:
        return record
    cluster = cluster_of(record)
    if fetch:
        fetch_files([record])
    paths = {
        key: local_path(cluster, cluster_path(cluster, value)) if key in PATH_KEYS else value
        for key, value in record.log_paths.items()
    }
    extra = dict(record.extra)
    if "run_dir" in extra:
        extra["run_dir"] = local_path(cluster, cluster_path(cluster, str(extra["run_dir"])))
    return record.with_columns({"log_paths": paths, "extra": extra})


def fetch_files(records: Sequence[JobRecord]) -> None:
    """Copy the remote jobs' files here: one round trip per cluster."""
    from jobkit.remote.clusters import get_cluster

    by_cluster: dict[str, list[str]] = {}
    for record in records:
        if is_remote(record):
            name = cluster_of(record)
            wanted = by_cluster.setdefault(name, [])
            for key in PATH_KEYS:
                if record.log_paths.get(key):
                    wanted.append(cluster_path(name, str(record.log_paths[key])))
    for name, paths in by_cluster.items():
        transport = Transport(get_cluster(name))
        root = mirror_root(name)
        private.make_dir(root)
        _fetch(transport, sorted(set(paths)), root)


def _fetch(transport: Transport, paths: list[str], root: Path) -> None:
    if shutil.which("rsync"):
        done = _run(_rsync_argv(transport, paths, root))
        if done.returncode == 0 or done.returncode in _PARTIAL:
            return
        if done.returncode == 255:  # ssh itself: say it the transport's way
            transport.settle(_completed(done))
    packed = _tar(transport, paths, root)
    if packed.returncode != 0:
        from jobkit.core.display import first_line

        text = packed.stderr or packed.stdout
        detail, _ = first_line(text.decode(errors="replace") if isinstance(text, bytes) else text)
        raise JobkitError(
            f"cannot copy the job's files from cluster {transport.cluster.name}: exit"
            f" {packed.returncode}: {detail or 'no message'}"
        )


def _rsync_argv(transport: Transport, paths: list[str], root: Path) -> list[str]:
    """`rsync -a -R --inplace` of the remote paths into root (their absolute paths kept)."""
    host = transport.cluster.host
    protect = ["--protect-args"] if _rsync_protects_args() else []
    sources = [f"{host}:{paths[0]}", *[f":{p}" for p in paths[1:]]]
    if not protect:
        sources = [f"{host}:{shlex.quote(paths[0])}", *[f":{shlex.quote(p)}" for p in paths[1:]]]
    return [
        "rsync",
        "-a",
        "-R",
        "--inplace",
        "--chmod=go-rwx",
        f"--exclude={CHECKPOINTS_DIR}/",
        *protect,
        "-e",
        shlex.join(transport.ssh_argv()),
        *sources,
        f"{root}/",
    ]


@functools.cache
def _rsync_protects_args() -> bool:
    """rsync 3 (`--protect-args`); macOS's old rsync 2.6.9 has not: paths are quoted."""
    try:
        done = subprocess.run(
            ["rsync", "--version"], capture_output=True, text=True, timeout=10, check=False
        )
    except (OSError, subprocess.TimeoutExpired):
        return False
    words = done.stdout.split()
    version = words[2] if len(words) > 2 and words[0] == "rsync" else "0"
    return version.split(".")[0].isdigit() and int(version.split(".")[0]) >= 3


def _tar(transport: Transport, paths: list[str], root: Path) -> subprocess.CompletedProcess[bytes]:
    """`ssh HOST 'cd / && tar -cf - PATHS'` (those that exist, checkpoints left out) into
    `tar -xf - -C root` here."""
    script = (
        "cd / || exit 1\n"
        'n=$#; for p in "$@"; do [ -e "$p" ] && set -- "$@" "${p#/}"; done; shift "$n"\n'
        '[ "$#" -gt 0 ] || exit 0\n'
        f'exec tar -cf - --exclude={CHECKPOINTS_DIR} -- "$@"'
    )
    remote = shlex.join(["sh", "-c", script, "jobkit", *paths])
    ssh = [*transport.ssh_argv(), transport.cluster.host, remote]
    try:
        fetched = subprocess.run(
            ssh, stdin=subprocess.DEVNULL, capture_output=True, timeout=FETCH_TIMEOUT_S, check=False
        )
    except subprocess.TimeoutExpired:
        return subprocess.CompletedProcess(ssh, 124, b"", b"timed out")
    if fetched.returncode != 0 or not fetched.stdout:
        return fetched
    return subprocess.run(
        ["tar", "-xf", "-", "-C", str(root)],
        input=fetched.stdout,
        capture_output=True,
        timeout=FETCH_TIMEOUT_S,
        check=False,
    )


def _run(argv: list[str]) -> subprocess.CompletedProcess[str]:
    """rsync through proc: its timeout, and JOBKIT_PROC_LOG counts it among the round trips."""
    try:
        done = proc.run(argv, timeout=FETCH_TIMEOUT_S, check=False)
    except proc.SchedulerTimeout:
        return subprocess.CompletedProcess(argv, 124, "", f"timed out after {FETCH_TIMEOUT_S:g} s")
    return subprocess.CompletedProcess(argv, done.returncode, done.stdout, done.stderr)


def _completed(done: subprocess.CompletedProcess[str]) -> proc.Completed:
    return proc.Completed(list(done.args), done.returncode, done.stdout, done.stderr, 0.0)
