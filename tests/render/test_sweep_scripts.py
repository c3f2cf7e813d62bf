"""A sweep's rendered script, run for real: task $JOBKIT_TASK_ID's override words reach the
program as the literal text (quotes, $(...), backquotes, globs), its overrides land in the run
folder as JSON, and a task id that is not the sweep's stops the job with one line.

The local backend's script runs here with JOBKIT_TASK_ID set as `jobkit submit` sets it (the
backend side is tested in tests/backends); the program is a tiny python printing its argv.
"""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path
from typing import Any

import pytest

from jobkit.render.engine import render, sweep_argv
from jobkit.spec.schema import JobSpec
from jobkit.spec.sweep import sweep_tasks
from tests.render.helpers import bash_syntax_ok, shellcheck

PRINT_ARGV = ["python3", "-c", "import sys, json; print('ARGV ' + json.dumps(sys.argv[1:]))"]
HOSTILE = [
    {"msg": 'it\'s $(touch PWNED) `touch PWNED` "q" ; touch PWNED', "n": "1e-3"},
    {"msg": "${HOME} * ? ~ \\ |&>", "flag": "on", "-rf": "--set=x", "ünï": "ç ø"},
    {},
]


def _spec(sets: list[dict[str, Any]], **extra: Any) -> JobSpec:
    data: dict[str, Any] = {
        "name": "sw",
        "backend": "local",
        "run": {"command": PRINT_ARGV},
        "sweep": {"sets": sets},
        **extra,
    }
    return JobSpec.model_validate(data)


def _env(task: str) -> dict[str, str]:
    """The job's environment as `jobkit submit` gives it (without a max_parallel slot)."""
    env = {**os.environ, "JOBKIT_TASK_ID": task, "JOBKIT_JOB_ID": f"t{len(task)}-{task[:3]}"}
    env.pop("JOBKIT_SLOT_DIR", None)
    return env


def _run_task(script: str, workdir: Path, task: str) -> subprocess.CompletedProcess[str]:
    (workdir / "job.sh").write_text(script, encoding="utf-8")
    return subprocess.run(
        ["bash", "job.sh"], cwd=workdir, env=_env(task), capture_output=True, text=True, timeout=120
    )


def _argv_printed(run_dir: Path) -> list[str]:
    lines = [line for line in (run_dir / "node-0.out").read_text().splitlines() if "ARGV " in line]
    assert len(lines) == 1, lines
    printed: list[str] = json.loads(lines[0].split("ARGV ", 1)[1])
    return printed


def test_each_task_gets_its_own_words_literally(tmp_path: Path) -> None:
    spec = _spec(HOSTILE)
    script = render(spec)
    bash_syntax_ok(script)
    shellcheck(script)
    (tmp_path / "job.sh").write_text(script, encoding="utf-8")
    tasks = sweep_tasks(spec)
    running = [  # at once: each task has a run folder and port of its own
        subprocess.Popen(
            ["bash", "job.sh"],
            cwd=tmp_path,
            env=_env(str(task.index)),
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for task in tasks
    ]
    for task, process in zip(tasks, running, strict=True):
        out, err = process.communicate(timeout=120)
        assert process.returncode == 0, err
        run_dir = tmp_path / "logs" / f"sw-t1-{task.index}"
        # run.command gets KEY=VALUE words, exactly as the spec wrote them.
        assert _argv_printed(run_dir) == [f"{k}={v}" for k, v in HOSTILE[task.index].items()]
        assert _argv_printed(run_dir) == sweep_argv(spec, task)
        written = json.loads((run_dir / "sweep-overrides.json").read_text(encoding="utf-8"))
        assert written == HOSTILE[task.index]
        assert f"jobkit: sweep task {task.index}: {task.shown()}\n" in out
    assert not list(tmp_path.rglob("PWNED"))


def test_a_task_id_outside_the_sweep_stops_with_one_line(tmp_path: Path) -> None:
    script = render(_spec([{"a": "1"}, {"a": "2"}]))
    for task in ("2", "", "0; touch PWNED", "$(touch PWNED)"):
        done = _run_task(script, tmp_path, task)
        line = f"jobkit: JOBKIT_TASK_ID is '{task}', not a task of this sweep (0-1)"
        assert (done.returncode, done.stderr) == (1, line + "\n")
        run_dir = tmp_path / "logs" / f"sw-t{len(task)}-{task[:3]}"
        assert (run_dir / "failure").read_text() == line + "\n"
        assert not (run_dir / "node-0.out").exists()
    assert not list(tmp_path.rglob("PWNED"))


def test_even_a_newline_stays_one_word(tmp_path: Path) -> None:
    """The spec refuses a newline in a value (tests/spec/test_sweep.py); were one to reach the
    template anyway, it is still one quoted word of the program."""
    spec = _spec([{"a": "1"}])
    tasks = [
        {"index": 0, "words": ["a=x\ny $(touch PWNED)"], "json": '{"a": "x\\ny"}', "shown": "a=x"}
    ]
    done = _run_task(render(spec, extra={"sweep_tasks": tasks}), tmp_path, "0")
    assert done.returncode == 0, done.stderr
    assert _argv_printed(tmp_path / "logs" / "sw-t1-0") == ["a=x\ny $(touch PWNED)"]
    assert not list(tmp_path.rglob("PWNED"))


def test_the_bundled_trainer_gets_the_task_values(tmp_path: Path) -> None:
    """examples/sweep.yaml's task 0 through torchrun: the trainer's resolved config (its
    rank-0.log) has optim.lr 0.001 (written 1e-3) and model.args.d_model 32."""
    from jobkit.spec.load import load_spec
    from tests.render.helpers import EXAMPLES_DIR

    loaded = load_spec(
        EXAMPLES_DIR / "sweep.yaml", sets=["run.train.overrides.train.steps=2"], profile_dirs=[]
    )
    done = _run_task(render(loaded.spec), tmp_path, "0")
    assert done.returncode == 0, done.stdout + done.stderr
    run_dir = tmp_path / "logs" / "sweep-t1-0"
    log = (run_dir / "rank-0.log").read_text(encoding="utf-8")
    assert " lr: 0.001\n" in log and " d_model: 32\n" in log
    assert "jobkit: sweep task 0: optim.lr=1e-3 model.args.d_model=32\n" in done.stdout


@pytest.mark.parametrize("backend", ["slurm", "pbs", "sge", "ssh"])
def test_every_backend_selects_the_task(backend: str) -> None:
    extra: dict[str, Any] = {"backend": backend}
    if backend == "ssh":
        extra["ssh"] = {"hosts": ["n1"]}
    if backend == "pbs":
        extra["scheduler"] = {"pbs_flavor": "torque"}
    script = render(_spec([{"a": "1"}, {"a": "2"}], **extra))
    bash_syntax_ok(script)
    assert "export JOBKIT_TASK_ID=" in script or "JOBKIT_TASK_ID=$(( SGE_TASK_ID - 1 ))" in script
    assert "jobkit_sweep_args=(a=2)" in script
    assert '"${jobkit_sweep_args[@]}"' in script
