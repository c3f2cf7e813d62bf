"""Job and Sweep: a tracked job (or a sweep's tasks) as a Python object. Each method opens
the registry, does what the matching CLI verb does through the same functions (refresh,
cancel, log selection, doctor, report), and closes it again: a Job holds no connection and
can be made again from its id in another process (`jobkit.job(id)`)."""

from __future__ import annotations

import logging
import time
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal, overload

from jobkit.api.errors import JobkitError, WaitTimeout
from jobkit.backends.registry import DEFAULT as DEFAULT_BACKEND
from jobkit.registry.store import JobRecord, Store

if TYPE_CHECKING:
    from jobkit.doctor.diagnosis import Diagnosis
    from jobkit.report.build import Report


class Job:
    """One tracked job (or one sweep task), as the registry last recorded it.

    `state` is the last known state; `refresh()` asks the scheduler (as `jobkit status`
    does) and `wait()` polls until the job has settled."""

    def __init__(self, record: JobRecord) -> None:
        self.record = record
        """The registry row (JobRecord) as last read."""

    def __repr__(self) -> str:
        return f"Job(id={self.id!r}, name={self.name!r}, state={self.state!r})"

    @property
    def id(self) -> str:
        """jobkit's id (`jk...`), what every verb takes."""
        return self.record.jobkit_id

    @property
    def scheduler_id(self) -> str | None:
        return self.record.scheduler_id

    @property
    def name(self) -> str:
        return self.record.name

    @property
    def backend(self) -> str:
        return self.record.backend

    @property
    def state(self) -> str:
        """QUEUED, RUNNING, SUCCEEDED, FAILED, CANCELLED, ... (core/states.py), or SUBMITTING."""
        return self.record.state

    @property
    def exit_code(self) -> int | None:
        return self.record.exit_code

    @property
    def reason(self) -> str | None:
        return self.record.reason

    @property
    def done(self) -> bool:
        """True once the job will not run again (a final state)."""
        return self.record.is_final

    @property
    def attempt(self) -> int:
        """Which attempt of its run this job is (1, 2, ...: docs/runs.md)."""
        return self.record.attempt

    @property
    def sweep_id(self) -> str | None:
        return self.record.sweep_id

    @property
    def task(self) -> str | None:
        """Its task id within its sweep (None outside a sweep)."""
        return self.record.task

    @property
    def run_dir(self) -> Path | None:
        """The run folder (rank logs, metrics.jsonl, checkpoints; a function's result)."""
        found = self.record.run_dir
        return Path(found) if found else None

    @property
    def attempts(self) -> list[Job]:
        """Every attempt of this job's run, first to last (docs/runs.md)."""
        with Store() as store:
            return [Job(r) for r in store.attempts(self.record.run_key)]

    def refresh(self) -> Job:
        """Ask the backend (one poll, as `jobkit status ID`) and record the answer; self.
        A scheduler that cannot answer leaves the last known state (no exception). As
        `jobkit status` does, a run that asked to go on is resubmitted as its next attempt
        (manager/followup.py, docs/runs.md); this Job stays the attempt it was."""
        from jobkit.manager.followup import follow_up
        from jobkit.manager.refresh import refresh

        log = logging.getLogger("jobkit")
        with Store() as store:
            before = [store.get(self.id)]
            result = refresh(store, before)
            done = follow_up(store, before, result.records)
        self.record = result.records[0]
        for failure in result.failures:  # `jobkit status`'s warning line, to the logger
            log.warning("%s", failure.warning())
        for line in [*done.notes, *(r.line() for r in done.resubmissions), *done.later]:
            log.warning("%s", line.removeprefix("jobkit: "))
        return self

    def _next_attempt(self) -> Job | None:
        """The attempt after this one, once jobkit submitted it (None: the run ends here,
        or the resubmission is not recorded yet)."""
        with Store() as store:
            later = [
                r for r in store.attempts(self.record.run_key) if r.attempt > self.record.attempt
            ]
        return Job(later[0]) if later else None

    def _resubmission_pending(self) -> bool:
        """Whether a jobkit process claimed this ended attempt's resubmission (its row says
        `resubmitted_as`) and the new row is not there yet."""
        with Store() as store:
            claimed = store.get(self.id).extra.get("resubmitted_as") is not None
        return claimed and self._next_attempt() is None

    def wait(self, timeout: float | None = None, poll: float | None = None) -> Job:
        """Poll until the run has settled (its last attempt final, with its exit code); the
        Job of that attempt (self when the run had one). An attempt that ended and was
        resubmitted (preempted, a refused requeue: docs/runs.md) is followed into the next
        one, as `jobkit watch` does. `poll`: seconds between polls (default: the backend's
        own, 1 s for local jobs, 3 s on schedulers); WaitTimeout after `timeout` seconds
        (the job goes on)."""
        from jobkit.manager.refresh import wait_settled

        interval = poll if poll is not None else _poll_interval(self.backend)
        deadline = None if timeout is None else time.monotonic() + timeout
        job = self
        while True:
            if wait_settled(job.refresh().record, time.time()):
                following = job._next_attempt()
                if following is not None:
                    job = following
                    continue
                if not job._resubmission_pending():
                    return job
            if deadline is not None and time.monotonic() >= deadline:
                raise WaitTimeout(f"job {job.id} is still {job.state} after {timeout:g} s")
            time.sleep(
                interval
                if deadline is None
                else max(0.0, min(interval, deadline - time.monotonic()))
            )

    def cancel(self) -> bool:
        """Cancel the job (as `jobkit cancel ID`); True when it was cancelled, False when it
        had already ended. A failed cancel command raises its SchedulerError."""
        from jobkit.manager.cancel import cancel_jobs

        with Store() as store:
            outcome = cancel_jobs(store, [self.id])
            self.record = store.get(self.id)
        if outcome.errors:
            raise outcome.errors[0]
        if outcome.pending:
            raise JobkitError(f"{self.id} is still being submitted; try again in a moment")
        return bool(outcome.cancelled)

    @overload
    def logs(self, rank: int | None = 0, follow: Literal[False] = False) -> str: ...

    @overload
    def logs(self, rank: int | None = 0, *, follow: Literal[True]) -> Iterator[str]: ...

    @overload
    def logs(self, rank: int | None, follow: Literal[True]) -> Iterator[str]: ...

    def logs(self, rank: int | None = 0, follow: bool = False) -> str | Iterator[str]:
        """Rank `rank`'s output as `jobkit logs ID --rank N` shows it (None: the job's .out);
        with `follow` an iterator of lines until the job ends and the files are drained."""
        from jobkit.logs.files import select_files

        if not self.record.log_paths:
            raise JobkitError(f"job {self.id} has no log files yet (still submitting)")
        selection = select_files(
            self.record.log_paths, self.record.spec, self.record.extra, rank=rank
        )
        if follow:
            return self._follow(selection.sources)
        from jobkit.logs.follow import read_all

        return "".join(line.render() + "\n" for line in read_all(selection.sources))

    def _follow(self, sources: list[Any]) -> Iterator[str]:
        from jobkit.core.states import State
        from jobkit.logs.follow import FollowTiming, follow

        def is_done() -> bool:
            self.refresh()
            return self.done or self.state == State.UNKNOWN.value

        timing = FollowTiming(done_interval_s=_poll_interval(self.backend))
        for line in follow(sources, is_done, timing=timing):
            yield line.render()

    def metrics(self) -> list[dict[str, Any]]:
        """The bundled trainer's metrics.jsonl records (one per logged step, in order); []
        when there are none yet."""
        from jobkit.plot.read import read_metrics

        run_dir = self.run_dir
        path = run_dir / "metrics.jsonl" if run_dir else None
        if path is None or not path.is_file():
            return []
        return read_metrics(path).records

    def diagnose(self) -> Diagnosis:
        """Why the job failed, as `jobkit doctor ID` finds it (Diagnosis: .one_line(),
        .lines(), .to_dict())."""
        from jobkit.doctor.classify import diagnose_record

        return diagnose_record(self.refresh().record)

    def report(self) -> Report:
        """What the job used and how to size its next run, as `jobkit report ID` (Report:
        .to_dict(); jobkit.report.text.render_text for the text)."""
        from jobkit.cli.report import _usages
        from jobkit.report.build import build_report

        record = self.refresh().record
        usages, notes, _ = _usages([(record, None)])
        return build_report(record, usages.get(self.id), notes.get(self.id), record.run_dir)

    def result(self, timeout: float | None = None, poll: float | None = None) -> Any:
        """A function job's return value (rank 0's), waiting for the job first; the
        function's exception re-raised as FunctionError (rank, host, remote traceback)."""
        from jobkit.api.results import read_result

        return read_result(self.wait(timeout=timeout, poll=poll))


class Sweep:
    """A sweep: its id and its tasks as Jobs (each task's newest attempt), in task order."""

    def __init__(self, sweep_id: str, tasks: list[Job]) -> None:
        self.id = sweep_id
        self.tasks = tasks

    def __repr__(self) -> str:
        states = ", ".join(f"{t.task}:{t.state}" for t in self.tasks)
        return f"Sweep(id={self.id!r}, tasks=[{states}])"

    def refresh(self) -> Sweep:
        """One poll for every task (as `jobkit status SWEEP_ID`); self."""
        from jobkit.manager.followup import follow_up
        from jobkit.manager.refresh import refresh
        from jobkit.registry.selection import newest_attempts

        log = logging.getLogger("jobkit")
        with Store() as store:
            rows = newest_attempts(store.sweep(self.id))
            result = refresh(store, rows)
            done = follow_up(store, rows, result.records)  # next attempts, as status does
            self.tasks = [Job(r) for r in newest_attempts(store.sweep(self.id))]
        for failure in result.failures:
            log.warning("%s", failure.warning())
        for line in [*done.notes, *(r.line() for r in done.resubmissions), *done.later]:
            log.warning("%s", line.removeprefix("jobkit: "))
        return self

    def wait(self, timeout: float | None = None, poll: float | None = None) -> Sweep:
        """Poll until every task has settled; self (WaitTimeout after `timeout` seconds)."""
        from jobkit.manager.refresh import wait_settled

        backend = self.tasks[0].backend if self.tasks else DEFAULT_BACKEND
        interval = poll if poll is not None else _poll_interval(backend)
        deadline = None if timeout is None else time.monotonic() + timeout
        while not all(wait_settled(t.record, time.time()) for t in self.refresh().tasks):
            if deadline is not None and time.monotonic() >= deadline:
                raise WaitTimeout(f"sweep {self.id} has unfinished tasks after {timeout:g} s")
            time.sleep(interval)
        return self

    def cancel(self) -> list[Job]:
        """Cancel every unfinished task (as `jobkit cancel SWEEP_ID`); the tasks cancelled."""
        from jobkit.manager.cancel import cancel_jobs

        with Store() as store:
            outcome = cancel_jobs(store, [self.id])
        if outcome.errors:
            raise outcome.errors[0]
        self.refresh()
        return [Job(r) for r in outcome.cancelled]

    def overrides(self, task: Job) -> dict[str, Any]:
        """The overrides a task ran with (its sweep.json entry)."""
        from jobkit.cli.taskfacts import task_overrides

        return dict(task_overrides(task.record, {}))

    def results(self, timeout: float | None = None) -> list[Any]:
        """Every task's function result in task order (a `map_array` sweep); the first
        failed task's FunctionError is raised."""
        from jobkit.api.results import read_result

        self.wait(timeout=timeout)
        return [read_result(task) for task in self.tasks]


def _poll_interval(backend: str) -> float:
    from jobkit.cli.logs import poll_interval

    return poll_interval(backend)
