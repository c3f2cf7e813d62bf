"""The job's environment managers (jobkit/provenance/envtools.py): conda and environment
modules. Neither conda nor Lmod/Environment Modules is installed on this machine: their
absence is tested for real; conda's own package records (conda-meta/*.json, the files conda
writes for every package it installs) are real files in conda's format; `conda env export`
and `module list` are run through stand-in executables, and the `module list` outputs parsed
are samples in the format Lmod's and Environment Modules' documentation show (each test
says which)."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from jobkit.provenance.envtools import conda_env, modules, parse_module_list

MANAGER_VARIABLES = (
    "CONDA_PREFIX",
    "CONDA_DEFAULT_ENV",
    "CONDA_EXE",
    "LMOD_CMD",
    "MODULES_CMD",
    "MODULESHOME",
    "LOADEDMODULES",
)


@pytest.fixture(autouse=True)
def _no_managers(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in MANAGER_VARIABLES:
        monkeypatch.delenv(name, raising=False)


def _conda_prefix(root: Path) -> Path:
    """An environment folder with conda's records of two packages (and a broken one)."""
    meta = root / "env" / "conda-meta"
    meta.mkdir(parents=True)
    for name, version, build in (
        ("numpy", "1.26.4", "py311h64a7726_0"),
        ("python", "3.11.9", "hb806964_0_cpython"),
    ):
        record = {
            "name": name,
            "version": version,
            "build": build,
            "channel": "https://conda.anaconda.org/conda-forge/linux-64",
            "files": [],
        }
        (meta / f"{name}-{version}-{build}.json").write_text(json.dumps(record))
    (meta / "history").write_text("==> 2026-01-01 <==\n")
    (meta / "broken.json").write_text("{not json")
    return root / "env"


def test_not_in_a_conda_env_records_nothing() -> None:
    assert conda_env() is None


def test_conda_packages_come_from_conda_meta_without_conda(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Real: conda is not on PATH here; the packages are read from conda's own records."""
    prefix = _conda_prefix(tmp_path)
    monkeypatch.setenv("CONDA_PREFIX", str(prefix))
    monkeypatch.setenv("CONDA_DEFAULT_ENV", "train")
    monkeypatch.setenv("PATH", "/usr/bin:/bin")
    found = conda_env()
    assert found == {
        "prefix": str(prefix),
        "name": "train",
        "packages": {
            "numpy": "1.26.4 py311h64a7726_0 (conda-forge)",
            "python": "3.11.9 hb806964_0_cpython (conda-forge)",
        },
        "export": None,
        "export_note": "conda not found (CONDA_EXE unset, none on PATH): not exported",
    }


def test_conda_env_export_is_kept_as_conda_prints_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A stand-in `conda` executable (conda is not installed here): it checks the arguments
    jobkit passes and prints an export; a failing one leaves a note, not a crash."""
    prefix = _conda_prefix(tmp_path)
    conda = tmp_path / "conda"
    conda.write_text(
        "#!/bin/sh\n"
        f'[ "$*" = "env export --prefix {prefix}" ] || {{ echo "bad args: $*" >&2; exit 2; }}\n'
        "printf 'name: train\\ndependencies:\\n  - numpy=1.26.4=py311h64a7726_0\\n'\n"
    )
    conda.chmod(0o755)
    monkeypatch.setenv("CONDA_PREFIX", str(prefix))
    monkeypatch.setenv("CONDA_EXE", str(conda))
    found = conda_env()
    assert found is not None and found["export_note"] is None
    assert found["export"] == "name: train\ndependencies:\n  - numpy=1.26.4=py311h64a7726_0\n"
    conda.write_text("#!/bin/sh\necho 'CondaError: broken' >&2\nexit 1\n")
    failed = conda_env()
    assert failed is not None and failed["export"] is None
    assert failed["export_note"] == f"{conda} env export exited 1: CondaError: broken"


def test_no_module_system_records_nothing() -> None:
    """Real: this machine has neither Lmod nor Environment Modules."""
    assert "LMOD_CMD" not in os.environ and modules() is None


# Lmod's `module list`, in the format of Lmod's user guide (a sticky module, a footer).
LMOD_LIST = """
Currently Loaded Modules:
  1) StdEnv (S)   2) gcc/12.2.0   3) openmpi/4.1.5   4) cuda/12.4 (D)

  Where:
   S:  Module is Sticky, requires --force to unload or purge
   D:  Default Module

"""
# Environment Modules 5's, in the format of its documentation (tags, a default marker).
MODULES5_LIST = (
    "Currently Loaded Modulefiles:\n"
    " 1) gcc/12.2.0   2) \x1b[1mopenmpi/4.1.5\x1b[0m <aL>   3) python/3.11(default)  \n\n"
    "Key:\n(symbolic-version)  <module-tag>  auto-loaded  \n"
)


def test_module_list_outputs_parse_to_names() -> None:
    assert parse_module_list(LMOD_LIST) == ["StdEnv", "gcc/12.2.0", "openmpi/4.1.5", "cuda/12.4"]
    assert parse_module_list(MODULES5_LIST) == ["gcc/12.2.0", "openmpi/4.1.5", "python/3.11"]
    assert parse_module_list("No modules loaded\n") == []
    assert parse_module_list("Lmod has detected the following error: ...\n") is None


def test_module_list_is_run_through_lmod_cmd(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A stand-in LMOD_CMD (Lmod is not installed here) printing the sample above on stderr,
    as Lmod does (stdout is shell code); a module system that cannot be run falls back to
    LOADEDMODULES, and says why."""
    lmod = tmp_path / "lmod"
    (tmp_path / "list.txt").write_text(LMOD_LIST)
    lmod.write_text(
        '#!/bin/sh\n[ "$*" = "bash list" ] || exit 2\n'
        f'cat {tmp_path}/list.txt >&2\necho "export X=1;"\n'
    )
    lmod.chmod(0o755)
    monkeypatch.setenv("LMOD_CMD", str(lmod))
    found = modules()
    assert found is not None and found["system"] == "lmod" and found["note"] is None
    assert found["loaded"] == ["StdEnv", "gcc/12.2.0", "openmpi/4.1.5", "cuda/12.4"]
    assert found["output"] == LMOD_LIST
    monkeypatch.delenv("LMOD_CMD")
    monkeypatch.setenv("MODULESHOME", "/usr/share/modules")
    monkeypatch.setenv("LOADEDMODULES", "gcc/12.2.0:openmpi/4.1.5")
    fallback = modules()
    assert fallback == {
        "system": "environment-modules",
        "loaded": ["gcc/12.2.0", "openmpi/4.1.5"],
        "output": None,
        "note": "module's command not found (LMOD_CMD / MODULES_CMD unset)",
    }
