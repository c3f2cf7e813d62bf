"""The README's "install into your own environment" line gives every verb its full feature:
the `all` extra holds the trainer's (`train`), `jobkit plot`'s (`plot`) and `jobkit doctor`'s
stacks of a hung job (`debug`: py-spy); .ci/quickstart and tests/e2e/test_installed.py (which
installs the wheel as a user does) use the same extra."""

from __future__ import annotations

import re
from pathlib import Path

import tomllib

REPO = Path(__file__).resolve().parent.parent


def extras() -> dict[str, list[str]]:
    project = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]
    found: dict[str, list[str]] = project["optional-dependencies"]
    return found


def test_all_holds_every_verbs_extra() -> None:
    every = extras()
    assert set(every["all"]) == set(every["train"] + every["plot"] + every["debug"])


def test_the_readme_quickstart_and_installed_test_install_all() -> None:
    readme = (REPO / "README.md").read_text()
    lines = re.findall(r"^pip install '/path/to/jobkit\[([^\]]+)\]'", readme, re.M)
    assert lines == ["all"], lines
    assert "bash .ci/venv.sh all\n" in (REPO / ".ci" / "quickstart").read_text()
    installed = (REPO / "tests" / "e2e" / "installed_venv.py").read_text()  # test_installed's
    assert 'f"{wheel}[all]"' in installed
