"""What an unquoted YAML scalar means for the key it sets: the text as written, or YAML's value.

YAML 1.1 (PyYAML) reads `24:00:00` as the base-60 integer 86400, `1:00:00` as 3600, `0123` as
the octal 83, `1.10` as the float 1.1 and `on`/`yes`/`no`/`off` as booleans. None of that is
what a job spec means, and taken as YAML reads it the job is silently wrong (`--time=60-00:00:00`
for a day). So, key by key (YamlDoc.source_text has the text of every such scalar):
- text keys (names, partitions, accounts, commands, env.vars, trainer overrides: anything the
  schema takes as a string) and keys marked `SourceText` (durations, memory sizes, arrays)
  get the text as written: `time: 24:00:00` is 24 hours, `account: 0123` is "0123",
  `env.vars: {TAG: 1.10}` exports 1.10, `partition: on` is the partition "on";
- number keys refuse the base-60 and octal forms with a line saying how to write the number
  (`nodes: 010` is not 8 nor 10 until the user says which);
- booleans, and `null`/`~`/an empty value (not set), keep YAML's meaning.

The bundled trainer reads its config and `--set` values by the same rules over its own
schema (train/config/load.py passes `annotation_at`).
"""

from __future__ import annotations

import re
import types
from collections.abc import Callable
from typing import Annotated, Any, Union, get_args, get_origin

from pydantic import BaseModel

from jobkit.core.errors import SpecError
from jobkit.core.yamlsrc import KeyPath, format_path

_BASE_60 = re.compile(r"^[-+]?[0-9][0-9_]*(?::[0-5]?[0-9])+(?:\.[0-9_]*)?$")
_OCTAL = re.compile(r"^[-+]?0[0-7_]+$")

Locate = Callable[[KeyPath], tuple[str, int | None]]
"""Key path -> (file or option, line) for an error."""

AnnotationAt = Callable[[KeyPath], Any]
"""Key path -> the declared type of its value, or None where the schema has none."""


def apply_source_text(
    data: dict[str, Any],
    source_text: dict[KeyPath, str],
    locate: Locate,
    annotation_at: AnnotationAt,
    marker: type | None = None,
) -> None:
    """Put back the text as written where the key wants text; refuse misleading numbers.

    `data` is changed in place; SpecError names the file, line and key of a refused value.
    `annotation_at` gives the type at a key path (the job spec's, from spec/load.py, or the
    trainer's config schema); a type carrying `marker` (the spec's SourceText) is text too.
    This module imports no schema: the trainer imports it.
    """
    for path, text in source_text.items():
        kind = _kind_at(annotation_at(path), marker)
        if kind == "text":
            _set(data, path, text)
        elif kind == "number":
            _refuse_misread_number(path, text, locate)


def by_shape(find: AnnotationAt) -> AnnotationAt:
    """`find`, asked once per shape of path: every item of a list (or value of a mapping) has
    the same type, so `sweep.grid.b.0` and `sweep.grid.b.999` are one question (a sweep of
    1,000 values took 1,000 walks of the schema)."""
    found: dict[KeyPath, Any] = {}

    def at(path: KeyPath) -> Any:
        shape = tuple(0 if isinstance(part, int) else part for part in path)
        if shape not in found:
            found[shape] = find(shape)
        return found[shape]

    return at


def _kind_at(annotation: Any, marker: type | None) -> str | None:
    """'text', 'number' or None (a boolean, a section, or a key the schema does not know)."""
    if annotation is None:
        return None
    if marker is not None and _marked_source_text(annotation, marker):
        return "text"
    members = _union_members(annotation)
    if any(member is str for member in members):
        return "text"
    if any(member is int or member is float for member in members):
        return "number"
    return None


def annotation_in(root: type[BaseModel], path: KeyPath) -> Any:
    """The declared type of the value at a key path under `root`, or None where it has none."""
    model: type[BaseModel] | None = root
    annotation: Any = None
    for part in path:
        if model is not None:
            field = model.model_fields.get(part) if isinstance(part, str) else None
            if field is None:
                return None
            annotation = (field.metadata and _with_metadata(field)) or field.annotation
            model = _section_model(field.annotation)
            continue
        container = _container(annotation)
        if container is None:
            return None
        annotation = container
        model = _section_model(annotation)
    return annotation


def _with_metadata(field: Any) -> Any:
    """The field's annotation with its Annotated metadata (pydantic keeps it apart)."""
    return Annotated[(field.annotation, *field.metadata)]


def _container(annotation: Any) -> Any:
    """The item type of a list or the value type of a dict field (Optional stripped)."""
    for member in _union_members(annotation):
        origin = get_origin(member)
        if origin is list:
            return get_args(member)[0]
        if origin is dict:
            return get_args(member)[1]
    return None


def _marked_source_text(annotation: Any, marker: type) -> bool:
    """True when the type (or a member of it) carries the SourceText marker."""
    pending = [annotation]
    while pending:
        current = pending.pop()
        metadata = getattr(current, "__metadata__", ())
        if any(isinstance(item, marker) for item in metadata):
            return True
        inner = _strip_annotated(current)
        pending.extend(arg for arg in get_args(inner) if arg is not type(None))
        if current is not inner:
            pending.append(inner)
    return False


def _set(data: Any, path: KeyPath, value: str) -> None:
    target = data
    for part in path[:-1]:
        target = target[part]
    target[path[-1]] = value


def misread_number(text: str) -> str | None:
    """Why an unquoted number as written is refused (base-60 or octal to YAML 1.1), or None."""
    if _BASE_60.match(text):
        meaning = "a base-60 number"
        advice = "write the plain number you mean"
    elif _OCTAL.match(text):
        meaning = "an octal number"
        advice = f"write {text.lstrip('+-0').replace('_', '') or '0'}, without the leading zero"
    else:
        return None
    return (
        f"{text} is {meaning} to YAML 1.1 ({_yaml_value(text)}), which is surely not what you"
        f" mean: {advice}"
    )


def _refuse_misread_number(path: KeyPath, text: str, locate: Locate) -> None:
    message = misread_number(text)
    if message is None:
        return
    file, line = locate(path)
    raise SpecError(message, file=file, line=line, key=format_path(path))


def _yaml_value(text: str) -> str:
    import yaml

    return repr(yaml.safe_load(text))


# As jobkit/spec/walk.py has them (which imports the whole job schema).


def _strip_annotated(annotation: Any) -> Any:
    while get_origin(annotation) is Annotated:
        annotation = get_args(annotation)[0]
    return annotation


def _union_members(annotation: Any) -> list[Any]:
    annotation = _strip_annotated(annotation)
    if get_origin(annotation) in (Union, types.UnionType):
        return [_strip_annotated(arg) for arg in get_args(annotation)]
    return [annotation]


def _section_model(annotation: Any) -> type[BaseModel] | None:
    for member in _union_members(annotation):
        if isinstance(member, type) and issubclass(member, BaseModel):
            return member
    return None
