"""Specs that passed validation, remembered: a later render of the very same inputs skips
pydantic (importing it and building the schema is most of `jobkit render`'s start-up).

An entry is named by a hash of everything validation reads: each layer's data and the text
of its unquoted scalars (site profile, job file, --set, --backend, --profile), jobkit's own
code (every module's size and modification time, so an edited checkout misses) and
pydantic's (its version files). It holds the validated values (`model_dump(mode="json")`)
and which key paths are sections; spec/view.py turns them back into a SpecView. Only specs
that passed without a note (no deprecated key, nothing ignored) and name a built-in backend
(a plug-in's code is not in the hash) are remembered; errors never are, so every error is
the schema's own. The entries live in the template cache folder (render/cache.py: ours
alone, `JOBKIT_TEMPLATE_CACHE=off` turns both off); a damaged or foreign entry is a miss,
and a cache that cannot be written is skipped.
"""

from __future__ import annotations

import contextlib
import functools
import hashlib
import importlib.util
import json
import os
import tempfile
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from jobkit.backends.registry import builtin_names
from jobkit.core.version import __version__
from jobkit.spec.view import SectionPath, SpecView

_JOBKIT_FOLDER = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
"""jobkit/ itself, whose Python files the fingerprint covers."""

if TYPE_CHECKING:
    from pydantic import BaseModel

    from jobkit.spec.schema import JobSpec

ENTRY_FORMAT = 1
ENTRY_PREFIX = "spec-ok-"


def inputs_key(layers: Iterable[tuple[str, Mapping[Any, Any], Mapping[Any, Any]]]) -> str:
    """The hash naming an entry: (role, data, source text) of each layer, lowest first, read
    before anything is changed in them, and the code that validates them."""
    digest = hashlib.sha256()
    digest.update(repr((ENTRY_FORMAT, __version__, code_fingerprint())).encode())
    for role, data, source_text in layers:
        digest.update(repr((role, data, source_text)).encode("utf-8", "backslashreplace"))
    return digest.hexdigest()[:40]


@functools.cache
def code_fingerprint() -> tuple[tuple[str, int, int], ...]:
    """jobkit's modules and pydantic's version files: path, size and modification time
    (os.scandir: about 1.5 ms for jobkit's 160 modules)."""
    return (*_python_files(_JOBKIT_FOLDER), *pydantic_marks())


@functools.cache
def pydantic_marks() -> tuple[tuple[str, int, int], ...]:
    """pydantic's and pydantic-core's version files (path, size, modification time), found
    without importing them: an upgrade changes them."""
    marks: list[tuple[str, int, int]] = []
    for package, name in (("pydantic", "version.py"), ("pydantic_core", "__init__.py")):
        found = importlib.util.find_spec(package)
        if found is not None and found.origin:
            with contextlib.suppress(OSError):
                path = os.path.join(os.path.dirname(found.origin), name)
                info = os.stat(path)
                marks.append((path, info.st_size, info.st_mtime_ns))
    return tuple(marks)


def _python_files(root: str) -> list[tuple[str, int, int]]:
    marks: list[tuple[str, int, int]] = []
    pending = [root]
    while pending:
        with contextlib.suppress(OSError), os.scandir(pending.pop()) as entries:
            for entry in entries:
                if entry.is_dir(follow_symlinks=False):
                    if entry.name != "__pycache__":
                        pending.append(entry.path)
                elif entry.name.endswith(".py"):
                    info = entry.stat()
                    marks.append((entry.path, info.st_size, info.st_mtime_ns))
    return sorted(marks)


def _entry_path(key: str) -> Path | None:
    from jobkit.core.cache_folder import cache_dir, private_folder

    folder = cache_dir()
    if folder is None or not private_folder(folder):
        return None
    return folder / f"{ENTRY_PREFIX}{key}.json"


def recall(key: str) -> SpecView | None:
    """The remembered spec of these inputs, or None (never seen, damaged, cache off)."""
    path = _entry_path(key)
    if path is None:
        return None
    try:
        entry = json.loads(path.read_text(encoding="utf-8"))
        if entry.get("format") != ENTRY_FORMAT or entry["spec"]["backend"] not in builtin_names():
            return None
        sections = [tuple(str(part) for part in item) for item in entry["sections"]]
        return SpecView.from_dump(entry["spec"], sections, entry["given"])
    except (OSError, ValueError, KeyError, TypeError, AttributeError):
        return None  # a damaged entry is only a miss


def remember(key: str, spec: JobSpec) -> None:
    """Keep `spec` (validated, without notes) under `key`; a failure to write is ignored."""
    if spec.backend not in builtin_names():
        return
    path = _entry_path(key)
    if path is None:
        return
    entry = {
        "format": ENTRY_FORMAT,
        "spec": spec.model_dump(mode="json"),
        "given": spec.model_dump(mode="json", exclude_unset=True),
        "sections": [list(where) for where in section_paths(spec)],
    }
    with contextlib.suppress(OSError):
        handle, temp = tempfile.mkstemp(prefix=f".{path.name}.", dir=path.parent)
        try:
            with os.fdopen(handle, "w", encoding="utf-8") as stream:
                json.dump(entry, stream)
            os.replace(temp, path)
        except BaseException:
            with contextlib.suppress(OSError):
                os.unlink(temp)
            raise


def section_paths(model: BaseModel, path: SectionPath = ()) -> Sequence[SectionPath]:
    """Key paths under `model` whose value is itself a model (a section), outermost first."""
    from pydantic import BaseModel

    found: list[SectionPath] = []
    for name in type(model).model_fields:
        value = getattr(model, name)
        if isinstance(value, BaseModel):
            found.append((*path, name))
            found.extend(section_paths(value, (*path, name)))
    return found
