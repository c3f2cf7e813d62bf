"""The bundled trainer's config sections (model, data, optim, train, amp, distributed,
checkpoint, eval, wandb, profile, logging), each a pydantic model with its checks;
config_schema.py composes them into TrainerConfig."""

from __future__ import annotations

import re
import signal
from typing import Annotated, Any, ClassVar, Literal

from pydantic import (
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Field,
    field_validator,
)

from jobkit.core.yamlsrc import KeyPath


class KeyedError(ValueError):
    """A check about a key other than where pydantic found it; key path relative to the model."""

    def __init__(self, path: KeyPath, message: str, either: tuple[KeyPath, ...] = ()) -> None:
        self.path = path
        self.message = message
        self.either = either
        """Other keys equally at fault: an error names the one an override set, if any."""
        super().__init__(message)


BUILTIN_MODELS = ("mlp", "transformer")
BUILTIN_DATA = ("synthetic", "chars")
BUILTIN_LOSSES = ("cross_entropy", "mse")
_IMPORT_PATH = re.compile(r"^[A-Za-z_][\w.]*:[A-Za-z_][\w.]*$")


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
    loss: str = Field(
        "cross_entropy",
        description="cross_entropy | mse | package.module:factory (returns loss(outputs, targets))",
    )
    loss_args: dict[str, Any] = Field(
        default_factory=dict, description="Arguments of a plug-in loss factory."
    )

    @field_validator("name")
    @classmethod
    def _known_or_import_path(cls, value: str) -> str:
        if value not in BUILTIN_MODELS and not _IMPORT_PATH.match(value):
            raise ValueError(
                f"must be one of {', '.join(BUILTIN_MODELS)} or package.module:factory"
                f" (got {value!r})"
            )
        return value

    @field_validator("loss")
    @classmethod
    def _loss_known_or_import_path(cls, value: str) -> str:
        if value not in BUILTIN_LOSSES and not _IMPORT_PATH.match(value):
            raise ValueError(
                f"must be one of {', '.join(BUILTIN_LOSSES)} or package.module:factory"
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
    val: str | None = Field(
        None,
        description=(
            "Validation set of a plug-in dataset: package.module:factory, called with data.args."
        ),
    )

    @field_validator("name")
    @classmethod
    def _known_or_import_path(cls, value: str) -> str:
        if value not in BUILTIN_DATA and not _IMPORT_PATH.match(value):
            raise ValueError(
                f"must be one of {', '.join(BUILTIN_DATA)} or package.module:factory"
                f" (got {value!r})"
            )
        return value

    @field_validator("val")
    @classmethod
    def _val_import_path(cls, value: str | None) -> str | None:
        if value is not None and not _IMPORT_PATH.match(value):
            raise ValueError(f"must be package.module:factory (got {value!r})")
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

    steps: int | None = Field(
        None, ge=1, description="Optimizer steps in all (give this or epochs)."
    )
    epochs: float | None = Field(
        None, gt=0, description="Passes over the training data (give this or steps)."
    )
    grad_accum_steps: int = Field(1, ge=1, le=4096)
    step: str | None = Field(
        None,
        description=(
            "Your own step: package.module:factory returning training_step(model, batch) -> loss."
        ),
    )
    step_args: dict[str, Any] = Field(
        default_factory=dict, description="Arguments of the train.step factory."
    )
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

    @field_validator("step")
    @classmethod
    def _step_import_path(cls, value: str | None) -> str | None:
        if value is not None and not _IMPORT_PATH.match(value):
            raise ValueError(f"must be package.module:factory (got {value!r})")
        return value


class AmpConfig(Section):
    """Mixed precision."""

    dtype: Annotated[Literal["off", "bf16", "fp16"], BeforeValidator(_off_is_false)] = "off"
    init_scale: float = Field(65536.0, gt=0, description="fp16 GradScaler start scale.")
    growth_factor: float = Field(
        2.0, gt=1, description="fp16: multiply the scale by this after growth_interval good steps."
    )
    backoff_factor: float = Field(
        0.5, gt=0, lt=1, description="fp16: multiply the scale by this on an inf/NaN step."
    )
    growth_interval: int = Field(2000, ge=1, description="fp16 GradScaler growth interval.")

    SCALER_KEYS: ClassVar[tuple[str, ...]] = (
        "init_scale",
        "growth_factor",
        "backoff_factor",
        "growth_interval",
    )

    def scaler_keys_set(self) -> list[str]:
        """The GradScaler keys the config gives (not left at their defaults)."""
        return [key for key in self.SCALER_KEYS if key in self.model_fields_set]


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
    keep_best: Literal["val_loss", "val_acc"] | None = Field(
        None, description="Also keep the checkpoint with the best value of this eval metric."
    )


class EvalConfig(Section):
    """Evaluation on the validation split; off unless every_steps or every_epochs is set."""

    every_steps: int = Field(0, ge=0, description="Evaluate every N steps; 0: not by steps.")
    every_epochs: int = Field(0, ge=0, description="Evaluate every N epochs; 0: not by epochs.")
    batches: int = Field(0, ge=0, description="At most N batches per rank; 0: the whole split.")
    batch_size_per_rank: int | None = Field(
        None, ge=1, description="Default: the training batch per rank."
    )
    holdout: float = Field(
        0.1, gt=0, lt=1, description="Share of a bundled dataset held out for evaluation."
    )

    @property
    def enabled(self) -> bool:
        """Whether the run evaluates at all."""
        return bool(self.every_steps or self.every_epochs)


class WandbConfig(Section):
    """Weights & Biases: where the run goes. Offline by default (`wandb sync` uploads later)."""

    project: str = Field("jobkit", description="W&B project.")
    entity: str | None = Field(None, description="W&B team or user; default: yours.")
    mode: Literal["offline", "online", "disabled"] = "offline"


class ProfileConfig(Section):
    """torch.profiler over a window of optimizer steps; steps 0: off."""

    start_step: int = Field(10, ge=1, description="First profiled step (1 = the first step).")
    steps: int = Field(0, ge=0, le=1000, description="How many steps; 0: no profiling.")


class LoggingConfig(Section):
    """Console lines, per-rank log files and metrics."""

    dir: str | None = Field(None, description="Default: $JOBKIT_RUN_DIR, else runs/NAME.")
    every_steps: int = Field(10, ge=1)
    metrics: bool = True
    tensorboard: bool = Field(False, description="TensorBoard event files in RUN/tensorboard.")
    wandb: WandbConfig | None = Field(None, description="Log to Weights & Biases (rank 0).")

    @field_validator("wandb", mode="before")
    @classmethod
    def _true_is_defaults(cls, value: object) -> object:
        """`wandb: true` is every default; `false` (or null) is off."""
        if value is True:
            return {}
        return None if value is False else value
