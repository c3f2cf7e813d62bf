"""Every backend jobkit knows, in one place: built-ins here, a site's own through the
`jobkit.backends` entry-point group (`mysched = "mypkg.backend:MyBackend"`).

Backends are imported only when asked for, so `jobkit status` for Slurm jobs never loads
submitit, and a backend's missing dependency only matters to that backend. The schema's
`backend:` choices, the CLI's help and the template lookup all come from here.
"""

from __future__ import annotations

import functools
import importlib
from typing import TYPE_CHECKING

from jobkit.core.errors import JobkitError, UsageError

if TYPE_CHECKING:
    from jobkit.backends.base import Backend

ENTRY_POINT_GROUP = "jobkit.backends"

BUILTIN: dict[str, str] = {
    "local": "jobkit.backends.local:LocalBackend",
    "slurm": "jobkit.backends.slurm.backend:SlurmBackend",
    "pbs": "jobkit.backends.pbs.backend:PbsBackend",
    "sge": "jobkit.backends.sge.backend:SgeBackend",
    "ssh": "jobkit.backends.ssh:SshBackend",
    "submitit": "jobkit.backends.submitit.backend:SubmititBackend",
}
"""Backend name -> `module:Class` (the class implements base.Backend, built with no args)."""

DEFAULT = "local"
"""The backend of a spec that names none (`backend:` left out): this machine, which needs no
scheduler, no hosts and no options."""

DEFAULT_REMOTE = "slurm"
"""The backend of a remote cluster whose clusters.yaml entry names none."""

INTERNAL: dict[str, str] = {"here": "jobkit.backends.here:HereBackend"}
REMOTE = "jobkit.remote.backend:remote_backend"
"""`slurm@mycluster`: a job submitted to a cluster over ssh (docs/remote.md); its class facts
are the scheduler's, its instance runs every command on the cluster's login node."""
"""Kinds of registry rows that no spec names as its `backend:` (`jobkit run --here` runs):
found by get_backend, never listed."""


class BackendUnavailable(JobkitError):
    """A known backend whose module cannot be imported here (a missing dependency)."""


@functools.cache
def _plugins() -> dict[str, str]:
    """Backends installed by other packages (read once, only when a name is not built in)."""
    from importlib.metadata import entry_points

    found: dict[str, str] = {}
    for point in entry_points(group=ENTRY_POINT_GROUP):
        if point.name not in BUILTIN:
            found[point.name] = point.value
    return found


def builtin_names() -> tuple[str, ...]:
    """The built-in backends, in a stable order (no entry point is read)."""
    return tuple(BUILTIN)


def backend_names() -> tuple[str, ...]:
    """Every backend: built-ins, then installed plug-ins."""
    return (*BUILTIN, *_plugins())


def is_known(name: str) -> bool:
    """Whether `name` is a backend (entry points are read only for a name not built in)."""
    return name in BUILTIN or name in _plugins()


def _target(name: str) -> str:
    target = BUILTIN.get(name) or INTERNAL.get(name) or _plugins().get(name)
    if target is None:
        raise UsageError(f"unknown backend {name!r} (known: {', '.join(backend_names())})")
    return target


@functools.cache
def backend_class(name: str) -> type[Backend]:
    """The named backend's class (`slurm@cluster`: Slurm's). UsageError for an unknown name;
    BackendUnavailable when its module cannot be loaded."""
    if "@" in name:
        return backend_class(name.partition("@")[0])
    module_name, _, class_name = _target(name).partition(":")
    try:
        module = importlib.import_module(module_name)
        found: type[Backend] = getattr(module, class_name)
    except (ImportError, AttributeError) as err:
        raise BackendUnavailable(f"backend {name} is unavailable: {err}") from None
    return found


def known_class(name: str) -> type[Backend] | None:
    """The named backend's class, or None where it is unknown or cannot load here (a
    registry row of a backend since uninstalled): its facts then fall back to "none"."""
    try:
        return backend_class(name)
    except JobkitError:
        return None


def remote_names() -> tuple[str, ...]:
    """The built-in backends a remote cluster may use: those that state their commands there."""
    return tuple(
        name
        for name in builtin_names()
        if (found := known_class(name)) is not None and found.remote_commands
    )


def remote_commands(name: str) -> tuple[str, ...]:
    """The commands the named backend runs on a remote cluster's login node (none: unknown)."""
    found = known_class(name)
    return found.remote_commands if found is not None else ()


def get_backend(name: str) -> Backend:
    """A fresh instance of the named backend (`slurm@cluster`: over ssh, docs/remote.md)."""
    if "@" in name:
        module_name, _, function = REMOTE.partition(":")
        made: Backend = getattr(importlib.import_module(module_name), function)(name)
        return made
    return backend_class(name)()
