"""Site profiles: partial job specs found by name, layered under the job file.

A profile named NAME is the file NAME.yaml (or NAME.yml) in one of the folders listed in
JOBKIT_PROFILES (os.pathsep-separated; a file there is a profile named after its stem),
then in $XDG_CONFIG_HOME/jobkit/profiles (default ~/.config/jobkit/profiles).
The first match wins.
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping, Sequence
from pathlib import Path

from jobkit.core.paths import xdg_dir

PROFILE_SUFFIXES = (".yaml", ".yml")
PROFILE_NAME_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]*$")
TEMPLATE_DIR_KEY = "template_dir"
"""The one top-level key a profile may hold that a job file may not: a site template folder."""


def profile_search_path(environ: Mapping[str, str] | None = None) -> list[Path]:
    """Where profiles are looked for, in order: JOBKIT_PROFILES entries, then the user's."""
    env = os.environ if environ is None else environ
    entries = [Path(item) for item in env.get("JOBKIT_PROFILES", "").split(os.pathsep) if item]
    user = user_profile_dir(env)
    if user is not None:
        entries.append(user)
    return entries


def user_profile_dir(environ: Mapping[str, str]) -> Path | None:
    """$XDG_CONFIG_HOME/jobkit/profiles, or ~/.config/jobkit/profiles (None without a home)."""
    return xdg_dir(environ, "XDG_CONFIG_HOME", ".config", "jobkit", "profiles")


def available_profiles(search: Sequence[Path]) -> dict[str, Path]:
    """Every profile found, name -> file; an earlier entry hides a later one of the same name."""
    found: dict[str, Path] = {}
    for entry in search:
        if entry.is_file():
            found.setdefault(_profile_name(entry), entry)
        elif entry.is_dir():
            try:
                children = sorted(entry.iterdir())
            except OSError:
                continue
            for child in children:
                if child.suffix in PROFILE_SUFFIXES and child.is_file():
                    found.setdefault(child.stem, child)
    return found


def find_profile(name: str, search: Sequence[Path]) -> Path | None:
    """The file of profile `name`, or None when no entry of the search path has it."""
    for entry in search:
        if entry.is_file() and _profile_name(entry) == name:
            return entry
        if entry.is_dir():
            for suffix in PROFILE_SUFFIXES:
                candidate = entry / f"{name}{suffix}"
                if candidate.is_file():
                    return candidate
    return None


def describe_missing(name: str, search: Sequence[Path]) -> str:
    """The message for an unknown profile: the ones that do exist, or where none were found."""
    names = sorted(available_profiles(search))
    if names:
        return f"unknown profile {name!r} (found: {', '.join(names)})"
    where = ", ".join(str(entry) for entry in search) or "nowhere: set JOBKIT_PROFILES"
    return f"unknown profile {name!r} (no profiles found in {where})"


def _profile_name(path: Path) -> str:
    return path.stem if path.suffix in PROFILE_SUFFIXES else path.name
