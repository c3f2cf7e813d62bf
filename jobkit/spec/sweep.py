"""Parameter sweeps (the `sweep:` section, docs/sweeps.md): the tasks a sweep expands to, the
checks on them, and the scheduler.array that runs them on a batch backend.

    tasks = [{**set, **combo} for set in (sets or [{}]) for combo in product(grid)]

The grid's keys vary in the order written, the last one fastest. Values are the text as
written (jobkit/spec/scalars.py): `1e-3` reaches the program as `1e-3` (the bundled trainer's
`--set` then reads it by its own key's type: optim.lr becomes the float 0.001).
"""

from __future__ import annotations

import itertools
import json
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from jobkit.core.arrays import array_ranges
from jobkit.core.errors import CrossFieldError

if TYPE_CHECKING:
    from jobkit.spec.schema import JobSpec
    from jobkit.spec.sections import Sweep

Scalar = str | int | float | bool
"""One override value."""

MAX_TASKS = 10_000
"""The most tasks one sweep may have (a bigger one is surely a mistake in the grid)."""


@dataclass(frozen=True)
class SweepTask:
    """One task of a sweep: its index (JOBKIT_TASK_ID) and the overrides it runs with."""

    index: int
    overrides: dict[str, Scalar]

    def shown(self) -> str:
        """`optim.lr=0.001 model.args.d_model=64`: the overrides as the job's output names them."""
        words = [f"{key}={value_text(value)}" for key, value in self.overrides.items()]
        return " ".join(words) or "(no overrides)"

    def json_text(self) -> str:
        """The overrides as one line of JSON (the run folder's sweep-overrides.json)."""
        return json.dumps(self.overrides, ensure_ascii=False)


def value_text(value: Scalar) -> str:
    """A value as the program gets it: booleans as true/false, anything else as str()."""
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)


def sweep_tasks(spec: JobSpec) -> list[SweepTask]:
    """The spec's sweep tasks in order ([] without `sweep:`)."""
    if spec.sweep is None:
        return []
    return [
        SweepTask(index, overrides)
        for index, overrides in enumerate(expand(spec.sweep.grid or {}, spec.sweep.sets))
    ]


def expand(
    grid: Mapping[str, Sequence[Scalar]], sets: Sequence[Mapping[str, Scalar]] | None
) -> list[dict[str, Scalar]]:
    """Every task's overrides: each set (or one empty set) with each grid combination."""
    keys = list(grid)
    combos = [dict(zip(keys, values, strict=True)) for values in itertools.product(*grid.values())]
    return [{**base, **combo} for base in (sets or [{}]) for combo in combos]


def task_count(sweep: Sweep) -> int:
    """How many tasks the sweep has, without expanding it."""
    grid = sweep.grid or {}
    return max(1, len(sweep.sets or ())) * math.prod(len(values) for values in grid.values())


def check_sweep(sweep: Sweep) -> None:
    """What the section's types cannot say; CrossFieldError names the key (and list item)."""
    if not sweep.grid and not sweep.sets:
        raise CrossFieldError("sweep", "give sweep.grid or sweep.sets (or both)")
    grid = sweep.grid or {}
    for key, values in grid.items():
        seen: dict[str, int] = {}
        for position, value in enumerate(values):
            text = value_text(value)
            if text in seen:
                raise CrossFieldError(
                    f"sweep.grid.{key}",
                    f"repeats {text!r} (item {seen[text]}): each task would run twice",
                    path=("sweep", "grid", key, position),
                )
            seen[text] = position
    known: dict[frozenset[tuple[str, str]], int] = {}
    for position, chosen in enumerate(sweep.sets or ()):
        for key in chosen:
            if key in grid:
                raise CrossFieldError(
                    f"sweep.sets.{key}",
                    f"{key} is also in sweep.grid, whose values would replace this one: give"
                    " it in one place",
                    path=("sweep", "sets", position, key),
                )
        signature = frozenset((key, value_text(value)) for key, value in chosen.items())
        if signature in known:
            raise CrossFieldError(
                "sweep.sets",
                f"repeats sweep.sets[{known[signature]}]: each task would run twice",
                path=("sweep", "sets", position),
            )
        known[signature] = position
    count = task_count(sweep)
    if count > MAX_TASKS:
        raise CrossFieldError(
            "sweep",
            f"has {count} tasks, more than {MAX_TASKS}: split it into smaller sweeps",
        )


def check_sweep_backend(spec: JobSpec, sweep_mode: str, hint: str | None = None) -> None:
    """The sweep against the backend: none (refused, with the backend's `hint`), each (no
    scheduler.array), or array (scheduler.array filled as `0-{N-1}[%K]`, or one given naming
    only task ids 0..N-1)."""
    sweep = spec.sweep
    if sweep is None:
        return
    if sweep_mode == "none":
        raise CrossFieldError(
            "sweep",
            f"the {spec.backend} backend cannot run a sweep" + (f": {hint}" if hint else ""),
        )
    array = spec.scheduler.array
    if sweep_mode != "array":
        if array is not None:
            raise CrossFieldError(
                "scheduler.array",
                f"the {spec.backend} backend runs a sweep as one job per task: leave"
                " scheduler.array out",
            )
        return
    count = task_count(sweep)
    limit = f"%{sweep.max_parallel}" if sweep.max_parallel else ""
    if array is None:
        spec.scheduler.array = f"0-{count - 1}{limit}"
        return
    outside = _first_at_or_above(array, count)
    if outside is not None:
        raise CrossFieldError(
            "scheduler.array",
            f"names task {outside}, but the sweep has {count} task(s), 0-{count - 1} (leave"
            " scheduler.array out to run them all)",
        )
    if limit and "%" not in array:
        spec.scheduler.array = f"{array}{limit}"


def array_task_ids(array: str) -> list[int]:
    """The task ids an array expression names (`0-9:2,15%4` -> 0 2 4 6 8 15), in order."""
    return [index for ids in _ranges(array) for index in ids]


def _first_at_or_above(array: str, count: int) -> int | None:
    """The smallest task id >= count the array names (without listing them all), or None."""
    found = [
        ids[max(0, -(-(count - ids.start) // ids.step))]
        for ids in _ranges(array)
        if ids and ids[-1] >= count
    ]
    return min(found) if found else None


def _ranges(array: str) -> list[range]:
    """The ranges of an array expression (scheduler.array's syntax, already checked)."""
    found = array_ranges(array)
    if found is None:
        raise ValueError(f"not an array range: {array!r}")
    return found


def one_based(array: str) -> dict[str, object]:
    """A sweep's array for a scheduler that numbers tasks from 1 (Grid Engine): every task
    id plus one (`0-3%2` -> range `1-4`), and the %K limit apart (limit 2, or None)."""
    ids, _, limit = array.partition("%")
    parts = []
    for ids_range in _ranges(ids):
        start, end, step = ids_range.start + 1, ids_range.stop, ids_range.step
        text = str(start) if end == start else f"{start}-{end}"
        parts.append(text + (f":{step}" if step != 1 else ""))
    return {"range": ",".join(parts), "limit": int(limit) if limit else None}
