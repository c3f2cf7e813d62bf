"""Array expressions, read the one way: `0-9`, `1,3,5`, `0-99:2`, `0-99%10`, as in
scheduler.array, in Slurm's pending-task ranges (`[2-5%2]`, brackets stripped by the caller)
and in Grid Engine's qstat task lists (`5-10:1`)."""

from __future__ import annotations

import re

_PART = re.compile(r"^(\d+)(?:-(\d+))?(?::(\d+))?$")


def array_ranges(text: str) -> list[range] | None:
    """The task ranges the expression names (a `%N` limit ignored); None when it is not one."""
    found: list[range] = []
    for part in text.split("%", 1)[0].split(","):
        match = _PART.match(part.strip())
        if match is None:
            return None
        first = int(match[1])
        last = int(match[2]) if match[2] else first
        step = int(match[3]) if match[3] else 1
        if last < first or step < 1:
            return None
        found.append(range(first, last + 1, step))
    return found


def array_size(text: str) -> int | None:
    """How many tasks it names: `0-9` 10, `1,3,5` 3, `0-10:2` 6, `0-99%10` 100; None if not
    an array expression."""
    ranges = array_ranges(text)
    return sum(len(r) for r in ranges) or None if ranges is not None else None


def array_includes(text: str | None, task: str) -> bool:
    """True when the expression names task `task` (a number)."""
    if not text or not task.isdigit():
        return False
    return any(int(task) in r for r in array_ranges(text) or ())
