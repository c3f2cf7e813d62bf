"""Bad `container:` input: one line naming the file, the key's line and the key; good input
read as written."""

from __future__ import annotations

from pathlib import Path

import pytest

from jobkit.container.mounts import Mount, parse_mount
from jobkit.core.errors import SpecError
from jobkit.spec.load import load_spec

HEAD = "name: c\nbackend: slurm\nrun:\n  command: [python3, t.py]\n"


def _error(tmp_path: Path, body: str) -> str:
    path = tmp_path / "job.yaml"
    path.write_text(HEAD + body)
    with pytest.raises(SpecError) as caught:
        load_spec(path, profile_dirs=[])
    assert caught.value.exit_code == 2
    return caught.value.show().replace(str(path), "job.yaml")


def test_mounts_read_as_written() -> None:
    assert parse_mount("/data:/data:ro") == Mount("/data", "/data", True)
    assert parse_mount("/a/b:/c") == Mount("/a/b", "/c", False)
    assert parse_mount("/a:/c:rw") == Mount("/a", "/c", False)


@pytest.mark.parametrize(
    ("mount", "why"),
    [
        ("/data", "is not HOST:CONTAINER or HOST:CONTAINER:ro: '/data'"),
        ("/data:/d:rx", "is not HOST:CONTAINER or HOST:CONTAINER:ro: '/data:/d:rx'"),
        ("data:/d", "the host path must be absolute: 'data:/d'"),
        ("/data:d", "the container path must be absolute: '/data:d'"),
        ("/a,b:/d", "a path with a comma cannot be mounted (pyxis splits there): '/a,b:/d'"),
    ],
)
def test_bad_mount_is_one_line_at_its_entry(tmp_path: Path, mount: str, why: str) -> None:
    body = (
        "container:\n  image: /i.sif\n  runtime: apptainer\n"
        f"  mounts:\n    - /ok:/ok\n    - '{mount}'\n"
    )
    shown = _error(tmp_path, body)
    assert shown == f"job.yaml:10: container.mounts[1]: {why}", shown


def test_unknown_runtime(tmp_path: Path) -> None:
    shown = _error(tmp_path, "container:\n  image: /i.sif\n  runtime: docker\n")
    assert shown.startswith("job.yaml:7: container.runtime: "), shown
    assert "apptainer" in shown and "podman" in shown


def test_charliecloud_has_no_read_only_bind(tmp_path: Path) -> None:
    body = "container:\n  image: /img\n  runtime: charliecloud\n  mounts: ['/d:/d:ro']\n"
    shown = _error(tmp_path, body)
    assert shown == (
        "job.yaml:8: container.mounts[0]: charliecloud's ch-run has no read-only bind:"
        " '/d:/d:ro' (drop :ro)"
    ), shown


@pytest.mark.parametrize(
    "option", ["--pid private", "--pid=private", "--sig-proxy=true", "--cidfile /tmp/c"]
)
def test_podman_options_that_change_how_it_stops_are_refused(tmp_path: Path, option: str) -> None:
    """--pid, --sig-proxy, --pidfile and --cidfile are the task's (docs/containers.md "How a
    Podman job stops"); the runtime's other options pass (--ulimit here)."""
    body = (
        "container:\n  image: localhost/t\n  runtime: podman\n"
        f"  options:\n    - --ulimit nofile=1024:1024\n    - {option}\n"
    )
    shown = _error(tmp_path, body)
    name = option.split("=")[0].split()[0]
    assert shown == (
        f"job.yaml:10: container.options[1]: {name} is set by jobkit for podman (the program"
        " runs in the host's pid namespace and jobkit passes the signals on, so that the"
        ' container stops with its job: docs/containers.md "How a Podman job stops"): remove it'
    ), shown
    (tmp_path / "job.yaml").write_text(HEAD + body.replace(f"    - {option}\n", ""))
    kept = load_spec(tmp_path / "job.yaml", profile_dirs=[]).spec.container
    assert kept is not None and kept.options == ["--ulimit nofile=1024:1024"]


def test_host_python_environment_refused(tmp_path: Path) -> None:
    body = "env:\n  venv: /opt/venv\ncontainer:\n  image: /i.sif\n  runtime: apptainer\n"
    assert _error(tmp_path, body) == (
        "job.yaml:6: env.venv: is activated on the host, not inside container.image: remove it"
    )


def test_pyxis_refused_where_there_is_no_slurm(tmp_path: Path) -> None:
    body = "container:\n  image: nvcr.io#x\n  runtime: pyxis\n"
    path = tmp_path / "job.yaml"
    path.write_text(HEAD.replace("slurm", "local") + body)
    with pytest.raises(SpecError) as caught:
        load_spec(path, profile_dirs=[])
    assert caught.value.show() == (
        f"{path}:7: container.runtime: the local backend cannot run container.runtime pyxis"
        " (its runtimes: apptainer, charliecloud, podman, singularity)"
    )
