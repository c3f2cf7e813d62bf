"""What the registry holds about a job: JobRecord (one row of `jobs`) and StateChange (one
line of its history). Plain values; jobkit/registry/rows.py maps them to and from SQLite."""

from __future__ import annotations

import functools
import json
import time
from collections.abc import Mapping
from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import TYPE_CHECKING, Any

from jobkit.core import lifecycle
from jobkit.core.lifecycle import SUBMITTING, Source
from jobkit.core.records import TrackedJob
from jobkit.registry.texts import LOADER_KEY, RAW_PREFIX, TEXT_FIELDS

__all__ = ["RECORD_FIELDS", "SUBMITTING", "JobRecord", "StateChange", "new_record"]


@dataclass(frozen=True)
class StateChange:
    """One line of a job's state history."""

    at: float
    state: str
    raw_state: str | None
    source: Source | None
    reason: str | None

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready form."""
        return dict(self.__dict__)


@dataclass(frozen=True)
class JobRecord:
    """One tracked job, as stored in the registry (docs/manager.md, the `jobs` table).

    The fields are the table's columns, in the order `to_dict` shows them; add a field here
    (and its column in a migration, rows.py) and every query and mapping follows.
    """

    jobkit_id: str
    scheduler_id: str | None
    backend: str
    name: str
    state: str
    """A State value, or SUBMITTING."""
    raw_state: str | None
    state_source: Source | None
    reason: str | None
    observed_at: float | None
    created_at: float
    submitted_at: float | None
    final_at: float | None
    exit_code: int | None
    signal: int | None
    requeues: int
    nodes: str | None
    elapsed_s: float | None
    max_rss: str | None
    cpu_time: str | None
    workdir: Path
    job_dir: Path
    log_paths: dict[str, str]
    """Absolute 'out', 'err', 'run_dir' (arrays: with a `{task}` placeholder)."""
    submit_argv: list[str]
    token: str
    spec_json: str
    """The spec as stored (JSON); `spec` decodes it when first asked."""
    script: str
    extra: dict[str, Any] = field(default_factory=dict)
    """Backend facts (array, pgid...), submitter, adopted. The run folder is in log_paths
    only (`tracked()` hands it to the backends as extra['run_dir'])."""
    run_id: str | None = None
    """The jobkit id of the first attempt of the run this job is an attempt of (None in
    rows older than runs: the job is its own run; see `run_key`)."""
    attempt: int = 1
    """Which attempt of its run this job is (1, 2, ...): docs/runs.md."""
    sweep_id: str | None = None
    """The sweep this job is a task of (its tasks share this id; docs/sweeps.md)."""
    task: str | None = None
    """Its task index in the sweep ("0", "1", ...); None outside sweeps."""

    if not TYPE_CHECKING:  # mypy keeps checking attribute names as usual

        def __getattr__(self, name: str) -> Any:
            """The fields a listing leaves for later (registry/texts.py), read or decoded
            on first use. Only called for an attribute the record does not hold."""
            state = self.__dict__
            loader = state.get(LOADER_KEY)
            if loader is not None:
                if name in TEXT_FIELDS:
                    state["spec_json"], state["script"] = loader.texts(self.jobkit_id)
                    return state[name]
                raw = RAW_PREFIX + name
                if raw in state:
                    state[name] = loader.decode(name, state[raw])
                    return state[name]
            raise AttributeError(f"{type(self).__name__!r} object has no attribute {name!r}")

    def with_columns(self, columns: Mapping[str, Any]) -> JobRecord:
        """A copy with some fields replaced, such as the columns record_observations returns:
        dataclasses.replace without its per-call work (a status may update 10,000 records)."""
        unknown = columns.keys() - RECORD_FIELDS
        if unknown:
            raise TypeError(f"JobRecord has no field {sorted(unknown)[0]!r}")
        state = {**self.__dict__, **columns}
        if "spec_json" in columns:
            state.pop("spec", None)  # the decoded spec belongs to the old JSON
        fresh = object.__new__(JobRecord)
        fresh.__dict__.update(state)  # frozen: fill the instance dict, not through setattr
        return fresh

    @functools.cached_property
    def spec(self) -> dict[str, Any]:
        """The spec after layering (decoded on first use: listings of thousands of jobs
        never need it)."""
        decoded: dict[str, Any] = json.loads(self.spec_json)
        return decoded

    @property
    def run_key(self) -> str:
        """The id of the run this job is an attempt of (its first attempt's jobkit id)."""
        return self.run_id or self.jobkit_id

    @property
    def is_final(self) -> bool:
        """True once the job will not run again."""
        return lifecycle.is_final(self.state)

    @property
    def is_array(self) -> bool:
        """True for a job array (log paths then hold a `{task}` placeholder)."""
        return bool(self.extra.get("array"))

    @property
    def run_dir(self) -> str | None:
        """The run folder (log_paths; a registry of an older jobkit may hold it in extra)."""
        found = self.log_paths.get("run_dir") or self.extra.get("run_dir")
        return str(found) if found else None

    def needs_poll(self, now: float | None = None) -> bool:
        """Whether `status` should ask the scheduler about this job again."""
        at = time.time() if now is None else now
        return lifecycle.needs_poll(self, submitted=self.scheduler_id is not None, now=at)

    def tracked(self) -> TrackedJob:
        """The view a backend gets when polling or cancelling (its run folder in extra)."""
        extra = {str(k): str(v) for k, v in self.extra.items()}
        run_dir = self.log_paths.get("run_dir")
        if run_dir and "run_dir" not in extra:
            extra["run_dir"] = run_dir
        return TrackedJob(
            jobkit_id=self.jobkit_id,
            scheduler_id=self.scheduler_id or "",
            job_dir=self.job_dir,
            workdir=self.workdir,
            extra=extra,
        )

    def log_paths_for(self, task: str | None = None) -> dict[str, str]:
        """Absolute log paths ('out', 'err', 'run_dir'); an array's `{task}` filled in."""
        if not self.is_array or task is None:
            return dict(self.log_paths)
        return {key: value.replace("{task}", task) for key, value in self.log_paths.items()}

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready form (the spec, script and token left out: see `jobkit status ID
        --json`)."""
        return {name: _plain(getattr(self, name)) for name in _DICT_FIELDS}


RECORD_FIELDS = frozenset(f.name for f in fields(JobRecord))
_EMPTY: dict[str, Any] = {name: None for name in RECORD_FIELDS}


def new_record(**values: Any) -> JobRecord:
    """A new job's record: the fields given, the others empty (None, no requeues, no log
    paths, no submit command, no extra)."""
    empty = {
        **_EMPTY,
        "requeues": 0,
        "log_paths": {},
        "submit_argv": [],
        "extra": {},
        "attempt": 1,
    }
    return JobRecord(**{**empty, **values})


_DICT_FIELDS = tuple(
    f.name for f in fields(JobRecord) if f.name not in ("token", "spec_json", "script")
)


def _plain(value: Any) -> Any:
    """A JSON-ready copy: paths as text, lists and dicts copied."""
    if isinstance(value, Path):
        return str(value)
    if isinstance(value, dict):
        return dict(value)
    if isinstance(value, list):
        return list(value)
    return value
