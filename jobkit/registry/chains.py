"""The registry's record of chains (table `chain_links`, migration 4; docs/chains.md).

A chain is a list of jobs, each (but the first) started after the one before it with a
condition: "ok", "any" or "fail". This module stores and reads the links; what a link means
for a stage (waiting, satisfied, broken) is decided by jobkit/chain/.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Sequence
from dataclasses import dataclass

from jobkit.registry.reader import RegistryReader
from jobkit.registry.store import Store

CHAIN_PREFIX = "ch"


@dataclass(frozen=True)
class Link:
    """One stage of a chain: its job, place, and what it waits for."""

    jobkit_id: str
    chain_id: str
    position: int
    after_id: str | None
    condition: str | None
    keep_broken: bool


def add_link(
    store: Store,
    jobkit_id: str,
    *,
    after_id: str | None,
    condition: str | None,
    keep_broken: bool = False,
) -> Link:
    """Record `jobkit_id` as the stage after `after_id` (None: the first stage of a new
    chain). A job already in a chain keeps its link. `after_id` not yet in a chain (a job
    submitted before, named with --after) becomes that chain's first stage."""

    def insert(conn: sqlite3.Connection) -> Link:
        mine = conn.execute(
            "SELECT * FROM chain_links WHERE jobkit_id = ?", (jobkit_id,)
        ).fetchone()
        if mine is not None:
            return _link(mine)
        if after_id is None:
            chain_id, position = CHAIN_PREFIX + jobkit_id.removeprefix("jk"), 0
        else:
            before = conn.execute(
                "SELECT chain_id, position FROM chain_links WHERE jobkit_id = ?", (after_id,)
            ).fetchone()
            if before is None:
                chain_id, position = CHAIN_PREFIX + after_id.removeprefix("jk"), 1
                conn.execute(
                    "INSERT INTO chain_links (jobkit_id, chain_id, position) VALUES (?, ?, 0)",
                    (after_id, chain_id),
                )
            else:
                chain_id, position = before["chain_id"], before["position"] + 1
        conn.execute(
            "INSERT INTO chain_links"
            " (jobkit_id, chain_id, position, after_id, condition, keep_broken)"
            " VALUES (?, ?, ?, ?, ?, ?)",
            (jobkit_id, chain_id, position, after_id, condition, int(keep_broken)),
        )
        return Link(jobkit_id, chain_id, position, after_id, condition, keep_broken)

    return store._write(insert)


def _link(row: sqlite3.Row) -> Link:
    return Link(
        row["jobkit_id"],
        row["chain_id"],
        row["position"],
        row["after_id"],
        row["condition"],
        bool(row["keep_broken"]),
    )


def chains_of(store: RegistryReader, jobkit_ids: Sequence[str]) -> dict[str, list[Link]]:
    """chain id -> its links in order, for every chain holding one of these jobs."""
    if not jobkit_ids or not store._read("SELECT 1 FROM chain_links LIMIT 1"):
        return {}  # no chain at all (most registries): one cheap query, not one per 500 jobs
    found: dict[str, list[Link]] = {}
    ids = list(dict.fromkeys(jobkit_ids))
    for start in range(0, len(ids), 500):
        part = ids[start : start + 500]
        marks = ", ".join("?" for _ in part)
        rows = store._read(
            "SELECT * FROM chain_links WHERE chain_id IN"
            f" (SELECT chain_id FROM chain_links WHERE jobkit_id IN ({marks}))"
            " ORDER BY chain_id, position",
            part,
        )
        for row in rows:
            found.setdefault(row["chain_id"], [])
            link = _link(row)
            if link not in found[row["chain_id"]]:
                found[row["chain_id"]].append(link)
    return found


def chain(store: RegistryReader, chain_id: str) -> list[Link]:
    """The links of one chain, in order ([] for an unknown id)."""
    rows = store._read(
        "SELECT * FROM chain_links WHERE chain_id = ? ORDER BY position", (chain_id,)
    )
    return [_link(row) for row in rows]
