"""Each API test gets its own registry (JOBKIT_HOME); its cluster jobs are cancelled
afterwards (tests/plugins/home.py). Tests submit from `workdir` (tests/plugins/invoke.py)."""

import pytest

from tests.plugins.home import jobkit_home as jobkit_home
from tests.plugins.invoke import Invoke, in_process


@pytest.fixture
def cli(capsys: pytest.CaptureFixture[str]) -> Invoke:
    """The jobkit CLI in this process (the `jobkit` fixture's, named so that it does not
    hide the jobkit module these tests use)."""
    return in_process(capsys)
