"""A remembered job spec's stand-in for JobSpec: its values as read-only attributes.

`jobkit render` of a spec whose very inputs passed validation before (spec/remembered.py)
reads the validated values back instead of building the pydantic models again (importing
pydantic and building the schema is most of render's start-up). SpecView answers what the
render path asks of a JobSpec: every key as an attribute, sections as SpecSection, the
derived values (spec/derived.py), `model_dump` and `model_copy`. Anything else (a pydantic
method, `model_fields_set`...) validates the values into the real JobSpec once and asks it,
so a use this module did not foresee is slower, never different.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping, Sequence
from typing import TYPE_CHECKING, Any

from jobkit.spec import derived

if TYPE_CHECKING:
    from pydantic import BaseModel

    from jobkit.spec.schema import JobSpec

SectionPath = tuple[str, ...]


class SpecSection:
    """One section (resources, env.nccl, run.train...) of a remembered spec."""

    __slots__ = ("_path", "_root", "_values")

    def __init__(self, values: dict[str, Any], path: SectionPath, root: SpecView | None) -> None:
        """`root` is the whole spec's view (None: this is the whole spec)."""
        object.__setattr__(self, "_values", values)
        object.__setattr__(self, "_path", path)
        object.__setattr__(self, "_root", root)

    def __getattr__(self, name: str) -> Any:
        values: dict[str, Any] = object.__getattribute__(self, "_values")
        if name in values:
            return values[name]
        if name.startswith("_"):  # copy, pickle, Jinja's probes: never the real model
            raise AttributeError(name)
        return getattr(self._real(), name)

    def __setattr__(self, name: str, value: Any) -> None:
        raise AttributeError(f"a remembered spec is read-only ({name})")

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.model_dump()!r})"

    def _real(self) -> BaseModel:
        """The pydantic section these values stand for (validated once, on first need)."""
        root: SpecView = object.__getattribute__(self, "_root")
        found: Any = root.real_spec()
        for part in self._path:
            found = getattr(found, part)
        return found  # type: ignore[no-any-return]

    def model_dump(self, *, mode: str = "python", exclude: Collection[str] = ()) -> dict[str, Any]:
        """The values as plain data (JSON types either way: they were stored as JSON)."""
        del mode  # the values are JSON types: both modes are the same
        return {key: _plain(value) for key, value in self._values.items() if key not in exclude}

    def model_copy(
        self, *, update: Mapping[str, Any] | None = None, deep: bool = False
    ) -> SpecSection:
        """A copy with `update` applied (not validated, as pydantic's model_copy); the
        values are plain data, so every copy is a deep one."""
        del deep
        values = _unwrap(object.__getattribute__(self, "_values"))
        values.update({key: _plain(value) for key, value in (update or {}).items()})
        return self._copy(values)

    def __copy__(self) -> SpecSection:
        return self.model_copy()

    def __deepcopy__(self, memo: dict[int, Any]) -> SpecSection:
        return self.model_copy()

    def _copy(self, values: dict[str, Any]) -> SpecSection:
        """A section of the same root with `values` (plain data)."""
        path: SectionPath = object.__getattribute__(self, "_path")
        root: SpecView = object.__getattribute__(self, "_root")
        sections = {where[len(path) :] for where in root.sections() if where[: len(path)] == path}
        return SpecSection(_wrap(values, (), sections - {()}, root, path), path, root)


class SpecView(SpecSection, derived.DerivedValues):
    """The whole job spec, remembered (spec/remembered.py); stands in for JobSpec."""

    __slots__ = ("_given", "_real_spec")

    def __init__(self, values: dict[str, Any], path: SectionPath = (), root: None = None) -> None:
        super().__init__(values, (), None)
        object.__setattr__(self, "_real_spec", None)
        object.__setattr__(self, "_given", None)

    @classmethod
    def from_dump(
        cls,
        dump: Mapping[str, Any],
        sections: Sequence[SectionPath],
        given: Mapping[str, Any] | None = None,
    ) -> SpecView:
        """The view of a JobSpec's `model_dump(mode="json")`; `sections` are the key paths
        that hold a section (a model) rather than a plain value; `given` the dump of the
        keys that were given (`exclude_unset`), from which the real JobSpec is rebuilt with
        the same `model_fields_set` (default: every key)."""
        view = cls({})
        object.__setattr__(view, "_values", _wrap(_unwrap(dict(dump)), (), set(sections), view))
        object.__setattr__(view, "_given", None if given is None else _unwrap(dict(given)))
        return view

    def real_spec(self) -> JobSpec:
        """The JobSpec these values stand for: validated once, when something not foreseen
        here is asked (the values passed validation before, so this cannot fail)."""
        found: JobSpec | None = object.__getattribute__(self, "_real_spec")
        if found is None:
            from jobkit.spec.schema import JobSpec

            given = object.__getattribute__(self, "_given")
            found = JobSpec.model_validate(given if given is not None else self.model_dump())
            object.__setattr__(self, "_real_spec", found)
        return found

    def _real(self) -> BaseModel:
        return self.real_spec()

    def sections(self) -> list[SectionPath]:
        """The key paths that hold a section, outermost first."""
        return _section_paths(object.__getattribute__(self, "_values"), ())

    def _copy(self, values: dict[str, Any]) -> SpecSection:
        return SpecView.from_dump(values, self.sections())

    def model_copy(
        self, *, update: Mapping[str, Any] | None = None, deep: bool = False
    ) -> SpecView:
        """A copy with `update` applied (not validated, as pydantic's model_copy)."""
        copied = super().model_copy(update=update, deep=deep)
        assert isinstance(copied, SpecView)
        return copied


def _plain(value: Any) -> Any:
    """Sections as dicts, containers copied: plain JSON-like data."""
    if isinstance(value, SpecSection):
        return value.model_dump()
    if hasattr(value, "model_dump"):  # a pydantic section given to model_copy(update=...)
        return value.model_dump(mode="json")
    if isinstance(value, dict):
        return {key: _plain(child) for key, child in value.items()}
    if isinstance(value, list):
        return [_plain(child) for child in value]
    return value


def _unwrap(values: dict[str, Any]) -> dict[str, Any]:
    return {key: _plain(value) for key, value in values.items()}


def _section_paths(values: Mapping[str, Any], path: SectionPath) -> list[SectionPath]:
    found: list[SectionPath] = []
    for key, value in values.items():
        if isinstance(value, SpecSection):
            found.append((*path, key))
            found.extend(_section_paths(object.__getattribute__(value, "_values"), (*path, key)))
    return found


def _wrap(
    values: dict[str, Any],
    path: SectionPath,
    sections: set[SectionPath],
    root: SpecView,
    base: SectionPath = (),
) -> dict[str, Any]:
    """Plain values with each dict at a section path (relative to `base`) a SpecSection."""
    wrapped: dict[str, Any] = {}
    for key, value in values.items():
        where = (*path, key)
        if where in sections and isinstance(value, dict):
            inner = _wrap(value, where, sections, root, base)
            wrapped[key] = SpecSection(inner, (*base, *where), root)
        else:
            wrapped[key] = value
    return wrapped
