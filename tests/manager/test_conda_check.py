"""Issue 24: "`env.conda: NAME` checks only that conda exists, not the environment". On the
local and ssh backends jobkit can see the hosts, so `jobkit submit` asks conda there before
anything is recorded or started: a named environment that does not exist is one line.

This machine has no conda: the `conda` on PATH here is a stand-in that answers as conda 23
does (`conda env list --json`; `shell.bash hook` defining `conda activate`), knowing one
environment, `known`, and one prefix folder with its conda-meta/."""

from __future__ import annotations

import json
import os
import socket
from pathlib import Path

import pytest

from tests.manager.helpers import Invoke

STAND_IN = """#!/bin/bash
root={root}
case "$1 $2" in
  "env list")
    printf '{{\\n  "envs": [\\n    "%s",\\n    "%s/envs/known"\\n  ]\\n}}\\n' "$root" "$root" ;;
  "shell.bash hook")
    echo 'conda() {{ [[ $1 == activate && ( $2 == known || $2 == base || -d $2/conda-meta ) ]]; }}'
    ;;
  *) exit 2 ;;
esac
"""


@pytest.fixture
def conda(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """The stand-in conda first on PATH; returns its root (a prefix env is under it)."""
    root = tmp_path / "conda"
    (root / "envs" / "known" / "conda-meta").mkdir(parents=True)
    (root / "bin").mkdir()
    exe = root / "bin" / "conda"
    exe.write_text(STAND_IN.format(root=json.dumps(str(root))), encoding="utf-8")
    exe.chmod(0o755)
    monkeypatch.setenv("PATH", f"{root / 'bin'}{os.pathsep}{os.environ['PATH']}")
    monkeypatch.delenv("CONDA_EXE", raising=False)
    return root


def spec(workdir: Path, env: str) -> Path:
    path = workdir / "job.yaml"
    path.write_text(
        f"name: job\nbackend: local\nenv:\n  conda: {json.dumps(env)}\n"
        "launch:\n  launcher: none\nrun:\n  command: [echo, hello]\n",
        encoding="utf-8",
    )
    return path


def test_a_conda_environment_that_does_not_exist_is_refused_at_submit(
    jobkit: Invoke, workdir: Path, conda: Path
) -> None:
    done = jobkit("submit", str(spec(workdir, "myenv")))
    assert (done.code, done.out) == (2, "")
    assert done.err == (
        f"jobkit: {workdir / 'job.yaml'}:4: env.conda: the conda environment myenv not found"
        f" on {socket.gethostname()} (`conda env list` names the environments there)\n"
    )
    assert jobkit("status", "--all", "--json").out.strip() == "[]"
    assert not (workdir / "logs").exists()
    missing_prefix = jobkit("submit", str(spec(workdir, str(conda / "envs" / "gone"))))
    assert missing_prefix.code == 2
    assert f"the conda environment {conda / 'envs' / 'gone'} not found" in missing_prefix.err


@pytest.mark.parametrize("env", ["known", "base", "PREFIX"])
def test_an_environment_conda_knows_is_submitted_and_runs(
    jobkit: Invoke, workdir: Path, conda: Path, env: str
) -> None:
    name = str(conda / "envs" / "known") if env == "PREFIX" else env
    done = jobkit("submit", str(spec(workdir, name)), "--wait")
    assert done.code == 0, done.err
    assert "hello" in done.out + done.err


def test_conda_from_the_jobs_own_setup_is_left_to_the_job(
    jobkit: Invoke, workdir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """No conda in this shell (a login shell's setup may bring it), or env.modules first
    (`module load anaconda` may): submit does not refuse; the job's own check says the same
    kind of line if it misses."""
    monkeypatch.setenv("PATH", "/usr/bin:/bin")
    path = spec(workdir, "myenv")
    done = jobkit("submit", str(path), "--wait")
    assert done.code == 1, done.err  # submitted, then the job's own check stopped it
    assert done.out.startswith("submitted "), done.out
    assert "env.conda: conda (neither on PATH nor in CONDA_EXE) not found" in done.err
    with_modules = path.read_text().replace("env:\n", "env:\n  modules: [anaconda3]\n")
    path.write_text(with_modules, encoding="utf-8")
    again = jobkit("submit", str(path), "--wait")
    assert again.out.startswith("submitted ") and again.code != 0, again.err  # no `module`
