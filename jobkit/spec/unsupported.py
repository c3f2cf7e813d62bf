"""Keys the chosen backend cannot honour: refused at spec loading, or listed as ignored.

A key counts when the job file or a `--set` gives it a value other than the schema's
default; the site profile and the defaults never count (a profile written for one cluster
may set `resources.partition` for every job). `--ignore-unsupported` turns each refusal into
one printed line (docs/spec.md, "Keys a backend cannot honour").
"""

from __future__ import annotations

import functools
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from jobkit.backends.honours import set_keys, unhonoured
from jobkit.backends.pbs.options import DEPRECATED_KEYS
from jobkit.backends.registry import backend_class, builtin_names
from jobkit.core.errors import SpecError
from jobkit.core.yamlsrc import KeyPath, lookup
from jobkit.spec.schema import JobSpec

if TYPE_CHECKING:
    from jobkit.spec.load import Layer


def ignored_line(error: SpecError) -> str:
    """A refusal as the line --ignore-unsupported prints instead:
    `job.yaml:9: resources.mem: ignored: the sge backend has no memory request ...`."""
    shown = SpecError(f"ignored: {error.message}", file=error.file, line=error.line, key=error.key)
    return shown.show()


@functools.cache
def _defaults() -> dict[str, Any]:
    """The schema's defaults, dumped as a spec is (constructed, not validated: validation
    would import the default backend's module)."""
    construct: Any = JobSpec.model_construct  # name and run left unset: not dumped
    dumped: dict[str, Any] = construct().model_dump(mode="json", exclude={"name", "run"})
    return dumped


def _user_paths(layers: Sequence[Layer]) -> dict[str, Layer]:
    """Dotted key path -> the topmost user layer that sets it."""
    found: dict[str, Layer] = {}

    def walk(value: Any, path: KeyPath, layer: Layer) -> None:
        if path:
            found[".".join(str(part) for part in path)] = layer
        if isinstance(value, dict):
            for key, child in value.items():
                walk(child, (*path, str(key)), layer)

    for layer in layers:
        walk(layer.data, (), layer)
    for old, new in DEPRECATED_KEYS.items():
        if old in found:
            found.setdefault(new, found[old])
    return found


def deprecation_notes(layers: Sequence[Layer]) -> list[str]:
    """One line per deprecated key a user layer sets (it still works)."""
    notes = []
    for old, new in DEPRECATED_KEYS.items():
        path = tuple(old.split("."))
        for layer in layers:
            if lookup(layer.data, path)[0]:
                where = layer.location(path)
                notes.append(
                    SpecError(
                        f"deprecated: write {new} (the old key still works)",
                        file=where.file,
                        line=where.line,
                        key=old,
                    ).show()
                )
    return notes


def unsupported_keys(spec: JobSpec, user_layers: Sequence[Layer]) -> list[SpecError]:
    """Each key the user set that `spec.backend` cannot honour, as the SpecError naming its
    file, line and key (in key order)."""
    cls = backend_class(spec.backend)
    present = _user_paths(user_layers)
    dumped = spec.model_dump(mode="json", exclude={"name"})
    changed = {key for key in set_keys(dumped, _defaults()) if key in present}
    errors = []
    reads = set(cls.reads_sections(spec))
    sections = {key.split(".", 1)[0] for key in changed}
    for section in sorted(sections):
        # Only built-ins have a section in the (typed) schema: no entry point is read here.
        if section != cls.name and section in builtin_names() and section not in reads:
            key = min(k for k in changed if k.split(".", 1)[0] == section)
            errors.append(
                _located(
                    key,
                    present,
                    f"only the {section} backend reads the {section}:"
                    f" section (backend is {spec.backend}; remove it)",
                )
            )
    for found in unhonoured(cls, spec, frozenset(changed)):
        errors.append(_located(found.key, present, found.message))
    return errors


def _located(key: str, present: dict[str, Layer], message: str) -> SpecError:
    for end in range(key.count(".") + 1, 0, -1):
        prefix = ".".join(key.split(".")[:end])
        if prefix in present:
            where = present[prefix].location(tuple(key.split(".")))
            return SpecError(message, file=where.file, line=where.line, key=key)
    return SpecError(message, key=key)
