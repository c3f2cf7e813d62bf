"""Fixtures for the trainer's tests: a clean environment and ways to start the trainer."""

from __future__ import annotations

import warnings

import pytest

with warnings.catch_warnings():
    # torch warns once at import when numpy is absent; pytest turns warnings into errors.
    warnings.filterwarnings("ignore", message="Failed to initialize NumPy")
    import torch  # noqa: F401

from tests.train.launch import Launcher


@pytest.fixture
def launcher(tmp_path) -> Launcher:
    """Starts `python -m train` (alone or under torchrun) in tmp_path with a clean env."""
    return Launcher(tmp_path)
