"""jobkit's version, here so that every layer can name it (caches key on it) without
importing the top-level package, whose names come from jobkit.api."""

from __future__ import annotations

__version__ = "0.1.0"
