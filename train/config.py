"""The trainer's config: one YAML file (bundled name or path) plus typed `--set key=value`.

Torch-free, so a bad config fails in a fraction of a second with `file:line: key: message`.
"""

from __future__ import annotations

import math
import re
import signal
from collections.abc import Callable
from pathlib import Path
from typing import Annotated, Any, Literal, TypeVar

import yaml
from pydantic import (
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Field,
    ValidationError,
    field_validator,
    model_validator,
)

from train.yamlsrc import KeyPath, YamlSourceError, load_yaml_with_lines

CONFIG_DIR = Path(__file__).resolve().parent / "configs"
BUILTIN_MODELS = ("mlp", "transformer")
BUILTIN_DATA = ("synthetic", "chars")
_IMPORT_PATH = re.compile(r"^[A-Za-z_][\w.]*:[A-Za-z_][\w.]*$")
_INT = re.compile(r"^[+-]?\d+$")
_FLOAT = re.compile(r"^[+-]?(\d+\.?\d*|\.\d+)([eE][+-]?\d+)?$")


class ConfigError(Exception):
    """A bad config or override: one line, `file:line: key: message` or `--set key: message`."""

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


class Section(BaseModel):
    """A config section: unknown keys are errors."""

    model_config = ConfigDict(extra="forbid")


def _off_is_false(value: object) -> object:
    """YAML reads a bare `off` as false: take it as the string."""
    return "off" if value is False else value


class ModelConfig(Section):
    """Which network to train."""

    name: str = Field("mlp", description="mlp | transformer | package.module:factory")
    args: dict[str, Any] = Field(default_factory=dict, description="Arguments of the model.")
    activation_checkpointing: bool = Field(
        False, description="Recompute transformer blocks in backward (bundled transformer)."
    )
    loss: Literal["cross_entropy", "mse"] = "cross_entropy"

    @field_validator("name")
    @classmethod
    def _known_or_import_path(cls, value: str) -> str:
        if value not in BUILTIN_MODELS and not _IMPORT_PATH.match(value):
            raise ValueError(
                f"must be one of {', '.join(BUILTIN_MODELS)} or package.module:factory"
                f" (got {value!r})"
            )
        return value


class DataConfig(Section):
    """Which data, and how much of it per step."""

    name: str = Field("synthetic", description="synthetic | chars | package.module:factory")
    args: dict[str, Any] = Field(default_factory=dict, description="Arguments of the dataset.")
    batch_size_per_rank: int | None = Field(
        None, ge=1, description="Samples per rank per micro-step."
    )
    global_batch_size: int | None = Field(
        None, ge=1, description="Samples per optimizer step over all ranks and micro-steps."
    )
    num_workers: int = Field(0, ge=0, le=64)
    shuffle: bool = True

    @field_validator("name")
    @classmethod
    def _known_or_import_path(cls, value: str) -> str:
        if value not in BUILTIN_DATA and not _IMPORT_PATH.match(value):
            raise ValueError(
                f"must be one of {', '.join(BUILTIN_DATA)} or package.module:factory"
                f" (got {value!r})"
            )
        return value


class OptimConfig(Section):
    """Optimizer and learning-rate schedule."""

    name: Literal["adamw", "sgd"] = "adamw"
    lr: float = Field(1e-3, gt=0)
    weight_decay: float = Field(0.0, ge=0)
    betas: tuple[float, float] = (0.9, 0.999)
    eps: float = Field(1e-8, gt=0)
    momentum: float = Field(0.0, ge=0, lt=1)
    nesterov: bool = False
    lr_scaling: Literal["none", "linear", "sqrt"] = Field(
        "none", description="Multiply lr by the world size (linear) or its square root (sqrt)."
    )
    warmup_steps: int = Field(0, ge=0)
    schedule: Literal["cosine", "constant"] = "cosine"
    min_lr_ratio: float = Field(0.1, ge=0, le=1, description="Cosine floor, as a part of lr.")
    grad_clip: float = Field(1.0, ge=0, description="Max gradient norm; 0: no clipping.")


def _signal_name(value: object) -> object:
    if isinstance(value, str):
        name = value.strip().upper()
        name = name if name.startswith("SIG") else "SIG" + name
        if not isinstance(getattr(signal, name, None), signal.Signals):
            raise ValueError(f"is not a signal name (got {value!r})")
        return name
    return value


SignalName = Annotated[str, BeforeValidator(_signal_name)]


class TrainConfig(Section):
    """Length of training and the stop rules."""

    steps: int = Field(100, ge=1, description="Optimizer steps in all.")
    grad_accum_steps: int = Field(1, ge=1, le=4096)
    seed: int = Field(0, ge=0)
    device: Literal["auto", "cpu", "cuda"] = "auto"
    stop_after_step: int | None = Field(
        None,
        ge=1,
        description="Stop after this step as if preempted (checkpoint, exit 75).",
    )
    preempt_signals: list[SignalName] = Field(default_factory=lambda: ["SIGUSR2", "SIGTERM"])
    stop_vote_every_s: float = Field(
        0.25,
        ge=0,
        le=60,
        description=(
            "About how often (seconds of training) the ranks agree on a stop signal; 0: after"
            " every step."
        ),
    )


class AmpConfig(Section):
    """Mixed precision."""

    dtype: Annotated[Literal["off", "bf16", "fp16"], BeforeValidator(_off_is_false)] = "off"
    init_scale: float = Field(65536.0, gt=0, description="fp16 GradScaler start scale.")
    growth_interval: int = Field(2000, ge=1, description="fp16 GradScaler growth interval.")


class DistributedConfig(Section):
    """Process group and DistributedDataParallel settings."""

    strategy: Literal["auto", "single", "dp", "ddp"] = "auto"
    backend: Literal["auto", "nccl", "gloo"] = "auto"
    timeout: int = Field(1800, ge=1, description="Collective timeout in seconds.")
    find_unused_parameters: bool = False
    bucket_cap_mb: float = Field(25.0, gt=0)
    gradient_as_bucket_view: bool = False
    static_graph: bool = False


class CheckpointConfig(Section):
    """Where checkpoints go, how often, and resuming."""

    dir: str | None = Field(
        None, description="Default: $JOBKIT_RUN_DIR/checkpoints, else runs/NAME/checkpoints."
    )
    every_steps: int = Field(0, ge=0, description="0: only at the end and on preemption.")
    keep_last: int = Field(3, ge=1)
    resume: str = Field("auto", description="auto | never | path of a checkpoint file.")
    save_final: bool = True


class LoggingConfig(Section):
    """Console lines, per-rank log files and metrics."""

    dir: str | None = Field(None, description="Default: $JOBKIT_RUN_DIR, else runs/NAME.")
    every_steps: int = Field(10, ge=1)
    metrics: bool = True


SectionT = TypeVar("SectionT", bound=Section)


def _defaults(section: type[SectionT]) -> Callable[[], SectionT]:
    """A default factory: the section with all its defaults."""
    return lambda: section.model_validate({})


class TrainerConfig(Section):
    """The whole trainer config."""

    name: str = Field("run", pattern=r"^[A-Za-z0-9][A-Za-z0-9._+-]*$")
    model: ModelConfig = Field(default_factory=_defaults(ModelConfig))
    data: DataConfig = Field(default_factory=_defaults(DataConfig))
    optim: OptimConfig = Field(default_factory=_defaults(OptimConfig))
    train: TrainConfig = Field(default_factory=_defaults(TrainConfig))
    amp: AmpConfig = Field(default_factory=_defaults(AmpConfig))
    distributed: DistributedConfig = Field(default_factory=_defaults(DistributedConfig))
    checkpoint: CheckpointConfig = Field(default_factory=_defaults(CheckpointConfig))
    logging: LoggingConfig = Field(default_factory=_defaults(LoggingConfig))

    @model_validator(mode="after")
    def _batch_size_given_once(self) -> TrainerConfig:
        given = [self.data.batch_size_per_rank, self.data.global_batch_size]
        if sum(value is not None for value in given) != 1:
            raise _KeyedError(
                ("data",), "give exactly one of batch_size_per_rank or global_batch_size"
            )
        return self


# Arguments of the bundled models and datasets, checked before anything is built.


class MlpArgs(Section):
    hidden: int = Field(64, ge=1)
    depth: int = Field(2, ge=1, le=64)
    dropout: float = Field(0.0, ge=0, lt=1)


class TransformerArgs(Section):
    d_model: int = Field(64, ge=8)
    n_layers: int = Field(2, ge=1, le=64)
    n_heads: int = Field(4, ge=1)
    d_ff: int | None = Field(None, ge=1, description="Default 4 * d_model.")
    dropout: float = Field(0.0, ge=0, lt=1)

    @model_validator(mode="after")
    def _heads_divide(self) -> TransformerArgs:
        if self.d_model % self.n_heads:
            raise _KeyedError(
                ("n_heads",),
                f"must divide d_model ({self.d_model}; got {self.n_heads})",
            )
        return self


class SyntheticArgs(Section):
    samples: int = Field(4096, ge=2)
    features: int = Field(16, ge=1)
    classes: int = Field(4, ge=2)
    separation: float = Field(3.0, ge=0)
    seed: int = Field(1234, ge=0)


class CharsArgs(Section):
    path: str | None = Field(None, description="Text file; default: the bundled corpus.")
    context: int = Field(64, ge=2)
    stride: int | None = Field(None, ge=1, description="Default: context (no overlap).")


BUILTIN_ARGS: dict[tuple[str, str], type[Section]] = {
    ("model", "mlp"): MlpArgs,
    ("model", "transformer"): TransformerArgs,
    ("data", "synthetic"): SyntheticArgs,
    ("data", "chars"): CharsArgs,
}


class _KeyedError(ValueError):
    """A check about a key other than where pydantic found it; key path relative to the model."""

    def __init__(self, path: KeyPath, message: str) -> None:
        self.path = path
        self.message = message
        super().__init__(message)


# Loading


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
    """`--set` values: true/false, null, ints, floats, [lists] and {maps}; else the string."""
    value = text.strip()
    lowered = value.lower()
    if lowered in ("true", "false"):
        return lowered == "true"
    if lowered in ("null", "~"):
        return None
    if _INT.match(value):
        return int(value)
    if _FLOAT.match(value):
        return float(value)
    if value[:1] in ("[", "{"):
        try:
            return yaml.safe_load(value)
        except yaml.YAMLError:
            return value
    if len(value) >= 2 and value[0] == value[-1] and value[0] in "'\"":
        return value[1:-1]
    return value


class _Sources:
    """Where each key path came from: a file line or a --set."""

    def __init__(self, file: str, lines: dict[KeyPath, int]) -> None:
        self.file = file
        self.lines = dict(lines)
        self.set_keys: dict[KeyPath, str] = {}

    def locate(self, path: KeyPath) -> tuple[str, str]:
        """(where, key) for an error about `path`: `--set a.b` or `file:line`."""
        for set_path, key in self.set_keys.items():
            if path[: len(set_path)] == set_path or set_path[: len(path)] == path:
                return "--set", key
        for length in range(len(path), 0, -1):
            line = self.lines.get(path[:length])
            if line is not None:
                return f"{self.file}:{line}", ".".join(path)
        return self.file, ".".join(path)


def _apply_set(data: dict[str, Any], item: str, sources: _Sources) -> None:
    key, sep, raw = item.partition("=")
    key = key.strip()
    if not sep or not key:
        raise ConfigError("--set", item or "''", "expected KEY=VALUE, e.g. train.steps=200")
    path = tuple(key.split("."))
    if any(not part for part in path):
        raise ConfigError("--set", key, "empty part in the key")
    target = data
    for depth, part in enumerate(path[:-1]):
        child = target.setdefault(part, {})
        if not isinstance(child, dict):
            where = ".".join(path[: depth + 1])
            raise ConfigError("--set", key, f"{where} is not a section")
        target = child
    target[path[-1]] = parse_set_value(raw)
    sources.set_keys[path] = key


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
        current = field.annotation
    fields = getattr(current, "model_fields", None)
    return list(fields) if isinstance(fields, dict) else []


def _validate(
    model: type[BaseModel], data: Any, sources: _Sources, prefix: KeyPath = ()
) -> BaseModel:
    try:
        return model.model_validate(data)
    except ValidationError as err:
        first = err.errors(include_url=False)[0]
        path = prefix + tuple(str(part) for part in first["loc"])
        ctx_error = (first.get("ctx") or {}).get("error")
        if isinstance(ctx_error, _KeyedError):
            path = path + ctx_error.path
            message = ctx_error.message
        else:
            message = _describe_error(first, model, tuple(str(p) for p in first["loc"]))
        where, key = sources.locate(path)
        raise ConfigError(where, key, message) from None


def load_config(name_or_path: str, overrides: list[str] | tuple[str, ...] = ()) -> LoadedConfig:
    """Read a config (bundled name or path), apply `key=value` overrides and check it all.

    Raises ConfigError with the file, line and key of the first problem.
    """
    path = resolve_config_path(name_or_path)
    shown = str(path)
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as err:
        raise ConfigError(shown, None, f"cannot read: {err}") from None
    try:
        data, lines = load_yaml_with_lines(text)
    except YamlSourceError as err:
        where = f"{shown}:{err.line}" if err.line else shown
        raise ConfigError(where, None, err.message) from None
    if data is None:
        data = {}
    if not isinstance(data, dict):
        raise ConfigError(shown, None, "must be a mapping of sections (model, data, ...)")
    data.setdefault("name", path.stem)
    sources = _Sources(shown, lines)
    for item in overrides:
        _apply_set(data, item, sources)
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
