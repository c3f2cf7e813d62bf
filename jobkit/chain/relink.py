"""`jobkit retry` of a chain's stage (or jobkit's own resubmission of it) re-links the rest
of the chain: each later stage that never started (cancelled as broken, or still waiting on
the attempt that failed) is cancelled if it still waits and submitted again as its run's
next attempt, after the new attempt of the stage before it, with the link's condition:
afterok:NEW on Slurm, -W depend= on PBS, -hold_jid on Grid Engine, the detached waiter on
local and ssh (docs/chains.md). A stage that did start (an `any` or `fail` link) keeps its
run, and the stages after it stay as they are."""

from __future__ import annotations

from jobkit.chain.settle import broken_reason, settle_chains
from jobkit.chain.submit import after_of
from jobkit.core.errors import JobkitError, SchedulerError
from jobkit.registry.chains import Link, chains_of
from jobkit.registry.record import JobRecord
from jobkit.registry.store import Store

_WAITING = frozenset({"QUEUED", "SUBMITTING"})


def never_started(record: JobRecord) -> bool:
    """Whether a stage never ran: its chain broke before it, or it still waits."""
    return broken_reason(record) is not None or record.state in _WAITING


def relink_after(store: Store, old: JobRecord, new: JobRecord) -> list[str]:
    """Re-link the stages after `old`'s in its chain to `new` (the next attempt of `old`'s
    run); one line per stage submitted again, or for the stage where it stopped."""
    lines: list[str] = []
    for links in chains_of(store, [old.run_key]).values():
        place = next((i for i, link in enumerate(links) if link.jobkit_id == old.run_key), None)
        if place is not None:
            lines += _relink(store, links[place + 1 :], new)
    return lines


def _newest(store: Store, link: Link) -> JobRecord:
    return store.attempts(link.jobkit_id)[-1]


def _relink(store: Store, later: list[Link], previous: JobRecord) -> list[str]:
    from jobkit.manager.attempts import retry_once
    from jobkit.manager.refresh import refresh

    stages = refresh(store, [_newest(store, link) for link in later]).records
    lines = [f"chain: {line}" for line in settle_chains(store, stages)]
    for link in later:
        stage = _newest(store, link)
        label = f"{stage.name} ({stage.jobkit_id})"
        if not never_started(stage):
            lines.append(f"chain: {label} is {stage.state}: it and the stages after it stay")
            break
        try:
            if not stage.is_final:
                _cancel_waiting(store, stage, previous)
                stage = store.get(stage.jobkit_id)
            after = (after_of(previous, link.condition or "ok"),)
            new = retry_once(
                store,
                stage,
                why=f"re-linked after {previous.jobkit_id} (jobkit retry)",
                after=after,
                keep_broken=link.keep_broken,
            )
        except (JobkitError, SchedulerError) as err:
            why = " ".join(err.show().split())
            lines.append(f"chain: {label} could not be re-linked: {why}")
            break
        lines.append(
            f"chain: {label} re-linked: attempt {new.attempt} {new.jobkit_id}"
            f" ({new.scheduler_id or '-'}) after {previous.name} {previous.jobkit_id}"
            f" ({link.condition})"
        )
        previous = new
    return lines


def _cancel_waiting(store: Store, stage: JobRecord, previous: JobRecord) -> None:
    """The stage still waiting on the old attempt is cancelled (it never ran)."""
    from jobkit.backends.registry import get_backend

    get_backend(stage.backend).cancel([stage.tracked()])
    store.mark_cancelled([stage.jobkit_id])
    store.add_note(
        store.get(stage.jobkit_id),
        f"cancelled by jobkit: re-linked after {previous.jobkit_id} (jobkit retry)",
    )
