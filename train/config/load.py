"""The trainer's config: one YAML file (bundled name or path) plus typed `--set key=value`.

Torch-free, so a bad config fails in a fraction of a second with `file:line: key: message`.
The file is read by jobkit's loader (jobkit/core/yamlsrc.py) and `--set` by jobkit's grammar
(jobkit/core/overrides.py), with the same per-key reading of unquoted scalars as a job spec
(jobkit/spec/scalars.py): what jobkit checks at render time is what the trainer reads.
The sections themselves are in train/config/schema.py (re-exported here).
"""

from __future__ import annotations

import math
from dataclasses import replace
from pathlib import Path
from typing import Any, get_args

import yaml
from pydantic import BaseModel, ValidationError

from jobkit.core import overrides
from jobkit.core.errors import SpecError
from jobkit.core.yamlsrc import KeyPath, format_path, load_yaml_file, lookup
from jobkit.spec.scalars import annotation_in, apply_source_text
from train.config.args import (
    BUILTIN_ARGS,
    CharsArgs,
    MlpArgs,
    SyntheticArgs,
    TransformerArgs,
)
from train.config.schema import (
    TrainerConfig,
)
from train.config.sections import (
    BUILTIN_DATA,
    BUILTIN_MODELS,
    AmpConfig,
    CheckpointConfig,
    DataConfig,
    DistributedConfig,
    EvalConfig,
    KeyedError,
    LoggingConfig,
    ModelConfig,
    OptimConfig,
    ProfileConfig,
    Section,
    TrainConfig,
    WandbConfig,
)

__all__ = [
    "BUILTIN_ARGS",
    "BUILTIN_DATA",
    "BUILTIN_MODELS",
    "CONFIG_DIR",
    "AmpConfig",
    "CharsArgs",
    "CheckpointConfig",
    "ConfigError",
    "DataConfig",
    "DistributedConfig",
    "EvalConfig",
    "LoadedConfig",
    "LoggingConfig",
    "MlpArgs",
    "ModelConfig",
    "OptimConfig",
    "ProfileConfig",
    "Section",
    "SyntheticArgs",
    "TrainConfig",
    "TrainerConfig",
    "TransformerArgs",
    "WandbConfig",
    "bundled_configs",
    "config_data",
    "load_config",
    "parse_set_value",
    "per_rank_batch",
    "resolve_config_path",
    "scaled_lr",
]

CONFIG_DIR = Path(__file__).resolve().parents[1] / "configs"
SET_EXAMPLE = "train.steps=200"


class ConfigError(Exception):
    """A bad config or override, one line: `file:line: key: message` (as jobkit's SpecError),
    `--set key: message` for a checked value an override set, `--set ITEM: message` for an
    override that cannot be read."""

    exit_code = 2

    def __init__(self, where: str, key: str | None, message: str) -> None:
        self.where = where
        self.key = key
        self.message = message
        super().__init__(self.show())

    def show(self) -> str:
        """The line printed on stderr."""
        if self.where == "--set" and self.key:
            return f"--set {self.key}: {self.message}"
        key = f"{self.key}: " if self.key else ""
        return f"{self.where}: {key}{self.message}"

    @classmethod
    def from_spec_error(cls, err: SpecError) -> ConfigError:
        """jobkit's loader and grammar errors, shown the same."""
        where = (err.file or "") + (f":{err.line}" if err.line else "")
        return cls(where, err.key, err.message)


def bundled_configs() -> list[str]:
    """Names accepted by `--config NAME`."""
    return sorted(path.stem for path in CONFIG_DIR.glob("*.yaml"))


def resolve_config_path(name_or_path: str) -> Path:
    """A bundled config name (tiny-lm, mlp) if one matches, else a file path."""
    bundled = CONFIG_DIR / f"{name_or_path}.yaml"
    if "/" not in name_or_path and bundled.is_file():
        return bundled
    path = Path(name_or_path)
    if path.is_file():
        return path
    raise ConfigError(
        "--config",
        None,
        f"{name_or_path!r} is neither a bundled config ({', '.join(bundled_configs())}) nor a file",
    )


def parse_set_value(text: str) -> Any:
    """A `--set` value as the shared grammar reads it, before the key's type has its say:
    `200`, `true`, `null`, `[a, b]`, `{a: 1}`, `'12'` (a string); `off`, `0123` and `1:30` are
    YAML 1.1's false, 83 and 90 here, but a text key takes them as written (load_config)."""
    return overrides.parse_set_value(text, f"--set x={text}")[0]


class _Sources:
    """Where each key path came from: a file line or a --set."""

    def __init__(self, file: str, lines: dict[KeyPath, int]) -> None:
        self.file = file
        self.lines = dict(lines)
        self.set_keys: dict[KeyPath, str] = {}

    def locate(self, path: KeyPath) -> tuple[str, str]:
        """(where, key) for an error about `path`: `--set a.b` or `file:line`."""
        for set_path, key in reversed(self.set_keys.items()):
            if path[: len(set_path)] == set_path or set_path[: len(path)] == path:
                return "--set", key
        file, line = self.file_line(path)
        return (f"{file}:{line}" if line else file), format_path(path)

    def file_line(self, path: KeyPath) -> tuple[str, int | None]:
        """(file, line of `path` or of its nearest ancestor written in the file)."""
        for length in range(len(path), 0, -1):
            line = self.lines.get(path[:length])
            if line is not None:
                return self.file, line
        return self.file, None


def _annotation_at(data: dict[str, Any]) -> Any:
    """Key path -> its declared type; under `model.args` / `data.args` of a bundled model or
    dataset, by that one's arguments (`data` names it, after every override)."""

    def find(path: KeyPath) -> Any:
        if len(path) > 2 and path[1] == "args" and path[0] in ("model", "data"):
            section = data.get(str(path[0]))
            name = section.get("name") if isinstance(section, dict) else None
            default = "mlp" if path[0] == "model" else "synthetic"
            args_model = BUILTIN_ARGS.get((str(path[0]), name if name is not None else default))
            if args_model is not None:
                return annotation_in(args_model, path[2:])
        return annotation_in(TrainerConfig, path)

    return find


def _read(
    text_path: Path, shown: str, items: list[str] | tuple[str, ...]
) -> tuple[dict[str, Any], _Sources]:
    """The file's data with every override merged in, each unquoted scalar read as its key
    takes it (jobkit/spec/scalars.py), and where each key came from."""
    try:
        doc = load_yaml_file(text_path, shown, what="a trainer config", empty_ok=True)
        data = dict(doc.data)
        data.setdefault("name", text_path.stem)
        sets = [overrides.parse_set(item, example=SET_EXAMPLE) for item in items]
        preview = data
        for parsed in sets:
            preview = overrides.merge(preview, parsed.nested())
        annotation_at = _annotation_at(preview)
        sources = _Sources(shown, doc.lines)
        apply_source_text(data, doc.source_text, sources.file_line, annotation_at)
        for parsed in sets:
            layer = parsed.nested()
            apply_source_text(layer, parsed.source_text, parsed.locate, annotation_at)
            data = overrides.apply_set(data, replace(parsed, value=lookup(layer, parsed.path)[1]))
            sources.set_keys[parsed.path] = parsed.key
    except SpecError as err:
        raise ConfigError.from_spec_error(err) from None
    return _one_length(data, set(sources.set_keys)), sources


LENGTH_KEYS = ("steps", "epochs")
"""train.steps and train.epochs: a run gives exactly one (train/loop/length.py)."""


def _one_length(data: dict[str, Any], set_paths: set[KeyPath]) -> dict[str, Any]:
    """An override of one of train.steps and train.epochs replaces the file's other one
    (`--set train.epochs=3` on a config with `steps: 200`); both overridden stays both."""
    train = data.get("train")
    given = [key for key in LENGTH_KEYS if ("train", key) in set_paths]
    if len(given) != 1 or not isinstance(train, dict) or train.get(given[0]) is None:
        return data
    other = LENGTH_KEYS[1 - LENGTH_KEYS.index(given[0])]
    return {**data, "train": {key: value for key, value in train.items() if key != other}}


def _describe_error(error: Any, model: type[BaseModel], path: KeyPath) -> str:
    kind = error["type"]
    got = error.get("input")
    ctx = error.get("ctx") or {}
    if kind == "extra_forbidden":
        valid = _fields_at(model, path[:-1])
        return "unknown key" + (f" (expected one of: {', '.join(valid)})" if valid else "")
    if kind == "missing":
        return "is required"
    if kind == "literal_error":
        return f"must be one of {ctx.get('expected', '')} (got {got!r})"
    if kind in ("int_parsing", "int_type", "int_from_float"):
        return f"must be an integer (got {got!r})"
    if kind in ("float_parsing", "float_type"):
        return f"must be a number (got {got!r})"
    if kind in ("bool_parsing", "bool_type"):
        return f"must be true or false (got {got!r})"
    if kind in ("string_type",):
        return f"must be a string (got {got!r})"
    if kind in ("dict_type", "model_type", "model_attributes_type"):
        return f"must be a mapping of keys (got {got!r})"
    if kind in ("list_type", "tuple_type"):
        return f"must be a list (got {got!r})"
    if kind == "string_pattern_mismatch":
        return f"must hold only letters, digits and . _ + - (got {got!r})"
    bounds = {
        "greater_than": ">",
        "greater_than_equal": ">=",
        "less_than": "<",
        "less_than_equal": "<=",
    }
    if kind in bounds:
        limit = next(iter(ctx.values()), "?")
        return f"must be {bounds[kind]} {limit} (got {got!r})"
    if kind == "value_error":
        return str(ctx.get("error", error["msg"]))
    message = str(error["msg"])
    return message[:1].lower() + message[1:] + (f" (got {got!r})" if got is not None else "")


def _fields_at(model: type[BaseModel], path: KeyPath) -> list[str]:
    """The field names of the (sub)model at `path`, for 'unknown key' messages."""
    current: Any = model
    for part in path:
        field = getattr(current, "model_fields", {}).get(part)
        if field is None:
            return []
        current = _model_in(field.annotation)
    fields = getattr(current, "model_fields", None)
    return list(fields) if isinstance(fields, dict) else []


def _model_in(annotation: Any) -> Any:
    """The section model in `annotation` (`WandbConfig | None` -> WandbConfig), else itself."""
    for member in get_args(annotation) or (annotation,):
        if isinstance(member, type) and issubclass(member, BaseModel):
            return member
    return annotation


def config_data(name_or_path: str, overrides: list[str] | tuple[str, ...] = ()) -> dict[str, Any]:
    """The config as read (file, then overrides), before it is checked against the sections."""
    path = resolve_config_path(name_or_path)
    return _read(path, str(path), overrides)[0]


def _validate(
    model: type[BaseModel], data: Any, sources: _Sources, prefix: KeyPath = ()
) -> BaseModel:
    try:
        return model.model_validate(data)
    except ValidationError as err:
        first = err.errors(include_url=False)[0]
        loc: KeyPath = tuple(first["loc"])
        path = prefix + loc
        ctx_error = (first.get("ctx") or {}).get("error")
        if isinstance(ctx_error, KeyedError):
            path = _blamed(sources, [path + key for key in (ctx_error.path, *ctx_error.either)])
            message = ctx_error.message
        else:
            message = _describe_error(first, model, tuple(str(part) for part in loc))
        where, key = sources.locate(path)
        raise ConfigError(where, key, message) from None


def _blamed(sources: _Sources, paths: list[KeyPath]) -> KeyPath:
    """Of keys equally at fault, one an override set, else the first."""
    for path in paths:
        if sources.locate(path)[0] == "--set":
            return path
    return paths[0]


def load_config(name_or_path: str, overrides: list[str] | tuple[str, ...] = ()) -> LoadedConfig:
    """Read a config (bundled name or path), apply `key=value` overrides and check it all.

    Raises ConfigError with the file, line and key of the first problem.
    """
    path = resolve_config_path(name_or_path)
    data, sources = _read(path, str(path), overrides)
    config = _validate(TrainerConfig, data, sources)
    assert isinstance(config, TrainerConfig)
    for (section, name), args_model in BUILTIN_ARGS.items():
        part = getattr(config, section)
        if part.name == name:
            part.args = _validate(args_model, part.args, sources, (section, "args")).model_dump()
    return LoadedConfig(config=config, path=path, sources=sources)


class LoadedConfig:
    """A checked config and where its keys came from (for errors found later, at run time)."""

    def __init__(self, config: TrainerConfig, path: Path, sources: _Sources) -> None:
        self.config = config
        self.path = path
        self.sources = sources

    def error(self, key: str, message: str) -> ConfigError:
        """A ConfigError about `key` (dotted) pointing at its line or --set."""
        where, shown_key = self.sources.locate(tuple(key.split(".")))
        return ConfigError(where, shown_key, message)

    def dump(self) -> str:
        """The resolved config as YAML (defaults filled in), for the start-of-run log."""
        return yaml.safe_dump(
            self.config.model_dump(mode="json"), sort_keys=False, default_flow_style=False
        )


def scaled_lr(config: TrainerConfig, world_size: int) -> float:
    """optim.lr after the lr_scaling rule over the world size."""
    factor = {"none": 1.0, "linear": float(world_size), "sqrt": math.sqrt(world_size)}
    return config.optim.lr * factor[config.optim.lr_scaling]


def per_rank_batch(loaded: LoadedConfig, world_size: int) -> tuple[int, int]:
    """(samples per rank per micro-step, samples per optimizer step over all ranks)."""
    data, accum = loaded.config.data, loaded.config.train.grad_accum_steps
    if data.batch_size_per_rank is not None:
        return data.batch_size_per_rank, data.batch_size_per_rank * world_size * accum
    assert data.global_batch_size is not None
    split = world_size * accum
    if data.global_batch_size % split:
        raise loaded.error(
            "data.global_batch_size",
            f"{data.global_batch_size} is not divisible by world size {world_size}"
            f" x train.grad_accum_steps {accum}",
        )
    return data.global_batch_size // split, data.global_batch_size
