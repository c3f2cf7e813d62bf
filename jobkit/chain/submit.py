"""Submitting a chain: each stage planned with the previous stage as its `after` and submitted
in order, its link recorded at once (registry/chains.py). A stage that cannot be submitted
stops the chain there: the stages before it stay submitted, and the error names them."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from jobkit.backends.base import After
from jobkit.core.errors import JobkitError, UsageError
from jobkit.registry.chains import add_link
from jobkit.registry.store import JobRecord, Store

if TYPE_CHECKING:
    from jobkit.manager.submit import Plan
    from jobkit.spec.schema import JobSpec


def after_of(record: JobRecord, condition: str) -> After:
    """The `after` of a stage that follows `record` (its id and what a launcher waits on)."""
    if record.scheduler_id is None:
        raise JobkitError(f"{record.jobkit_id} has no scheduler id yet: cannot chain after it")
    facts = {**record.extra, "run_dir": record.log_paths.get("run_dir", "")}
    return After(record.scheduler_id, condition, {k: str(v) for k, v in facts.items()})


def placeholder_after(index: int, condition: str) -> After:
    """The `after` a dry run shows for stage `index` (its previous stage has no id yet)."""
    return After(f"<stage-{index}>", condition)


def check_stages(specs: Sequence[JobSpec], before: JobRecord | None) -> None:
    """One backend for the whole chain, and no scheduler.dependency of the user's own: a
    UsageError in one line otherwise (nothing is submitted)."""
    backends = {spec.backend for spec in specs} | ({before.backend} if before else set())
    if len(backends) > 1:
        raise UsageError(
            f"a chain's stages run on one backend (got {', '.join(sorted(backends))}): a"
            " scheduler cannot wait for another scheduler's job"
        )
    for spec in specs:
        if spec.scheduler.dependency:
            raise UsageError(
                f"{spec.name}: scheduler.dependency is set, and --chain/--after set the"
                " dependency themselves (remove the key)"
            )


@dataclass
class ChainSubmission:
    """The stages submitted so far (in order)."""

    records: list[JobRecord]


def submit_chain(
    store: Store,
    plan_for: Callable[[int, tuple[After, ...]], Plan],
    count: int,
    *,
    condition: str,
    before: JobRecord | None = None,
    before_condition: str = "ok",
    keep_broken: bool = False,
    on_submitted: Callable[[JobRecord], None] | None = None,
) -> ChainSubmission:
    """Submit `count` stages: stage i planned by `plan_for(i, after)`, after stage i-1 with
    `condition` (stage 0 after `before`, if given, with `before_condition`). Raises the
    first stage's error as it is; a later stage's names the stages already submitted."""
    from jobkit.manager.submit import SubmissionUnknown
    from jobkit.manager.submit import submit as submit_plan

    done = ChainSubmission([])
    previous, wanted = before, before_condition
    for index in range(count):
        after = (after_of(previous, wanted),) if previous is not None else ()
        try:
            plan = plan_for(index, after)
            record = submit_plan(store, plan)
        except SubmissionUnknown as err:
            _link(store, err.jobkit_id, previous, wanted, keep_broken)
            raise _stopped(done, err) from None
        except JobkitError as err:
            if not done.records:
                raise
            raise _stopped(done, err) from None
        _link(store, record.jobkit_id, previous, wanted, keep_broken)
        done.records.append(record)
        if on_submitted is not None:
            on_submitted(record)
        previous, wanted = record, condition
    return done


def _link(
    store: Store, jobkit_id: str, previous: JobRecord | None, condition: str, keep: bool
) -> None:
    add_link(
        store,
        jobkit_id,
        after_id=previous.jobkit_id if previous else None,
        condition=condition if previous else None,
        keep_broken=keep,
    )


def _stopped(done: ChainSubmission, err: JobkitError) -> JobkitError:
    """The error of a stage after some were submitted: it names them."""
    if not done.records:
        return err
    ids = ", ".join(f"{r.name} {r.jobkit_id}" for r in done.records)
    why = " ".join(err.show().split())
    return JobkitError(
        f"chain stopped at stage {len(done.records) + 1}: {why} (already submitted: {ids};"
        f" `jobkit cancel` them or submit the rest with --after {done.records[-1].jobkit_id})"
    )
