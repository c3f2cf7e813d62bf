"""`launch.master_port: auto` is one rule (jobkit/core/ports.py): the rendered scripts (real bash),
the trainer's fallback (train/env/launch.py) and the submitit job side give the same port for the
same job, for Slurm, Slurm arrays, PBS, PBS arrays, local and ssh ids."""

from __future__ import annotations

import re
import subprocess
from pathlib import Path
from types import SimpleNamespace

import pytest

from jobkit.backends.submitit.job import RankProgram, rank_environment
from jobkit.core.ports import PORT_BASE, PORT_SPAN, auto_port, id_number
from jobkit.render.engine import render
from tests.render.helpers import GOLDEN_PYTHON, spec_from
from train.env import detect_launch_env

RUN = {"command": ["prog"]}


def _script(backend: str) -> str:
    data = {"name": "ports", "backend": backend, "run": RUN}
    if backend == "ssh":
        data["ssh"] = {"hosts": ["h1"]}
    return render(spec_from(data), interpreter=GOLDEN_PYTHON)


def _bash_port(script: str, env: dict[str, str]) -> int:
    """Run the script's own port lines (the task id, the id function and the MASTER_PORT
    line) in bash."""
    task = re.search(r"^export JOBKIT_TASK_ID=.*\n", script, re.M)
    function = re.search(r"^jobkit_id_number\(\) \{\n.*?^\}\n", script, re.M | re.S)
    line = re.search(r"^MASTER_PORT=.*$", script, re.M)
    assert line is not None
    code = "".join(m.group(0) for m in (task, function) if m)
    code += line.group(0) + '\necho "$MASTER_PORT"\n'
    done = subprocess.run(
        ["bash", "-c", code], env=env, capture_output=True, text=True, check=True, timeout=30
    )
    return int(done.stdout)


def _trainer_port(env: dict[str, str]) -> int:
    return detect_launch_env(env).master_port


def _submitit_port(job_id: str, slurm_job_id: str, monkeypatch: pytest.MonkeyPatch) -> int:
    monkeypatch.setenv("SLURM_JOB_ID", slurm_job_id)
    program = RankProgram(argv=["prog"], cwd="/", run_dir_pattern="/r/%j")
    job_env = SimpleNamespace(
        job_id=job_id,
        num_nodes=1,
        num_tasks=1,
        hostnames=["h"],
        global_rank=0,
        local_rank=0,
        node=0,
    )
    return int(rank_environment(program, job_env)["MASTER_PORT"])


@pytest.mark.parametrize(
    ("slurm_job_id", "array_job_id"),
    [("1234", None), ("98765432", None), ("1240", "1234_6")],  # task 6 of array 1234
)
def test_slurm_ids_agree(
    slurm_job_id: str, array_job_id: str | None, monkeypatch: pytest.MonkeyPatch
) -> None:
    expected = PORT_BASE + int(slurm_job_id) % PORT_SPAN
    assert auto_port(slurm_job_id) == expected
    assert _bash_port(_script("slurm"), {"SLURM_JOB_ID": slurm_job_id}) == expected
    assert _trainer_port({"SLURM_JOB_ID": slurm_job_id}) == expected
    job_id = array_job_id or slurm_job_id
    assert _submitit_port(job_id, slurm_job_id, monkeypatch) == expected


@pytest.mark.parametrize(
    ("pbs_jobid", "index"), [("123.server", None), ("987654.pbs01", None), ("123[4].server", "4")]
)
def test_pbs_ids_agree(pbs_jobid: str, index: str | None) -> None:
    number = int(pbs_jobid.split(".")[0].split("[")[0])
    expected = PORT_BASE + (number + int(index or 0)) % PORT_SPAN
    env = {"PBS_JOBID": pbs_jobid, **({"PBS_ARRAY_INDEX": index} if index else {})}
    assert auto_port(pbs_jobid, int(index or 0)) == expected
    # The PBS script takes JOBKIT_JOB_ID from $PBS_JOBID (under Slurm's Torque wrappers,
    # which set none, from $SLURM_JOB_ID: the Slurm case above).
    assert _bash_port(_script("pbs"), {**env, "JOBKIT_JOB_ID": pbs_jobid}) == expected
    assert _trainer_port(env) == expected


@pytest.mark.parametrize(
    "task_env",
    [
        {"PBS_ARRAYID": "{task}"},  # Torque
        {"PBS_ARRAY_INDEX": "{task}"},  # PBS Pro
        # Slurm's Torque wrappers set no PBS_* variable: the id is ARRAYJOB_TASK.
        {"SLURM_ARRAY_JOB_ID": "777", "SLURM_ARRAY_TASK_ID": "{task}"},
    ],
)
def test_pbs_array_tasks_on_one_host_get_ports_of_their_own(task_env: dict[str, str]) -> None:
    """Two tasks of one array share the id's number; their index keeps their rendezvous ports
    apart (under the wrappers they once met on one port and one task failed)."""
    script = _script("pbs")
    ports = []
    for task in ("0", "1"):
        env = {key: value.format(task=task) for key, value in task_env.items()}
        job_id = "777_" + task if "SLURM_ARRAY_JOB_ID" in env else f"777[{task}].server"
        ports.append(_bash_port(script, {**env, "JOBKIT_JOB_ID": job_id}))
    assert ports == [PORT_BASE + 777, PORT_BASE + 778]


@pytest.mark.parametrize("backend", ["local", "ssh"])
@pytest.mark.parametrize("job_id", ["jkx3ebd", "jk2NIEQ", "local-1700000000-4242", "jk-9"])
def test_local_and_ssh_ids_agree(backend: str, job_id: str) -> None:
    expected = auto_port(job_id)
    assert expected is not None
    assert PORT_BASE <= expected < PORT_BASE + PORT_SPAN
    assert _bash_port(_script(backend), {"JOBKIT_JOB_ID": job_id}) == expected
    assert _trainer_port({"JOBKIT_JOB_ID": job_id}) == expected


def test_jobkit_ids_are_read_in_base_36() -> None:
    assert id_number("jkx3ebd") == int("jkx3ebd", 36)
    assert id_number("local-1700000000-4242") == 4242
    assert id_number("123_4") == id_number("123.server") == id_number("123[4].x") == 123
    assert id_number("1" * 30) == int("1" * 18)  # bash arithmetic is 64-bit
    assert auto_port("jkx3ebd") != auto_port("jk2nieq")


def test_no_job_id_falls_back_to_torchs_default() -> None:
    assert auto_port(None) is None and auto_port("") is None
    assert _trainer_port({}) == 29500


def test_design_doc_states_the_numbers() -> None:
    design = (Path(__file__).resolve().parents[2] / "docs" / "design.md").read_text()
    assert f"{PORT_BASE} + N % {PORT_SPAN}" in design
