"""Reading the registry: one job, the jobs a typed id names, listings, history."""

from __future__ import annotations

import fnmatch
import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from jobkit.core.lifecycle import FINAL_STATES, SUBMITTING, State, source_of
from jobkit.registry.db import Database, RegistryError, corrupt
from jobkit.registry.record import JobRecord, StateChange
from jobkit.registry.rows import (
    LAZY_DECODERS,
    SELECT_LISTING,
    SELECT_RECORDS,
    record_from_listing_row,
    record_from_row,
    shared_holder,
)
from jobkit.registry.texts import ListingTexts

ID_PREFIX = "jk"
_IDS_PER_QUERY = 500
"""Ids bound in one `IN (...)` query (SQLite allows 32766 variables; this stays far below)."""


class RegistryReader(Database):
    """The registry's queries (Store adds the writes)."""

    def _records(
        self, where: str = "", params: Sequence[Any] = (), *, texts: bool = True
    ) -> list[JobRecord]:
        """Records of `SELECT_RECORDS` + where (WHERE / ORDER BY / LIMIT clauses); with
        texts=False their spec and script are read when first asked (registry/texts.py)."""
        rows = self._read(f"{SELECT_RECORDS if texts else SELECT_LISTING} {where}", params)
        try:
            if not texts:
                loader = ListingTexts(self, [row[0] for row in rows], self.path, LAZY_DECODERS)
                return [record_from_listing_row(row, loader) for row in rows]
            records = [record_from_row(row) for row in rows]
        except (ValueError, TypeError, KeyError) as err:  # a damaged value: never shown
            raise corrupt(self.path, f"a job's row cannot be read: {type(err).__name__}") from None
        self._fill_shared_texts(records)
        return records

    def texts_of(self, jobkit_ids: Sequence[str]) -> dict[str, tuple[str, str]]:
        """jobkit id -> (spec_json, script) of these jobs (a sweep task's shared ones
        resolved); a job not in the registry is left out."""
        found = self._stored_texts(jobkit_ids)
        holders = {h for spec_json, _ in found.values() if (h := shared_holder(spec_json))}
        if not holders:
            return found
        shared = {**self._stored_texts(sorted(holders - found.keys())), **found}
        for jobkit_id, (spec_json, _) in found.items():
            holder = shared_holder(spec_json)
            if holder is None:
                continue
            if holder not in shared or shared_holder(shared[holder][0]) is not None:
                raise corrupt(self.path, "a sweep task's spec and script cannot be found")
            found[jobkit_id] = shared[holder]
        return found

    def _stored_texts(self, jobkit_ids: Sequence[str]) -> dict[str, tuple[str, str]]:
        """job_texts' rows of these jobs, as stored."""
        found: dict[str, tuple[str, str]] = {}
        for start in range(0, len(jobkit_ids), _IDS_PER_QUERY):
            chunk = list(jobkit_ids[start : start + _IDS_PER_QUERY])
            marks = ", ".join("?" for _ in chunk)
            for row in self._read(
                f"SELECT jobkit_id, spec_json, script FROM job_texts WHERE jobkit_id IN ({marks})",
                chunk,
            ):
                found[row[0]] = (row[1], row[2])
        return found

    def _fill_shared_texts(self, records: Sequence[JobRecord]) -> None:
        """Rows that share another job's spec and script (a sweep's tasks, rows.shared_texts)
        get them, one copy for all (kept for this reader's life: a holder's texts are
        written once): one query for every new holder."""
        holders = {h for r in records if (h := shared_holder(r.spec_json)) is not None}
        if not holders:
            return
        found: dict[str, tuple[str, str]] = self.__dict__.setdefault("_shared_texts", {})
        wanted = sorted(holders - found.keys())  # a holder's texts never change: kept
        for start in range(0, len(wanted), _IDS_PER_QUERY):
            chunk = wanted[start : start + _IDS_PER_QUERY]
            marks = ", ".join("?" for _ in chunk)
            for row in self._read(
                f"SELECT jobkit_id, spec_json, script FROM job_texts WHERE jobkit_id IN ({marks})",
                chunk,
            ):
                found[row[0]] = (row[1], row[2])
        for record in records:
            holder = shared_holder(record.spec_json)
            if holder is None:  # the holder itself takes the same copy as its sweep
                holder = record.jobkit_id if record.jobkit_id in found else None
            if holder is None:
                continue
            if holder not in found or shared_holder(found[holder][0]) is not None:
                raise corrupt(self.path, "a sweep task's spec and script cannot be found")
            # As record_from_row builds it: the frozen record's fields set directly.
            record.__dict__["spec_json"], record.__dict__["script"] = found[holder]

    def records_of(self, jobkit_ids: Sequence[str]) -> list[JobRecord]:
        """The jobs with these ids, in the order given (RegistryError if one is missing)."""
        by_id: dict[str, JobRecord] = {}
        for start in range(0, len(jobkit_ids), _IDS_PER_QUERY):
            chunk = list(jobkit_ids[start : start + _IDS_PER_QUERY])
            marks = ", ".join("?" for _ in chunk)
            for record in self._records(f"WHERE jobkit_id IN ({marks})", chunk):
                by_id[record.jobkit_id] = record
        missing = [i for i in jobkit_ids if i not in by_id]
        if missing:
            raise RegistryError(f"no tracked job {missing[0]!r}")
        return [by_id[i] for i in jobkit_ids]

    def get(self, jobkit_id: str) -> JobRecord:
        """The job with this exact jobkit id; RegistryError if none."""
        records = self._records("WHERE jobkit_id = ?", (jobkit_id,))
        if not records:
            raise RegistryError(f"no tracked job {jobkit_id!r}")
        return records[0]

    def find(self, text: str) -> list[JobRecord]:
        """Jobs whose jobkit id starts with text, or whose scheduler id matches it.

        A scheduler id matches exactly, or by its number alone (`123` finds `123;cluster`
        and `123.server`); an array task id `123_4` finds the array `123`.
        """
        records = self._records("WHERE jobkit_id = ? OR scheduler_id = ?", (text, text))
        exact = [r for r in records if r.jobkit_id == text]
        if exact:
            return exact[:1]
        if records:
            return records
        if text.lower().startswith(ID_PREFIX):
            tasks = self.sweep(text)
            if tasks:
                return tasks
        if text and (text.lower().startswith(ID_PREFIX) or ID_PREFIX.startswith(text.lower())):
            # Any prefix of a jobkit id, `jk` and `j` too (which match every job: ambiguous,
            # not "no tracked job").
            escaped = text.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_")
            records = self._records(
                "WHERE jobkit_id LIKE ? ESCAPE '\\' ORDER BY created_at DESC", (escaped + "%",)
            )
        if not records:
            base = scheduler_base_id(text)
            records = self._records(
                "WHERE scheduler_id = ? OR scheduler_id LIKE ? OR scheduler_id LIKE ?"
                " ORDER BY created_at DESC",
                (base, base + ";%", base + ".%"),
            )
        return records

    def sweep(self, sweep_id: str) -> list[JobRecord]:
        """The jobs of a sweep (every attempt of every task), by task, then attempt."""
        records = self._records("WHERE sweep_id = ?", (sweep_id,))
        return sorted(records, key=lambda r: (_task_number(r.task), r.attempt, r.created_at))

    def attempts(self, run_id: str) -> list[JobRecord]:
        """The attempts of a run, first to last (a row older than runs is its own run)."""
        return self._records(
            "WHERE run_id = ? OR (run_id IS NULL AND jobkit_id = ?)"
            " ORDER BY attempt, created_at, row_order",
            (run_id, run_id),
        )

    def bad_nodes(
        self,
        backend: str | None = None,
        *,
        now: float | None = None,
        include_expired: bool = False,
    ) -> list[BadNode]:
        """The user's excluded nodes (docs/nodes.md), soonest to expire last."""
        at = time.time() if now is None else now
        where: list[str] = []
        params: list[Any] = []
        if backend is not None:
            where.append("backend = ?")
            params.append(backend)
        if not include_expired:
            where.append("until > ?")
            params.append(at)
        sql = "SELECT backend, cluster, node, reason, jobkit_id, added_at, until FROM bad_nodes"
        if where:
            sql += f" WHERE {' AND '.join(where)}"
        rows = self._read(sql + " ORDER BY backend, cluster, node", params)
        return [BadNode(*tuple(row)) for row in rows]

    def newest(self) -> JobRecord | None:
        """The most recently created job, or None when the registry is empty."""
        records = self._records("ORDER BY created_at DESC, row_order DESC LIMIT 1")
        return records[0] if records else None

    def list_jobs(
        self,
        *,
        since: float | None = None,
        recent_final_s: float | None = 86_400.0,
        name_glob: str | None = None,
        states: Sequence[str] | None = None,
        backend: str | None = None,
        limit: int | None = None,
        now: float | None = None,
        texts: bool = True,
    ) -> list[JobRecord]:
        """Jobs newest first.

        since: created at or after this time. recent_final_s: keep unfinished jobs plus
        those that ended within this many seconds (None: every job). texts=False: each
        record's spec and script are read when first asked (registry/texts.py).
        """
        at = time.time() if now is None else now
        where: list[str] = []
        params: list[Any] = []
        if since is not None:
            where.append("created_at >= ?")
            params.append(since)
        if recent_final_s is not None:
            finals = sorted(s.value for s in FINAL_STATES)
            marks = ",".join("?" for _ in finals)
            where.append(
                f"(state NOT IN ({marks}) OR COALESCE(final_at, observed_at, created_at) >= ?)"
            )
            params.extend(finals)
            params.append(at - recent_final_s)
        if states:
            where.append(f"state IN ({','.join('?' for _ in states)})")
            params.extend(states)
        if backend:
            where.append("backend = ?")
            params.append(backend)
        sql = f"WHERE {' AND '.join(where)}" if where else ""
        records = self._records(
            f"{sql} ORDER BY created_at DESC, row_order DESC", params, texts=texts
        )
        if name_glob:
            records = [r for r in records if fnmatch.fnmatchcase(r.name, name_glob)]
        return records[:limit] if limit is not None else records

    def submitting(self) -> list[JobRecord]:
        """Jobs whose intent is recorded but whose scheduler id is not (yet) known: those
        SUBMITTING, and those whose submission's fate is unknown (UNKNOWN, no id)."""
        return self._records(
            "WHERE state = ? OR (state = ? AND scheduler_id IS NULL) ORDER BY created_at",
            (SUBMITTING, State.UNKNOWN.value),
        )

    def history(self, jobkit_id: str) -> list[StateChange]:
        """A job's state changes, oldest first."""
        rows = self._read(
            "SELECT at, state, raw_state, source, reason FROM state_history"
            " WHERE jobkit_id = ? ORDER BY seq",
            (jobkit_id,),
        )
        return [
            StateChange(r["at"], r["state"], r["raw_state"], source_of(r["source"]), r["reason"])
            for r in rows
        ]

    def count(self) -> int:
        """How many jobs the registry holds."""
        return int(self._read("SELECT COUNT(*) FROM jobs")[0][0])


@dataclass(frozen=True)
class BadNode:
    """A node on the user's exclude list (table bad_nodes)."""

    backend: str
    cluster: str
    """'' when the backend has one cluster."""
    node: str
    reason: str
    jobkit_id: str | None
    """The job that showed the node bad (None: added by hand)."""
    added_at: float
    until: float


def _task_number(task: str | None) -> int:
    return int(task) if task is not None and task.isdigit() else -1


def scheduler_base_id(text: str) -> str:
    """The scheduler id without cluster (`;c`), server (`.s`) or array task (`_4`, `[4]`)."""
    base = text.split(";", 1)[0].split(".", 1)[0]
    if "[" in base:
        base = base.split("[", 1)[0]
    if "_" in base and base.split("_", 1)[0].isdigit():
        base = base.split("_", 1)[0]
    return base
