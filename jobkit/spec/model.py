"""The base of every job-spec section (spec/schema.py and backends' own option sections), and
the default factories the sections use."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, TypeVar

from pydantic import BaseModel, ConfigDict

Section = TypeVar("Section", bound=BaseModel)


class StrictModel(BaseModel):
    """Unknown keys are errors; values are validated on assignment too.

    A number where text is expected is taken as text (`account: 12345`, `--epochs, 3`).
    """

    model_config = ConfigDict(
        extra="forbid", validate_assignment=True, frozen=False, coerce_numbers_to_str=True
    )


# Default factories are plain functions: pydantic reads each factory's signature when it
# builds a model, and for the builtins `list` and `dict` or a model class that means parsing
# text signatures or building the class's own (~1-3 ms each, at every first render).


def empty_list() -> list[Any]:
    """A new empty list (default_factory)."""
    return []


def empty_dict() -> dict[Any, Any]:
    """A new empty mapping (default_factory)."""
    return {}


def default_section(model: type[Section]) -> Callable[[], Section]:
    """A default_factory making `model()`: the section with all its defaults."""

    def build() -> Section:
        return model()

    build.__qualname__ = build.__name__ = f"default_{model.__name__}"
    return build
