"""Where jobkit's files are: its bundled templates (inside the package in a wheel, at the
repository root in a checkout) and the user's XDG folders."""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path

from jobkit.core.errors import JobkitError

_PACKAGE_DIR = Path(__file__).resolve().parent.parent


def templates_dir() -> Path:
    """The built-in templates: `jobkit/templates` in a wheel, `templates/` in a checkout."""
    candidates = (_PACKAGE_DIR / "templates", _PACKAGE_DIR.parent / "templates")
    for candidate in candidates:
        if (candidate / "common").is_dir():
            return candidate
    looked = ", ".join(str(c) for c in candidates)
    raise JobkitError(f"jobkit's templates are missing (looked in {looked}); reinstall jobkit")


def xdg_dir(environ: Mapping[str, str], variable: str, default: str, *parts: str) -> Path | None:
    """$VARIABLE/parts (an absolute XDG base folder), else ~/default/parts; None without a
    home. XDG says a relative value is to be ignored."""
    base = environ.get(variable, "")
    if base and os.path.isabs(base):
        return Path(base, *parts)
    home = environ.get("HOME") or _home_or_none()
    return Path(home, default, *parts) if home else None


def _home_or_none() -> str | None:
    """The user's home folder, or None where there is none (no HOME, no passwd entry)."""
    try:
        return str(Path.home())
    except RuntimeError:
        return None
