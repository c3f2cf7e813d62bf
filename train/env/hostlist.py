"""Slurm's compact host and task lists, expanded: `gpu-[01-03,07],cpu5` and `2(x3),1`.

Stdlib only: user programs import this through train.env without torch.
"""

from __future__ import annotations

import re

_TASKS_ITEM = re.compile(r"^(?P<n>\d+)(?:\(x(?P<times>\d+)\))?$")
_RANGE_ITEM = re.compile(r"^(?P<lo>\d+)(?:-(?P<hi>\d+))?$")


class HostlistError(ValueError):
    """A host or task list that cannot be read; the message names the text."""


def _split_top_level(text: str) -> list[str]:
    """Split on commas that are not inside brackets."""
    items: list[str] = []
    depth = 0
    start = 0
    for i, char in enumerate(text):
        if char == "[":
            if depth:
                raise HostlistError(f"nested '[' in host list {text!r}")
            depth = 1
        elif char == "]":
            if not depth:
                raise HostlistError(f"unbalanced ']' in host list {text!r}")
            depth = 0
        elif char == "," and not depth:
            items.append(text[start:i])
            start = i + 1
    if depth:
        raise HostlistError(f"unbalanced '[' in host list {text!r}")
    items.append(text[start:])
    return items


def _expand_range(body: str, text: str) -> list[str]:
    """`01-03,07` -> ['01', '02', '03', '07']; the width of each low bound is kept."""
    values: list[str] = []
    for part in body.split(","):
        match = _RANGE_ITEM.match(part.strip())
        if not match:
            raise HostlistError(f"bad range {part!r} in host list {text!r}")
        lo_text = match["lo"]
        hi_text = match["hi"] if match["hi"] is not None else lo_text
        lo, hi = int(lo_text), int(hi_text)
        if hi < lo:
            raise HostlistError(f"range {part!r} goes downwards in host list {text!r}")
        if hi - lo > 100_000:
            raise HostlistError(f"range {part!r} is too large in host list {text!r}")
        width = len(lo_text)
        values.extend(str(n).zfill(width) for n in range(lo, hi + 1))
    return values


def _expand_item(item: str, text: str) -> list[str]:
    """One host pattern, any number of bracket groups: `a[1-2]-b[3-4]` -> 4 names."""
    names = [""]
    rest = item
    while rest:
        open_at = rest.find("[")
        if open_at < 0:
            names = [name + rest for name in names]
            break
        close_at = rest.find("]", open_at)
        prefix, body = rest[:open_at], rest[open_at + 1 : close_at]
        values = _expand_range(body, text)
        names = [name + prefix + value for name in names for value in values]
        rest = rest[close_at + 1 :]
    return names


def expand_hostlist(text: str) -> list[str]:
    """Every host of a Slurm host list, in order: `n[1-2],gpu-[01-03,07]` -> n1 n2 gpu-01 ...

    Raises HostlistError on a list Slurm would not write (unbalanced or bad ranges).
    """
    text = text.strip()
    if not text:
        return []
    hosts: list[str] = []
    for item in _split_top_level(text):
        item = item.strip()
        if not item:
            raise HostlistError(f"empty entry in host list {text!r}")
        hosts.extend(_expand_item(item, text))
    return hosts


def expand_tasks_per_node(text: str) -> list[int]:
    """Slurm's tasks-per-node string, one count per node: `2(x3),1` -> [2, 2, 2, 1]."""
    counts: list[int] = []
    for part in text.strip().split(","):
        match = _TASKS_ITEM.match(part.strip())
        if not match:
            raise HostlistError(f"bad tasks-per-node entry {part!r} in {text!r}")
        counts.extend([int(match["n"])] * int(match["times"] or 1))
    return counts


def unique_in_order(names: list[str]) -> list[str]:
    """The names without repeats, first occurrence first (a PBS node file -> its hosts)."""
    return list(dict.fromkeys(names))
