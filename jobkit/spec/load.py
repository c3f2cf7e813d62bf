"""Loading a job spec: layering, validation, and errors that name the file, line and key.

Layers, lowest first: the schema's defaults < the site profile < the job file
< each `--set key.path=value` in order < `--backend`. Mappings merge key by key; lists and
scalars replace. The first problem (by layer, then line) is raised as one SpecError line.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, cast

from jobkit.core import overrides
from jobkit.core.errors import SpecError
from jobkit.core.yamlsrc import KeyPath, format_path, load_yaml_file, lookup
from jobkit.spec.profiles import (
    PROFILE_NAME_RE,
    TEMPLATE_DIR_KEY,
    describe_missing,
    find_profile,
    profile_search_path,
)

if TYPE_CHECKING:
    from jobkit.spec.errors import Problem
    from jobkit.spec.schema import JobSpec

DEFAULT_ORIGIN = "default"


@dataclass(frozen=True)
class Location:
    """Where a value was set: a file and line, or a command-line option (line None)."""

    file: str
    line: int | None = None

    def __str__(self) -> str:
        return f"{self.file}:{self.line}" if self.line else self.file


@dataclass
class Layer:
    """One source of values: its data and the location of every key path in it."""

    data: dict[str, Any]
    where: Location
    """The layer as a whole: a file (no line) or the option that made it."""
    lines: dict[KeyPath, int] = field(default_factory=dict)
    source_text: dict[KeyPath, str] = field(default_factory=dict)
    """Unquoted scalars YAML read as numbers or booleans, as written (jobkit/spec/scalars.py)."""

    def has(self, path: KeyPath) -> bool:
        """True when this layer sets `path` (or a value under it)."""
        return lookup(self.data, path)[0]

    def location(self, path: KeyPath) -> Location:
        """The line of `path`, or of its nearest ancestor written in this layer."""
        for end in range(len(path), 0, -1):
            line = self.lines.get(path[:end])
            if line is not None:
                return Location(self.where.file, line)
        return self.where


@dataclass(frozen=True)
class LoadedSpec:
    """A validated job spec and where each of its values came from."""

    spec: JobSpec
    path: Path
    """The job file."""
    origins: Mapping[KeyPath, Location]
    """Key path -> the layer and line that set it; keys left out come from the defaults."""
    profile_path: Path | None = None
    """The site profile file layered under the job file, if any."""
    template_dir: Path | None = None
    """A site template folder for render(): from --template-dir or the profile's template_dir."""
    notes: tuple[str, ...] = ()
    """Lines for stderr: deprecated keys, and keys ignored with --ignore-unsupported."""

    def origin(self, key: str | KeyPath) -> str:
        """Where a value came from: `job.yaml:7`, `--set resources.nodes=2` or `default`."""
        from jobkit.spec.walk import split_key

        path = (split_key(key) or (key,)) if isinstance(key, str) else tuple(key)
        found = self.origins.get(path)
        return str(found) if found is not None else DEFAULT_ORIGIN


def load_spec(
    path: str | Path,
    *,
    sets: Sequence[str] = (),
    backend: str | None = None,
    profile: str | None = None,
    template_dir: str | Path | None = None,
    profile_dirs: Sequence[Path] | None = None,
    ignore_unsupported: bool = False,
    remembered: bool = False,
) -> LoadedSpec:
    """Load, layer and validate a job spec; raise SpecError (one line) on the first problem.

    `sets` are `key.path=value` strings (value parsed as YAML), applied in order;
    `backend` and `profile` are the --backend / --profile options; `template_dir` the
    --template-dir option; `profile_dirs` replaces the profile search path (default:
    JOBKIT_PROFILES, then ~/.config/jobkit/profiles). A key the job file or a --set gives
    that the backend cannot honour is refused (spec/unsupported.py); `ignore_unsupported`
    lists it in `notes` instead. `remembered`: inputs that passed before are taken as they
    passed, without importing pydantic (the spec is then a SpecView, spec/view.py), and
    inputs that pass now are remembered (spec/remembered.py; what `jobkit render` does).
    """
    job_path = Path(path)
    doc = load_yaml_file(job_path, str(path))
    job = Layer(doc.data, Location(doc.file), dict(doc.lines), dict(doc.source_text))
    top = [parse_set(item) for item in sets]
    for layer in (job, *top):
        _refuse_profile_only_keys(layer)
    if backend is not None:
        top.append(Layer({"backend": backend}, Location(f"--backend {backend}")))
    if profile is not None:
        top.append(Layer({"profile": profile}, Location(f"--profile {profile}")))
    search = profile_search_path() if profile_dirs is None else list(profile_dirs)
    site = _load_profile([job, *top], search)
    layers = ([site.layer] if site else []) + [job, *top]
    key = _inputs_key(layers, job) if remembered else None
    known = _recall(key)
    for layer in layers:
        if known is None:  # what it changes passed before: the same text, the same keys
            _use_source_text(layer)
        _normalise(layer.data)
    merged: dict[str, Any] = {}
    for layer in layers:
        merged = overrides.merge(merged, layer.data)
    notes: tuple[str, ...] = ()
    if known is not None:
        spec = known
    else:
        spec = _validate(merged, layers, job)
        notes = _unsupported(spec, [job, *top], ignore_unsupported)
        if key is not None and not notes:
            from jobkit.spec.remembered import remember

            remember(key, spec)
    chosen_dir = Path(template_dir) if template_dir is not None else None
    if chosen_dir is not None and not chosen_dir.is_dir():
        raise SpecError(f"not a directory: {chosen_dir}", file=f"--template-dir {template_dir}")
    return LoadedSpec(
        spec=spec,
        path=job_path,
        origins=_origins(merged, layers),
        profile_path=site.path if site else None,
        template_dir=chosen_dir or (site.template_dir if site else None),
        notes=notes,
    )


def _inputs_key(layers: Sequence[Layer], job: Layer) -> str:
    from jobkit.spec.remembered import inputs_key

    roles = ["job" if layer is job else "layer" for layer in layers]
    return inputs_key(
        (role, layer.data, layer.source_text) for role, layer in zip(roles, layers, strict=True)
    )


def _recall(key: str | None) -> JobSpec | None:
    """The remembered spec of these inputs (a SpecView standing in for JobSpec), or None."""
    if key is None:
        return None
    from jobkit.spec.remembered import recall

    return cast("JobSpec | None", recall(key))


def _unsupported(spec: JobSpec, user_layers: Sequence[Layer], ignore: bool) -> tuple[str, ...]:
    """Refuse the first key the backend cannot honour (by line), or with `ignore` list them
    all; deprecated keys get a note either way."""
    from jobkit.spec.unsupported import deprecation_notes, ignored_line, unsupported_keys

    found = unsupported_keys(spec, user_layers)
    if found and not ignore:
        raise min(found, key=lambda err: (err.file != user_layers[0].where.file, err.line or 0))
    return (*deprecation_notes(user_layers), *(ignored_line(err) for err in found))


def parse_set(item: str) -> Layer:
    """One `--set key.path=value` as a layer; the value is parsed as YAML (`2`, `[a, b]`) by
    the grammar the trainer shares (jobkit/core/overrides.py)."""
    from jobkit.spec.walk import split_key

    parsed = overrides.parse_set(item, split=split_key)
    _refuse_descending_into_value(parsed.path, parsed.source)
    return Layer(parsed.nested(), Location(parsed.source), source_text=dict(parsed.source_text))


@dataclass(frozen=True)
class _Profile:
    layer: Layer
    path: Path
    template_dir: Path | None


def _load_profile(layers: Sequence[Layer], search: Sequence[Path]) -> _Profile | None:
    """The site profile the topmost `profile` key names (None: no profile)."""
    naming = next((layer for layer in reversed(layers) if "profile" in layer.data), None)
    if naming is None:
        return None
    name = naming.data["profile"]
    where = naming.location(("profile",))
    if name is None:
        return None
    if not isinstance(name, str) or not PROFILE_NAME_RE.match(name):
        from jobkit.spec.errors import show_value

        raise SpecError(
            f"must be a profile name (letters, digits, . _ -; got {show_value(name)})",
            file=where.file,
            line=where.line,
            key="profile",
        )
    found = find_profile(name, search)
    if found is None:
        raise SpecError(
            describe_missing(name, search), file=where.file, line=where.line, key="profile"
        )
    doc = load_yaml_file(found)
    layer = Layer(doc.data, Location(doc.file), dict(doc.lines), dict(doc.source_text))
    if "profile" in layer.data:
        where = layer.location(("profile",))
        raise SpecError(
            "a profile cannot name another profile", file=where.file, line=where.line, key="profile"
        )
    template_dir = None
    if TEMPLATE_DIR_KEY in layer.data:
        where = layer.location((TEMPLATE_DIR_KEY,))
        value = layer.data.pop(TEMPLATE_DIR_KEY)
        if not isinstance(value, str) or not value:
            from jobkit.spec.errors import show_value

            raise SpecError(
                f"must be a folder path (got {show_value(value)})",
                file=where.file,
                line=where.line,
                key=TEMPLATE_DIR_KEY,
            )
        template_dir = found.parent / Path(value).expanduser()
        if not template_dir.is_dir():
            raise SpecError(
                f"not a directory: {template_dir}",
                file=where.file,
                line=where.line,
                key=TEMPLATE_DIR_KEY,
            )
    return _Profile(layer, found, template_dir)


def _refuse_profile_only_keys(layer: Layer) -> None:
    if TEMPLATE_DIR_KEY in layer.data:
        where = layer.location((TEMPLATE_DIR_KEY,))
        raise SpecError(
            "only a site profile may set this (use --template-dir)",
            file=where.file,
            line=where.line,
            key=TEMPLATE_DIR_KEY,
        )


def _refuse_descending_into_value(path: KeyPath, source: str) -> None:
    """`--set resources.nodes.x=1`: resources.nodes holds a value, not keys."""
    from jobkit.spec.walk import is_free_mapping, model_at, section_model

    for end in range(1, len(path)):
        parent = path[:end]
        model = model_at(parent[:-1])
        field_info = model.model_fields.get(str(parent[-1])) if model is not None else None
        if field_info is None or is_free_mapping(field_info.annotation):
            return  # an unknown key (validation names it) or the user's own keys
        if section_model(field_info.annotation) is None:
            raise SpecError(
                f"{format_path(parent)} holds a value, not keys",
                file=source,
                key=format_path(path),
            )


def _use_source_text(layer: Layer) -> None:
    """Each key takes an unquoted scalar as written or as YAML read it (jobkit/spec/scalars.py)."""
    from jobkit.spec.scalars import annotation_in, apply_source_text, by_shape
    from jobkit.spec.schema import JobSpec
    from jobkit.spec.values import SourceText

    def locate(path: KeyPath) -> tuple[str, int | None]:
        where = layer.location(path)
        return where.file, where.line

    annotation_at = by_shape(lambda path: annotation_in(JobSpec, path))
    apply_source_text(layer.data, layer.source_text, locate, annotation_at, SourceText)


def _normalise(data: dict[str, Any]) -> None:
    """Shorthands become their long form before merging (`env.nccl: ethernet`)."""
    env = data.get("env")
    if isinstance(env, dict) and isinstance(env.get("nccl"), str):
        env["nccl"] = {"preset": env["nccl"]}


def _validate(merged: dict[str, Any], layers: Sequence[Layer], job: Layer) -> JobSpec:
    from pydantic import ValidationError

    from jobkit.spec.schema import JobSpec

    try:
        return JobSpec.model_validate(merged)
    except ValidationError as err:
        from jobkit.spec.errors import problems  # only a spec with errors needs it

        found = problems(err, merged)
    ranked = [(_rank(problem.path, merged, layers, job), problem) for problem in found]
    ranked.sort(key=lambda item: item[0][:2])  # layer, then line: the order they are read in
    errors = [
        SpecError(problem.message, file=where.file, line=where.line, key=_key_text(problem))
        for (_, _, where), problem in ranked
    ]
    errors[0].more = errors[1:]  # every schema error at once, the first one first
    raise errors[0]


def _rank(
    path: KeyPath, merged: dict[str, Any], layers: Sequence[Layer], job: Layer
) -> tuple[int, float, Location]:
    """(layer index, line, location) of the value at `path` or its nearest present parent."""
    for end in range(len(path), 0, -1):
        sub = path[:end]
        if not lookup(merged, sub)[0]:
            continue
        for index in range(len(layers) - 1, -1, -1):
            if layers[index].has(sub):
                where = layers[index].location(path)
                return index, where.line or math.inf, where
    job_index = next(index for index, layer in enumerate(layers) if layer is job)
    return job_index, math.inf, job.where


def _key_text(problem: Problem) -> str | None:
    return format_path(problem.path) or None


def _origins(merged: dict[str, Any], layers: Sequence[Layer]) -> dict[KeyPath, Location]:
    """Every key path of the merged data -> the topmost layer that set it."""
    found: dict[KeyPath, Location] = {}

    def walk(value: Any, path: KeyPath) -> None:
        if path:
            for layer in reversed(layers):
                if layer.has(path):
                    found[path] = layer.location(path)
                    break
        if isinstance(value, dict):
            for key, child in value.items():
                walk(child, (*path, key))
        elif isinstance(value, list):
            for index, child in enumerate(value):
                walk(child, (*path, index))

    walk(merged, ())
    return found
