"""Where jobkit caches what it has already worked out (compiled templates, specs and trainer
configs that passed): one private folder per user, shared by render and spec loading."""

from __future__ import annotations

import os
import stat
from collections.abc import Mapping
from pathlib import Path

from jobkit.core.paths import xdg_dir

CACHE_ENV = "JOBKIT_TEMPLATE_CACHE"
OFF_VALUES = frozenset({"off", "0", "no", "false"})
FOLDER_MODE = 0o700


def cache_dir(environ: Mapping[str, str] | None = None) -> Path | None:
    """The cache folder for this user, or None when the cache is off or there is no home."""
    env = os.environ if environ is None else environ
    chosen = env.get(CACHE_ENV, "")
    if chosen.lower() in OFF_VALUES:
        return None
    if chosen:
        return Path(chosen).expanduser()
    return xdg_dir(env, "XDG_CACHE_HOME", ".cache", "jobkit", "templates")


def private_folder(folder: Path) -> bool:
    """Create `folder` (0700) if missing; True when it is a real folder of ours, not
    writable by group or others."""
    try:
        folder.mkdir(mode=FOLDER_MODE, parents=True, exist_ok=True)
        info = os.lstat(folder)
    except OSError:
        return False
    return (
        stat.S_ISDIR(info.st_mode)
        and info.st_uid == os.getuid()
        and not info.st_mode & (stat.S_IWGRP | stat.S_IWOTH)
    )
