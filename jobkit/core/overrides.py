"""The `--set key.path=value` grammar shared by jobkit and the trainer (stdlib + PyYAML).

    item = parse_set("train.steps=20")        # SetItem: path ('train', 'steps'), value 20
    data = apply_set(data, item)              # the value replaces what is at its key path
    word = set_word("name", "0123")           # 'name=0123': what the trainer reads back

A value is YAML as the job-file loader reads it (jobkit/core/yamlsrc.py): `2`, `true`,
`[a, b]`, `{a: 1}`, `'quoted'`, nothing (null). Where YAML would not read the text whole
(a ` #` that YAML takes for a comment, a backquote or a lone `*`), the value is the text
as written, unless it opens a flow collection or a quoted string (`[a`, `'a`: an error).
Unquoted scalars keep their text as written (`source_text`), so each side applies the same
per-key reading (jobkit/spec/scalars.py) as for a file.

Errors are SpecError lines `--set ITEM: message` (`--set ITEM: key: message` for a key).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import yaml

from jobkit.core.errors import SpecError
from jobkit.core.yamlsrc import (
    KeyPath,
    build_node,
    format_path,
    parse_plain_with_source,
    parse_value_node,
)

SplitKey = Callable[[str], "tuple[str, ...] | None"]
"""`a.b.c` -> its key path, or None where it is not one (an empty part)."""

_FLOW_OR_QUOTE = ("[", "{", "'", '"')


@dataclass(frozen=True)
class SetItem:
    """One parsed `--set KEY=VALUE`."""

    item: str
    """As given on the command line."""
    key: str
    """KEY as written (spaces around it dropped)."""
    path: tuple[str, ...]
    value: Any
    source_text: dict[KeyPath, str] = field(default_factory=dict)
    """The text as written of each unquoted scalar YAML read as a number, boolean or date,
    by key path from the top (as YamlDoc.source_text)."""

    @property
    def source(self) -> str:
        """How errors name this override: `--set train.steps=20`."""
        return f"--set {self.item}"

    def locate(self, _path: KeyPath) -> tuple[str, int | None]:
        """Where a problem with any part of the value is: this option (no line)."""
        return self.source, None

    def nested(self) -> dict[str, Any]:
        """The value under its key path: `{'train': {'steps': 20}}`."""
        data: Any = self.value
        for part in reversed(self.path):
            data = {part: data}
        assert isinstance(data, dict)
        return data


def dotted_path(key: str) -> tuple[str, ...] | None:
    """`a.b.c` -> ('a', 'b', 'c'); None for an empty part (`a..b`, `.a`, `a.`)."""
    parts = tuple(key.split("."))
    return None if any(not part for part in parts) else parts


def parse_set(
    item: str, *, split: SplitKey = dotted_path, example: str = "resources.nodes=2"
) -> SetItem:
    """Parse one `KEY=VALUE`; `split` turns KEY into a key path, `example` is shown in errors."""
    source = f"--set {item}"
    key, sep, text = item.partition("=")
    key = key.strip()
    if not sep or not key:
        raise SpecError(f"expected KEY=VALUE, e.g. --set {example}", file=source)
    path = split(key)
    if path is None:
        example_key = example.partition("=")[0]
        raise SpecError(f"{key!r} is not a key path like {example_key}", file=source)
    try:
        value, source_text = parse_set_value(text, source)
    except SpecError as err:
        raise SpecError(err.message, file=source, key=key) from None
    written = {(*path, *inner): raw for inner, raw in source_text.items()}
    return SetItem(item=item, key=key, path=path, value=value, source_text=written)


def parse_set_value(text: str, source: str) -> tuple[Any, dict[KeyPath, str]]:
    """A `--set` value and the text as written of its unquoted typed scalars (paths relative
    to the value); SpecError (naming `source`, no line) for a broken collection or quote."""
    try:
        node = parse_value_node(text, source)
    except SpecError:
        if text.lstrip(" ").startswith(_FLOW_OR_QUOTE):
            raise
        return parse_plain_with_source(text, source)  # `a`b`, `*`: the text as written
    if isinstance(node, yaml.ScalarNode) and node.style is None:
        # unquoted: read whole (`a #b` is no comment, `!!str 1` no tag, `=` no value)
        whole = text.strip(" ")
        return parse_plain_with_source(whole if node.value == whole else text, source)
    return build_node(node, source)


def merge(base: Any, top: Any) -> Any:
    """Mappings merge key by key; anything else in `top` replaces `base` (neither is changed)."""
    if isinstance(base, dict) and isinstance(top, dict):
        merged = dict(base)
        for key, value in top.items():
            merged[key] = merge(base[key], value) if key in base else value
        return merged
    return top


def apply_set(data: dict[str, Any], item: SetItem) -> dict[str, Any]:
    """`data` with the override's value put at its key path: the value replaces what was
    there (a map too: `model.args={hidden: 8}` drops the file's other args), the maps above it
    are kept. SpecError where the key path goes through a value (`optim.lr.x=1` while
    optim.lr is a number). jobkit layers whole sources with merge() instead."""
    current: Any = data
    for end, part in enumerate(item.path[:-1], start=1):
        if not isinstance(current, dict) or part not in current:
            break
        current = current[part]
        if current is not None and not isinstance(current, dict):
            raise SpecError(
                f"{format_path(item.path[:end])} holds a value, not keys",
                file=item.source,
                key=format_path(item.path),
            )
    return _put(data, item.path, item.value)


def _put(data: dict[str, Any], path: tuple[str, ...], value: Any) -> dict[str, Any]:
    result = dict(data)
    head, rest = path[0], path[1:]
    if rest:
        child = result.get(head)
        result[head] = _put(child if isinstance(child, dict) else {}, rest, value)
    else:
        result[head] = value
    return result


def set_word(key: str, value: object) -> str:
    """`KEY=VALUE` that parse_set reads back as `value` (see set_value_text)."""
    return f"{key}={set_value_text(value)}"


def set_value_text(value: object) -> str:
    """`value` as `--set` text that the grammar reads back unchanged.

    Booleans are true/false, numbers as YAML writes them (`1.0e-05`, `.inf`), lists and
    mappings in flow style. A string stays as written where the grammar reads that text
    back as the same string, or as an unquoted number, boolean or date *written so* (`0123`,
    `1:30`, `on`: the key's type decides, as for the same text in a file); else it is
    quoted (`''`, `'null'`, `'[a, b]'`, `' x'`), so it arrives as the string.
    """
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int):
        return str(value)
    if isinstance(value, float):
        return _float_text(value)
    if isinstance(value, str):
        return value if _reads_back(value) else _quoted(value)
    if isinstance(value, (list, dict)):
        text = yaml.safe_dump(value, default_flow_style=True, width=math.inf, allow_unicode=True)
        return text.strip()
    raise TypeError(f"cannot write {type(value).__name__} value {value!r} as a --set value")


def _float_text(value: float) -> str:
    text = repr(value)
    try:
        back = parse_set_value(text, "--set")[0]
    except SpecError:
        back = None
    if isinstance(back, float) and (back == value or (math.isnan(back) and math.isnan(value))):
        return text
    return yaml.safe_dump(value).splitlines()[0]  # 1e-05 -> 1.0e-05, inf -> .inf


def _reads_back(text: str) -> bool:
    try:
        value, source_text = parse_set_value(text, "--set")
    except SpecError:
        return False
    if isinstance(value, str):
        return value == text
    return source_text.get(()) == text  # an unquoted number, boolean or date, as written


def _quoted(text: str) -> str:
    """A YAML quoted scalar holding exactly `text`."""
    if text.isprintable():
        return "'" + text.replace("'", "''") + "'"
    out = []
    for char in text:
        if char == '"' or char == "\\":
            out.append("\\" + char)
        elif char.isprintable():
            out.append(char)
        elif ord(char) <= 0xFF:
            out.append(f"\\x{ord(char):02x}")
        elif ord(char) <= 0xFFFF:
            out.append(f"\\u{ord(char):04x}")
        else:
            out.append(f"\\U{ord(char):08x}")
    return '"' + "".join(out) + '"'
