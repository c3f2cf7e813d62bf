"""`jobkit status [ID...]`: tracked jobs, refreshed with one query per backend.

Exit codes: 0; 2 for an unknown or ambiguous id or a bad option; 3 when a scheduler query
failed (the last known states are shown, with a warning saying how old they are).
"""

from __future__ import annotations

import json
import re
import sys
import time
from collections.abc import Sequence
from datetime import datetime

import click

from jobkit.core.errors import UsageError
from jobkit.core.lifecycle import SUBMITTING, State
from jobkit.registry.store import JobRecord, Store

EXIT_STALE = 3
DEFAULT_RECENT_S = 86_400.0
_SINCE = re.compile(r"^(?P<n>\d+(?:\.\d+)?)\s*(?P<unit>s|m|h|d|w)$", re.IGNORECASE)
_UNIT_S = {"s": 1, "m": 60, "h": 3600, "d": 86400, "w": 604800}
STATE_NAMES = (*(s.value for s in State), SUBMITTING)


def parse_since(text: str, now: float) -> float:
    """`90s`, `30m`, `2h`, `1d`, `1w`, or an ISO date/time -> epoch seconds."""
    match = _SINCE.match(text.strip())
    if match:
        return now - float(match["n"]) * _UNIT_S[match["unit"].lower()]
    try:
        return datetime.fromisoformat(text.strip()).timestamp()
    except ValueError:
        raise UsageError(
            f"--since {text!r}: give an age like 2h, 30m, 1d or an ISO time like 2024-05-01T12:00"
        ) from None


def parse_states(values: Sequence[str]) -> list[str]:
    """--state values (repeatable, comma-separated, any case) checked against the states."""
    states: list[str] = []
    for value in values:
        for word in value.split(","):
            name = word.strip().upper()
            if not name:
                continue
            if name not in STATE_NAMES:
                raise UsageError(f"--state {word!r}: not a state (one of {', '.join(STATE_NAMES)})")
            states.append(name)
    return states


@click.command()
@click.argument("ids", nargs=-1, metavar="[ID]...")
@click.option("--all", "show_all", is_flag=True, help="Every tracked job, however old.")
@click.option("--since", metavar="AGE|TIME", help="Jobs submitted since: 2h, 1d, or ISO time.")
@click.option("--name", "name_glob", metavar="GLOB", help="Only jobs whose name matches GLOB.")
@click.option(
    "--state",
    "states",
    multiple=True,
    metavar="STATE",
    help="Only jobs in this state (repeatable).",
)
@click.option("--backend", metavar="NAME", help="Only jobs of this backend.")
@click.option("--last", is_flag=True, help="The newest job (detail view).")
@click.option("--expand", is_flag=True, help="Show each sweep's tasks under its line.")
@click.option("--json", "as_json", is_flag=True, help="Print JSON instead of text.")
@click.option(
    "--watch",
    type=float,
    is_flag=False,
    flag_value=5.0,
    default=None,
    metavar="[SECONDS]",
    help="Refresh every SECONDS (default 5) until interrupted.",
)
def status(
    ids: tuple[str, ...],
    show_all: bool,
    since: str | None,
    name_glob: str | None,
    states: tuple[str, ...],
    backend: str | None,
    last: bool,
    expand: bool,
    as_json: bool,
    watch: float | None,
) -> int:
    """List tracked jobs (unfinished ones and those ended in the last 24 h), or detail IDs.

    An ID is a jobkit id (or a unique prefix of one), the scheduler's id, or a sweep's id
    (its tasks). A sweep is one line (--expand: its tasks too); a run resubmitted shows its
    newest attempt (--all: every attempt). One query per backend refreshes the states.
    Exit 3 when a scheduler query failed: the last known states are shown, with a warning
    giving their age.
    """
    from jobkit.core.display import printable_lines

    wanted_states = parse_states(states)
    if watch is not None and watch <= 0:
        raise UsageError(f"--watch {watch:g}: must be a positive number of seconds")
    with Store() as store:

        def snapshot() -> tuple[str, int]:
            return _snapshot(
                store,
                ids,
                show_all,
                since,
                name_glob,
                wanted_states,
                backend,
                last,
                as_json,
                expand,
            )

        if watch is None:
            text, code = snapshot()
            if text:
                click.echo(text if as_json else printable_lines(text))
            return code
        tty = sys.stdout.isatty()
        while True:
            text, code = snapshot()
            if tty:
                click.clear()
                click.echo(f"every {watch:g}s  {time.strftime('%H:%M:%S')}  (Ctrl-C to stop)")
            elif not as_json:
                click.echo(f"--- {time.strftime('%Y-%m-%d %H:%M:%S')}")
            click.echo(text if as_json else printable_lines(text), nl=True)
            sys.stdout.flush()
            time.sleep(watch)


def _snapshot(
    store: Store,
    ids: Sequence[str],
    show_all: bool,
    since: str | None,
    name_glob: str | None,
    states: Sequence[str],
    backend: str | None,
    last: bool,
    as_json: bool,
    expand: bool = False,
) -> tuple[str, int]:
    """Refresh and render once; returns the text and the exit code."""
    from jobkit.cli.jobview import detail_dict, render_detail, render_table
    from jobkit.cli.sweepview import listing_text, render_listing, sweep_groups
    from jobkit.cli.watch import resubmit_ended_runs
    from jobkit.doctor.cache import with_diagnoses, with_diagnosis
    from jobkit.hang.stall import with_stall
    from jobkit.manager.reconcile import reconcile_submissions
    from jobkit.manager.refresh import refresh
    from jobkit.registry.ids import resolve_jobs, with_last
    from jobkit.registry.selection import named_sweeps, newest_attempts

    now = time.time()
    code = 0
    reconciled = reconcile_submissions(store, now=now)
    for err in reconciled.errors:
        click.echo(f"jobkit: warning: could not reconcile submissions: {err.show()}", err=True)
        code = EXIT_STALE
    detail = bool(ids) or last
    sweeps: dict[str, list[JobRecord]] = {}  # sweep ids named: their rows (docs/sweeps.md)
    jobs_named = 0
    if detail:
        sweeps, job_ids = named_sweeps(store, with_last(store, ids, last))
        records = resolve_jobs(store, job_ids)
        jobs_named = len(records)
        records += [r for rows in sweeps.values() for r in rows]
    else:
        records = store.list_jobs(
            since=parse_since(since, now) if since else None,
            recent_final_s=None if (show_all or since) else DEFAULT_RECENT_S,
            name_glob=name_glob,
            backend=backend,
            texts=False,  # specs and scripts read only for the rows that need them
        )
    result = refresh(store, records, now=now)
    for failure in result.failures:
        click.echo(f"jobkit: {failure.warning(now)}", err=True)
        code = EXIT_STALE
    shown: list[JobRecord] = result.records
    # Bad nodes onto the exclude list, then runs resubmitted (docs/nodes.md, docs/runs.md).
    shown += resubmit_ended_runs(store, records, result.records)
    if states and not detail:
        shown = [r for r in shown if r.state in states]
    shown = with_diagnoses(store, shown)  # failed jobs: the cached one-line diagnosis
    if sweeps:
        shown, groups = shown[:jobs_named], sweep_groups(shown[jobs_named:], sweeps)
        if as_json:
            data = [
                with_stall(detail_dict(r, store.history(r.jobkit_id), store), r, now) for r in shown
            ]
            data += [group.to_dict({}) for group in groups]
            return json.dumps(data, indent=2), code
        blocks = [render_detail(r, store.history(r.jobkit_id), now, store) for r in shown]
        blocks += [render_listing(groups, now, expand=True, all_attempts=show_all)]
        return "\n\n".join(blocks), code
    if detail:
        if as_json:
            data = [
                with_stall(detail_dict(r, store.history(r.jobkit_id), store), r, now) for r in shown
            ]
            return json.dumps(data, indent=2), code
        blocks = [render_detail(r, store.history(r.jobkit_id), now, store) for r in shown]
        return "\n\n".join(blocks), code
    if not show_all:
        shown = newest_attempts(shown)  # a resubmitted run: its newest attempt
    if as_json:
        data = [with_diagnosis(with_stall(r.to_dict(), r, now), r) for r in shown]
        return json.dumps(data, indent=2), code
    if not shown:
        hint = "" if show_all else " (use --all for older ones)"
        click.echo(f"jobkit: no tracked jobs to show{hint}", err=True)
        return "", code
    from jobkit.chain.view import chains_text, split_chains

    chains, shown = split_chains(store, shown)  # a chain is one line (docs/chains.md)
    if any(r.sweep_id is not None or r.attempt > 1 for r in shown):
        text = listing_text(store, shown, now, expand=expand, all_attempts=show_all)
    else:
        text = render_table(shown, now) if shown else ""
    return "\n".join(part for part in (text, chains_text(chains)) if part), code
