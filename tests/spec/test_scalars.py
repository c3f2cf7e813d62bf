"""Unquoted YAML scalars mean what the user wrote (jobkit/spec/scalars.py): `time: 24:00:00` is a
day, not YAML 1.1's base-60 integer 86400 taken as minutes; `account: 0123` stays "0123". Each
case checks the value that reaches the script, in the job file, a profile and `--set`."""

from __future__ import annotations

from pathlib import Path

import pytest

from jobkit.core.errors import SpecError
from jobkit.render.engine import render
from jobkit.spec.load import load_spec
from tests.render.helpers import GOLDEN_PYTHON, directive_lines


def write(folder: Path, body: str, name: str = "job.yaml") -> Path:
    path = folder / name
    path.write_text(body, encoding="utf-8")
    return path


def script(path: Path, *sets: str, backend: str | None = None) -> str:
    loaded = load_spec(path, sets=sets, backend=backend, profile_dirs=[path.parent])
    return render(loaded.spec, interpreter=GOLDEN_PYTHON)


def directive(text: str, prefix: str, option: str) -> str:
    """The value of `#SBATCH --option=value` / `#PBS -l option=value`."""
    for words in directive_lines(text, prefix):
        for word in words:
            if word.startswith(option + "="):
                return word.split("=", 1)[1]
    raise AssertionError(f"no {option} in the {prefix} lines")


JOB = "name: t\nbackend: slurm\nresources:\n  time: {time}\nrun:\n  command: prog\n"


@pytest.mark.parametrize(
    ("written", "slurm", "pbs"),
    [
        ("24:00:00", "1-00:00:00", "24:00:00"),  # YAML 1.1: 86400 (minutes: 60 days)
        ("1:00:00", "01:00:00", "01:00:00"),  # YAML 1.1: 3600 (2.5 days)
        ("1-00:00:00", "1-00:00:00", "24:00:00"),
        ("90", "01:30:00", "01:30:00"),  # minutes, as Slurm reads a bare number
        ('"48:00:00"', "2-00:00:00", "48:00:00"),
        ("2-12", "2-12:00:00", "60:00:00"),
    ],
)
def test_unquoted_times_mean_what_slurm_means(
    tmp_path: Path, written: str, slurm: str, pbs: str
) -> None:
    path = write(tmp_path, JOB.format(time=written))
    assert directive(script(path), "#SBATCH", "--time") == slurm
    pbs_script = script(path, backend="pbs")
    assert directive(pbs_script, "#PBS", "walltime") == pbs


def test_the_same_from_set_and_from_a_profile(tmp_path: Path) -> None:
    path = write(tmp_path, JOB.format(time="10"))
    assert directive(script(path, "resources.time=24:00:00"), "#SBATCH", "--time") == "1-00:00:00"
    write(tmp_path, "resources:\n  time: 12:00:00\n  account: 0123\n", "site.yaml")
    body = "name: t\nbackend: slurm\nprofile: site\nrun:\n  command: prog\n"
    text = script(write(tmp_path, body))
    assert directive(text, "#SBATCH", "--time") == "12:00:00"
    assert directive(text, "#SBATCH", "--account") == "0123"


@pytest.mark.parametrize(
    ("line", "error"),
    [
        (
            "  time: 1:30",
            "job.yaml:4: resources.time: 1:30 is ambiguous: Slurm reads MM:SS (minutes and"
            " seconds), many mean HH:MM; write HH:MM:SS, e.g. 01:30:00",
        ),
        (
            "  nodes: 010",
            "job.yaml:4: resources.nodes: 010 is an octal number to YAML 1.1 (8), which is surely"
            " not what you mean: write 10, without the leading zero",
        ),
        (
            "  cpus_per_task: 1:30",
            "job.yaml:4: resources.cpus_per_task: 1:30 is a base-60 number to YAML 1.1 (90),"
            " which is surely not what you mean: write the plain number you mean",
        ),
        ("  mem: 1e3", "job.yaml:4: resources.mem: must be a size like 32G or 500M (got '1e3')"),
        ("  mem: 0x20", "job.yaml:4: resources.mem: must be a size like 32G or 500M (got '0x20')"),
    ],
)
def test_misleading_numbers_are_one_line_errors(tmp_path: Path, line: str, error: str) -> None:
    path = write(tmp_path, f"name: t\nbackend: slurm\nresources:\n{line}\nrun:\n  command: prog\n")
    with pytest.raises(SpecError) as caught:
        load_spec(path, profile_dirs=[])
    assert caught.value.show() == error.replace("job.yaml", str(path))


def test_ports_written_with_a_leading_zero_are_refused(tmp_path: Path) -> None:
    path = write(tmp_path, "name: t\nlaunch:\n  master_port: 02222\nrun:\n  command: prog\n")
    with pytest.raises(SpecError) as caught:
        load_spec(path, profile_dirs=[])
    assert caught.value.key == "launch.master_port" and "octal number" in caught.value.message
    ssh = "name: t\nbackend: ssh\nssh:\n  hosts: [a]\n  port: 022\nrun:\n  command: prog\n"
    with pytest.raises(SpecError) as caught:
        load_spec(write(tmp_path, ssh), profile_dirs=[])
    assert caught.value.key == "ssh.port" and caught.value.line == 5


def test_text_keys_keep_the_text_as_written(tmp_path: Path) -> None:
    body = (
        "name: 0123\n"
        "backend: slurm\n"
        "resources:\n  account: 0123\n  partition: on\n  qos: no\n  gpus_per_node: 0\n"
        "env:\n  modules: [cuda/12, 1.10]\n  vars: {TAG: 1.10, FLAG: on, N: 010, BIG: 1e3}\n"
        "run:\n  command: [python, t.py, --lr, 0.0010, 0123, yes]\n"
    )
    loaded = load_spec(write(tmp_path, body), profile_dirs=[])
    spec = loaded.spec
    assert spec.name == "0123"
    res = spec.resources
    assert (res.account, res.partition, res.qos) == ("0123", "on", "no")
    assert spec.env.modules == ["cuda/12", "1.10"]
    assert spec.env.vars == {"TAG": "1.10", "FLAG": "on", "N": "010", "BIG": "1e3"}
    assert spec.run.command == ["python", "t.py", "--lr", "0.0010", "0123", "yes"]
    text = render(spec, interpreter=GOLDEN_PYTHON)
    assert "export TAG=1.10\n" in text and "export N=010\n" in text
    assert "python t.py --lr 0.0010 0123 yes" in text


def test_booleans_and_null_keep_their_yaml_meaning(tmp_path: Path) -> None:
    body = (
        "name: t\nbackend: slurm\nresources:\n  exclusive: yes\n  partition: ~\n"
        "scheduler:\n  requeue: on\nrun:\n  command: prog\n"
    )
    spec = load_spec(write(tmp_path, body), profile_dirs=[]).spec
    assert spec.resources.exclusive is True and spec.scheduler.requeue is True
    assert spec.resources.partition is None


def test_trainer_overrides_reach_the_trainer_as_written(tmp_path: Path) -> None:
    body = (
        "name: t\nrun:\n  train:\n    config: tiny-lm\n    overrides:\n"
        "      data.args.path: 0123\n      optim.lr: 3.0e-4\n      train.steps: 20\n"
    )
    spec = load_spec(write(tmp_path, body), profile_dirs=[]).spec
    assert spec.run.train is not None
    assert spec.run.train.overrides == {
        "data.args.path": "0123",
        "optim.lr": "3.0e-4",
        "train.steps": "20",
    }
    text = render(spec, interpreter=GOLDEN_PYTHON)
    assert "--set data.args.path=0123 --set optim.lr=3.0e-4 --set train.steps=20" in text
