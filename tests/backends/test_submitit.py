"""The submitit backend: parameter mapping, the checkpointable trainer callable, and real
jobs on the test Slurm cluster (submitted through submitit, tracked as Slurm jobs)."""

from __future__ import annotations

import json
import pickle
import shutil
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from jobkit.backends.submitit.backend import executor_parameters, folder_pattern, setup_lines
from jobkit.core.errors import SpecError
from jobkit.spec.schema import JobSpec
from tests.backends.cli import Jobkit
from tests.plugins.cluster import SlurmCluster


def spec(**fields: Any) -> JobSpec:
    base: dict[str, Any] = {"name": "sub", "backend": "submitit", "run": {"command": "true"}}
    base.update(fields)
    return JobSpec.model_validate(base)


def test_resources_map_to_submitit_parameters() -> None:
    job = spec(
        resources={
            "nodes": 2,
            "gpus_per_node": 4,
            "cpus_per_task": 8,
            "mem": "48G",
            "time": "01:30:00",
            "partition": "gpu",
            "account": "proj",
            "qos": "high",
            "constraint": "a100",
            "exclusive": True,
        },
        scheduler={
            "signal": "USR2@120",
            "requeue": True,
            "dependency": "afterok:12",
            "mail_user": "me@example.org",
            "mail_type": ["END", "FAIL"],
            "extra": ["--reservation=big --hint=nomultithread", "--overcommit"],
        },
        launch={"launcher": "srun"},
    )
    params = executor_parameters(job, "tok")
    params.pop("slurm_setup")
    assert params == {
        "name": "sub",
        "nodes": 2,
        "tasks_per_node": 4,  # one task per process
        "cpus_per_task": 8,
        "gpus_per_node": 4,
        "mem_gb": 48.0,
        "timeout_min": 90,
        "slurm_partition": "gpu",
        "slurm_account": "proj",
        "slurm_qos": "high",
        "slurm_constraint": "a100",
        "slurm_exclusive": True,
        "slurm_signal_delay_s": 120,
        "slurm_dependency": "afterok:12",
        "slurm_mail_user": "me@example.org",
        "slurm_mail_type": "END,FAIL",
        "slurm_comment": "jobkit:tok",
        "slurm_additional_parameters": {
            "requeue": True,
            "reservation": "big",
            "hint": "nomultithread",
            "overcommit": True,
        },
    }


def test_gpu_type_goes_to_gres() -> None:
    params = executor_parameters(spec(resources={"gpus_per_node": 2, "gpu_type": "h100"}), "tok")
    assert params["slurm_gres"] == "gpu:h100:2"
    assert "gpus_per_node" not in params


def test_setup_lines_quote_every_value() -> None:
    job = spec(
        env={
            "modules": ["cuda/12.1", "x; rm -rf ~"],
            "venv": "/opt/my env",
            "setup": ["ulimit -n 4096"],
            "vars": {"GREETING": "it's $HOME"},
        }
    )
    assert setup_lines(job) == [
        "module load cuda/12.1",
        "module load 'x; rm -rf ~'",
        "source '/opt/my env/bin/activate'",
        "ulimit -n 4096",  # env.setup is the one field run as written
        "export GREETING='it'\"'\"'s $HOME'",
    ]


def test_arrays_and_odd_directives_are_refused_with_their_key() -> None:
    with pytest.raises(SpecError) as err:
        executor_parameters(spec(scheduler={"array": "0-3"}), "tok")
    assert err.value.key == "scheduler.array"
    with pytest.raises(SpecError) as err:
        executor_parameters(spec(scheduler={"extra": ["-x n3"]}), "tok")
    assert err.value.key == "scheduler.extra"


def test_the_folder_is_submitits_layout_under_logs_dir(tmp_path: Path) -> None:
    assert folder_pattern(spec(), tmp_path) == str(tmp_path / "logs" / "sub-%j")
    absolute = spec(logs={"dir": "/scratch/me"})
    assert folder_pattern(absolute, tmp_path) == "/scratch/me/sub-%j"


def test_a_submission_folder_with_percent_is_refused_before_anything_is_recorded(
    tmp_path: Path,
) -> None:
    """submitit would read `%` in its folder's path as a placeholder (%j, %t...)."""
    workdir = tmp_path / "runs 100%t"
    workdir.mkdir()
    jobkit = Jobkit(workdir=workdir, home=tmp_path / "home")
    spec_file = write_spec(jobkit, "pct", "pass")
    for command in (["submit", spec_file], ["submit", spec_file, "--dry-run"]):
        done = jobkit.run(*command)
        assert (done.returncode, done.stdout) == (1, ""), done.stderr
        assert done.stderr == (
            f"jobkit: the submitit backend cannot submit from {workdir}: submitit reads %j,"
            " %t... in its folder's path (submit from a folder without %)\n"
        )
    listed = jobkit.run("status", "--all", "--json")
    assert json.loads(listed.stdout) == []
    assert not (workdir / "logs").exists()


def test_status_and_polling_never_import_submitit() -> None:
    code = (
        "import sys\n"
        "from jobkit.backends.registry import get_backend\n"
        "backend = get_backend('submitit')\n"
        "assert backend.poll([]) == {}\n"
        "import jobkit.cli.status, jobkit.cli.logs\n"
        "assert 'submitit' not in sys.modules, 'submitit was imported'\n"
    )
    subprocess.run([sys.executable, "-c", code], check=True)


def test_the_trainer_callable_checkpoints_then_asks_to_be_requeued(tmp_path: Path) -> None:
    """checkpoint() passes the signal to the running trainer, waits for it to save and
    exit, and returns a fresh copy of the callable for submitit to requeue."""
    from jobkit.backends.submitit.job import RankProgram, TrainerJob

    saved = tmp_path / "checkpoint-saved"
    trainer = (
        "import signal, sys, time\n"
        "def stop(*_):\n"
        f"    time.sleep(0.5); open({str(saved)!r}, 'w').close(); sys.exit(75)\n"
        "signal.signal(signal.SIGUSR2, stop)\n"
        "print('ready', flush=True)\n"
        "time.sleep(60)\n"
    )
    program = RankProgram(argv=[sys.executable, "-c", trainer], cwd=str(tmp_path))
    job = TrainerJob(program)
    child = subprocess.Popen(program.argv, stdout=subprocess.PIPE, text=True)
    assert child.stdout is not None and child.stdout.readline() == "ready\n"
    job._child = child
    resubmission = job.checkpoint()
    assert child.returncode == 75 and saved.exists()
    again = resubmission.function
    assert isinstance(again, TrainerJob) and again.program == program
    # What submitit pickles carries the program, never the process.
    restored = pickle.loads(pickle.dumps(job))
    assert restored.program == program and restored._child is None


# -- real jobs on the test Slurm cluster ------------------------------------------------


@pytest.fixture
def jobkit(tmp_path: Path, slurm_cluster: SlurmCluster) -> Jobkit:
    workdir = tmp_path / "work"
    workdir.mkdir()
    return Jobkit(workdir=workdir, home=tmp_path / "home")


def write_spec(jobkit: Jobkit, name: str, code: str) -> str:
    (jobkit.workdir / f"{name}.py").write_text(code)
    job = {
        "name": name,
        "backend": "submitit",
        "resources": {"nodes": 2, "partition": "debug", "time": 5},
        "launch": {"nproc_per_node": 1},
        "env": {"vars": {"GREETING": "hello there"}},
        "run": {"command": ["python3", f"{name}.py"]},
    }
    path = jobkit.workdir / f"{name}.yaml"
    path.write_text(json.dumps(job))
    return path.name


SHOW_ENV = (
    "import os, time\n"
    "names = ['RANK', 'WORLD_SIZE', 'LOCAL_RANK', 'MASTER_ADDR', 'JOBKIT_JOB_ID', 'GREETING']\n"
    "time.sleep(0.5)\n"
    "os.write(1, ('|'.join(['env'] + [os.environ[n] for n in names]) + '\\n').encode())\n"
    "open(os.path.join(os.environ['JOBKIT_RUN_DIR'], 'rank-%s.done' % os.environ['RANK']), 'w')\n"
)


@pytest.mark.slurm
def test_a_command_job_runs_through_submitit_and_is_tracked(jobkit: Jobkit) -> None:
    job = jobkit.submit(write_spec(jobkit, "showenv", SHOW_ENV))
    scheduler_id = job["scheduler_id"]
    assert scheduler_id.isdigit()
    assert job["submit_argv"][:2] == ["(submitit)", "AutoExecutor"]
    follower = jobkit.run("logs", job["jobkit_id"], "-f", "--all-ranks", timeout=300)
    assert follower.returncode == 0, follower.stderr
    for rank in (0, 1):
        expected = f"[rank {rank}] env|{rank}|2|0|n1|{scheduler_id}|hello there"
        assert expected in follower.stdout.splitlines()
    state = jobkit.status(job["jobkit_id"])
    assert (state["state"], state["exit_code"], state["state_source"]) == (
        "SUCCEEDED",
        0,
        "sacct",
    )
    run_dir = Path(job["log_paths"]["run_dir"])
    assert run_dir.name == f"showenv-{scheduler_id}"
    assert sorted(p.name for p in run_dir.glob("rank-*.done")) == ["rank-0.done", "rank-1.done"]
    one = jobkit.run("logs", scheduler_id, "--rank", "1")
    assert f"env|1|2|0|n1|{scheduler_id}|hello there" in one.stdout.splitlines()


@pytest.mark.slurm
def test_a_failing_command_is_failed_and_a_sleeping_one_cancelled(jobkit: Jobkit) -> None:
    failing = jobkit.submit(write_spec(jobkit, "fails", "import sys; sys.exit(4)"))
    sleeping = jobkit.submit(
        write_spec(jobkit, "sleeps", "import time; print('up', flush=True); time.sleep(300)")
    )
    deadline = time.monotonic() + 300  # the test cluster may be busy with other tests' jobs
    while jobkit.status(sleeping["jobkit_id"])["state"] != "RUNNING":
        assert time.monotonic() < deadline, "the job never started"
        time.sleep(0.5)
    done = jobkit.run("cancel", sleeping["jobkit_id"])
    assert done.returncode == 0, done.stderr
    follower = jobkit.run("logs", failing["jobkit_id"], "-f", timeout=300)
    assert follower.returncode != 0
    assert "ended FAILED" in follower.stderr
    assert jobkit.status(failing["jobkit_id"])["state"] == "FAILED"
    deadline = time.monotonic() + 120
    while (state := jobkit.status(sleeping["jobkit_id"]))["state_source"] == "cancel":
        assert time.monotonic() < deadline, "sacct never confirmed the cancel"
        time.sleep(1)
    assert state["state"] == "CANCELLED"
    assert state["raw_state"].startswith("CANCELLED")


@pytest.mark.slurm
def test_a_refused_submission_shows_sbatchs_own_error(jobkit: Jobkit) -> None:
    spec_file = write_spec(jobkit, "nowhere", "pass")
    done = jobkit.run("submit", spec_file, "--set", "resources.partition=no-such-partition")
    assert done.returncode == 1
    # SchedulerError: the sbatch command, its exit code and its stderr verbatim, once.
    assert done.stderr.startswith("jobkit: sbatch "), done.stderr
    assert ": exit 1: sbatch: error: invalid partition specified: no-such-partition" in done.stderr
    assert done.stderr.count("Invalid partition name specified") == 1
    listed = jobkit.run("status", "--all", "--json")
    assert [job["state"] for job in json.loads(listed.stdout)] == ["FAILED"]


def test_render_of_the_submitit_example_works_on_a_laptop_without_slurm(tmp_path: Path) -> None:
    """`jobkit render examples/submitit.yaml` where no Slurm command is on PATH (a laptop):
    the same sbatch file as on the cluster (render is pure); submit refuses in one line."""
    from tests.e2e.cli import REPO

    laptop = tmp_path / "bin"
    laptop.mkdir()
    for tool in ("bash", "sh", "env"):  # what a laptop has; no srun, sbatch, squeue...
        found = shutil.which(tool)
        assert found is not None
        (laptop / tool).symlink_to(found)
    jobkit = Jobkit(workdir=REPO, home=tmp_path / "home")
    on_cluster = jobkit.run("render", "examples/submitit.yaml")
    env = {**jobkit.env(), "PATH": str(laptop)}
    done = subprocess.run(
        jobkit.argv("render", "examples/submitit.yaml"),
        cwd=REPO,
        env=env,
        capture_output=True,
        text=True,
        check=False,
    )
    assert (done.returncode, done.stderr) == (0, ""), done.stderr
    assert done.stdout == on_cluster.stdout
    assert "#SBATCH --nodes=1" in done.stdout
    submitted = subprocess.run(
        jobkit.argv("submit", "examples/submitit.yaml"),
        cwd=REPO,
        env=env,
        capture_output=True,
        text=True,
        check=False,
    )
    assert submitted.returncode == 1
    assert submitted.stderr == (
        "jobkit: the submitit backend submits through Slurm, and no srun is on PATH here:"
        " submit from a Slurm login node (`jobkit render` shows the sbatch file anywhere)\n"
    )
