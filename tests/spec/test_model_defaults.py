"""The spec models' default factories (spec/model.py): plain functions that give exactly what
the builtins and model classes they stand for gave (a new empty list or mapping, the section
with all its defaults), so that building the models skips reading costly signatures."""

from __future__ import annotations

import types
from collections.abc import Iterator

from pydantic import BaseModel
from pydantic.fields import FieldInfo

from jobkit.spec.model import empty_dict, empty_list
from jobkit.spec.schema import JobSpec
from jobkit.spec.walk import section_model


def factory_fields(model: type[BaseModel]) -> Iterator[tuple[str, FieldInfo]]:
    """(dotted key, field) of every field with a default factory, sections included."""
    for name, field in model.model_fields.items():
        if field.default_factory is not None:
            yield f"{model.__name__}.{name}", field
        sub = section_model(field.annotation)
        if sub is not None:
            yield from factory_fields(sub)


def test_every_factory_is_a_plain_function() -> None:
    found = dict(factory_fields(JobSpec))
    assert len(found) >= 20  # every section of JobSpec, and the lists and mappings in them
    for key, field in found.items():
        assert isinstance(field.default_factory, types.FunctionType), key


def test_each_factory_gives_a_new_value_equal_to_what_it_stands_for() -> None:
    for key, field in factory_fields(JobSpec):
        factory = field.default_factory
        assert factory is not None
        first, second = factory(), factory()  # type: ignore[call-arg]
        assert first is not second, key  # never one value shared by two specs
        sub = section_model(field.annotation)
        if sub is not None:
            assert type(first) is sub, key
            assert first.model_dump() == sub().model_dump(), key
            assert first.model_fields_set == set(), key
        elif factory is empty_list:
            assert type(first) is list and not first, key
        elif factory is empty_dict:
            assert type(first) is dict and not first, key
