"""Turning pydantic's validation errors into short messages about key paths.

`problems(err, data)` gives one Problem (key path + human message) per offending key;
spec.py then finds the file and line of each and reports the first.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from pydantic import ValidationError

from jobkit.core.errors import CrossFieldError
from jobkit.core.yamlsrc import KeyPath, lookup
from jobkit.spec.walk import model_at, split_key

_TYPE_WORDS = {
    "int_type": "an integer",
    "int_parsing": "an integer",
    "int_from_float": "an integer",
    "int_parsing_size": "an integer",
    "float_type": "a number",
    "float_parsing": "a number",
    "bool_type": "true or false",
    "bool_parsing": "true or false",
    "string_type": "a string",
    "string_unicode": "a string",
    "model_type": "a mapping",
    "model_attributes_type": "a mapping",
    "dict_type": "a mapping",
    "list_type": "a list",
}
_COMPARISONS = {
    "greater_than_equal": (">=", "ge"),
    "greater_than": (">", "gt"),
    "less_than_equal": ("<=", "le"),
    "less_than": ("<", "lt"),
}


@dataclass(frozen=True)
class Problem:
    """One thing wrong with the spec: the key path it is about and what is wrong."""

    path: KeyPath
    message: str


def show_value(value: Any) -> str:
    """A value as the user wrote it, short: 'abc', 0, true, null, a list, a mapping."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if value is None:
        return "null"
    if isinstance(value, int | float):
        return repr(value)
    if isinstance(value, str):
        return repr(value if len(value) <= 60 else value[:57] + "...")
    if isinstance(value, list):
        return "a list"
    if isinstance(value, dict):
        return "a mapping"
    text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."


def problems(
    err: ValidationError, data: Any, *, extra_top_keys: Sequence[str] = ()
) -> list[Problem]:
    """One Problem per key path, in pydantic's order (union branches merged into one)."""
    grouped: dict[KeyPath, list[dict[str, Any]]] = {}
    for error in err.errors(include_url=False):
        detail = dict(error)
        grouped.setdefault(_data_path(detail, data), []).append(detail)
    found = []
    for path, details in grouped.items():
        found.append(_problem(path, details, extra_top_keys))
    return found


def _data_path(detail: dict[str, Any], data: Any) -> KeyPath:
    """The real key path of an error: pydantic's loc without union-branch and `[key]` tags."""
    loc = detail["loc"]
    path: list[str | int] = []
    current = data
    for index, part in enumerate(loc):
        found, child = lookup(current, (part,))
        if found:
            current = child
            path.append(part)
        elif (
            detail["type"] == "missing"
            and index == len(loc) - 1
            and isinstance(current, dict)
            and isinstance(part, str)
        ):
            path.append(part)
    return tuple(path)


def _problem(
    path: KeyPath, details: list[dict[str, Any]], extra_top_keys: Sequence[str]
) -> Problem:
    for detail in details:
        cross = _cross_field(detail)
        if cross is not None:
            return cross
    if len(details) == 1:
        return Problem(path, _message(path, details[0], extra_top_keys))
    specific = [d for d in details if d["type"] not in _TYPE_WORDS and d["type"] != "literal_error"]
    if specific:
        return Problem(path, _message(path, specific[0], extra_top_keys))
    words: list[str] = []
    for detail in details:
        if detail["type"] == "literal_error":
            words.extend(repr(value) for value in _expected(detail))
        else:
            word = _TYPE_WORDS[detail["type"]]
            words.append("true/false" if word == "true or false" else word)
    if "a number" in words and "an integer" in words:
        words.remove("an integer")
    unique = list(dict.fromkeys(words))
    got = show_value(details[0]["input"])
    return Problem(path, f"must be {_join_or(unique)} (got {got})")


def _cross_field(detail: dict[str, Any]) -> Problem | None:
    error = (detail.get("ctx") or {}).get("error")
    if not isinstance(error, CrossFieldError):
        return None
    key_path = error.path or split_key(error.key) or (error.key,)
    message = getattr(error, "message", None) or str(error).removeprefix(f"{error.key}: ")
    return Problem(key_path, message)


def _message(path: KeyPath, detail: dict[str, Any], extra_top_keys: Sequence[str]) -> str:
    kind = detail["type"]
    value = detail.get("input")
    ctx = detail.get("ctx") or {}
    got = show_value(value)
    if kind == "missing":
        return "is required"
    if kind == "extra_forbidden":
        return _unknown_key(path, extra_top_keys)
    if kind in _COMPARISONS:
        symbol, name = _COMPARISONS[kind]
        return f"must be {symbol} {ctx.get(name)} (got {got})"
    if kind == "literal_error":
        return f"must be one of: {', '.join(map(str, _expected(detail)))} (got {got})"
    if kind in _TYPE_WORDS:
        return f"must be {_TYPE_WORDS[kind]} (got {got})"
    if kind in ("too_short", "string_too_short"):
        least = ctx.get("min_length", 1)
        return "must not be empty" if least == 1 else f"must have at least {least} items"
    if kind == "too_long":
        return f"must have at most {ctx.get('max_length')} items (got {ctx.get('actual_length')})"
    if kind == "string_too_long":
        return f"must be at most {ctx.get('max_length')} characters long"
    if kind in ("value_error", "assertion_error") and "error" in ctx:
        return _one_line(str(ctx["error"]))
    message = str(detail.get("msg", "is not valid"))
    message = message.replace("Input should be", "must be").replace("Value error, ", "")
    return f"{_one_line(message)} (got {got})"


def _unknown_key(path: KeyPath, extra_top_keys: Sequence[str]) -> str:
    model = model_at(path[:-1])
    valid = list(model.model_fields) if model is not None else []
    if not path[:-1]:
        valid += list(extra_top_keys)
    key = str(path[-1]) if path else ""
    guess = _guess_key(key, valid)
    if guess:
        return f"unknown key (did you mean {guess!r}?)"
    if valid:
        return f"unknown key (valid keys: {', '.join(valid)})"
    return "unknown key"


def _guess_key(key: str, valid: list[str]) -> str | None:
    """The valid key the user most likely meant: same letters, close spelling, or a part of it."""
    import difflib  # only for an unknown key

    lowered = {name.lower(): name for name in valid}
    if key.lower() in lowered:
        return lowered[key.lower()]
    close = difflib.get_close_matches(key.lower(), valid, n=1, cutoff=0.6)
    if close:
        return close[0]
    if len(key) >= 3:
        parts = [name for name in valid if key.lower() in name or name in key.lower()]
        if parts:
            return max(parts, key=lambda name: difflib.SequenceMatcher(None, key, name).ratio())
    return None


def _expected(detail: dict[str, Any]) -> list[str]:
    expected = str((detail.get("ctx") or {}).get("expected", ""))
    return re.findall(r"'([^']*)'", expected) or [expected]


def _join_or(words: list[str]) -> str:
    if len(words) <= 1:
        return "".join(words)
    return ", ".join(words[:-1]) + " or " + words[-1]


def _one_line(text: str) -> str:
    return " ".join(text.split())
