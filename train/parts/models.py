"""The bundled models: an MLP classifier and a small causal character transformer."""

from __future__ import annotations

from typing import Any

import torch
import torch.nn.functional as F
from torch import nn
from torch.utils.checkpoint import checkpoint

from train.config.load import ModelConfig
from train.parts.plugins import call_factory


class MlpClassifier(nn.Module):
    """Linear layers with ReLU (and optional dropout) to `classes` logits."""

    def __init__(
        self, in_features: int, classes: int, hidden: int = 64, depth: int = 2, dropout: float = 0.0
    ) -> None:
        super().__init__()
        layers: list[nn.Module] = []
        width = in_features
        for _ in range(depth - 1):
            layers += [nn.Linear(width, hidden), nn.ReLU()]
            if dropout:
                layers.append(nn.Dropout(dropout))
            width = hidden
        layers.append(nn.Linear(width, classes))
        self.net = nn.Sequential(*layers)

    def forward(self, inputs: torch.Tensor) -> torch.Tensor:
        logits: torch.Tensor = self.net(inputs)
        return logits


class _Block(nn.Module):
    """Pre-norm transformer block: causal self-attention then a feed-forward layer."""

    def __init__(self, d_model: int, n_heads: int, d_ff: int, dropout: float) -> None:
        super().__init__()
        self.n_heads = n_heads
        self.dropout = dropout
        self.norm1 = nn.LayerNorm(d_model)
        self.qkv = nn.Linear(d_model, 3 * d_model)
        self.proj = nn.Linear(d_model, d_model)
        self.norm2 = nn.LayerNorm(d_model)
        self.ff = nn.Sequential(nn.Linear(d_model, d_ff), nn.GELU(), nn.Linear(d_ff, d_model))
        self.drop = nn.Dropout(dropout)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        batch, length, width = x.shape
        q, k, v = self.qkv(self.norm1(x)).split(width, dim=-1)
        heads = [
            t.view(batch, length, self.n_heads, width // self.n_heads).transpose(1, 2)
            for t in (q, k, v)
        ]
        query, key, value = heads
        attn = F.scaled_dot_product_attention(
            query, key, value, is_causal=True, dropout_p=self.dropout if self.training else 0.0
        )
        x = x + self.drop(self.proj(attn.transpose(1, 2).reshape(batch, length, width)))
        out: torch.Tensor = x + self.drop(self.ff(self.norm2(x)))
        return out


class CharTransformer(nn.Module):
    """A GPT-style language model over `vocab_size` symbols and `context` positions."""

    def __init__(
        self,
        vocab_size: int,
        context: int,
        d_model: int = 64,
        n_layers: int = 2,
        n_heads: int = 4,
        d_ff: int | None = None,
        dropout: float = 0.0,
        activation_checkpointing: bool = False,
    ) -> None:
        super().__init__()
        self.activation_checkpointing = activation_checkpointing
        self.tokens = nn.Embedding(vocab_size, d_model)
        self.positions = nn.Embedding(context, d_model)
        self.drop = nn.Dropout(dropout)
        self.blocks = nn.ModuleList(
            _Block(d_model, n_heads, d_ff or 4 * d_model, dropout) for _ in range(n_layers)
        )
        self.norm = nn.LayerNorm(d_model)
        self.head = nn.Linear(d_model, vocab_size)

    def forward(self, ids: torch.Tensor) -> torch.Tensor:
        positions = torch.arange(ids.shape[1], device=ids.device)
        x = self.drop(self.tokens(ids) + self.positions(positions))
        for block in self.blocks:
            if self.activation_checkpointing and self.training:
                x = checkpoint(block, x, use_reentrant=False)
            else:
                x = block(x)
        logits: torch.Tensor = self.head(self.norm(x))
        return logits


class ModelBuildError(Exception):
    """The model cannot be built from this config and data; the message is one line."""


def _need(info: dict[str, Any], keys: tuple[str, ...], model: str) -> list[Any]:
    missing = [key for key in keys if key not in info]
    if missing:
        raise ModelBuildError(
            f"{model} needs the dataset to give {', '.join(missing)} in its `info`"
            f" dict (it gives: {', '.join(sorted(info)) or 'nothing'})"
        )
    return [info[key] for key in keys]


def build_model(config: ModelConfig, info: dict[str, Any]) -> nn.Module:
    """The model named by model.name, sized from the dataset's info dict.

    A plug-in `package.module:factory` is called as `factory(info, **model.args)` and must
    return an nn.Module.
    """
    if config.name == "mlp":
        features, classes = _need(info, ("in_features", "num_classes"), "mlp")
        return MlpClassifier(features, classes, **config.args)
    if config.name == "transformer":
        vocab, context = _need(info, ("vocab_size", "context"), "transformer")
        return CharTransformer(
            vocab, context, **config.args, activation_checkpointing=config.activation_checkpointing
        )
    model = call_factory(config.name, info, **config.args)
    if not isinstance(model, nn.Module):
        raise ModelBuildError(f"{config.name} returned {type(model).__name__}, not an nn.Module")
    return model


def compute_loss(kind: str, outputs: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
    """Mean loss: cross entropy over the last axis of `outputs` (any leading shape), or MSE."""
    if kind == "cross_entropy":
        return F.cross_entropy(outputs.reshape(-1, outputs.shape[-1]).float(), targets.reshape(-1))
    return F.mse_loss(outputs.float(), targets.float())
