"""The code snapshot a job runs from (docs/provenance.md, "Frozen code").

The work tree's tracked files with their uncommitted changes (and, asked for, its untracked
files) are staged in a temporary copy of the index and written as a git tree; the tree's hash
names the snapshot, `$JOBKIT_HOME/snapshots/<tree>`, filled once by `git archive` and shared
by every submission of the same code (a sweep's tasks, a run's attempts, a rerun). The folder
appears by one rename, so a snapshot that exists is whole.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import tempfile
from dataclasses import dataclass
from pathlib import Path

from jobkit.core import private
from jobkit.core.display import printable
from jobkit.core.errors import JobkitError
from jobkit.provenance.git import GIT_TIMEOUT_S, git, work_tree

SNAPSHOTS = "snapshots"
"""The folder of snapshots under $JOBKIT_HOME."""
BIGGEST_NAMED = 3


@dataclass(frozen=True)
class Snapshot:
    """A snapshot on disk and where the submit folder is in it."""

    tree: str
    """The git tree the snapshot holds (its name)."""
    root: Path
    """$JOBKIT_HOME/snapshots/<tree>: the work tree's top."""
    code_dir: Path
    """The snapshot's copy of the submit folder: the job's working folder."""
    size: int
    """Bytes of its files."""
    top: Path
    """The user's work tree it was taken from."""


def snapshots_dir() -> Path:
    """Where snapshots are kept: $JOBKIT_HOME/snapshots."""
    from jobkit.registry.db import jobkit_home

    return jobkit_home() / SNAPSHOTS


def take_snapshot(folder: Path, *, include_untracked: bool, max_bytes: int) -> Snapshot:
    """Snapshot the work tree `folder` is in (NotInGit outside one); a tree over `max_bytes`
    is refused in one line naming its biggest files."""
    top, index = work_tree(folder)
    tree = stage_tree(top, index, include_untracked=include_untracked)
    sizes = tree_sizes(top, tree)
    total = sum(size for size, _ in sizes)
    if total > max_bytes:
        raise JobkitError(too_big(total, max_bytes, sizes))
    root = materialise(top, tree, snapshots_dir())
    inside = folder.resolve().relative_to(top.resolve())
    return Snapshot(tree=tree, root=root, code_dir=root / inside, size=total, top=top)


def stage_tree(top: Path, index: Path, *, include_untracked: bool) -> str:
    """The tree of HEAD plus the work tree's changes, staged in a temporary copy of the
    index (its stat cache makes `git add` quick); the user's index is only read."""
    with tempfile.TemporaryDirectory(prefix="jobkit-index-") as scratch:
        temp_index = Path(scratch) / "index"
        if index.exists():  # copy2 keeps its mtime: entries as new as it stay "racy", and
            shutil.copy2(index, temp_index)  # git re-reads them instead of trusting the stat
        env = {"GIT_INDEX_FILE": str(temp_index)}
        git(top, "add", "-A" if include_untracked else "-u", "--", ":/", env=env)
        return git(top, "write-tree", env=env).strip()


def tree_sizes(top: Path, tree: str) -> list[tuple[int, str]]:
    """(bytes, path) of every file in the tree, biggest first."""
    out = git(top, "ls-tree", "-r", "-l", "-z", tree)
    sizes: list[tuple[int, str]] = []
    for entry in out.split("\0"):
        meta, _, path = entry.partition("\t")
        fields = meta.split()
        if len(fields) == 4 and fields[3].isdigit():
            sizes.append((int(fields[3]), path))
    return sorted(sizes, reverse=True)


def format_bytes(size: int) -> str:
    """1.5 GB, 120.0 MB, 812 B: a size for a one-line message."""
    for unit, scale in (("GB", 1 << 30), ("MB", 1 << 20), ("KB", 1 << 10)):
        if size >= scale:
            return f"{size / scale:.1f} {unit}"
    return f"{size} B"


def too_big(total: int, max_bytes: int, sizes: list[tuple[int, str]]) -> str:
    """The refusal: the snapshot's size, the limit, its biggest files."""
    biggest = ", ".join(
        f"{printable(path)} ({format_bytes(size)})" for size, path in sizes[:BIGGEST_NAMED]
    )
    return (
        f"code.max_size: the code snapshot would be {format_bytes(total)}, over"
        f" {format_bytes(max_bytes)}; biggest files: {biggest} (remove or .gitignore them,"
        " raise code.max_size, or set code.snapshot: false)"
    )


def materialise(top: Path, tree: str, store: Path) -> Path:
    """store/<tree> holding the tree's files: made now (extracted aside, renamed into place)
    or found whole from an earlier submission."""
    final = store / tree
    if final.is_dir():
        return final
    private.make_dir(store)
    scratch = Path(tempfile.mkdtemp(prefix=f".{tree[:12]}-", dir=store))
    try:
        _extract(top, tree, scratch)
        try:
            os.rename(scratch, final)
        except OSError:
            if not final.is_dir():  # not another submitter's identical snapshot: a failure
                raise
    except OSError as err:
        raise JobkitError(
            f"cannot write the code snapshot {final}: {err.strerror or err}"
        ) from None
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
    return final


def _extract(top: Path, tree: str, into: Path) -> None:
    """`git archive TREE | tar -x` into `into`."""
    archive = subprocess.Popen(
        ["git", "archive", "--format=tar", tree],
        cwd=top,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    assert archive.stdout is not None
    try:
        tar = subprocess.run(
            ["tar", "-x", "-f", "-", "-C", str(into)],
            stdin=archive.stdout,
            capture_output=True,
            timeout=GIT_TIMEOUT_S,
            check=False,
        )
    finally:
        archive.stdout.close()
        archive_err = archive.stderr.read() if archive.stderr else b""
        archive.wait(timeout=GIT_TIMEOUT_S)
    if archive.returncode != 0 or tar.returncode != 0:
        words = (archive_err or tar.stderr).decode(errors="replace")
        raise JobkitError(f"git archive of {tree[:12]} failed: {' '.join(words.split())[:300]}")
