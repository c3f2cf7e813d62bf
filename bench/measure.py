"""Repeated measurements: interleaved runs (A B A B ...), their statistics and ratios.

Every case times jobkit and its baseline in the same rounds, so a slow moment of a shared
machine slows both; a figure is only ever compared with one taken beside it.
"""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any


@dataclass(frozen=True)
class Stats:
    """Summary of one measured quantity: median, min, max over n values (and the values)."""

    name: str
    unit: str
    values: tuple[float, ...]

    @property
    def n(self) -> int:
        """How many values."""
        return len(self.values)

    @property
    def median(self) -> float:
        """The median (NaN without values)."""
        return statistics.median(self.values) if self.values else float("nan")

    @property
    def min(self) -> float:
        """The smallest value (NaN without values)."""
        return min(self.values) if self.values else float("nan")

    @property
    def max(self) -> float:
        """The largest value (NaN without values)."""
        return max(self.values) if self.values else float("nan")

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready form."""
        return {
            "name": self.name,
            "unit": self.unit,
            "median": clean(self.median),
            "min": clean(self.min),
            "max": clean(self.max),
            "n": self.n,
            "values": [clean(v) for v in self.values],
        }


def clean(value: float) -> float | None:
    """NaN and infinity are not JSON: None instead; else rounded to 6 significant places."""
    if value != value or value in (float("inf"), float("-inf")):
        return None
    return float(f"{value:.6g}")


def stats(name: str, unit: str, values: Sequence[float]) -> Stats:
    """A Stats from any sequence of numbers."""
    return Stats(name, unit, tuple(float(v) for v in values))


def ratio(numerator: float, denominator: float) -> float | None:
    """numerator / denominator, or None when it is undefined."""
    if denominator == 0 or numerator != numerator or denominator != denominator:
        return None
    return clean(numerator / denominator)


def paired_ratios(a: Sequence[float], b: Sequence[float]) -> list[float]:
    """Round-by-round a[i] / b[i] (runs of the same round share the machine's state)."""
    return [x / y for x, y in zip(a, b, strict=False) if y]


def paired_median(a: Sequence[float], b: Sequence[float]) -> float | None:
    """The median of the round-by-round ratios a[i] / b[i] (None without pairs)."""
    values = paired_ratios(a, b)
    return clean(statistics.median(values)) if values else None


Runner = Callable[[], Mapping[str, float]]
"""One run of one contender: returns named measurements (e.g. {'wall_s': 0.12})."""


@dataclass
class Interleaved:
    """Values collected by `interleave`: contender -> measurement name -> values."""

    values: dict[str, dict[str, list[float]]] = field(default_factory=dict)
    rounds: int = 0
    """Rounds kept (fewer than asked for when a deadline stopped them)."""

    def get(self, contender: str, measure: str) -> list[float]:
        """The values of one measurement of one contender (empty if none)."""
        return self.values.get(contender, {}).get(measure, [])

    def stats(self, contender: str, measure: str, unit: str) -> Stats:
        """Stats of one measurement of one contender."""
        return stats(f"{contender} {measure}", unit, self.get(contender, measure))


def interleave(
    runners: Mapping[str, Runner],
    rounds: int,
    warmup: int = 1,
    on_run: Callable[[int, str, Mapping[str, float]], None] | None = None,
    deadline: float | None = None,
) -> Interleaved:
    """Run every contender once per round, in the given order (A B A B ...).

    The first `warmup` rounds are run and thrown away (file cache, .pyc files, first
    connections). `on_run(round, name, result)` is called after each kept run. With a
    `deadline` (a time.monotonic() value), no round is started that would end after it,
    judged by the slowest round so far; `rounds` on the result says how many were kept.
    """
    for _ in range(warmup):
        for runner in runners.values():
            runner()
    collected = Interleaved()
    slowest = 0.0
    for index in range(rounds):
        began = time.monotonic()
        if deadline is not None and index and began + slowest > deadline:
            break
        for name, runner in runners.items():
            result = runner()
            slot = collected.values.setdefault(name, {})
            for key, value in result.items():
                slot.setdefault(key, []).append(float(value))
            if on_run is not None:
                on_run(index, name, result)
        collected.rounds = index + 1
        slowest = max(slowest, time.monotonic() - began)
    return collected
