"""`jobkit check` looks for a container runtime on this machine only where the backend says
the job runs here (Backend.runs_here: local), not by the backend's name."""

from __future__ import annotations

from pathlib import Path

import pytest

from jobkit.backends.base import Backend
from jobkit.backends.registry import DEFAULT, backend_class, builtin_names
from jobkit.check.run import check_loaded
from jobkit.spec.load import load_spec


def _runtime_problems(tmp_path: Path, backend: str) -> list[str]:
    path = tmp_path / f"{backend}.yaml"
    hosts = "ssh:\n  hosts: [n1]\n" if backend == "ssh" else ""
    path.write_text(
        f"name: c\nbackend: {backend}\nrun:\n  command: [python3, t.py]\n{hosts}"
        "container:\n  runtime: apptainer\n  image: img.sif\n"
    )
    loaded = load_spec(path, profile_dirs=[])
    report = check_loaded(loaded, tmp_path, script=None, scheduler=False, thorough=False)
    return [p.message for p in report.problems if p.key == "container.runtime"]


def test_the_runtime_is_looked_for_here_only_where_the_job_runs_here(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("PATH", str(tmp_path / "empty"))  # no apptainer on this PATH
    assert _runtime_problems(tmp_path, "local") == ["apptainer not found on PATH"]
    assert _runtime_problems(tmp_path, "slurm") == []
    assert _runtime_problems(tmp_path, "ssh") == []


def test_only_local_runs_here_and_it_is_the_default() -> None:
    here = [name for name in builtin_names() if backend_class(name).runs_here]
    assert here == ["local"]
    assert Backend.runs_here is False  # an entry-point backend: not on this machine
    assert DEFAULT == "local"
    assert backend_class(DEFAULT).runs_here
