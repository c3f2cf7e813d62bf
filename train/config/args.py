"""The `args:` of the built-in models and data sets (mlp, transformer, synthetic, chars),
checked against the name they go with (BUILTIN_ARGS)."""

from __future__ import annotations

from pydantic import (
    Field,
    model_validator,
)

from train.config.sections import KeyedError, Section


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
            raise KeyedError(
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
