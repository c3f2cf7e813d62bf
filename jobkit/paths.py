"""Where jobkit's bundled files are: the wheel ships them inside the package, a source
checkout keeps them at the repository root."""

from __future__ import annotations

from pathlib import Path

from jobkit.errors import JobkitError

_PACKAGE_DIR = Path(__file__).resolve().parent


def templates_dir() -> Path:
    """The built-in templates: `jobkit/templates` in a wheel, `templates/` in a checkout."""
    candidates = (_PACKAGE_DIR / "templates", _PACKAGE_DIR.parent / "templates")
    for candidate in candidates:
        if (candidate / "slurm").is_dir():
            return candidate
    looked = ", ".join(str(c) for c in candidates)
    raise JobkitError(f"jobkit's templates are missing (looked in {looked}); reinstall jobkit")


def home_or_none() -> str | None:
    """The user's home folder, or None where there is none (no HOME, no passwd entry)."""
    try:
        return str(Path.home())
    except RuntimeError:
        return None
