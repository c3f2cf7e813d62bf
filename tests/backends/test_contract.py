"""The backend contract (jobkit/backends/base.py), checked for every registered backend: what
the registry, the renderer and the manager rely on without knowing which backend it is.

Submitting, polling and cancelling for real are each backend's own tests (tests/backends,
tests/e2e) on the real cluster; here, what must hold before any scheduler is asked.
"""

from __future__ import annotations

import subprocess
from pathlib import Path
from typing import Any

import pytest

from jobkit.backends.base import Backend
from jobkit.backends.registry import backend_class, backend_names, get_backend
from jobkit.core.errors import UsageError
from jobkit.core.paths import templates_dir
from tests.backends.requests import make_request

ALL = backend_names()

MINIMAL: dict[str, dict[str, Any]] = {
    "ssh": {"ssh": {"hosts": ["n1"]}},
}
"""What a backend needs beyond name + run to accept a one-node spec."""


def spec_fields(name: str) -> dict[str, Any]:
    return {"backend": name, "logs": {"dir": "logs"}, **MINIMAL.get(name, {})}


def test_every_builtin_backend_is_registered() -> None:
    assert set(ALL) >= {"local", "slurm", "pbs", "sge", "ssh", "submitit"}


def test_an_unknown_backend_is_a_usage_error_naming_the_known_ones() -> None:
    with pytest.raises(UsageError, match=r"unknown backend 'lsf' \(known: local, slurm"):
        get_backend("lsf")


@pytest.mark.parametrize("name", ALL)
def test_class_is_a_backend_named_as_registered(name: str) -> None:
    cls = backend_class(name)
    assert issubclass(cls, Backend) and cls.name == name
    assert isinstance(get_backend(name), cls)
    assert cls.poll_interval_s > 0
    assert "torchrun" in cls.launchers


@pytest.mark.parametrize("name", ALL)
def test_template_exists_or_the_backend_writes_its_own_script(name: str) -> None:
    cls = backend_class(name)
    if cls.template is None:
        assert cls.script is not Backend.script, f"{name}: no template and no script()"
    else:
        assert (templates_dir() / cls.template).is_file()


@pytest.mark.parametrize("name", ALL)
def test_script_and_submit_command_for_a_minimal_spec(name: str, tmp_path: Path) -> None:
    request = make_request(tmp_path, "", **spec_fields(name))
    backend = get_backend(name)
    script = backend.script(request.spec, None, request.workdir)
    assert script.startswith("#!"), script[:80]
    assert subprocess.run(["bash", "-n"], input=script, text=True, check=False).returncode == 0
    argv = backend.submit_argv(request)
    assert argv and all(isinstance(word, str) for word in argv)


@pytest.mark.parametrize("name", ALL)
def test_log_paths_live_in_the_logs_folder(name: str, tmp_path: Path) -> None:
    request = make_request(tmp_path, "", name="contract", **spec_fields(name))
    backend = get_backend(name)
    paths = backend.log_paths(request, "123")
    assert set(paths) >= {"out", "err", "run_dir"}
    logs = (request.workdir / "logs").resolve()
    for key in ("out", "err", "run_dir"):
        path = Path(paths[key])
        assert path.is_absolute() and logs in path.parents, (key, path)
        assert "123" in path.name or "123" in path.parent.name, (key, path)
    kept = Path(backend.submit_extra(request, "123")["run_dir"])  # the exit-code fallback
    assert kept.is_absolute() and logs in kept.parents, kept


@pytest.mark.parametrize("name", ALL)
def test_polling_or_cancelling_no_job_runs_no_command(
    name: str, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setenv("PATH", str(tmp_path))  # no scheduler command can be found
    backend = get_backend(name)
    assert backend.poll([]) == {}


@pytest.mark.parametrize("name", ALL)
def test_validate_runs_as_the_spec_loads(name: str) -> None:
    """A backend's own checks are part of loading: a minimal spec passes them."""
    from jobkit.spec.schema import JobSpec

    spec = JobSpec.model_validate({"name": "x", "run": {"command": ["true"]}, **spec_fields(name)})
    backend_class(name).validate(spec)
    assert spec.backend == name
