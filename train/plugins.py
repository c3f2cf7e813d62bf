"""Load the user's own model or dataset factory from `package.module:factory`."""

from __future__ import annotations

import importlib
from collections.abc import Callable
from typing import Any


class PluginError(Exception):
    """The import path does not lead to a callable; the message is one line."""


def load_factory(import_path: str) -> Callable[..., Any]:
    """The callable named by `package.module:attribute` (attribute may be dotted)."""
    module_name, _, attribute = import_path.partition(":")
    try:
        target: Any = importlib.import_module(module_name)
    except ImportError as err:
        raise PluginError(f"cannot import {module_name!r} for {import_path!r}: {err}") from None
    for part in attribute.split("."):
        if not hasattr(target, part):
            raise PluginError(f"{module_name!r} has no attribute {attribute!r} ({import_path!r})")
        target = getattr(target, part)
    if not callable(target):
        raise PluginError(f"{import_path!r} is not callable")
    factory: Callable[..., Any] = target
    return factory
