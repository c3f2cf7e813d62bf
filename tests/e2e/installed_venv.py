"""The fresh venv of tests/e2e/test_installed.py, built in the background (issue 25).

The wheel is built from the checkout and installed with its `all` extra into a new venv
outside it (no system site packages), as the README's install line does: a minute or two
of pip on the 2-core CI machine that needs no cluster. tests/e2e/conftest.py starts the build
when the session's collection selected test_installed (once the Slurm gate of
tests/plugins/gates.py is open, so that it never slows the tests that need the cluster
alone; in .ci/run, whose lane 0 runs it first as that gate opens, once the hosts' gate is:
start); the test's fixture waits for it and fails with pip's own output when it failed.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

import pytest

from tests.e2e.cli import REPO

CONSTRAINTS = REPO / ".ci" / "constraints.txt"
TEST_FILE = "tests/e2e/test_installed.py"
BUILD_TIMEOUT_S = 1500.0
_KEY = pytest.StashKey["Build"]()


def clean_env(home: Path) -> dict[str, str]:
    """The user's shell: no virtualenv active, no Python variables, a registry of its own."""
    env = {
        k: v
        for k, v in os.environ.items()
        if not k.startswith(("PYTHON", "VIRTUAL_ENV", "CONDA_", "SLURM_", "PBS_", "JOBKIT_"))
    }
    env["JOBKIT_HOME"] = str(home)
    env["JOBKIT_TEMPLATE_CACHE"] = "off"
    return env


def _run(argv: list[str], cwd: Path, env: dict[str, str], timeout: float) -> None:
    done = subprocess.run(
        argv, cwd=cwd, env=env, capture_output=True, text=True, timeout=timeout, check=False
    )
    if done.returncode != 0:
        raise RuntimeError(f"{argv}: exit {done.returncode}\n{done.stdout}\n{done.stderr}")


class Build:
    """One background build of the venv under ROOT."""

    def __init__(self, root: Path, after: Path | None = None) -> None:
        self.root = root
        self._after = after
        self._error: BaseException | None = None
        self._seconds = 0.0
        self._thread = threading.Thread(target=self._build, name="installed-venv", daemon=True)
        self._thread.start()

    def _build(self) -> None:
        try:
            while self._after is not None and not self._after.exists():
                time.sleep(1.0)
            started = time.monotonic()
            self._install()
            self._seconds = time.monotonic() - started
        except BaseException as error:
            self._error = error

    def _install(self) -> None:
        env = clean_env(self.root / "home")
        venv = self.root / "venv"
        _run([sys.executable, "-m", "venv", str(venv)], self.root, env, 120)
        pip = [str(venv / "bin" / "python"), "-m", "pip", "--disable-pip-version-check", "-q"]
        dist = self.root / "dist"
        _run([*pip, "wheel", "--no-deps", "-w", str(dist), str(REPO)], self.root, env, 600)
        (wheel,) = dist.glob("jobkit-*.whl")
        # --no-compile: byte-compiling every module of torch, numpy and matplotlib up front
        # costs a minute of CPU on the 2-core CI machine; what the examples import is
        # compiled then.
        _run(
            [*pip, "install", "--no-compile", "-c", str(CONSTRAINTS), f"{wheel}[all]"],
            self.root,
            env,
            900,
        )

    def venv(self) -> Path:
        """The venv, once built; fails the test with the build's error."""
        self._thread.join(BUILD_TIMEOUT_S)
        if self._thread.is_alive():
            pytest.fail(f"the venv of {TEST_FILE} was not built after {BUILD_TIMEOUT_S:.0f} s")
        if self._error is not None:
            pytest.fail(f"building the venv of {TEST_FILE} failed: {self._error}")
        return self.root / "venv"

    def seconds(self) -> float:
        """How long the build took (0 while it runs)."""
        return self._seconds

    def remove(self) -> None:
        """Delete ROOT once the build has ended."""
        self._thread.join(BUILD_TIMEOUT_S)
        shutil.rmtree(self.root, ignore_errors=True)


def start(config: pytest.Config) -> Build:
    """Start this session's build: after the Slurm gate, when there is one; in a lane that
    claims its files (tests/plugins/claims.py: lane 0 runs test_installed first, as soon as
    the Slurm gate opens) after the hosts' gate, early in the cluster-alone tests."""
    claiming = os.environ.get("JOBKIT_TEST_CLAIMS") and os.environ.get("JOBKIT_TEST_HOSTS_GATE")
    gate = os.environ.get("JOBKIT_TEST_HOSTS_GATE" if claiming else "JOBKIT_TEST_SLURM_GATE")
    build = Build(Path(tempfile.mkdtemp(prefix="jobkit-installed-")), Path(gate) if gate else None)
    config.stash[_KEY] = build
    return build


def started(config: pytest.Config) -> Build:
    """This session's build: the one started at collection, or one started now."""
    return config.stash[_KEY] if _KEY in config.stash else start(config)


def finish(config: pytest.Config) -> None:
    """Remove this session's venv, if one was built."""
    if _KEY in config.stash:
        config.stash[_KEY].remove()
