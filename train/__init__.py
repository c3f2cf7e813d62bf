"""The bundled DDP trainer (`python -m train`). `train.fit` runs it from your own script.

Importing `train` stays light (jobkit reads `train.config` without torch): `fit` is loaded
when first used.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from train.api import fit

__all__ = ["fit"]


def __getattr__(name: str) -> Any:
    if name == "fit":
        from train.api import fit

        return fit
    raise AttributeError(f"module 'train' has no attribute {name!r}")
