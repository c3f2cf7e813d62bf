"""launch.preflight in the spec and the rendered scripts (no job runs)."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.manager.helpers import Invoke

SPEC = "name: pf\nbackend: {backend}\nlaunch: {{launcher: {launcher}, preflight: {on}}}\n"
RUN = "run: {command: [python3, train.py]}\n"


def _spec(folder: Path, backend: str, launcher: str, on: bool) -> Path:
    path = folder / f"{backend}-{launcher}-{on}.yaml"
    extra = "ssh: {hosts: [n1]}\n" if backend == "ssh" else ""
    path.write_text(
        SPEC.format(backend=backend, launcher=launcher, on=str(on).lower()) + extra + RUN
    )
    return path


def test_mpirun_is_refused_in_one_line(workdir: Path, jobkit: Invoke) -> None:
    result = jobkit("render", str(_spec(workdir, "slurm", "mpirun", True)))
    assert result.code == 2
    assert result.err.strip().splitlines() == [
        f"jobkit: {workdir}/slurm-mpirun-True.yaml:3: launch.preflight: needs launcher torchrun"
        " or srun (mpirun has no preflight)"
    ]


@pytest.mark.parametrize("backend", ["slurm", "pbs", "sge", "ssh", "local"])
def test_scripts_run_the_preflight_only_when_asked(
    workdir: Path, jobkit: Invoke, backend: str
) -> None:
    on = jobkit("render", str(_spec(workdir, backend, "torchrun", True)))
    off = jobkit("render", str(_spec(workdir, backend, "torchrun", False)))
    assert (on.code, off.code) == (0, 0), on.err + off.err
    assert "-m train.preflight node" in on.out and "-m train --check" in on.out
    assert "preflight" not in off.out


def test_submitit_refuses_the_preflight_in_one_line(workdir: Path, jobkit: Invoke) -> None:
    """submitit writes its own sbatch file: a preflight asked for would silently not run."""
    result = jobkit("render", str(_spec(workdir, "submitit", "torchrun", True)))
    assert result.code == 2
    assert result.err.strip().splitlines() == [
        f"jobkit: {workdir}/submitit-torchrun-True.yaml:3: launch.preflight: the submitit backend"
        " runs no jobkit script, so it cannot run the preflight: use backend slurm (the same"
        " cluster, jobkit's script) or leave it off"
    ]
