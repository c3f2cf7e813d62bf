"""Files and folders only their owner can read: what jobkit writes may hold secrets.

A job's script and the registry hold the spec's `env.vars` (API keys, tokens), so every file
jobkit writes is 0600 (a script 0700) and every folder 0700, whatever the user's umask
(docs/reliability.md, "Threat model"). The CLI runs under PRIVATE_UMASK, which the job's
launcher and the scheduler's submit command inherit; the registry and the job scripts are
also written with explicit modes, so that they stay private when jobkit is used as a
library, and files an older jobkit left readable are tightened when they are next used.
"""

from __future__ import annotations

import os
from pathlib import Path

PRIVATE_UMASK = 0o077
FILE_MODE = 0o600
SCRIPT_MODE = 0o700
DIR_MODE = 0o700


def use_private_umask() -> int:
    """Make everything this process (and what it starts) creates private; the old umask."""
    return os.umask(PRIVATE_UMASK)


def make_dir(path: Path) -> None:
    """Create `path` and its missing parents as 0700 folders. A folder that exists keeps
    its mode: it may be the user's own (a logs.dir in a shared project)."""
    missing = [folder for folder in (path, *path.parents) if not folder.exists()]
    path.mkdir(mode=DIR_MODE, parents=True, exist_ok=True)
    for folder in missing:
        os.chmod(folder, DIR_MODE)  # mkdir's mode is cut by the umask; parents get 0777


def write_file(path: Path, text: str, mode: int = FILE_MODE) -> None:
    """Write `text` to `path` with `mode`, never readable by others even for a moment."""
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, mode)
    with os.fdopen(fd, "w", encoding="utf-8") as handle:
        os.fchmod(fd, mode)  # an existing file keeps its old mode through O_CREAT
        handle.write(text)


def create_empty(path: Path, mode: int = FILE_MODE) -> None:
    """Create `path` empty with `mode` unless it exists (then only tighten it)."""
    try:
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, mode)
    except FileExistsError:
        tighten(path, mode)
        return
    os.close(fd)


def tighten(path: Path, mode: int) -> None:
    """Take away group and other access from `path` when it is ours and has some; a file of
    another user (a shared registry) or one that is gone is left as it is."""
    try:
        info = os.stat(path)
        if info.st_uid == os.getuid() and info.st_mode & 0o077:
            os.chmod(path, mode)
    except OSError:
        pass
