"""Shared pytest set-up: each plugin module in tests/plugins/ owns one kind of fixture."""

from __future__ import annotations

import os
from collections.abc import Iterator

import pytest

# One torch thread per process, as .ci/run exports for everything it starts (the jobs inherit
# it: sbatch, the local backend; the test sshd sets it for ssh sessions). The two test nodes
# share two cores: a rank alone on its node would otherwise spin torch's two threads against
# every other process (about 3x the CPU for a tiny model, and paced steps run late).
os.environ.setdefault("OMP_NUM_THREADS", "1")

pytest_plugins = [
    "tests.plugins.cluster",
    "tests.plugins.sge",
    "tests.plugins.invoke",
    "tests.plugins.claims",  # before groups, which imports it
    "tests.plugins.groups",
    "tests.plugins.gates",
    "tests.plugins.cpu",
]


@pytest.fixture(autouse=True, scope="session")
def template_cache_of_the_session(tmp_path_factory: pytest.TempPathFactory) -> Iterator[None]:
    """Compiled templates go to a folder of this test session, not to ~/.cache (also for the
    jobkit processes the tests start: they inherit the environment)."""
    folder = tmp_path_factory.mktemp("template-cache") / "templates"
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("JOBKIT_TEMPLATE_CACHE", str(folder))
        yield
