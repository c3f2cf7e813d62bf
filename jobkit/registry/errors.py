"""The registry's own errors: below every registry module, so none imports db.py for them."""

from __future__ import annotations

from pathlib import Path

from jobkit.core.errors import JobkitError


class RegistryError(JobkitError):
    """The registry file cannot be opened or is from a newer jobkit."""


class RegistryCorrupt(RegistryError):
    """The registry file is damaged: what to do, never what it holds (it may hold secrets)."""


class RegistryReadOnly(RegistryError):
    """The registry can be read but not written (its disk is full, read-only or failing):
    read-only verbs go on with what it last recorded (docs/reliability.md)."""


def corrupt(path: Path, what: str) -> RegistryCorrupt:
    """The registry at `path` is damaged (`what`): move it aside, say what is lost."""
    return RegistryCorrupt(
        f"the job registry {path} is corrupt ({what}): move it aside with its -wal and -shm"
        f" files (mv {path} {path}.corrupt) and jobkit starts an empty one; jobkit keeps no"
        f" other copy of its records (each job's script stays in {path.parent / 'jobs'})"
    )
