"""Functions as jobs: `submit_function(fn, *args, **kwargs)` and `map_array(fn, items)`.

The call is pickled (with cloudpickle, so closures, lambdas and functions of a notebook or
`__main__` travel by value) into `{logs.dir}/.calls/` under the submission directory, which
the job's nodes see as they see its logs; the job runs `python -m jobkit.api.runner FILE`
(jobkit/api/runner.py) with the job's own Python on every rank, and rank 0's return value
lands in the run folder as `function/result.pkl`. A rank whose call raised leaves
`function/error-rank-R.json` (its traceback) and the job fails; `read_result` (results.py)
raises the first such error here as FunctionError, naming the rank and its host.
"""

from __future__ import annotations

import os
import pickle
import re
import uuid
from collections.abc import Callable, Iterable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

from jobkit.api.errors import UsageError
from jobkit.api.spec import DICT_SOURCE, SetValues, Spec
from jobkit.backends.registry import DEFAULT as DEFAULT_BACKEND
from jobkit.core import private

if TYPE_CHECKING:
    from jobkit.api.handles import Job, Sweep

CALLS_DIR = ".calls"
"""Under logs.dir: the pickled calls, one file per submission."""
ITEM_KEY = "item"
"""The sweep key of a map_array task: the runner gets `item=N` after its arguments."""

SpecInput = Mapping[str, Any] | str | Path | None


def submit_function(
    fn: Callable[..., Any],
    *args: Any,
    spec: SpecInput = None,
    set: SetValues | None = None,
    **kwargs: Any,
) -> Job:
    """Run `fn(*args, **kwargs)` as a job; `job.result()` gives its return value.

    `spec`: a job spec without `run:` (a mapping laid out like a job YAML, or a YAML file's
    path; default: `{name: <fn's name>, backend: local}`), `set`: overrides on top. Every
    rank runs `fn` with the launch environment set (RANK, WORLD_SIZE, MASTER_ADDR, ...);
    rank 0's return value is the result."""
    from jobkit.api.calls import submit

    loaded = _function_spec(fn, spec, set, [(args, kwargs)], sweep=None)
    return submit(loaded)


def map_array(
    fn: Callable[..., Any],
    items: Iterable[Any],
    *,
    spec: SpecInput = None,
    set: SetValues | None = None,
    max_parallel: int | None = None,
) -> Sweep:
    """`fn(item)` for each item, as a sweep (one array job on Slurm, PBS, Grid Engine; one
    job per task on local and ssh), task N running items[N]; `sweep.results()` in order."""
    from jobkit.api.calls import submit_sweep

    calls: list[tuple[tuple[Any, ...], dict[str, Any]]] = [((item,), {}) for item in items]
    if not calls:
        raise UsageError("map_array: no items")
    sweep: dict[str, Any] = {"sets": [{ITEM_KEY: n} for n in range(len(calls))]}
    if max_parallel is not None:
        sweep["max_parallel"] = max_parallel
    loaded = _function_spec(fn, spec, set, calls, sweep=sweep)
    return submit_sweep(loaded)


def _function_spec(
    fn: Callable[..., Any],
    spec: SpecInput,
    sets: SetValues | None,
    calls: list[tuple[tuple[Any, ...], dict[str, Any]]],
    *,
    sweep: dict[str, Any] | None,
) -> Spec:
    """The spec with run.command set to the runner of a new call file (written here)."""
    _refuse_owned_sets(sets)
    payload = _pickled({"fn": fn, "calls": calls})
    extra: dict[str, Any] = dict(sets or {})
    if sweep is not None:
        extra["sweep"] = sweep
    probe = _base_spec(fn, spec, {**extra, "run.command": ["python3"]})
    from jobkit.render.interpreter import spec_interpreter

    logs_dir = Path.cwd() / probe.spec.logs.dir
    call_file = logs_dir / CALLS_DIR / f"{probe.name}-{uuid.uuid4().hex[:12]}.pkl"
    python = spec_interpreter(probe.spec).path or "python3"
    command = [python, "-m", "jobkit.api.runner", str(call_file)]
    final = probe.with_set({"run.command": command})
    private.make_dir(call_file.parent)
    _write_private(call_file, payload)
    return final


def _base_spec(fn: Callable[..., Any], spec: SpecInput, sets: SetValues) -> Spec:
    """The user's spec (which must leave `run:` and `sweep:` to jobkit) with `sets` on top."""
    if spec is None or isinstance(spec, Mapping):
        data = dict(spec) if spec is not None else {}
        data.setdefault("name", _job_name(fn))
        data.setdefault("backend", DEFAULT_BACKEND)
        _refuse_owned_keys(DICT_SOURCE, data)
        return Spec.from_dict(data, set=sets)
    from jobkit.core.yamlsrc import load_yaml_file

    _refuse_owned_keys(str(spec), load_yaml_file(Path(spec), str(spec)).data)
    return Spec.load(spec, set=sets)


OWNED_KEYS = {"run": "it runs the function", "sweep": "map_array: one task per item"}
"""What a function job's spec may not give, and why: jobkit sets both."""


def _refuse_owned_keys(source: str, data: Mapping[str, Any]) -> None:
    for key, why in OWNED_KEYS.items():
        if data.get(key) is not None:
            raise UsageError(f"{source}: {key}: {_owned(key, why)}")


def _refuse_owned_sets(sets: SetValues | None) -> None:
    for key in sets or {}:
        section = key.split(".")[0]
        if section in OWNED_KEYS:
            raise UsageError(f"set {key}: {_owned(section, OWNED_KEYS[section])}")


def _owned(key: str, why: str) -> str:
    return f"a function job's {key} is jobkit's ({why}): leave it out"


def _job_name(fn: Callable[..., Any]) -> str:
    """The function's name as a job name (letters, digits and . _ + -)."""
    name = re.sub(r"[^A-Za-z0-9._+-]+", "-", getattr(fn, "__name__", "") or "").strip("-")
    return name or "function"


def pickler_name() -> str:
    """cloudpickle when it is installed (a dependency of jobkit's), else pickle."""
    try:
        import cloudpickle  # noqa: F401
    except ImportError:
        return "pickle"
    return "cloudpickle"


def _pickled(payload: dict[str, Any]) -> bytes:
    """The call as bytes; UsageError (one line) when it cannot travel."""
    fn = payload["fn"]
    try:
        import cloudpickle

        return bytes(cloudpickle.dumps(payload))
    except ImportError:
        if getattr(fn, "__module__", None) == "__main__":
            raise UsageError(
                f"{getattr(fn, '__qualname__', fn)!s} is defined in __main__ and plain pickle"
                " sends it by name, which the job cannot import: install cloudpickle or move"
                " it into a module"
            ) from None
        try:
            return pickle.dumps(payload)
        except (pickle.PicklingError, AttributeError, TypeError) as err:
            raise UsageError(f"the call cannot be pickled: {err}") from None
    except (pickle.PicklingError, AttributeError, TypeError) as err:
        raise UsageError(f"the call cannot be pickled: {err}") from None


def _write_private(path: Path, data: bytes) -> None:
    """`data` into a new file of its owner's only (0600), whole or not at all."""
    temp = path.with_name(f".{path.name}.tmp")
    fd = os.open(temp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, private.FILE_MODE)
    with os.fdopen(fd, "wb") as stream:
        stream.write(data)
    os.replace(temp, path)
