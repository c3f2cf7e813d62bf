"""`jobkit logs` as a user runs it: options, errors (one line, exit code), --tail, --last.

Jobs are recorded in a registry of the test's own; the running ones are real processes
started by the local backend.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from jobkit.backends.local import LocalBackend
from jobkit.cli import run as cli_run
from jobkit.manager.submit import request_for
from jobkit.registry.store import JobRecord, Store


@pytest.fixture
def store(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Store]:
    monkeypatch.setenv("JOBKIT_HOME", str(tmp_path / "home"))
    with Store() as opened:
        yield opened


def jobkit(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:
    capsys.readouterr()
    code = cli_run(list(args))
    out, err = capsys.readouterr()
    return code, out, err


SPEC: dict[str, Any] = {
    "name": "job",
    "backend": "local",
    "resources": {"nodes": 1},
    "launch": {"nproc_per_node": 2, "launcher": "torchrun"},
    "run": {"command": ["x"]},
}


def record(
    store: Store,
    tmp_path: Path,
    *,
    backend: str = "local",
    scheduler_id: str | None = None,
    extra: dict[str, Any] | None = None,
    out: str = "",
) -> JobRecord:
    """A finished job whose .out holds `out` (state SUCCEEDED unless told otherwise)."""
    from jobkit.backends.base import Observation
    from jobkit.core.states import State

    rec = store.create_intent(
        backend=backend, name="job", spec=SPEC, script="", workdir=tmp_path, extra=extra
    )
    logs = tmp_path / "logs"
    logs.mkdir(exist_ok=True)
    stem = f"job-{scheduler_id or rec.jobkit_id}"
    paths = {
        "out": str(logs / f"{stem}.out"),
        "err": str(logs / f"{stem}.err"),
        "run_dir": str(logs / stem),
    }
    if out:
        Path(paths["out"]).write_text(out)
    rec = store.mark_submitted(
        rec.jobkit_id,
        scheduler_id=scheduler_id or rec.jobkit_id,
        argv=["bash"],
        log_paths=paths,
        extra=extra,
    )
    store.record_observations(
        {rec.jobkit_id: Observation(State.SUCCEEDED, "exit 0", "exit-file", 0)}
    )
    return store.get(rec.jobkit_id)


def test_prints_the_out_file_and_its_last_lines(
    store: Store, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    rec = record(store, tmp_path, out="one\ntwo\nthree\nunfinished")
    assert jobkit(capsys, "logs", rec.jobkit_id) == (0, "one\ntwo\nthree\nunfinished\n", "")
    assert jobkit(capsys, "logs", rec.jobkit_id, "--tail", "2") == (0, "three\nunfinished\n", "")
    assert jobkit(capsys, "logs", "--last", "--tail", "1") == (0, "unfinished\n", "")


def test_all_ranks_are_prefixed(
    store: Store, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    rec = record(store, tmp_path, out="x\n")
    run_dir = Path(rec.log_paths["run_dir"])
    run_dir.mkdir()
    (run_dir / "node-0.out").write_text("a\nb\n")
    code, out, _ = jobkit(capsys, "logs", rec.jobkit_id, "--all-ranks")
    assert (code, out) == (0, "[node 0] a\n[node 0] b\n")
    code, out, err = jobkit(capsys, "logs", rec.jobkit_id, "--rank", "1")
    assert (code, out) == (0, "a\nb\n")
    assert err == "jobkit: rank 1 has no file of its own; node-0.out holds every rank on host 0\n"


@pytest.mark.parametrize(
    ("args", "message"),
    [
        ((), "jobkit: give one or more job IDs or --last (not both)\n"),
        (("jkzzzzz",), "jobkit: no tracked job 'jkzzzzz'\n"),
        (("ID", "--rank", "0", "--all-ranks"), "jobkit: give --rank N or --all-ranks, not both\n"),
        (
            ("ID", "--rank", "0", "--stderr"),
            "jobkit: --stderr shows the job's .err file; per-rank files have none\n",
        ),
        (("ID", "--rank", "2"), "jobkit: --rank 2: the job has 2 rank(s), 0-1\n"),
    ],
)
def test_usage_errors_are_one_line_and_exit_2(
    store: Store,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    args: tuple[str, ...],
    message: str,
) -> None:
    rec = record(store, tmp_path, out="x\n")
    argv = [rec.jobkit_id if a == "ID" else a for a in args]
    assert jobkit(capsys, "logs", *argv) == (2, "", message)


def test_an_array_job_needs_a_task(
    store: Store, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    rec = record(store, tmp_path, backend="slurm", scheduler_id="4242", extra={"array": "0-3"})
    # Array log paths carry a {task} placeholder (store.JobRecord.log_paths_for).
    logs = tmp_path / "logs"
    store.mark_submitted(
        rec.jobkit_id,
        scheduler_id="4242",
        argv=[],
        log_paths={
            "out": str(logs / "job-4242_{task}.out"),
            "run_dir": str(logs / "job-4242_{task}"),
        },
    )
    (logs / "job-4242_3.out").write_text("task three\n")
    code, out, err = jobkit(capsys, "logs", rec.jobkit_id)
    assert (code, out) == (2, "")
    assert err == f"jobkit: job {rec.jobkit_id} is an array: name one task, e.g. 4242_0\n"
    assert jobkit(capsys, "logs", "4242_3") == (0, "task three\n", "")


def test_a_missing_file_of_a_finished_job_is_an_error(
    store: Store, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    rec = record(store, tmp_path)  # no .out written
    code, out, err = jobkit(capsys, "logs", rec.jobkit_id)
    assert (code, out) == (1, "")
    assert err == f"jobkit: job {rec.jobkit_id} ended (SUCCEEDED) without {rec.log_paths['out']}\n"


def test_a_running_job_without_output_yet_is_not_an_error(
    store: Store, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    rec = store.create_intent(backend="local", name="job", spec=SPEC, script="", workdir=tmp_path)
    script = rec.job_dir / "job.sh"
    script.write_text("sleep 30\n")
    backend = LocalBackend(grace_s=2)
    submitted = backend.submit(request_for(store.get(rec.jobkit_id)))
    rec = store.mark_submitted(
        rec.jobkit_id,
        scheduler_id=submitted.scheduler_id,
        argv=submitted.argv,
        log_paths=submitted.log_paths,
        extra=submitted.extra,
    )
    try:
        code, out, err = jobkit(capsys, "logs", rec.jobkit_id, "--rank", "0")
        node0 = Path(submitted.log_paths["run_dir"]) / "node-0.out"
        assert (code, out) == (0, "")
        assert err.splitlines()[-1] == f"jobkit: no output yet: {node0} (job is RUNNING)"
    finally:
        started = time.monotonic()
        backend.cancel([store.get(rec.jobkit_id).tracked()])
        assert time.monotonic() - started < 10


def test_a_grid_engine_array_task_is_named_its_way(
    store: Store, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    rec = record(store, tmp_path, backend="sge", scheduler_id="13", extra={"array": "1-3"})
    logs = tmp_path / "logs"
    store.mark_submitted(
        rec.jobkit_id,
        scheduler_id="13",
        argv=[],
        log_paths={"out": str(logs / "job-13.{task}.out"), "run_dir": str(logs / "job-13.{task}")},
    )
    (logs / "job-13.2.out").write_text("task two\n")
    code, out, err = jobkit(capsys, "logs", rec.jobkit_id)
    assert (code, out, err) == (
        2,
        "",
        f"jobkit: job {rec.jobkit_id} is an array: name one task, e.g. 13.1\n",
    )
    assert jobkit(capsys, "logs", "13.2") == (0, "task two\n", "")
