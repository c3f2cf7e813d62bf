"""`jobkit nodes`: the bad nodes later jobs leave out (docs/nodes.md); --add, --clear."""

from __future__ import annotations

import json
import time
from collections.abc import Sequence
from typing import Any

import click

from jobkit.core.errors import UsageError
from jobkit.manager.badnodes import HAND_REASON
from jobkit.registry.store import BadNode, Store

COLUMNS = ("NODE", "BACKEND", "WHY", "JOB", "SINCE", "UNTIL")


@click.command()
@click.option("--add", "add", metavar="NODE", multiple=True, help="Put NODE on the list.")
@click.option(
    "--for", "hold", metavar="TIME", default="6h", show_default=True, help="With --add: how long."
)
@click.option("--reason", metavar="TEXT", help="With --add: why (shown in the list).")
@click.option("--clear", "clear", metavar="NODE", multiple=True, help="Take NODE off the list.")
@click.option("--clear-all", is_flag=True, help="Empty the list (of --backend, if given).")
@click.option(
    "--backend",
    metavar="NAME",
    help="Only this backend's nodes (--add: default the first built-in backend that chooses"
    " its nodes).",
)
@click.option("--cluster", default="", metavar="NAME", help="With --add: the Slurm cluster.")
@click.option("--all", "show_all", is_flag=True, help="Also the entries that have expired.")
@click.option("--json", "as_json", is_flag=True, help="Print the list as JSON.")
def nodes(
    add: tuple[str, ...],
    hold: str,
    reason: str | None,
    clear: tuple[str, ...],
    clear_all: bool,
    backend: str | None,
    cluster: str,
    show_all: bool,
    as_json: bool,
) -> int:
    """Bad nodes your later jobs leave out: the list, --add, --clear.

    A node goes on the list after a NODE_FAIL or a failed preflight that names it. Later
    Slurm jobs are submitted with --exclude=NODES (Grid Engine: -l h=!NODE) until its entry
    expires (scheduler.exclude_bad_nodes_for, default 6h). --add NODE --for 2h puts one on
    the list by hand; --clear NODE or --clear-all takes them off (docs/nodes.md).
    """
    if sum(map(bool, (add, clear, clear_all))) > 1:
        raise UsageError("give one of --add, --clear, --clear-all")
    now = time.time()
    with Store() as store:
        if add:
            _add(store, add, hold, reason, backend or _first_node_chooser(), cluster, now)
        elif clear or clear_all:
            removed = store.clear_bad_nodes(backend, list(clear) if clear else None)
            if not as_json:
                click.echo(f"removed {removed} entr{'y' if removed == 1 else 'ies'}")
        rows = store.bad_nodes(backend, now=now, include_expired=show_all)
    if as_json:
        click.echo(json.dumps([_as_dict(r, now) for r in rows], indent=2))
    elif rows:
        click.echo(_table(rows, now))
    elif not (add or clear or clear_all):
        click.echo("no bad nodes: every node is used", err=True)
    return 0


def _add(
    store: Store,
    names: Sequence[str],
    hold: str,
    reason: str | None,
    backend: str,
    cluster: str,
    now: float,
) -> None:
    """Check the values, then add the nodes."""
    from jobkit.backends.registry import is_known
    from jobkit.core.units import parse_period
    from jobkit.manager.badnodes import NODE_NAME

    for name in names:
        if not NODE_NAME.match(name):
            raise UsageError(f"--add {name!r}: not a node name (letters, digits, . _ -)")
    try:
        seconds = parse_period(hold)
    except ValueError as err:
        raise UsageError(f"--for {hold!r}: {err}") from None
    if seconds <= 0:
        raise UsageError(f"--for {hold!r}: must be longer than 0 (use --clear to remove)")
    if not is_known(backend):
        raise UsageError(f"--backend {backend!r}: not a backend")
    if cluster and not NODE_NAME.match(cluster):
        raise UsageError(f"--cluster {cluster!r}: not a cluster name")
    text = " ".join((reason or HAND_REASON).split())
    if not text:
        raise UsageError("--reason: give some text")
    store.add_bad_nodes(
        backend, cluster, list(names), reason=text, jobkit_id=None, until=now + seconds, now=now
    )


def _as_dict(row: BadNode, now: float) -> dict[str, Any]:
    return {
        "node": row.node,
        "backend": row.backend,
        "cluster": row.cluster,
        "reason": row.reason,
        "jobkit_id": row.jobkit_id,
        "added_at": row.added_at,
        "until": row.until,
        "expired": row.until <= now,
    }


def _table(rows: Sequence[BadNode], now: float) -> str:
    """The list, one node a line, columns padded."""
    from jobkit.core.units import format_age
    from jobkit.manager.badnodes import clock

    cells = [COLUMNS]
    for row in rows:
        left = row.until - now
        until = clock(row.until, now) + (
            f" (in {format_age(round(left / 60) * 60)})" if left > 0 else " (expired)"
        )
        where = f"{row.backend}/{row.cluster}" if row.cluster else row.backend
        cells.append(
            (
                row.node,
                where,
                row.reason or HAND_REASON,
                row.jobkit_id or "-",
                f"{format_age(now - row.added_at)} ago",
                until,
            )
        )
    widths = [max(len(c[i]) for c in cells) for i in range(len(COLUMNS))]
    return "\n".join(
        "  ".join(c.ljust(w) for c, w in zip(cell, widths, strict=True)).rstrip() for cell in cells
    )


def _first_node_chooser() -> str:
    """The first built-in backend whose scheduler chooses its nodes (Backend.chooses_nodes)."""
    from jobkit.backends.registry import backend_class, builtin_names

    return next(name for name in builtin_names() if backend_class(name).chooses_nodes)
