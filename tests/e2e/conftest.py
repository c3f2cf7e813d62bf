"""Fixtures of the end-to-end tests: a jobkit CLI with its own JOBKIT_HOME, and figures.

The cluster fixtures (slurm_cluster, pbs_cluster, ssh_hosts) come from
tests/plugins/cluster.py; a test marked slurm/pbs/ssh fails instead of skipping in CI.
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable
from pathlib import Path

import pytest

from tests.e2e import installed_venv
from tests.e2e.cli import Jobkit

Figures = Callable[..., None]


@pytest.fixture
def jobkit(tmp_path: Path) -> Jobkit:
    """The jobkit CLI with a fresh JOBKIT_HOME; jobs log under tmp_path/logs."""
    return Jobkit(home=tmp_path / "jobkit-home", logs_dir=tmp_path / "logs")


@pytest.fixture
def figures(request: pytest.FixtureRequest) -> Figures:
    """figures(name=value, ...): print what a test measured (shown with pytest -rP).

    With JOBKIT_E2E_FIGURES=FILE they are also appended to FILE as JSON lines.
    """

    def record(**values: object) -> None:
        line = {"test": request.node.name, **values}
        print("e2e figures:", json.dumps(line, default=str))
        target = os.environ.get("JOBKIT_E2E_FIGURES")
        if target:
            with open(target, "a", encoding="utf-8") as sink:
                sink.write(json.dumps(line, default=str) + "\n")

    return record


def pytest_collection_finish(session: pytest.Session) -> None:
    """test_installed's venv takes a minute or two of pip: built beside the tests before it
    (not for a --collect-only, which would wait for it to end)."""
    if session.config.option.collectonly:
        return
    if any(item.nodeid.startswith(installed_venv.TEST_FILE + "::") for item in session.items):
        installed_venv.start(session.config)


def pytest_sessionfinish(session: pytest.Session) -> None:
    installed_venv.finish(session.config)
