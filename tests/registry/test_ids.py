"""Id resolution: jobkit ids, prefixes, scheduler ids, array tasks; exact error messages."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from jobkit.registry.ids import (
    AmbiguousJobError,
    UnknownJobError,
    resolve_job,
    resolve_job_task,
    resolve_jobs,
)
from jobkit.registry.store import JobRecord, Store


def _job(
    store: Store,
    monkeypatch: pytest.MonkeyPatch,
    jobkit_id: str,
    name: str,
    backend: str,
    sched: str | None,
    **extra: str,
) -> JobRecord:
    """A job with a chosen jobkit id (the id generator is pinned), so prefixes are known."""
    monkeypatch.setattr("jobkit.registry.newids.new_jobkit_id", lambda: jobkit_id)
    rec = store.create_intent(
        backend=backend, name=name, spec={}, script="", workdir=Path("/w"), extra=extra
    )
    if sched is not None:
        store.mark_submitted(rec.jobkit_id, scheduler_id=sched, argv=[], log_paths={})
    return store.get(rec.jobkit_id)


@pytest.fixture
def store(monkeypatch: pytest.MonkeyPatch) -> Iterator[Store]:
    with Store() as opened:
        with monkeypatch.context() as patch:
            _job(opened, patch, "jkab123", "train", "slurm", "501")
            _job(opened, patch, "jkab999", "eval", "pbs", "501", pbs_flavor="torque")
            _job(opened, patch, "jkzz001", "sweep", "slurm", "900", array="0-3")
            _job(opened, patch, "jkqq777", "pending", "slurm", None)
        yield opened


def test_exact_and_prefix(store: Store) -> None:
    assert resolve_job(store, "jkab123").name == "train"
    assert resolve_job(store, "jkzz").name == "sweep"
    assert resolve_job(store, "JKZZ0").name == "sweep"
    assert resolve_job(store, "jkqq").name == "pending"


def test_scheduler_id_and_array_task(store: Store) -> None:
    assert resolve_job(store, "900").name == "sweep"
    record, task = resolve_job_task(store, "900_2")
    assert (record.name, task) == ("sweep", "2")
    assert resolve_job_task(store, "900")[1] is None
    assert resolve_job_task(store, "jkzz001")[1] is None


def test_unknown_id_message(store: Store, jobkit) -> None:  # type: ignore[no-untyped-def]
    with pytest.raises(UnknownJobError) as err:
        resolve_job(store, "12345")
    assert err.value.show() == "no tracked job '12345'"
    assert err.value.exit_code == 2
    result = jobkit("status", "jkxyz")
    assert (result.code, result.err) == (2, "jobkit: no tracked job 'jkxyz'\n")


def test_ambiguous_prefix_lists_candidates(store: Store, jobkit) -> None:  # type: ignore[no-untyped-def]
    with pytest.raises(AmbiguousJobError) as err:
        resolve_job(store, "jkab")
    expected = (
        "job id 'jkab' is ambiguous: jkab999 (eval, pbs 501), jkab123 (train, slurm 501);"
        " give more of the jobkit id"
    )
    assert err.value.show() == expected
    assert err.value.exit_code == 2
    result = jobkit("cancel", "jkab")
    assert (result.code, result.err) == (2, f"jobkit: {expected}\n")


def test_scheduler_id_shared_by_two_backends_is_ambiguous(store: Store) -> None:
    with pytest.raises(AmbiguousJobError, match=r"job id '501' is ambiguous: jkab"):
        resolve_job(store, "501")


def test_last_and_dedup(store: Store) -> None:
    records = resolve_jobs(store, ["jkqq777", "jkab123", "jkab123"], last=True)
    assert [r.jobkit_id for r in records] == ["jkqq777", "jkab123"]


def test_last_with_empty_registry() -> None:
    with Store() as empty, pytest.raises(UnknownJobError) as err:
        resolve_jobs(empty, [], last=True)
    assert err.value.show() == "--last: no tracked jobs yet"


def test_grid_engine_array_task(store: Store, monkeypatch: pytest.MonkeyPatch) -> None:
    """Grid Engine names a task JOB_ID.TASK; the Slurm form works too."""
    _job(store, monkeypatch, "jksg001", "arr", "sge", "13", array="1-3")
    assert resolve_job_task(store, "13.2")[1] == "2"
    assert resolve_job_task(store, "13_3")[1] == "3"
    assert resolve_job_task(store, "13")[1] is None


@pytest.mark.parametrize("prefix", ["jk", "j", "JK"])
def test_a_prefix_matching_every_job_is_ambiguous_not_unknown(
    store: Store,
    jobkit,  # type: ignore[no-untyped-def]
    prefix: str,
) -> None:
    """The user's words: "a prefix matching every job says 'no tracked job' instead of
    'ambiguous'"."""
    with pytest.raises(AmbiguousJobError) as err:
        resolve_job(store, prefix)
    assert err.value.show().startswith(f"job id '{prefix}' is ambiguous: jkqq777 (pending,")
    assert len(err.value.candidates) == 4
    for verb in ("status", "doctor", "why", "report", "logs", "cancel"):
        result = jobkit(verb, prefix)
        assert result.code == 2, (verb, result.err)
        assert result.err.startswith(f"jobkit: job id '{prefix}' is ambiguous: "), (verb, result)


def test_last_is_the_last_submission_a_sweep_or_one_retried_task() -> None:
    """`--last` after a sweep is the whole sweep; after `jobkit retry` of one of its tasks (a
    later attempt of that task) it is that task alone."""
    from jobkit.registry.ids import with_last

    with Store() as store:
        first = store.create_intent(
            backend="local",
            name="sw",
            spec={},
            script="",
            workdir=Path("/w"),
            sweep_id="jkswp09",
            task="0",
        )
        store.create_intent(
            backend="local",
            name="sw",
            spec={},
            script="",
            workdir=Path("/w"),
            sweep_id="jkswp09",
            task="1",
        )
        assert with_last(store, ["jkx"], True) == ["jkswp09", "jkx"]
        retried = store.create_intent(
            backend="local",
            name="sw",
            spec={},
            script="",
            workdir=Path("/w"),
            sweep_id="jkswp09",
            task="0",
            run_id=first.jobkit_id,
            attempt=2,
        )
        assert with_last(store, [], True) == [retried.jobkit_id]
        assert with_last(store, ["a"], False) == ["a"]
