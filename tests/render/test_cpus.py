"""`resources.cpus_per_process` asks for the same cores per training process whatever the
launcher and backend (docs/spec.md has the table); `cpus_per_task` is passed as given."""

from __future__ import annotations

import subprocess
from pathlib import Path
from typing import Any

import pytest

from jobkit.core.errors import SpecError
from jobkit.render.engine import render
from jobkit.render.environment import env_exports
from jobkit.spec.load import load_spec
from tests.plugins.cluster import SlurmCluster, sbatch, wait_slurm_job
from tests.render.helpers import GOLDEN_PYTHON, directive_lines, spec_from


def spec(backend: str, launcher: str = "torchrun", **resources: Any) -> dict[str, Any]:
    data: dict[str, Any] = {
        "name": "cpus",
        "backend": backend,
        "resources": {"nodes": 2 if backend in ("slurm", "pbs") else 1, **resources},
        "launch": {"launcher": launcher, "nproc_per_node": 4},
        "run": {"command": ["prog"]},
    }
    if backend == "pbs":
        data["scheduler"] = {"pbs_flavor": resources.pop("flavor", "pro")}
        data["resources"].pop("flavor", None)
    return data


def script(data: dict[str, Any]) -> str:
    return render(spec_from(data), interpreter=GOLDEN_PYTHON)


def slurm_cpus(text: str) -> list[str]:
    """Every --cpus-per-task in the script: the #SBATCH line and the srun lines."""
    return [word for word in text.split() if word.startswith("--cpus-per-task=")]


@pytest.mark.parametrize(
    ("launcher", "expected"),
    [
        ("torchrun", "--cpus-per-task=32"),
        ("srun", "--cpus-per-task=8"),
        ("mpirun", "--cpus-per-task=8"),
    ],
)
def test_slurm_asks_for_the_same_cores_per_process(launcher: str, expected: str) -> None:
    text = script(spec("slurm", launcher, cpus_per_process=8))
    found = slurm_cpus(text)
    assert found and set(found) == {expected}
    assert "export OMP_NUM_THREADS=8\n" in text


def test_cpus_per_task_means_per_process_whatever_the_launcher() -> None:
    """A seed's cpus_per_task is "cores per process": torchrun's one task per node asks for
    it times nproc_per_node (render says so: tests/spec/test_seed_words.py)."""
    assert set(slurm_cpus(script(spec("slurm", "torchrun", cpus_per_task=6)))) == {
        "--cpus-per-task=24"
    }
    assert set(slurm_cpus(script(spec("slurm", "srun", cpus_per_task=6)))) == {"--cpus-per-task=6"}
    for launcher in ("torchrun", "srun"):
        assert "export OMP_NUM_THREADS=6\n" in script(spec("slurm", launcher, cpus_per_task=6))


@pytest.mark.parametrize(
    ("flavor", "launcher", "expected"),
    [
        ("pro", "torchrun", ["-l", "select=2:ncpus=32:mpiprocs=1"]),
        ("pro", "mpirun", ["-l", "select=2:ncpus=32:mpiprocs=4"]),
        ("torque", "torchrun", ["-l", "nodes=2:ppn=32"]),
    ],
)
def test_pbs_asks_for_the_node_total(flavor: str, launcher: str, expected: list[str]) -> None:
    text = script(spec("pbs", launcher, cpus_per_process=8, flavor=flavor))
    assert expected in directive_lines(text, "#PBS")
    assert "export OMP_NUM_THREADS=8\n" in text


def test_local_and_submitit() -> None:
    assert "export OMP_NUM_THREADS=8\n" in script(spec("local", cpus_per_process=8))
    from jobkit.backends.submitit.backend import executor_parameters

    params = executor_parameters(spec_from(spec("submitit", cpus_per_process=8)), "t")
    assert params["cpus_per_task"] == 8 and params["tasks_per_node"] == 4
    assert ("OMP_NUM_THREADS", "8") in env_exports(spec_from(spec("submitit", cpus_per_process=8)))


def test_without_either_torchrun_gets_one_thread_per_process_and_no_banner() -> None:
    text = script(spec("slurm"))
    assert slurm_cpus(text) == []
    assert "export OMP_NUM_THREADS=1\n" in text
    one = spec("slurm", "srun")
    assert "OMP_NUM_THREADS" not in script(one)  # srun starts the processes: nothing to say
    mine = spec("slurm")
    mine["env"] = {"vars": {"OMP_NUM_THREADS": 3}}
    assert script(mine).count("export OMP_NUM_THREADS=") == 1
    assert "export OMP_NUM_THREADS=3\n" in script(mine)


def test_both_is_an_error(tmp_path: Path) -> None:
    path = tmp_path / "job.yaml"
    path.write_text(
        "name: x\nresources:\n  cpus_per_task: 2\n  cpus_per_process: 8\nrun:\n  command: p\n"
    )
    with pytest.raises(SpecError) as caught:
        load_spec(path, profile_dirs=[])
    assert caught.value.show() == (
        f"{path}:4: resources.cpus_per_process: give resources.cpus_per_process or"
        " resources.cpus_per_task, not both (both mean the CPUs of each process)"
    )


PRINT_CPUS = (
    "import os\n"
    "print('cpus', os.environ.get('SLURM_CPUS_PER_TASK'), 'omp', os.environ.get('OMP_NUM_THREADS'),"
    " flush=True)\n"
)


@pytest.mark.slurm
def test_slurm_gets_the_request(tmp_path: Path, slurm_cluster: SlurmCluster) -> None:
    """The test nodes have 1 CPU each: 2 torchrun processes of 1 core need a 2-CPU task, which
    Slurm refuses (the request reached it, multiplied); one process of 1 core runs."""
    workdir = tmp_path / "w"
    (workdir / "logs").mkdir(parents=True)
    (workdir / "prog.py").write_text(PRINT_CPUS)
    data = {
        "name": "cpus",
        "backend": "slurm",
        "resources": {
            "nodes": 1,
            "cpus_per_process": 1,
            "time": 5,
            "partition": slurm_cluster.partition,
        },
        "launch": {"launcher": "srun", "nproc_per_node": 1},
        "run": {"command": ["python3", "prog.py"]},
    }
    job = workdir / "job.sh"
    data["launch"] = {"launcher": "torchrun", "nproc_per_node": 2}
    job.write_text(render(spec_from(data)))
    refused = subprocess.run(
        ["sbatch", "--test-only", str(job)],
        cwd=workdir,
        capture_output=True,
        text=True,
        check=False,
        timeout=60,
    )
    assert refused.returncode != 0
    assert "Requested node configuration is not available" in refused.stderr
    data["launch"] = {"launcher": "srun", "nproc_per_node": 1}
    job.write_text(render(spec_from(data)))
    job_id = sbatch(str(job), cwd=workdir)
    end = wait_slurm_job(job_id, timeout=480)
    output = (workdir / "logs" / f"cpus-{job_id}" / "rank-0.out").read_text()
    assert (end.state, end.exit_code) == ("COMPLETED", "0:0"), output
    assert "cpus 1 omp 1" in output
