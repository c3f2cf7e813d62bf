"""Waiting for the container test image that .ci/run builds beside the tests (issue 25).

.ci/run starts tests/cluster/image.sh with the venv and the cluster, and the tests as soon as
the cluster is up: the image (debootstrap, the pinned torch, Podman's copy) takes a minute
or two more, and only the tests that run a container need it. They call `wait()` first.
JOBKIT_TEST_IMAGE_BUILD names the file .ci/run writes image.sh's exit status to when it
ends; without it (a developer's pytest, the image built by hand) there is nothing to wait for.
"""

from __future__ import annotations

import os
import time
from pathlib import Path

import pytest

WAIT_S = 900.0
"""At most this long for the build (it takes 1-3 minutes on the 2-core CI machine)."""


def wait(timeout: float = WAIT_S, poll_s: float = 1.0) -> None:
    """Return once image.sh has ended well; fail the test, naming its log, when it failed
    or had not ended after TIMEOUT seconds."""
    named = os.environ.get("JOBKIT_TEST_IMAGE_BUILD")
    if not named:
        return
    status = Path(named)
    log = status.with_suffix(".log")
    deadline = time.monotonic() + timeout
    while not status.exists():
        if time.monotonic() > deadline:
            pytest.fail(f"the test image was not built after {timeout:.0f} s: see {log}")
        time.sleep(poll_s)
    code = status.read_text().strip()
    if code != "0":
        pytest.fail(f"tests/cluster/image.sh failed (exit {code or '?'}): see {log}")
