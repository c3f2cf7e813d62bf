"""TrainerConfig: the trainer's config sections (config_sections.py) composed, with the
checks across them (pydantic, torch-free).

Loading and error lines are in train/config/load.py, which re-exports these names.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TypeVar

from pydantic import (
    Field,
    model_validator,
)

from train.config.sections import (
    BUILTIN_DATA,
    BUILTIN_LOSSES,
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
)

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
    eval: EvalConfig = Field(default_factory=_defaults(EvalConfig))
    profile: ProfileConfig = Field(default_factory=_defaults(ProfileConfig))

    @model_validator(mode="after")
    def _batch_size_given_once(self) -> TrainerConfig:
        given = [self.data.batch_size_per_rank, self.data.global_batch_size]
        if sum(value is not None for value in given) != 1:
            raise KeyedError(
                ("data",), "give exactly one of batch_size_per_rank or global_batch_size"
            )
        return self

    @model_validator(mode="after")
    def _length_given_once(self) -> TrainerConfig:
        if self.train.steps is not None and self.train.epochs is not None:
            raise KeyedError(
                ("train", "epochs"),
                f"give steps or epochs, not both (steps is {self.train.steps})",
                either=(("train", "steps"),),
            )
        if self.train.steps is None and self.train.epochs is None:
            raise KeyedError(
                ("train", "steps"),
                "give train.steps or train.epochs (neither is set)",
                either=(("train", "epochs"),),
            )
        return self

    @model_validator(mode="after")
    def _evaluation_fits(self) -> TrainerConfig:
        plugin = self.data.name not in BUILTIN_DATA
        if self.data.val is not None and not plugin:
            raise KeyedError(
                ("data", "val"),
                f"is for plug-in datasets; {self.data.name} holds out eval.holdout of its samples",
            )
        if self.eval.enabled and plugin and self.data.val is None:
            raise KeyedError(
                ("data", "val"),
                "evaluation is on but the plug-in dataset has no validation set: give"
                " data.val: package.module:factory",
            )
        best = self.checkpoint.keep_best
        if best is not None and not self.eval.enabled:
            raise KeyedError(
                ("checkpoint", "keep_best"),
                f"{best} needs evaluation: set eval.every_steps or eval.every_epochs",
            )
        if best == "val_acc" and (self.model.loss != "cross_entropy" or self.train.step):
            got = f"train.step {self.train.step}" if self.train.step else self.model.loss
            raise KeyedError(
                ("checkpoint", "keep_best"),
                f"val_acc needs model.loss cross_entropy (got {got}); use val_loss",
            )
        return self

    @model_validator(mode="after")
    def _one_loss(self) -> TrainerConfig:
        if self.train.step is None:
            if self.model.loss_args and self.model.loss in BUILTIN_LOSSES:
                raise KeyedError(
                    ("model", "loss_args"),
                    f"is for a plug-in loss (package.module:factory); {self.model.loss}"
                    " takes no arguments",
                )
            if self.train.step_args:
                raise KeyedError(("train", "step_args"), "is for train.step, which is not set")
            return self
        for key in ("loss", "loss_args"):
            if key in self.model.model_fields_set:
                raise KeyedError(
                    ("model", key),
                    f"train.step {self.train.step} computes the loss itself: drop model.{key}",
                    either=(("train", "step"),),
                )
        return self


# Arguments of the bundled models and datasets, checked before anything is built.
