"""`resources.nodes` as a count or an elastic range `MIN:MAX` (docs/spec.md, "Value formats").

YAML 1.1 reads an unquoted `2:4` as the base-60 number 124; the loader puts the text back for
this key (it carries the SourceText marker), and the text is read here: `2:4` becomes
nodes 2 and max_nodes 4. A count written `010` (octal 8 to YAML 1.1) is refused, as for
every number key.
"""

from __future__ import annotations

import re

from jobkit.core.errors import CrossFieldError
from jobkit.spec.scalars import misread_number

_COUNT = re.compile(r"^[-+]?(0|[1-9][0-9]*)$")
_RANGE = re.compile(r"^\s*([0-9]+)\s*:\s*([0-9]+)\s*$")


def parse_node_range(text: str) -> tuple[int, int] | None:
    """(MIN, MAX) for `MIN:MAX`, else None."""
    found = _RANGE.match(text)
    return (int(found[1]), int(found[2])) if found else None


def node_count(value: object) -> object:
    """A count given as text (`"4"`) as its number; `010` refused as for every number key;
    other text is left for the integer check to refuse."""
    if isinstance(value, str):
        text = value.strip()
        if _COUNT.match(text):
            return int(text)
        message = misread_number(text)
        if message is not None:
            raise ValueError(message)
    return value


def split_node_range(data: object) -> object:
    """A resources mapping with `nodes: "MIN:MAX"` as nodes MIN and max_nodes MAX."""
    if not isinstance(data, dict):
        return data
    nodes = data.get("nodes")
    bounds = parse_node_range(nodes) if isinstance(nodes, str) else None
    if bounds is None:
        return data
    low, high = bounds
    if data.get("max_nodes") is not None:
        raise CrossFieldError(
            "resources.nodes", "give resources.nodes as MIN:MAX or resources.max_nodes, not both"
        )
    if not 1 <= low <= high:
        raise CrossFieldError(
            "resources.nodes", f"a range MIN:MAX needs 1 <= MIN <= MAX (got {low}:{high})"
        )
    return {**data, "nodes": low, "max_nodes": high if high > low else None}
