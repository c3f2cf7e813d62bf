"""jobkit: one YAML job spec to a running, tracked distributed PyTorch job.

The library (docs/api.md) is jobkit.api; its names are available here too, imported on
first use, so that `import jobkit` (and the CLI's start-up) loads nothing else.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from jobkit.core.version import __version__

if TYPE_CHECKING:
    from jobkit.api import (
        CheckFailed,
        FunctionError,
        Job,
        JobFailed,
        JobkitError,
        NoResult,
        SchedulerError,
        Spec,
        SpecError,
        Sweep,
        UsageError,
        WaitTimeout,
        job,
        jobs,
        map_array,
        pickler_name,
        render_script,
        submit,
        submit_function,
        submit_sweep,
        sweep,
    )

__all__ = [
    "CheckFailed",
    "FunctionError",
    "Job",
    "JobFailed",
    "JobkitError",
    "NoResult",
    "SchedulerError",
    "Spec",
    "SpecError",
    "Sweep",
    "UsageError",
    "WaitTimeout",
    "__version__",
    "job",
    "jobs",
    "map_array",
    "pickler_name",
    "render_script",
    "submit",
    "submit_function",
    "submit_sweep",
    "sweep",
]

API_NAMES = frozenset(__all__) - {"__version__"}
"""The names of jobkit.api re-exported here: all of its __all__ but `render`, which here is
the package jobkit/render/ (the function is `render_script`; tests/api checks both)."""


def __getattr__(name: str) -> Any:
    """jobkit.api's names, importing it on first use (PEP 562)."""
    if name in API_NAMES:
        import jobkit.api

        return getattr(jobkit.api, name)
    raise AttributeError(f"module 'jobkit' has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted({*globals(), *API_NAMES})
