"""Fixtures for the spec tests: the CLI run in-process, and no stray site profiles."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.plugins.invoke import Invoke, in_process

CliRunner = Invoke


@pytest.fixture(autouse=True)
def no_site_profiles(
    tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch
) -> Path:
    """Profiles come only from what a test sets up, never from the machine's own config."""
    config = tmp_path_factory.mktemp("xdg-config")
    monkeypatch.setenv("XDG_CONFIG_HOME", str(config))
    monkeypatch.delenv("JOBKIT_PROFILES", raising=False)
    monkeypatch.delenv("JOBKIT_DEBUG", raising=False)
    return config


@pytest.fixture
def cli(capsys: pytest.CaptureFixture[str]) -> CliRunner:
    """Run `jobkit ARGS...` in this process (the same error handling as the console script)."""

    return in_process(capsys)


@pytest.fixture
def in_tmp(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """Run from an empty temporary folder, so errors name files as `job.yaml`."""
    monkeypatch.chdir(tmp_path)
    return tmp_path
