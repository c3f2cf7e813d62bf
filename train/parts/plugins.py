"""Load the user's own model or dataset factory from `package.module:factory`."""

from __future__ import annotations

import importlib
import inspect
from collections.abc import Callable
from typing import Any


class PluginError(Exception):
    """The import path does not lead to a callable; the message is one line."""


class PluginArgsError(PluginError):
    """The configured arguments do not fit the factory's signature."""


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


def call_factory(import_path: str, *args: Any, **kwargs: Any) -> Any:
    """Load `import_path` and call it; arguments that do not fit its signature raise
    PluginArgsError (a config mistake) before the call, errors inside it propagate."""
    factory = load_factory(import_path)
    try:
        signature = inspect.signature(factory)
    except (TypeError, ValueError):  # no introspectable signature: just call it
        return factory(*args, **kwargs)
    try:
        signature.bind(*args, **kwargs)
    except TypeError as err:
        raise PluginArgsError(f"{import_path}: {err}") from None
    return factory(*args, **kwargs)
