"""container: rendered for every runtime on Slurm and on the local backend (the node launcher
shared by local, ssh, PBS and Grid Engine): the one command each node runs, compared
whole with the line its runtime's documentation gives (cited at each case)."""

from __future__ import annotations

import re
import subprocess
from typing import Any

import pytest

from jobkit.container import podman
from jobkit.container.words import package_dir
from jobkit.core.paths import templates_dir
from jobkit.render.engine import render
from jobkit.render.interpreter import Interpreter
from jobkit.spec.schema import JobSpec

HOST_PYTHON = Interpreter("/host/venv/bin/python", "test")


def _script(backend: str, container: dict[str, Any], **more: Any) -> str:
    data: dict[str, Any] = {
        "name": "ct",
        "backend": backend,
        "resources": {"nodes": 2},
        "container": container,
        "run": {"command": ["python3", "train.py", "--lr", "0.1"]},
        **more,
    }
    if backend == "local" and "resources" not in more:
        data["resources"] = {"nodes": 1}
    return render(JobSpec.model_validate(data))


def _line_with(script: str, word: str) -> str:
    """The one script line holding `word` (the container's command), stripped; the checks
    before the launch left out."""
    script = "\n".join(
        line for line in script.splitlines() if "jobkit_container_missing" not in line
    )
    found = [
        line.strip()
        for line in script.splitlines()
        if word in line and not line.lstrip().startswith("#")
    ]
    assert len(found) == 1, found
    return found[0]


MOUNTS = ["/data:/data:ro", "/scratch/me:/scratch"]

# The frozen code's folder (docs/provenance.md) is mounted only when the script has one:
# bash expands `${VAR:+-v "$VAR":"$VAR"}` to two words, or to none when VAR is empty.
# Apptainer: "apptainer exec --bind src[:dest[:opts]] image command" (apptainer.org/docs/user/
# main/bind_paths_and_mounts.html, "--bind src[:dest[:opts]]"); "--nv" (gpu.html, "NVIDIA
# GPUs & CUDA"); "--pwd" (cli/apptainer_exec.html: "initial working directory for payload
# process inside the container").
APPTAINER = (
    'apptainer exec --nv --bind "$JOBKIT_WORKDIR":"$JOBKIT_WORKDIR"'
    ' --bind "$JOBKIT_RUN_DIR":"$JOBKIT_RUN_DIR"'
    ' ${JOBKIT_CODE_DIR:+--bind "$JOBKIT_CODE_DIR":"$JOBKIT_CODE_DIR"} --bind /data:/data:ro'
    ' --bind /scratch/me:/scratch --pwd "$PWD" --writable-tmpfs /img/train.sif '
)
# Charliecloud: "ch-run [OPTION...] IMAGE -- COMMAND [ARG...]", "-b, --bind=SRC[:DST]",
# "-c, --cd=DIR" (ch-run(1)); "$USER not set" is fatal (ch-run.c, seen here: CONTAINERS-HERE);
# "the host's /tmp (or $TMPDIR if set) is bind-mounted at container /tmp" (-t): TMPDIR unset.
CHARLIECLOUD = (
    'env -u TMPDIR USER="${USER:-$(id -un)}" ch-run -b "$JOBKIT_WORKDIR":"$JOBKIT_WORKDIR"'
    ' -b "$JOBKIT_RUN_DIR":"$JOBKIT_RUN_DIR"'
    ' ${JOBKIT_CODE_DIR:+-b "$JOBKIT_CODE_DIR":"$JOBKIT_CODE_DIR"}'
    ' -b /scratch/me:/scratch -c "$PWD"'
    " /img/torch -- "
)
# Podman: "podman [options] run [options] image [command [arg ...]]", "--network host",
# "--pid=mode: host: use the host's PID namespace",
# "--volume, -v=[[SOURCE-VOLUME|HOST-DIR:]CONTAINER-DIR[:OPTIONS]]", "--env, -e=env ... If an
# environment variable ending in * is specified without a value, Podman searches the host
# environment for variables starting with the prefix", "--device nvidia.com/gpu=all" (CDI,
# podman-run(1) --device); "--runtime" is podman(1)'s global option. jobkit's task runs it and
# puts its own run options at @jobkit-task (--sig-proxy=false, --pidfile: docs/containers.md
# "How a Podman job stops"); the first process inside is jobkit's too.
PODMAN = (
    'sh -c "$jobkit_podman_task" jobkit-podman'
    " podman --runtime runc run @jobkit-task --rm --network host --pid host"
    " --device nvidia.com/gpu=all"
    ' -v "$JOBKIT_WORKDIR":"$JOBKIT_WORKDIR" -v "$JOBKIT_RUN_DIR":"$JOBKIT_RUN_DIR"'
    ' ${JOBKIT_CODE_DIR:+-v "$JOBKIT_CODE_DIR":"$JOBKIT_CODE_DIR"} -v /data:/data:ro'
    ' -v /scratch/me:/scratch -w "$PWD" -e MASTER_ADDR -e MASTER_PORT'
    " -e 'JOBKIT_*' -e 'NCCL_*' -e 'SLURM_*' -e 'TORCH_*' -e CUDA_VISIBLE_DEVICES"
    " -e JOBKIT_GPUS_PER_NODE -e HF_HOME --ulimit nofile=1024:1024 localhost/train:1"
    ' sh -c "$jobkit_podman_inside" jobkit-inside '
)


@pytest.mark.parametrize("backend", ["slurm", "local"])
def test_apptainer_line(backend: str) -> None:
    script = _script(
        backend,
        {
            "image": "/img/train.sif",
            "runtime": "apptainer",
            "mounts": MOUNTS,
            "env": {"HF_HOME": "/data/hf"},
            "options": ["--writable-tmpfs"],
        },
        resources={"nodes": 2 if backend == "slurm" else 1, "gpus_per_node": 1},
    )
    assert APPTAINER in _line_with(script, "apptainer exec")
    # APPTAINERENV_NAME sets NAME inside only (environment_and_metadata.html).
    assert "export APPTAINERENV_HF_HOME=/data/hf\n" in script


def test_singularity_reads_its_own_prefix() -> None:
    script = _script("slurm", {"image": "/img/a.sif", "runtime": "singularity", "env": {"A": 1}})
    assert _line_with(script, "singularity exec").startswith("singularity exec --bind")
    assert "export SINGULARITYENV_A=1\n" in script


@pytest.mark.parametrize("backend", ["slurm", "local"])
def test_charliecloud_line(backend: str) -> None:
    script = _script(
        backend,
        {
            "image": "/img/torch",
            "runtime": "charliecloud",
            "mounts": ["/scratch/me:/scratch"],
            "env": {"HF_HOME": "/data/hf"},
        },
    )
    assert CHARLIECLOUD in _line_with(script, "ch-run")
    # ch-run passes the environment: the variable is the script's own.
    assert "export HF_HOME=/data/hf\n" in script


@pytest.mark.parametrize("backend", ["slurm", "local"])
def test_podman_line(backend: str) -> None:
    script = _script(
        backend,
        {
            "image": "localhost/train:1",
            "runtime": "podman",
            "mounts": MOUNTS,
            "env": {"HF_HOME": "secret-free"},
            "options": ["--runtime runc", "--ulimit nofile=1024:1024"],
        },
        resources={"nodes": 2 if backend == "slurm" else 1, "gpus_per_node": 1},
    )
    line = _line_with(script, "jobkit-podman podman ")
    assert PODMAN in line
    # Values never in podman's argv: exported by the script (a 0700 file), named with -e.
    assert "export HF_HOME=secret-free\n" in script
    assert "HF_HOME=secret-free " not in line
    # The task and the first process inside, set once before the launch, are the templates'
    # files (indented with the code around them on the local backend).
    for name, source in podman.SCRIPTS:
        text = (templates_dir() / source).read_text()
        assert "'" not in text, source  # set between single quotes
        assert script.count(f"{name}='") == 1, name
        found = re.search(rf"^ *{name}='(.*?)'$", script, re.S | re.M)
        assert found is not None, name
        assert _stripped(found.group(1)) == _stripped(text), name


def _stripped(text: str) -> list[str]:
    """The lines, without indentation and blank lines (which change nothing in sh)."""
    return [line.strip() for line in text.splitlines() if line.strip()]


def test_pyxis_options_on_the_launching_srun() -> None:
    # pyxis README "Usage": --container-image, --container-mounts=SRC:DST[:FLAGS][,...],
    # --container-workdir.
    script = _script(
        "slurm", {"image": "nvcr.io#nvidia/pytorch:24.05-py3", "runtime": "pyxis", "mounts": MOUNTS}
    )
    line = _line_with(script, "--container-image")
    assert line == (
        "--container-image='nvcr.io#nvidia/pytorch:24.05-py3' --container-mounts="
        '"$JOBKIT_WORKDIR":"$JOBKIT_WORKDIR","$JOBKIT_RUN_DIR":"$JOBKIT_RUN_DIR",'
        '/data:/data:ro,/scratch/me:/scratch --container-workdir="$PWD" \\'
    )
    step = script[script.index("# ---- Launch") :]
    assert step.index("srun --nodes") < step.index("--container-image") < step.index("sh -c")


def test_every_slurm_launcher_runs_inside() -> None:
    for launcher, nproc in (("torchrun", 1), ("srun", 2), ("none", 1)):
        script = _script(
            "slurm",
            {"image": "/img/t", "runtime": "charliecloud"},
            launch={"launcher": launcher, "nproc_per_node": nproc},
            resources={"nodes": 2},
        )
        line = _line_with(script, "ch-run")
        assert "/img/t -- sh -c 'export" in line, (launcher, line)
    script = _script(
        "slurm",
        {"image": "/img/t.sif", "runtime": "apptainer"},
        launch={"launcher": "mpirun", "nproc_per_node": 2},
    )
    assert _line_with(script, "apptainer exec").startswith("mpirun -np 4 apptainer exec ")


def test_bundled_trainer_mounts_its_packages_and_uses_the_image_python() -> None:
    spec = JobSpec.model_validate(
        {
            "name": "ct",
            "backend": "slurm",
            "container": {"image": "img", "runtime": "charliecloud"},
            "run": {"train": {"config": "tiny-lm"}},
        }
    )
    script = render(spec, interpreter=HOST_PYTHON)
    train, jobkit = package_dir("train"), package_dir("jobkit")
    assert train is not None and jobkit is not None
    line = _line_with(script, "ch-run")
    assert f"-b {train}:{train} -b {jobkit}:{jobkit}" in line
    # A relative image path is the submission folder's.
    assert ' -c "$PWD" "$JOBKIT_WORKDIR"/img -- ' in line
    assert f"export PYTHONPATH={train.rsplit('/', 1)[0]}\n" in script
    assert "python3 -m train --config tiny-lm &\n" in script
    assert "/host/venv" not in script


HOSTILE = 'a\'; touch /tmp/jobkit-canary #$(id) `id` "q"'


@pytest.mark.parametrize("runtime", ["apptainer", "charliecloud", "podman"])
def test_hostile_values_stay_one_word(runtime: str) -> None:
    """A value with quotes, $(...) and backquotes in image, a mount, container.env and
    options: each reaches the runtime as one word, exactly as written."""
    import shlex

    mount = f"/{HOSTILE}:/in" if runtime == "charliecloud" else f"/{HOSTILE}:/in:ro"
    script = _script(
        "slurm",
        {
            "image": f"/img/{HOSTILE}",
            "runtime": runtime,
            "mounts": [mount],
            "env": {"INSIDE": HOSTILE},
            "options": [shlex.quote(HOSTILE)],
        },
    )
    command = {
        "apptainer": "apptainer exec",
        "charliecloud": "ch-run",
        "podman": "jobkit-podman podman ",
    }
    words = shlex.split(_line_with(script, command[runtime]).removesuffix("\\"))
    assert f"/img/{HOSTILE}" in words and HOSTILE in words
    assert any(word.startswith(f"/{HOSTILE}:/in") for word in words)
    exported = "APPTAINERENV_INSIDE" if runtime == "apptainer" else "INSIDE"
    assert f"export {exported}={shlex.quote(HOSTILE)}\n" in script
    checked = subprocess.run(["bash", "-n"], input=script, text=True, capture_output=True)
    assert checked.returncode == 0, checked.stderr


def test_the_trainers_checkpoint_dir_outside_the_run_folder_is_created_and_mounted(
    tmp_path: Any,
) -> None:
    """checkpoint.dir (an override) and logging.dir (the config file's) are mounted at the
    same path after the run folder, and created on the host first (a bind needs its source);
    a relative folder (the working folder's, mounted already) adds nothing."""
    config = tmp_path / "trainer.yaml"
    config.write_text("name: x\nlogging: {dir: /scratch/logs}\ncheckpoint: {dir: rel/ck}\n")
    script = _script(
        "slurm",
        {"image": "localhost/torch:1", "runtime": "podman"},
        run={"train": {"config": str(config), "overrides": {"checkpoint.dir": "/ckpt/my run"}}},
    )
    assert "mkdir -p -- '/ckpt/my run' /scratch/logs\n" in script
    line = _line_with(script, "podman run")
    trainer = package_dir("train")
    assert (
        f"-v {trainer}:{trainer}:ro -v {package_dir('jobkit')}:{package_dir('jobkit')}:ro"
        " -v '/ckpt/my run':'/ckpt/my run' -v /scratch/logs:/scratch/logs -w" in line
    ), line
    assert "rel/ck" not in script
