"""Fixtures for the reliability suite: a registry per test, the CLI in-process, counts, outages.

Cluster tests carry the `slurm` / `ssh` markers and use the fixtures of
tests/plugins/cluster.py. Fault injection stops a daemon of the shared test cluster through
tests/cluster/ctl.sh and always starts it again (waiting until it answers) in a `finally`,
so other tests running at the same time see at most a short outage.

Every test that tries many things records how many with `tally(case, n)`; the counts are
printed at the end of the run and, with JOBKIT_RELIABILITY_COUNTS=FILE, written as JSON
(docs/reliability.md quotes them).
"""

from __future__ import annotations

import dataclasses
import functools
import json
import os
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest

from jobkit.core.errors import SpecError
from jobkit.render import engine as render_module
from jobkit.spec import load as load_module
from tests.plugins.cluster import SlurmCluster

COUNTS_ENV = "JOBKIT_RELIABILITY_COUNTS"
_COUNTS = pytest.StashKey[dict[str, int]]()
_FIGURES = pytest.StashKey[dict[str, float]]()


@pytest.fixture(autouse=True)
def jobkit_home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A fresh registry folder for each test (JOBKIT_HOME)."""
    home = tmp_path / "jobkit-home"
    monkeypatch.setenv("JOBKIT_HOME", str(home))
    monkeypatch.delenv("JOBKIT_DEBUG", raising=False)
    return home


@pytest.fixture
def tally(request: pytest.FixtureRequest) -> Callable[[str, int], None]:
    """tally(case, n): add n to the count of things tried for `case` (summed over the run)."""
    counts = request.config.stash.setdefault(_COUNTS, {})

    def add(case: str, n: int) -> None:
        counts[case] = counts.get(case, 0) + n

    return add


@pytest.fixture
def figure(request: pytest.FixtureRequest) -> Callable[[str, float], None]:
    """figure(name, value): a measurement to report (the largest value seen is kept)."""
    figures = request.config.stash.setdefault(_FIGURES, {})

    def keep(name: str, value: float) -> None:
        figures[name] = max(value, figures.get(name, value))

    return keep


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter) -> None:
    """Print the counts (and write them to JOBKIT_RELIABILITY_COUNTS when set)."""
    counts = terminalreporter.config.stash.get(_COUNTS, {})
    figures = terminalreporter.config.stash.get(_FIGURES, {})
    if not counts and not figures:
        return
    terminalreporter.section("reliability: what was tried")
    for case, n in sorted(counts.items()):
        terminalreporter.write_line(f"{n:8d}  {case}")
    for name, value in sorted(figures.items()):
        terminalreporter.write_line(f"{value:8.1f}  {name}")
    target = os.environ.get(COUNTS_ENV)
    if target:
        data = {"counts": counts, "figures": figures}
        Path(target).write_text(json.dumps(data, indent=1, sort_keys=True) + "\n")


@pytest.fixture
def outage(slurm_cluster: SlurmCluster) -> Iterator[Callable[[str], object]]:
    """outage(DAEMON) is a context manager: the daemon is stopped inside, started after.

    The start waits until the daemon answers (ctl.sh). Whatever happens in the test, every
    daemon stopped here is running again when the test ends.
    """
    stopped: list[str] = []

    @contextmanager
    def down(daemon: str) -> Iterator[None]:
        stopped.append(daemon)
        slurm_cluster.ctl("stop", daemon)
        try:
            yield
        finally:
            slurm_cluster.ctl("start", daemon)
            stopped.remove(daemon)

    try:
        yield down
    finally:
        for daemon in reversed(stopped):
            slurm_cluster.ctl("start", daemon)


@pytest.fixture(scope="module")
def reuse_the_jinja_environment() -> Iterator[None]:
    """render() builds its Jinja environment (and compiles the templates) on every call;
    here the same environment is kept for a module, so thousands of renders stay fast."""
    original = render_module._environment
    render_module._environment = functools.cache(original)  # type: ignore[assignment]
    try:
        yield
    finally:
        render_module._environment = original  # type: ignore[assignment]


@pytest.fixture(scope="module")
def parse_each_yaml_file_once() -> Iterator[None]:
    """Parsing the job file (with every key's line) is a large part of a load's time (texts
    with a tab go to pure-Python YAML: jobkit/core/yamlsrc.py); the injection walk loads the
    same bytes once per backend (7 times).
    Here a file's bytes are parsed once and each load gets its own copy of the mappings and
    lists (or the same refusal): what the loader then does per backend is unchanged."""
    original = load_module.load_yaml_file
    parsed: dict[tuple[bytes, str, str, bool], Any] = {}

    def load_yaml_file(
        path: Path, display: str | None = None, *, what: str = "a job spec", empty_ok: bool = False
    ) -> Any:
        try:
            raw = Path(path).read_bytes()
        except OSError:
            return original(path, display, what=what, empty_ok=empty_ok)
        key = (raw, str(path) if display is None else display, what, empty_ok)
        if key not in parsed:
            if len(parsed) >= 256:
                parsed.clear()
            try:
                parsed[key] = original(path, display, what=what, empty_ok=empty_ok)
            except SpecError as err:
                parsed[key] = err
        found = parsed[key]
        if isinstance(found, SpecError):
            raise found.with_traceback(None)
        return dataclasses.replace(found, data=_fresh(found.data))

    load_module.load_yaml_file = load_yaml_file  # type: ignore[assignment]
    try:
        yield
    finally:
        load_module.load_yaml_file = original  # type: ignore[assignment]


def _fresh(value: Any) -> Any:
    """A copy of the mappings and lists of a parsed YAML value (scalars are immutable)."""
    if isinstance(value, dict):
        return {key: _fresh(item) for key, item in value.items()}
    if isinstance(value, list):
        return [_fresh(item) for item in value]
    return value
