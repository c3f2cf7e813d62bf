"""Spec: a validated job spec built from Python, loaded exactly as `jobkit submit` loads one
(the same layers, checks and `file:line: key: message` errors)."""

from __future__ import annotations

import tempfile
from collections.abc import Mapping
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from jobkit.core.errors import SpecError

if TYPE_CHECKING:
    from jobkit.spec.load import LoadedSpec
    from jobkit.spec.schema import JobSpec

DICT_SOURCE = "<dict>"
"""How a spec given as a dict is named in errors (`<dict>: resources.nodes: must be >= 1`)."""

SetValues = Mapping[str, object]


@dataclass(frozen=True)
class _Source:
    """What a Spec was loaded from, kept so that `with_set` can load it again with more."""

    path: Path | None
    data: Mapping[str, Any] | None
    sets: tuple[str, ...]
    backend: str | None
    profile: str | None


class Spec:
    """A job spec, validated. Build one with `Spec.load(path, set={...})` or
    `Spec.from_dict({...})`; `with_set` gives a copy with more overrides."""

    def __init__(self, loaded: LoadedSpec, source: _Source) -> None:
        self.loaded = loaded
        """What spec/load.py made of it (the spec and where each value came from)."""
        self._source = source

    @classmethod
    def load(
        cls,
        path: str | Path,
        *,
        set: SetValues | None = None,
        backend: str | None = None,
        profile: str | None = None,
    ) -> Spec:
        """Load a job YAML with `--set`-style overrides (key path -> value); SpecError (the
        CLI's line) on a problem."""
        source = _Source(Path(path), None, _set_words(set), backend, profile)
        return cls(_load(source), source)

    @classmethod
    def from_dict(
        cls,
        data: Mapping[str, Any],
        *,
        set: SetValues | None = None,
        backend: str | None = None,
        profile: str | None = None,
    ) -> Spec:
        """A spec from a mapping laid out like a job YAML; errors name `<dict>` and the key."""
        source = _Source(None, dict(data), _set_words(set), backend, profile)
        return cls(_load(source), source)

    def with_set(self, values: SetValues) -> Spec:
        """A copy with these overrides applied after the existing ones (later wins)."""
        source = replace(self._source, sets=self._source.sets + _set_words(values))
        return Spec(_load(source), source)

    @property
    def spec(self) -> JobSpec:
        """The validated schema object (read it; build a new Spec to change it)."""
        return self.loaded.spec

    @property
    def name(self) -> str:
        return self.loaded.spec.name

    @property
    def backend(self) -> str:
        return self.loaded.spec.backend

    @property
    def is_sweep(self) -> bool:
        return self.loaded.spec.sweep is not None

    def to_dict(self) -> dict[str, Any]:
        """Every key with its value (defaults filled in), as JSON-ready data."""
        return self.loaded.spec.model_dump(mode="json")

    def __repr__(self) -> str:
        return f"Spec(name={self.name!r}, backend={self.backend!r})"


def _set_words(values: SetValues | None) -> tuple[str, ...]:
    """{key: value} as the CLI's `key=value` words, each value written so that the --set
    grammar reads it back unchanged (core/overrides.py)."""
    from jobkit.core.overrides import set_value_text

    words = []
    for key, value in (values or {}).items():
        if value is None:  # null: the key's default (a section: left out)
            words.append(f"{key}=null")
            continue
        try:
            words.append(f"{key}={set_value_text(value)}")
        except TypeError as err:
            raise SpecError(str(err), file="set", key=key) from None
    return tuple(words)


def _load(source: _Source) -> LoadedSpec:
    from jobkit.spec.load import load_spec

    if source.path is not None:
        return load_spec(
            source.path, sets=source.sets, backend=source.backend, profile=source.profile
        )
    return _load_dict(source)


def _load_dict(source: _Source) -> LoadedSpec:
    """A mapping loaded through a private temporary file (the loader reads files); the
    file's name becomes `<dict>` in the spec and in its errors (line numbers dropped: they
    would be the temporary file's)."""
    import yaml

    from jobkit.spec.load import Location, load_spec

    with tempfile.TemporaryDirectory(prefix="jobkit-spec-") as folder:
        path = Path(folder) / "spec.yaml"
        path.write_text(yaml.safe_dump(dict(source.data or {}), sort_keys=False))
        try:
            loaded = load_spec(
                path, sets=source.sets, backend=source.backend, profile=source.profile
            )
        except SpecError as err:
            raise _relabelled(err, str(path)) from None
    origins = {
        key: Location(DICT_SOURCE) if where.file == str(path) else where
        for key, where in loaded.origins.items()
    }
    return replace(loaded, path=Path(DICT_SOURCE), origins=origins)


def _relabelled(err: SpecError, temp_file: str) -> SpecError:
    """The error (and its further ones) naming `<dict>` instead of the temporary file."""

    def one(error: SpecError) -> SpecError:
        if error.file != temp_file:
            return error
        return SpecError(error.message, file=DICT_SOURCE, key=error.key)

    first = one(err)
    first.more = [one(e) for e in err.more]
    return first
