"""One module per backend behind the protocol in base.py; this is the name -> class registry.

Backends are imported only when asked for, so `jobkit status` for Slurm jobs never loads
submitit, and a backend's missing dependency only matters to that backend.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING

from jobkit.core.errors import JobkitError, UsageError

if TYPE_CHECKING:
    from jobkit.backends.base import Backend

BACKENDS: dict[str, str] = {
    "local": "jobkit.backends.local:LocalBackend",
    "slurm": "jobkit.backends.slurm.backend:SlurmBackend",
    "pbs": "jobkit.backends.pbs.backend:PbsBackend",
    "ssh": "jobkit.backends.ssh:SshBackend",
    "submitit": "jobkit.backends.submitit.backend:SubmititBackend",
}
"""Backend name -> `module:Class` (the class implements base.Backend, built with no args)."""


class BackendUnavailable(JobkitError):
    """A known backend whose module cannot be imported here (a missing dependency)."""


def backend_names() -> list[str]:
    """Every backend jobkit knows, in a stable order."""
    return list(BACKENDS)


def get_backend(name: str) -> Backend:
    """A fresh instance of the named backend.

    UsageError for an unknown name; BackendUnavailable when its module cannot be loaded.
    """
    target = BACKENDS.get(name)
    if target is None:
        known = ", ".join(BACKENDS)
        raise UsageError(f"unknown backend {name!r} (known: {known})")
    module_name, _, class_name = target.partition(":")
    try:
        module = importlib.import_module(module_name)
        backend_class = getattr(module, class_name)
    except (ImportError, AttributeError) as err:
        raise BackendUnavailable(f"backend {name} is unavailable: {err}") from None
    backend: Backend = backend_class()
    return backend
