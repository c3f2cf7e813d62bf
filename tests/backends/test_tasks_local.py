"""A sweep's tasks on the local backend: each task is its own launcher with JOBKIT_TASK_ID,
and at most sweep.max_parallel of them run at once (backends/slots.py). Real launchers from
the rendered templates/ssh script, run here."""

from __future__ import annotations

import secrets
import time
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path

from jobkit.backends.base import Observation, SubmitRequest, Submitted, TrackedJob
from jobkit.backends.local import LocalBackend
from jobkit.core.states import State
from jobkit.render.engine import render
from jobkit.spec.schema import JobSpec
from tests.backends.requests import make_request

# Prints its sweep words, then holds its slot for a moment.
PROGRAM = "import sys, time; print('task words', sys.argv[1:], flush=True); time.sleep(3)"


def sweep_spec(max_parallel: int) -> JobSpec:
    return JobSpec.model_validate(
        {
            "name": "sw",
            "backend": "local",
            "run": {"command": ["python3", "-c", PROGRAM]},
            "sweep": {"sets": [{"lr": 1}, {"lr": 2}], "max_parallel": max_parallel},
        }
    )


def task_request(tmp_path: Path, spec: JobSpec, task: str, sweep_id: str) -> SubmitRequest:
    script = render(spec)
    base = make_request(tmp_path, script, name=spec.name)
    return replace(base, spec=spec, task=task, sweep_id=sweep_id)


def as_tracked(request: SubmitRequest, sub: Submitted) -> TrackedJob:
    return TrackedJob(
        jobkit_id=request.jobkit_id,
        scheduler_id=sub.scheduler_id,
        job_dir=request.job_dir,
        workdir=request.workdir,
        extra=dict(sub.extra),
    )


def wait_until(done: Callable[[], bool], *, timeout: float) -> None:
    """Return once done() is true; fail after timeout seconds."""
    deadline = time.monotonic() + timeout
    while not done():
        assert time.monotonic() < deadline, f"not done after {timeout} s"
        time.sleep(0.2)


def poll(backend: LocalBackend, job: TrackedJob) -> Observation:
    return backend.poll([job])[job.scheduler_id]


def test_with_max_parallel_1_the_second_task_waits_queued_then_runs(tmp_path: Path) -> None:
    backend = LocalBackend(grace_s=5)
    spec = sweep_spec(max_parallel=1)
    sweep_id = "jk" + secrets.token_hex(3)
    first, second = (task_request(tmp_path, spec, task, sweep_id) for task in ("0", "1"))
    jobs = []
    try:
        for request in (first, second):
            jobs.append(as_tracked(request, backend.submit(request)))
        one, two = jobs
        wait_until(lambda: poll(backend, one).state is State.RUNNING, timeout=30)
        waiting = poll(backend, two)
        assert waiting.state is State.QUEUED, waiting
        assert waiting.reason == "waiting for a free slot (sweep.max_parallel 1)"
        why = backend.explain_waiting([two])[two.scheduler_id]
        assert why.waiting and why.reasons[0].explanation.fix.startswith("wait")
        # The first ends, the second takes its slot, and both succeed.
        wait_until(lambda: poll(backend, two).state is State.RUNNING, timeout=60)
        assert poll(backend, one).state is State.SUCCEEDED
        wait_until(lambda: poll(backend, two).state.is_final, timeout=60)
        assert poll(backend, two).state is State.SUCCEEDED
    finally:
        backend.cancel(jobs)
    outputs = [Path(sub.extra["run_dir"]).parent for sub in jobs]
    assert outputs[0] == outputs[1]
    for request, task, lr in ((first, "0", "1"), (second, "1", "2")):
        out = (request.workdir / "logs" / f"sw-{request.jobkit_id}.out").read_text()
        assert f"jobkit: sweep task {task}" in out, out
        node = (request.workdir / "logs" / f"sw-{request.jobkit_id}" / "node-0.out").read_text()
        assert f"task words ['lr={lr}']" in node, node
    assert (
        "jobkit: waiting for a free slot"
        in (second.workdir / "logs" / f"sw-{second.jobkit_id}.out").read_text()
    )


def test_a_task_killed_while_it_runs_frees_its_slot(tmp_path: Path) -> None:
    backend = LocalBackend(grace_s=5)
    spec = sweep_spec(max_parallel=1)
    sweep_id = "jk" + secrets.token_hex(3)
    first, second = (task_request(tmp_path, spec, task, sweep_id) for task in ("0", "1"))
    one = as_tracked(first, backend.submit(first))
    two = as_tracked(second, backend.submit(second))
    try:
        wait_until(lambda: poll(backend, one).state is State.RUNNING, timeout=30)
        assert poll(backend, two).state is State.QUEUED
        started = time.monotonic()
        backend.cancel([one])
        assert poll(backend, one).state is State.CANCELLED
        wait_until(lambda: poll(backend, two).state is State.RUNNING, timeout=30)
        assert time.monotonic() - started < 20
    finally:
        backend.cancel([one, two])
    assert poll(backend, two).state is State.CANCELLED


def test_a_plain_job_gets_no_task_and_no_slot(tmp_path: Path) -> None:
    request = make_request(tmp_path, "exit 0\n")
    sub = LocalBackend().submit(request)
    assert "slot_dir" not in sub.extra and "task" not in sub.extra


def test_the_ssh_launcher_gets_the_task_and_its_slot_too(tmp_path: Path) -> None:
    """The ssh backend starts its launcher here as local does: same variables."""
    from jobkit.backends.ssh import SshBackend

    script = 'echo "$JOBKIT_TASK_ID $JOBKIT_MAX_PARALLEL $JOBKIT_SLOT_DIR"\n'
    sets = [{"a": 1}, {"a": 2}, {"a": 3}]
    base = make_request(
        tmp_path, script, backend="ssh", ssh={"hosts": ["n1"]}, sweep={"sets": sets}
    )
    request = replace(base, task="2", sweep_id="jksweep")
    backend = SshBackend()
    sub = backend.submit(request)
    job = as_tracked(request, sub)
    wait_until(lambda: backend.poll([job])[job.scheduler_id].state.is_final, timeout=30)
    out = (request.workdir / "logs" / f"job-{request.jobkit_id}.out").read_text()
    slot_dir = request.job_dir.parent / "jksweep" / "slots"
    assert sub.extra["slot_dir"] == str(slot_dir)
    assert out.split() == ["2", "1", str(slot_dir)], out
