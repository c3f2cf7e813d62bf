"""The user's list of bad nodes written (docs/nodes.md): nodes put on it until a time, and
taken off. Store has these writes; RegistryReader reads the list."""

from __future__ import annotations

import sqlite3
import time
from collections.abc import Iterable
from typing import Any

from jobkit.registry.reader import RegistryReader


class BadNodeWrites(RegistryReader):
    """The bad-node writes of Store (its base: one connection, one `_write` path)."""

    def add_bad_nodes(
        self,
        backend: str,
        cluster: str | None,
        nodes: Iterable[str],
        *,
        reason: str,
        jobkit_id: str | None,
        until: float,
        now: float | None = None,
    ) -> None:
        """Put nodes on the exclude list until `until` (a node already there gets the later
        end, this reason and job)."""
        at = time.time() if now is None else now
        rows = [(backend, cluster or "", node, reason, jobkit_id, at, until) for node in nodes]

        def insert(conn: sqlite3.Connection) -> None:
            conn.executemany(
                "INSERT INTO bad_nodes (backend, cluster, node, reason, jobkit_id, added_at,"
                " until) VALUES (?, ?, ?, ?, ?, ?, ?)"
                " ON CONFLICT (backend, cluster, node) DO UPDATE SET reason = excluded.reason,"
                " jobkit_id = excluded.jobkit_id, added_at = excluded.added_at,"
                " until = MAX(until, excluded.until)",
                rows,
            )

        self._write(insert)

    def clear_bad_nodes(
        self, backend: str | None = None, nodes: Iterable[str] | None = None
    ) -> int:
        """Take nodes off the list (all of them when `nodes` is None); returns how many."""
        where: list[str] = []
        params: list[Any] = []
        if backend is not None:
            where.append("backend = ?")
            params.append(backend)
        if nodes is not None:
            names = list(nodes)
            where.append(f"node IN ({','.join('?' for _ in names)})")
            params.extend(names)
        sql = "DELETE FROM bad_nodes" + (f" WHERE {' AND '.join(where)}" if where else "")

        def delete(conn: sqlite3.Connection) -> int:
            return int(conn.execute(sql, params).rowcount)

        return self._write(delete)
