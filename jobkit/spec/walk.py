"""Walking the schema by key path: which keys a section has, where free-form mappings start.

Used to split `--set` key paths, to suggest keys for typos and to generate docs/spec.md.
"""

from __future__ import annotations

import types
from collections.abc import Iterator, Sequence
from typing import Annotated, Any, Literal, Union, get_args, get_origin

from pydantic import BaseModel

from jobkit.spec.schema import JobSpec


def strip_annotated(annotation: Any) -> Any:
    """`Annotated[X, ...]` -> X (repeatedly)."""
    while get_origin(annotation) is Annotated:
        annotation = get_args(annotation)[0]
    return annotation


def union_members(annotation: Any) -> list[Any]:
    """The members of `X | Y` (Annotated stripped), or [annotation] for a plain type."""
    annotation = strip_annotated(annotation)
    if get_origin(annotation) in (Union, types.UnionType):
        return [strip_annotated(arg) for arg in get_args(annotation)]
    return [annotation]


def section_model(annotation: Any) -> type[BaseModel] | None:
    """The model class behind a field that is a section (possibly optional), else None."""
    for member in union_members(annotation):
        if isinstance(member, type) and issubclass(member, BaseModel):
            return member
    return None


def is_free_mapping(annotation: Any) -> bool:
    """True for `dict[...]` fields, whose keys are the user's own (env.vars, overrides)."""
    return any(get_origin(member) is dict for member in union_members(annotation))


def literal_values(annotation: Any) -> list[Any]:
    """The allowed values of the Literal members of a field's type."""
    values: list[Any] = []
    for member in union_members(annotation):
        if get_origin(member) is Literal:
            values.extend(get_args(member))
    return values


def model_at(path: Sequence[str | int]) -> type[BaseModel] | None:
    """The section model at a key path (`()` is JobSpec), or None if the path is not a section."""
    model: type[BaseModel] = JobSpec
    for part in path:
        field = model.model_fields.get(part) if isinstance(part, str) else None
        sub = section_model(field.annotation) if field is not None else None
        if sub is None:
            return None
        model = sub
    return model


def split_key(dotted: str) -> tuple[str, ...] | None:
    """Split `a.b.c` into a key path; the tail under a free mapping stays one key.

    `run.train.overrides.train.steps` -> ('run', 'train', 'overrides', 'train.steps').
    Returns None for an empty part (`a..b`, `.a`, `a.`).
    """
    parts = dotted.split(".")
    if any(not part for part in parts):
        return None
    model: type[BaseModel] | None = JobSpec
    for index, part in enumerate(parts):
        field = model.model_fields.get(part) if model is not None else None
        if field is None:
            return tuple(parts)
        if is_free_mapping(field.annotation) and index + 2 < len(parts):
            return (*parts[: index + 1], ".".join(parts[index + 1 :]))
        model = section_model(field.annotation)
    return tuple(parts)


def iter_fields(
    model: type[BaseModel] = JobSpec, prefix: tuple[str, ...] = ()
) -> Iterator[tuple[tuple[str, ...], Any]]:
    """Every field, depth first: (key path, pydantic FieldInfo), sections before their keys."""
    for name, field in model.model_fields.items():
        path = (*prefix, name)
        yield path, field
        sub = section_model(field.annotation)
        if sub is not None:
            yield from iter_fields(sub, path)
