"""A broken chain is never silent: after a refresh, each stage that can no longer start (its
previous stage ended in a way its condition excludes, or never started itself) is marked
once, with the first failed stage and that stage's one-line diagnosis, and cancelled unless
it was submitted with --keep-broken (docs/chains.md).

Slurm (--kill-on-invalid-dep=yes) and the local/ssh waiter end such a stage themselves: here
it only gets its reason. PBS through Slurm's Torque wrapper keeps it waiting, and Grid
Engine's -hold_jid waits only for the end (the stage may already run): jobkit cancels both.
"""

from __future__ import annotations

from collections.abc import Sequence

from jobkit.chain.links import can_start
from jobkit.registry.chains import Link, chains_of
from jobkit.registry.store import JobRecord, Store

BROKEN_KEY = "chain_broken"
"""extra key of a stage that can never start: the one line saying why (claimed once)."""


def broken_reason(record: JobRecord) -> str | None:
    """The stage's recorded reason for never starting, or None."""
    value = record.extra.get(BROKEN_KEY)
    return str(value) if value else None


def _failure_words(store: Store, failed: JobRecord) -> str:
    """`train (jk12345) FAILED: <doctor's one line>`."""
    from jobkit.doctor.cache import one_line, with_diagnoses

    diagnosed = with_diagnoses(store, [failed])[0]
    line = one_line(diagnosed) or failed.reason
    words = f"stage {failed.name} ({failed.jobkit_id}) {failed.state}"
    if failed.exit_code is not None:
        words += f" (exit {failed.exit_code})"
    return f"{words}: {line}" if line else words


def settle_chains(store: Store, records: Sequence[JobRecord]) -> list[str]:
    """Mark (and cancel) the stages of these jobs' chains that can never start; one line per
    stage newly marked, for the caller to print."""
    lines: list[str] = []
    for links in chains_of(store, [r.run_key for r in records]).values():
        lines += _settle_chain(store, links)
    return lines


def _settle_chain(store: Store, links: Sequence[Link]) -> list[str]:
    # each stage is its run's newest attempt (a retried stage: chain/relink.py)
    rows = {link.jobkit_id: store.attempts(link.jobkit_id)[-1] for link in links}
    lines: list[str] = []
    for link in links:
        me = rows[link.jobkit_id]
        if link.after_id is None or link.condition is None or link.after_id not in rows:
            continue
        if broken_reason(me):
            continue
        before = rows[link.after_id]
        inherited = broken_reason(before)  # it never started: as the scheduler, CANCELLED
        state = "CANCELLED" if inherited else before.state
        if can_start(link.condition, state) is not False:
            continue
        if inherited:
            why = inherited
        elif link.condition == "fail":
            why = f"never started: stage {before.name} ({before.jobkit_id}) succeeded"
        else:
            why = f"never started: {_failure_words(store, before)}"
        if not store.claim_extra(me.jobkit_id, BROKEN_KEY, why):
            continue
        rows[link.jobkit_id] = store.get(me.jobkit_id)
        lines.append(_act(store, rows[link.jobkit_id], why, keep=link.keep_broken))
    return lines


def _act(store: Store, me: JobRecord, why: str, *, keep: bool) -> str:
    """Cancel the stage (unless kept or already ended); the line that says what was done."""
    label = f"{me.jobkit_id} ({me.name})"
    if keep:
        store.add_note(me, f"{why}; kept waiting (--keep-broken)")
        return f"chain: {label} will never start ({why}); kept (--keep-broken)"
    if me.is_final or me.scheduler_id is None:
        store.add_note(me, why)
        return f"chain: {label} {why}"
    from jobkit.backends.registry import BackendUnavailable, get_backend
    from jobkit.core.errors import SchedulerError

    try:
        get_backend(me.backend).cancel([me.tracked()])
    except (SchedulerError, BackendUnavailable) as err:
        store.add_note(me, f"{why}; cancelling failed: {err.show()}")
        return f"chain: {label} {why}; could not cancel it: {' '.join(err.show().split())}"
    store.mark_cancelled([me.jobkit_id])
    store.add_note(store.get(me.jobkit_id), f"{why}; cancelled by jobkit")
    return f"chain: {label} cancelled, {why}"
