"""`jobkit plot` on real runs of the bundled trainer (local backend, one CPU process).

Two jobs, about 8 s each, both restarted once inside the job by torchrun
(launch.max_restarts 1): `crashed` is SIGKILLed during step 16 (tests/plot/crash_data.py)
and resumes from its step-10 checkpoint, so steps 11-15 are logged twice; `stopped` stops
cleanly after step 12 (train.stop_after_step: checkpoint, exit 75, as when preempted) and
resumes from step 12, so nothing repeats and only rank-0.log says it restarted. Both append
to metrics.jsonl and rank-0.log exactly as a Slurm requeue of the same job id does (the
trainer starts again with the same JOBKIT_RUN_DIR); a scheduler requeue is not used here
because Slurm holds a requeued job for 30 s or more (its credential lifetime).
"""

from __future__ import annotations

import json
import struct
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from jobkit.plot.png import image_size
from jobkit.registry.store import JobRecord, Store
from tests.e2e import runs
from tests.e2e.cli import REPO, Jobkit, trainer_sets
from tests.plugins.invoke import Invoke

pytestmark = pytest.mark.slow  # the two trainings: about 30 s on 2 busy cores

SPEC = "examples/quickstart.yaml"
STEPS = 30


@dataclass(frozen=True)
class Run:
    """A finished job of this module."""

    jobkit_id: str
    name: str
    run_dir: Path

    def records(self) -> list[dict[str, Any]]:
        """metrics.jsonl as the trainer wrote it, every line."""
        return runs.metrics(self.run_dir)


@dataclass(frozen=True)
class Jobs:
    home: Path
    crashed: Run
    stopped: Run


def submit(cli: Jobkit, name: str, **overrides: object) -> Run:
    sub = cli.submit(
        SPEC,
        "--set",
        f"name={name}",
        "--set",
        "launch.nproc_per_node=1",
        "--set",
        "launch.max_restarts=1",
        *trainer_sets(train__steps=STEPS, **overrides),
        venv=False,
        timeout=300,
    )
    assert sub.returncode == 0, sub.explain()
    record = cli.status(sub.jobkit_id)
    assert record["state"] == "SUCCEEDED", record
    return Run(sub.jobkit_id, name, Path(record["log_paths"]["run_dir"]))


@pytest.fixture(scope="module")
def jobs(tmp_path_factory: pytest.TempPathFactory) -> Jobs:
    folder = tmp_path_factory.mktemp("plot")
    cli = Jobkit(home=folder / "home", logs_dir=folder / "logs")
    crashed = submit(
        cli,
        "crashed",
        logging__every_steps=1,
        checkpoint__every_steps=10,
        data__name="tests.plot.crash_data:crash_once_chars",
        data__args__after_samples=16 * 15 + 5,  # 16 samples a step: during step 16
    )
    stopped = submit(cli, "stopped", logging__every_steps=2, train__stop_after_step=12)
    return Jobs(cli.home, crashed, stopped)


@pytest.fixture
def home(jobs: Jobs, monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Iterator[Path]:
    """The module's registry for the in-process CLI; the current directory a fresh one."""
    monkeypatch.setenv("JOBKIT_HOME", str(jobs.home))
    monkeypatch.chdir(tmp_path)
    yield jobs.home


def png_size(path: Path) -> tuple[int, int]:
    """Width and height from a PNG's IHDR chunk (after checking the signature)."""
    data = path.read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n", f"{path} is not a PNG"
    assert data[12:16] == b"IHDR" and data[-8:-4] == b"IEND"
    width, height = struct.unpack(">II", data[16:24])
    return width, height


def last_per_step(records: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """For each step, the record written last, by step."""
    latest = {int(r["step"]): r for r in records}
    return [latest[s] for s in sorted(latest)]


def call(jobkit: Invoke, *args: str) -> tuple[int, str, str]:
    """`jobkit plot ARGS`: (exit code, stdout, stderr)."""
    result = jobkit("plot", *args)
    return result.code, result.out, result.err


def plot_json(jobkit: Invoke, *args: str) -> dict[str, Any]:
    result = jobkit("plot", *args, "--json")
    assert (result.code, result.err) == (0, ""), result
    data: dict[str, Any] = json.loads(result.out)
    return data


def test_a_crashed_and_restarted_run_is_one_curve(
    jobs: Jobs, home: Path, jobkit: Invoke, tmp_path: Path
) -> None:
    run = jobs.crashed
    written = run.records()
    steps = [r["step"] for r in written]
    assert steps == [*range(1, 16), *range(11, STEPS + 1)], steps  # 11-15 twice
    assert runs.resumed_steps(run.run_dir) == [10]

    result = jobkit("plot", run.jobkit_id)
    image = tmp_path / f"crashed-{run.jobkit_id}.png"
    assert (result.code, result.out, result.err) == (0, f"{image}\n", "")
    assert png_size(image) == image_size(1)

    data = plot_json(jobkit, run.jobkit_id)
    assert (data["x"], data["metrics"], data["image"]) == ("step", ["loss"], None)
    (shown,) = data["runs"]
    assert shown["records"] == last_per_step(written)
    assert shown["records"][10:15] == written[15:20]  # the second attempt's 11-15
    assert shown["attempts"] == [
        {"first_step": 1, "records": 15, "resumed_from": None, "started_at": written[0]["time"]},
        {
            "first_step": 11,
            "records": STEPS - 10,
            "resumed_from": 10,
            "started_at": shown["attempts"][1]["started_at"],
        },
    ]
    assert written[14]["time"] - 1 < shown["attempts"][1]["started_at"] <= written[15]["time"]
    assert (shown["label"], shown["metrics_file"]) == (
        f"crashed ({run.jobkit_id})",
        str(run.run_dir / "metrics.jsonl"),
    )


def test_a_cleanly_stopped_run_is_joined_by_its_log(jobs: Jobs, home: Path, jobkit: Invoke) -> None:
    run = jobs.stopped
    written = run.records()
    assert [r["step"] for r in written] == list(range(2, STEPS + 1, 2))  # nothing repeats
    (shown,) = plot_json(jobkit, run.jobkit_id, "--metric", "loss,lr")["runs"]
    assert shown["records"] == written
    assert [(a["first_step"], a["resumed_from"]) for a in shown["attempts"]] == [
        (2, None),
        (14, 12),
    ]


def test_two_jobs_on_one_chart(jobs: Jobs, home: Path, jobkit: Invoke, tmp_path: Path) -> None:
    a, b = jobs.crashed, jobs.stopped
    result = jobkit("plot", a.jobkit_id, b.jobkit_id, "--metric", "loss", "--metric", "lr")
    image = tmp_path / f"crashed-{a.jobkit_id}-{b.jobkit_id}.png"
    assert (result.code, result.out, result.err) == (0, f"{image}\n", "")
    assert png_size(image) == image_size(2)

    out = tmp_path / "chart.png"
    data = plot_json(jobkit, a.jobkit_id, b.jobkit_id, "--metric", "lr", "-o", str(out))
    assert data["image"] == str(out) and png_size(out) == image_size(1)
    assert [r["label"] for r in data["runs"]] == [
        f"crashed ({a.jobkit_id})",
        f"stopped ({b.jobkit_id})",
    ]
    assert [r["records"] for r in data["runs"]] == [
        last_per_step(a.records()),
        b.records(),
    ]
    svg = tmp_path / "chart.svg"
    assert jobkit("plot", a.jobkit_id, "--x", "time", "-o", str(svg)).code == 0
    assert svg.read_text().lstrip().startswith("<?xml")


def test_the_terminal_chart(jobs: Jobs, home: Path, jobkit: Invoke, tmp_path: Path) -> None:
    a, b = jobs.crashed, jobs.stopped
    result = jobkit("plot", a.jobkit_id, b.jobkit_id, "--term", "--metric", "loss,samples_per_s")
    assert (result.code, result.err) == (0, "")
    lines = result.out.splitlines()
    assert lines[0].strip() == f"crashed ({a.jobkit_id}) vs stopped ({b.jobkit_id})"
    assert lines[-3:] == [
        f"  ━━ crashed ({a.jobkit_id})",
        f"  ━━ stopped ({b.jobkit_id})",
        "  ┊  restart / requeue (resumed from a checkpoint)",
    ]
    assert [line.strip() for line in lines if line.strip() in ("loss", "samples/s")] == [
        "loss",
        "samples/s",
    ]
    assert sum(line.strip() == "step" for line in lines) == 2  # each panel's x axis
    assert any(line.rstrip().endswith(f"{STEPS:.1f}") for line in lines)  # x ticks to 30
    assert "\x1b[" not in result.out  # no colours into a pipe
    assert list(tmp_path.iterdir()) == []  # --term writes no file
    timed = jobkit("plot", a.jobkit_id, "--term", "--x", "time", "--logy")
    assert "time since the run's first record (s)" in timed.out
    assert "loss (log scale)" in timed.out


def test_bad_input_is_one_line(jobs: Jobs, home: Path, jobkit: Invoke, tmp_path: Path) -> None:
    run = jobs.crashed
    metrics = sorted({k for r in run.records() for k in r} - {"step", "time"})
    cases = [
        ((), 2, "jobkit: give one or more job ids, or --last\n"),
        (("jkzzzzz",), 2, "jobkit: no tracked job 'jkzzzzz'\n"),
        (
            (run.jobkit_id, "--metric", "acc"),
            2,
            f"jobkit: unknown metric 'acc': the metrics are {', '.join(metrics)}\n",
        ),
        (
            (run.jobkit_id, "--metric", ","),
            2,
            "jobkit: --metric: give a metric name, e.g. --metric loss\n",
        ),
        (
            (run.jobkit_id, "-o", "chart.txt"),
            2,
            "jobkit: -o chart.txt: give a file name ending in .png, .svg, .pdf\n",
        ),
        (
            (run.jobkit_id, "-o", "no/such/chart.png"),
            1,
            f"jobkit: cannot write {tmp_path}/no/such/chart.png: {tmp_path}/no/such is not a"
            " directory\n",
        ),
    ]
    for args, code, err in cases:
        assert call(jobkit, *args) == (code, "", err.replace("\n", "") + "\n"), args
    assert list(tmp_path.iterdir()) == []


def add_job(
    store: Store,
    workdir: Path,
    run: dict[str, Any],
    *,
    array: str | None = None,
) -> JobRecord:
    """A finished job in the registry whose run folder is under workdir/logs: a local job,
    or with `array` a Slurm array (as recorded: no Slurm job is run)."""
    from jobkit.backends.base import Observation
    from jobkit.core.states import State

    backend = "slurm" if array else "local"
    spec = {"name": "job", "backend": backend, "run": run}
    extra = {"array": array} if array else None
    record = store.create_intent(
        backend=backend, name="job", spec=spec, script="", workdir=workdir, extra=extra
    )
    scheduler_id = str(900_000 + store.count()) if array else record.jobkit_id
    stem = f"job-{scheduler_id}" + ("_{task}" if array else "")
    logs = workdir / "logs"
    logs.mkdir(exist_ok=True)
    store.mark_submitted(
        record.jobkit_id,
        scheduler_id=scheduler_id,
        argv=["bash"],
        log_paths={"out": str(logs / f"{stem}.out"), "run_dir": str(logs / stem)},
    )
    store.record_observations(
        {record.jobkit_id: Observation(State.SUCCEEDED, "exit 0", "exit-file", 0)}
    )
    return store.get(record.jobkit_id)


TRAINER = {"train": {"config": "tiny-lm", "overrides": {}}, "command": None}


def test_jobs_without_metrics_say_where_they_looked(
    jobs: Jobs, home: Path, jobkit: Invoke, tmp_path: Path
) -> None:
    with Store() as store:
        trainer = add_job(store, tmp_path, TRAINER)
        own = add_job(store, tmp_path, {"command": ["python", "x.py"], "train": None})
        empty = add_job(store, tmp_path, TRAINER)
    empty_file = Path(empty.log_paths["run_dir"]) / "metrics.jsonl"
    empty_file.parent.mkdir()
    empty_file.write_text("")
    where = {r.jobkit_id: Path(r.log_paths["run_dir"]) / "metrics.jsonl" for r in (trainer, own)}
    assert call(jobkit, trainer.jobkit_id) == (
        1,
        "",
        f"jobkit: job {trainer.jobkit_id} (job) has no metrics yet: no {where[trainer.jobkit_id]}"
        " (job is SUCCEEDED)\n",
    )
    assert call(jobkit, jobs.crashed.jobkit_id, own.jobkit_id) == (
        1,
        "",
        f"jobkit: job {own.jobkit_id} (job) has no metrics yet: no {where[own.jobkit_id]}"
        " (job is SUCCEEDED); it runs its own command: jobkit plot reads the metrics.jsonl the"
        " bundled trainer writes (docs/plot.md)\n",
    )
    assert call(jobkit, empty.jobkit_id) == (
        1,
        "",
        f"jobkit: job {empty.jobkit_id} (job) has no metrics yet: {empty_file} holds no record"
        " (job is SUCCEEDED)\n",
    )


def test_an_array_job_plots_each_task_or_the_one_named(
    jobs: Jobs, home: Path, jobkit: Invoke, tmp_path: Path
) -> None:
    """Tasks 0 and 2 ran (their metrics are the real runs'), task 1 did not start."""
    with Store() as store:
        array = add_job(store, tmp_path, TRAINER, array="0-2")
    pattern = array.log_paths["run_dir"]
    for task, run in (("0", jobs.stopped), ("2", jobs.crashed)):
        folder = Path(pattern.replace("{task}", task))
        folder.mkdir()
        for name in ("metrics.jsonl", "rank-0.log"):
            (folder / name).write_bytes((run.run_dir / name).read_bytes())
    data = plot_json(jobkit, array.jobkit_id)
    assert [(r["task"], r["label"]) for r in data["runs"]] == [
        ("0", f"job ({array.jobkit_id} task 0)"),
        ("2", f"job ({array.jobkit_id} task 2)"),
    ]
    assert data["runs"][1]["records"] == last_per_step(jobs.crashed.records())
    task2 = f"{array.scheduler_id}_2"
    (one,) = plot_json(jobkit, task2)["runs"]
    assert one["task"] == "2"
    assert call(jobkit, task2) == (0, f"{tmp_path}/job-{array.jobkit_id}_2.png\n", "")
    missing = Path(pattern.replace("{task}", "1")) / "metrics.jsonl"
    assert call(jobkit, f"{array.scheduler_id}_1") == (
        1,
        "",
        f"jobkit: job {array.jobkit_id} (job) task 1 has no metrics yet: no {missing}"
        " (job is SUCCEEDED)\n",
    )


@pytest.mark.parametrize(("module", "args"), [("matplotlib", ()), ("plotext", ("--term",))])
def test_a_missing_drawing_library_says_how_to_install_it(
    jobs: Jobs,
    home: Path,
    jobkit: Invoke,
    monkeypatch: pytest.MonkeyPatch,
    module: str,
    args: tuple[str, ...],
) -> None:
    monkeypatch.setitem(sys.modules, module, None)  # what `import` meets when it is absent
    verb = "jobkit plot --term" if args else "jobkit plot"
    assert call(jobkit, jobs.stopped.jobkit_id, *args) == (
        1,
        "",
        f"jobkit: {verb} needs {module}: pip install 'jobkit[plot]'\n",
    )


def test_the_verb_imports_no_drawing_library() -> None:
    code = (
        "import sys, jobkit.cli.plot, jobkit.plot.runs, jobkit.plot.chart\n"
        "heavy = [m for m in ('matplotlib', 'plotext', 'torch', 'numpy') if m in sys.modules]\n"
        "print(heavy)"
    )
    done = subprocess.run(
        [sys.executable, "-c", code], cwd=REPO, capture_output=True, text=True, check=True
    )
    assert done.stdout == "[]\n", done.stderr
