"""`jobkit shell` and `jobkit run --here`, the parts that need no cluster: salloc's options
read from the rendered script, the allocation read from the environment, the shell's rc
file run by bash (its quoting), and the `here` row kind kept out of the spec's backends."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from jobkit.backends.registry import backend_class, backend_names, get_backend
from jobkit.backends.slurm.interactive import (
    STEP_VARIABLES,
    current_allocation,
    salloc_argv,
    sbatch_options,
)
from jobkit.core.errors import SpecError
from jobkit.manager.submit import render_script
from jobkit.render.shellrc import shell_rc
from jobkit.spec.load import load_spec
from jobkit.spec.schema import JobSpec

INNER = ["bash", "-i"]


def _spec(tmp_path: Path, text: str, *sets: str) -> JobSpec:
    path = tmp_path / "job.yaml"
    path.write_text(text)
    return load_spec(path, sets=sets).spec


SLURM_JOB = """\
name: inter
backend: slurm
resources: {nodes: 2, time: "00:10:00", partition: debug, mem: 1G}
scheduler:
  requeue: true
  signal: USR2@60
  array: "0-3"
  extra: ['--comment="two words"']
run:
  command: [hostname]
"""


def test_salloc_gets_the_scripts_options_without_the_batch_only_ones(tmp_path: Path) -> None:
    spec = _spec(tmp_path, SLURM_JOB)
    script = render_script(spec, None, tmp_path)
    argv = salloc_argv(script, INNER)
    request = argv[: argv.index("srun")]
    assert request == [
        "salloc",
        "--job-name=inter",
        "--nodes=2",
        "--ntasks-per-node=1",
        "--mem=1G",
        "--time=00:10:00",
        "--partition=debug",
        "--comment=two words",
    ]
    # every directive sbatch reads is there, the batch-only ones were left out on purpose
    names = {word.split("=")[0] for word in sbatch_options(script)}
    assert {"--output", "--error", "--array", "--signal", "--requeue"} <= names
    step = argv[argv.index("srun") : argv.index("env")]
    assert step == ["srun", "--overlap", "--pty", "--nodes=1", "--ntasks=1", "--quiet"]
    assert argv[-len(INNER) :] == INNER
    unset = argv[argv.index("env") + 1 : -len(INNER)]
    assert unset[1::2] == list(STEP_VARIABLES) and set(unset[::2]) == {"-u"}


def test_sbatch_options_stop_at_the_first_command() -> None:
    script = "#!/bin/bash\n# note\n#SBATCH --nodes=1\n\necho hi\n#SBATCH --time=5\n"
    assert sbatch_options(script) == ["--nodes=1"]


def test_current_allocation_from_the_environment() -> None:
    assert current_allocation({"PATH": "/bin"}) is None
    plain = current_allocation({"SLURM_JOB_ID": "42", "SLURM_NTASKS": "2", "X": "1"})
    assert plain is not None and plain.job_id == "42"
    assert plain.environ["SLURM_NTASKS"] == "2"  # not in a step: the job's own value stays
    array = current_allocation(
        {"SLURM_JOB_ID": "50", "SLURM_ARRAY_JOB_ID": "49", "SLURM_ARRAY_TASK_ID": "1"}
    )
    assert array is not None and array.job_id == "49_1"
    step = current_allocation(
        {"SLURM_JOB_ID": "7", "SLURM_STEP_ID": "0", "SLURM_NTASKS": "1", "SLURM_JOB_NODELIST": "n1"}
    )
    assert step is not None and step.nodes == "n1"
    assert "SLURM_NTASKS" not in step.environ and "SLURM_STEP_ID" not in step.environ


LOCAL_JOB = """\
name: shellenv
backend: local
env:
  nccl: {preset: ethernet}
  vars:
    TRICKY: "a'b $(touch {marker}) \\"c\\""
run:
  workdir: sub
  command: [hostname]
"""


def test_local_shell_rc_sets_the_jobs_environment_quoted(tmp_path: Path) -> None:
    marker = tmp_path / "pwned"
    (tmp_path / "sub").mkdir()
    spec = _spec(tmp_path, LOCAL_JOB.replace("{marker}", str(marker)))
    rc = shell_rc(spec)
    probe = 'printf "%s|" "$MASTER_ADDR" "$JOBKIT_NNODES" "$NCCL_IB_DISABLE" "$TRICKY" "$PWD"'
    done = subprocess.run(
        ["bash", "-c", f"{rc}\n{probe}"],
        cwd=tmp_path,
        env={"PATH": "/usr/bin:/bin", "JOBKIT_JOB_ID": "shell-1"},
        capture_output=True,
        text=True,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    tricky = f'a\'b $(touch {marker}) "c"'
    assert done.stdout.split("|")[:5] == ["127.0.0.1", "1", "1", tricky, str(tmp_path / "sub")]
    assert not marker.exists()
    assert (tmp_path / "logs" / "shellenv-shell-1").is_dir()  # JOBKIT_RUN_DIR exists


def test_here_rows_have_a_backend_no_spec_can_name(tmp_path: Path) -> None:
    assert "here" not in backend_names()
    assert backend_class("here").name == "here"
    with pytest.raises(SpecError, match="backend"):
        _spec(tmp_path, "name: x\nbackend: here\nrun: {command: [hostname]}\n")
    assert get_backend("pbs").interactive_argv(_spec(tmp_path, SLURM_JOB), "", INNER) is None
