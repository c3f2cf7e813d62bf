"""YAML loading that remembers the line of every key path and refuses duplicate keys.

Every problem with the file itself (unreadable, binary, not UTF-8, empty, invalid YAML,
duplicate key, top level not a mapping) is a one-line SpecError naming the file and line.
"""

from __future__ import annotations

import re
from collections.abc import Hashable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from jobkit.core.errors import SpecError

KeyPath = tuple[str | int, ...]
"""A path into the data: mapping keys (str) and list indices (int)."""

MAX_FILE_BYTES = 1024 * 1024
"""A job spec is a few kilobytes; anything past a mebibyte is not one."""

MAX_NODES = 100_000
"""Bound on values built, so an alias bomb (billion laughs) cannot exhaust memory."""

MAX_DEPTH = 64
"""Nesting levels at most (a job spec has about five): deeper input is refused with a line,
before Python's recursion limit turns it into a crash."""

MERGE_KEY = "<<"


@dataclass(frozen=True)
class YamlDoc:
    """A loaded YAML mapping with the 1-based line of every key path in it."""

    data: dict[str, Any]
    lines: dict[KeyPath, int] = field(default_factory=dict)
    file: str = "<string>"
    source_text: dict[KeyPath, str] = field(default_factory=dict)
    """The text as written of each unquoted scalar YAML 1.1 read as a number, boolean or date
    (`24:00:00` is the base-60 integer 86400, `0123` the octal 83, `on` true): the spec decides
    per key which one the user meant (jobkit/spec/scalars.py)."""


def format_path(path: KeyPath) -> str:
    """`resources.nodes`, `ssh.hosts[1]`: how a key path is shown to the user.

    A key with a newline, escape or other unprintable character is shown quoted
    (`env.vars['a\\nb']`), so an error stays one harmless line on the terminal.
    """
    text = ""
    for part in path:
        if isinstance(part, int):
            text += f"[{part}]"
        elif not part.isprintable():
            text += f"[{part!r}]"
        else:
            text += ("." if text else "") + part
    return text


def lookup(data: Any, path: KeyPath) -> tuple[bool, Any]:
    """(True, value) at `path` inside nested mappings and lists, or (False, None)."""
    current = data
    for part in path:
        found, current = _child(current, part)
        if not found:
            return False, None
    return True, current


def _child(value: Any, part: str | int) -> tuple[bool, Any]:
    if isinstance(value, dict) and part in value:
        return True, value[part]
    if isinstance(value, list) and isinstance(part, int) and 0 <= part < len(value):
        return True, value[part]
    return False, None


def load_yaml_file(
    path: Path, display: str | None = None, *, what: str = "a job spec", empty_ok: bool = False
) -> YamlDoc:
    """Load a YAML file whose top level must be a mapping.

    `display` is how the file is named in errors (default: the path as given); `what` is
    what the file should be (for the size error); `empty_ok`: an empty file is `{}`.
    """
    name = display if display is not None else str(path)
    try:
        with open(path, "rb") as stream:
            raw = stream.read(MAX_FILE_BYTES + 1)
    except FileNotFoundError:
        raise SpecError("no such file", file=name) from None
    except IsADirectoryError:
        raise SpecError("is a directory, not a YAML file", file=name) from None
    except OSError as err:
        raise SpecError(f"cannot read: {err.strerror or err}", file=name) from None
    if len(raw) > MAX_FILE_BYTES:
        raise SpecError(f"is larger than {MAX_FILE_BYTES // 1024} KiB: not {what}", file=name)
    return load_yaml_bytes(raw, name, empty_ok=empty_ok)


def load_yaml_bytes(raw: bytes, file: str, *, empty_ok: bool = False) -> YamlDoc:
    """Decode and load YAML text whose top level must be a mapping."""
    if b"\x00" in raw:
        raise SpecError("is a binary file, not YAML text", file=file)
    try:
        text = raw.decode("utf-8-sig")
    except UnicodeDecodeError as err:
        line = raw[: err.start].count(b"\n") + 1
        raise SpecError(
            f"is not UTF-8 text (byte 0x{raw[err.start]:02x} at offset {err.start})",
            file=file,
            line=line,
        ) from None
    return load_yaml_text(text, file, empty_ok=empty_ok)


def load_yaml_text(text: str, file: str, *, empty_ok: bool = False) -> YamlDoc:
    """Load YAML text whose top level must be a mapping (`empty_ok`: or nothing, `{}`)."""
    node = _compose(text, file)
    if node is None and empty_ok:
        return YamlDoc(data={}, file=file)
    if node is None:
        raise SpecError(
            "is empty: expected a mapping such as `name: ...` and `run: ...`", file=file
        )
    if not isinstance(node, yaml.MappingNode):
        raise SpecError(
            f"the top level must be a mapping of keys (got {_node_kind(node)})",
            file=file,
            line=node.start_mark.line + 1,
        )
    builder = _Builder(file)
    data = builder.build(node, ())
    return YamlDoc(data=data, lines=builder.lines, file=file, source_text=builder.source_text)


def parse_value(text: str, source: str) -> Any:
    """Parse one YAML scalar or flow value (`2`, `[cuda, nccl]`, `{a: 1}`); errors name `source`."""
    return parse_value_with_source(text, source)[0]


def parse_value_with_source(text: str, source: str) -> tuple[Any, dict[KeyPath, str]]:
    """parse_value, and the source text of its scalars as YamlDoc.source_text has it (paths
    relative to the value)."""
    return build_node(parse_value_node(text, source), source)


def parse_value_node(text: str, source: str) -> yaml.Node | None:
    """The composed node of one YAML value (None: empty), for parse_value's callers that look
    at how it was written (jobkit/core/overrides.py); errors name `source`, no line."""
    return _compose(text, source, with_line=False)


def build_node(node: yaml.Node | None, source: str) -> tuple[Any, dict[KeyPath, str]]:
    """A node from parse_value_node as a value and its scalars' source text."""
    if node is None:
        return None, {}
    builder = _Builder(source, with_line=False)
    return builder.build(node, ()), builder.source_text


def parse_plain_with_source(text: str, source: str) -> tuple[Any, dict[KeyPath, str]]:
    """`text` whole as one unquoted scalar: its type as YAML resolves an unquoted scalar of
    that text (`12` an integer, `a #b` the string), nothing dropped or folded."""
    tag = _RESOLVER.resolve(yaml.ScalarNode, text, (True, False))  # type: ignore[no-untyped-call]
    if tag not in yaml.SafeLoader.yaml_constructors:  # `*`, `=`, `<<` resolve to no value
        tag = "tag:yaml.org,2002:str"
    mark = yaml.Mark(source, 0, 0, 0, "", 0)
    node = yaml.ScalarNode(tag, text, mark, mark, style=None)
    return build_node(node, source)


_RESOLVER = yaml.resolver.Resolver()


def _compose(text: str, file: str, *, with_line: bool = True) -> yaml.Node | None:
    """The node tree of `text`, by libyaml where PyYAML has it. Should libyaml refuse the
    text, PyYAML's own parser reads it again: its messages say more ("expected ',' or ']',
    but got ':'" where libyaml says "did not find expected ',' or ']'"), and the verdict
    and message are the same with or without libyaml. Texts libyaml would read where PyYAML
    refuses them go to PyYAML's parser alone (see _PYYAML_ONLY; tests/spec/test_yaml_parsers.py
    compares the two parsers)."""
    if _LibyamlParser is not None and not _FORCE_PURE and _PYYAML_ONLY.search(text) is None:
        fast = _LibyamlLoader(text)
        try:
            return fast.get_single_node()
        except yaml.YAMLError:
            pass
        finally:
            fast.dispose()
    try:
        loader = _PureLoader(text)  # the reader checks every character here
    except yaml.reader.ReaderError as err:
        line = text[: err.position].count("\n") + 1 if with_line else None
        message = f"invalid YAML: unacceptable character #x{err.character:04x} ({err.reason})"
        raise SpecError(message, file=file, line=line) from None
    try:
        return loader.get_single_node()
    except yaml.MarkedYAMLError as err:
        mark = err.problem_mark or err.context_mark
        problem = err.problem or err.context or "cannot be parsed"
        if err.context and err.problem and not err.context.startswith("while "):
            problem = f"{err.context}, {err.problem}"  # "expected a single document ..."
        line = mark.line + 1 if (mark is not None and with_line) else None
        raise SpecError(f"invalid YAML: {_one_line(problem)}", file=file, line=line) from None
    except yaml.YAMLError as err:
        raise SpecError(f"invalid YAML: {_one_line(str(err))}", file=file) from None
    finally:
        loader.dispose()


_PYYAML_ONLY = re.compile(yaml.reader.Reader.NON_PRINTABLE.pattern + "|[\t\ufeff]")
"""A text with one of these goes to PyYAML's parser alone: the characters PyYAML's reader
refuses, tabs (libyaml takes one after a key or in a flow collection's indentation) and a
byte-order mark past the start (libyaml skips one at the start of any line)."""


class _DepthLimit:
    """A composer that stops at MAX_DEPTH levels: PyYAML composes recursively (deep input
    ends in RecursionError), so deeper input is refused right there. Plain scalars get
    style None, as PyYAML's own parser gives them (libyaml's gives '')."""

    _depth = 0

    def compose_node(self, parent: yaml.Node | None, index: int) -> yaml.Node | None:
        self._depth += 1
        try:
            if self._depth > MAX_DEPTH:
                mark = self.peek_event().start_mark  # type: ignore[attr-defined]
                raise yaml.composer.ComposerError(
                    None, None, f"nested more than {MAX_DEPTH} levels deep", mark
                )
            node: yaml.Node | None = super().compose_node(parent, index)  # type: ignore[misc]
            return node
        finally:
            self._depth -= 1

    def compose_scalar_node(self, anchor: Any) -> Any:
        node = super().compose_scalar_node(anchor)  # type: ignore[misc]
        if node.style == "":
            node.style = None
        return node


class _PureLoader(_DepthLimit, yaml.SafeLoader):
    """PyYAML's pure-Python parser: the texts libyaml does not take as PyYAML would, the
    refusals' messages, and everything where PyYAML was built without libyaml."""

    def fetch_flow_collection_start(self, TokenClass: type[yaml.Token]) -> None:
        """`[` or `{`: the scanner reads a flow collection ahead to its end (to find simple
        keys) in time quadratic in its depth (a 1 MiB `[[[[...` would take hours), so the
        depth is checked here, before any of that work."""
        if self.flow_level >= MAX_DEPTH:
            raise yaml.scanner.ScannerError(
                None, None, f"nested more than {MAX_DEPTH} levels deep", self.get_mark()
            )
        super().fetch_flow_collection_start(TokenClass)


_LibyamlParser: Any
try:
    from yaml._yaml import CParser as _LibyamlParser
except ImportError:  # PyYAML without libyaml
    _LibyamlParser = None


if _LibyamlParser is not None:

    class _LibyamlLoader(
        _DepthLimit,
        yaml.composer.Composer,
        yaml.resolver.Resolver,
        _LibyamlParser,  # type: ignore[misc]
    ):
        """libyaml's parser (C: a typical spec in a tenth of the time) under PyYAML's own
        composer and resolver, so the nodes, marks and depth limit are the same."""

        def __init__(self, stream: str) -> None:
            _LibyamlParser.__init__(self, stream)
            yaml.composer.Composer.__init__(self)
            yaml.resolver.Resolver.__init__(self)


_FORCE_PURE = False
"""Tests compare the two parsers on the same input (tests/spec/test_yaml_parsers.py)."""


class _Builder:
    """Turns a composed node tree into Python values, recording key lines."""

    def __init__(self, file: str, *, with_line: bool = True) -> None:
        self.file = file
        self.with_line = with_line
        self.lines: dict[KeyPath, int] = {}
        self.source_text: dict[KeyPath, str] = {}
        self.count = 0
        self.constructor = yaml.SafeLoader("")
        self.active: set[int] = set()
        self.flattened: set[int] = set()

    def error(self, message: str, node: yaml.Node, path: KeyPath = ()) -> SpecError:
        line = node.start_mark.line + 1 if self.with_line else None
        return SpecError(message, file=self.file, line=line, key=format_path(path) or None)

    def build(self, node: yaml.Node, path: KeyPath) -> Any:
        self.count += 1
        if len(path) > MAX_DEPTH:
            raise self.error(f"nested more than {MAX_DEPTH} levels deep", node)
        if self.count > MAX_NODES:
            raise self.error(f"too many values (over {MAX_NODES}; an alias loop?)", node)
        if isinstance(node, yaml.ScalarNode):
            try:
                value = self.constructor.construct_object(node, deep=True)
                if node.style is None and value is not None and not isinstance(value, str):
                    self.source_text[path] = str(node.value)
                return value
            except Exception as err:
                # PyYAML's constructors raise more than YAMLError: ValueError for a date like
                # 2001-13-45 or an integer of over 4300 digits, KeyError for `!!bool maybe`.
                # The line is the node's: a marked error's own mark is left out.
                if isinstance(err, yaml.MarkedYAMLError) and err.problem:
                    text = err.problem
                elif isinstance(err, KeyError):
                    text = f"not a value: {err}"
                else:
                    text = str(err)
                why = _one_line(text).split(": use sys.")[0].split("; use sys.")[0]
                raise self.error(f"invalid YAML value: {why}", node, path) from None
        if id(node) in self.active:
            raise self.error("an alias refers to itself", node, path)
        self.active.add(id(node))
        try:
            if isinstance(node, yaml.SequenceNode):
                return [self._item(child, (*path, i)) for i, child in enumerate(node.value)]
            assert isinstance(node, yaml.MappingNode)
            return self._mapping(node, path)
        finally:
            self.active.discard(id(node))

    def _item(self, node: yaml.Node, path: KeyPath) -> Any:
        if self.with_line:
            self.lines[path] = node.start_mark.line + 1
        return self.build(node, path)

    def _mapping(self, node: yaml.MappingNode, path: KeyPath) -> dict[str, Any]:
        if id(node) not in self.flattened:  # an aliased mapping is visited again, already merged
            self._refuse_duplicates(node, path)
            try:
                self.constructor.flatten_mapping(node)  # `<<: *anchor` merge keys
            except yaml.MarkedYAMLError as err:
                problem = _one_line(err.problem or "bad merge key")
                raise self.error(f"invalid YAML: {problem}", node, path) from None
            self.flattened.add(id(node))
        result: dict[str, Any] = {}
        for key_node, value_node in node.value:
            key = self._key(key_node, path)
            child = (*path, key)
            if self.with_line:
                self.lines[child] = key_node.start_mark.line + 1
            result[key] = self.build(value_node, child)
        return result

    def _refuse_duplicates(self, node: yaml.MappingNode, path: KeyPath) -> None:
        seen: set[str] = set()
        for key_node, _ in node.value:
            key = self._key(key_node, path)
            if key == MERGE_KEY and key_node.tag == "tag:yaml.org,2002:merge":
                continue
            if key in seen:
                raise self.error("duplicate key", key_node, (*path, key))
            seen.add(key)

    def _key(self, node: yaml.Node, path: KeyPath) -> str:
        """Keys are taken as written (`on:` stays 'on', `1:` stays '1')."""
        if not isinstance(node, yaml.ScalarNode):
            raise self.error(f"a key must be plain text (got {_node_kind(node)})", node, path)
        value: Hashable = node.value
        return str(value)


def _node_kind(node: yaml.Node) -> str:
    if isinstance(node, yaml.MappingNode):
        return "a mapping"
    if isinstance(node, yaml.SequenceNode):
        return "a list"
    return f"the value {_one_line(str(node.value))!r}"


def _one_line(text: str) -> str:
    return " ".join(text.split())
