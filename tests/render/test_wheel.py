"""The installed package (not the source tree) renders with the templates shipped in the
wheel: `pip install .` into a fresh, plain venv, then `jobkit render` from another folder."""

from __future__ import annotations

import importlib.metadata
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.render.helpers import EXAMPLES_DIR, GOLDEN_DIR, GOLDEN_PYTHON, REPO

DEPENDENCIES = ("jinja2", "pyyaml", "pydantic", "click", "submitit")


def _run(argv: list[str], cwd: Path, timeout: float = 600, **extra_env: str) -> str:
    env = {
        k: v
        for k, v in os.environ.items()
        if not k.startswith(("PYTHON", "VIRTUAL_ENV", "CONDA_PREFIX"))
    }
    env.update(extra_env)
    done = subprocess.run(
        argv, cwd=cwd, env=env, capture_output=True, text=True, timeout=timeout, check=False
    )
    assert done.returncode == 0, f"{argv}: {done.stdout}\n{done.stderr}"
    return done.stdout


@pytest.mark.slow
def test_installed_wheel_renders_with_its_own_templates(tmp_path: Path) -> None:
    venv = tmp_path / "venv"
    _run([sys.executable, "-m", "venv", str(venv)], cwd=tmp_path)  # no system site packages
    pip = [str(venv / "bin" / "python"), "-m", "pip", "--disable-pip-version-check", "-q"]
    # The same versions as this environment's, so pip finds them in its cache.
    pins = [f"{name}=={importlib.metadata.version(name)}" for name in DEPENDENCIES]
    _run([*pip, "install", *pins], cwd=tmp_path)
    _run([*pip, "install", "--no-deps", str(REPO)], cwd=tmp_path)

    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    located = _run(
        [
            str(venv / "bin" / "python"),
            "-c",
            "import jobkit.core.paths; print(jobkit.core.paths.templates_dir())",
        ],
        cwd=elsewhere,
    ).strip()
    site_packages = next((venv / "lib").glob("python3*/site-packages"))
    assert Path(located) == site_packages / "jobkit" / "templates"
    assert (Path(located) / "common" / "env.sh.j2").is_file()

    # env.python auto takes the active virtualenv: the golden scripts' one.
    script = _run(
        [str(venv / "bin" / "jobkit"), "render", str(EXAMPLES_DIR / "quickstart.yaml")],
        cwd=elsewhere,
        VIRTUAL_ENV=str(Path(GOLDEN_PYTHON.path or "").parent.parent),
    )
    assert script == (GOLDEN_DIR / "examples" / "quickstart.local.sh").read_text()
    # Without one, the interpreter jobkit runs with: the fresh venv's python.
    script = _run(
        [str(venv / "bin" / "jobkit"), "render", str(EXAMPLES_DIR / "quickstart.yaml")],
        cwd=elsewhere,
    )
    assert f"jobkit_python={venv / 'bin' / 'python'}\n" in script
