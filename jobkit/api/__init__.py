"""jobkit as a library: build a spec, submit it, follow, read and cancel jobs, and run
Python functions as jobs (docs/api.md). Everything here is also importable from `jobkit`
itself, which loads this package only when one of these names is first used.

    import jobkit
    spec = jobkit.Spec.load("examples/quickstart.yaml", set={"run.train.overrides.train.steps": 50})
    job = jobkit.submit(spec).wait()
    print(job.state, job.metrics()[-1])
"""

from jobkit.api.calls import job, jobs, render, render_script, submit, submit_sweep, sweep
from jobkit.api.errors import (
    CheckFailed,
    FunctionError,
    JobFailed,
    JobkitError,
    NoResult,
    SchedulerError,
    SpecError,
    UsageError,
    WaitTimeout,
)
from jobkit.api.functions import map_array, pickler_name, submit_function
from jobkit.api.handles import Job, Sweep
from jobkit.api.spec import Spec

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
    "job",
    "jobs",
    "map_array",
    "pickler_name",
    "render",
    "render_script",
    "submit",
    "submit_function",
    "submit_sweep",
    "sweep",
]
