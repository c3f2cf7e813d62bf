"""The registry's tables and the mapping between a `jobs` row and a JobRecord.

The migrations are numbered SQL scripts, applied in order (jobkit/registry/db.py); a shipped
one never changes. The row mapping is derived from JobRecord's fields: a column has the
field's name, and only the columns below that are not plain values are listed (JSON,
paths, state sources), so a new field is added in one place (and its column in a new
migration).
"""

from __future__ import annotations

import functools
import json
from collections.abc import Callable, Mapping, Sequence
from dataclasses import fields
from pathlib import Path
from typing import Any

from jobkit.core.lifecycle import source_of
from jobkit.registry.record import JobRecord
from jobkit.registry.texts import LOADER_KEY, RAW_PREFIX, ListingTexts

SCHEMA_VERSION = 4

MIGRATIONS: dict[int, str] = {
    1: """
    CREATE TABLE jobs (
        jobkit_id     TEXT PRIMARY KEY,
        backend       TEXT NOT NULL,
        scheduler_id  TEXT,
        name          TEXT NOT NULL,
        spec_json     TEXT NOT NULL,
        script        TEXT NOT NULL,
        submit_argv   TEXT NOT NULL DEFAULT '[]',
        created_at    REAL NOT NULL,
        submitted_at  REAL,
        workdir       TEXT NOT NULL,
        job_dir       TEXT NOT NULL,
        log_paths     TEXT NOT NULL DEFAULT '{}',
        token         TEXT NOT NULL UNIQUE,
        state         TEXT NOT NULL,
        raw_state     TEXT,
        state_source  TEXT,
        reason        TEXT,
        observed_at   REAL,
        final_at      REAL,
        exit_code     INTEGER,
        signal        INTEGER,
        requeues      INTEGER NOT NULL DEFAULT 0,
        nodes         TEXT,
        elapsed_s     REAL,
        max_rss       TEXT,
        cpu_time      TEXT,
        extra         TEXT NOT NULL DEFAULT '{}'
    );
    CREATE INDEX jobs_scheduler_id ON jobs (scheduler_id);
    CREATE INDEX jobs_created_at ON jobs (created_at);
    CREATE INDEX jobs_state ON jobs (state);
    CREATE TABLE state_history (
        seq        INTEGER PRIMARY KEY AUTOINCREMENT,
        jobkit_id  TEXT NOT NULL REFERENCES jobs (jobkit_id) ON DELETE CASCADE,
        at         REAL NOT NULL,
        state      TEXT NOT NULL,
        raw_state  TEXT,
        source     TEXT,
        reason     TEXT
    );
    CREATE INDEX state_history_job ON state_history (jobkit_id, seq);
    """,
    # The spec and the script (7 kB a job) move out of `jobs`: every state update rewrote
    # them with the row (a status of 10,000 jobs spent 0.3 s of its 1.3 s there). jobs keeps
    # both columns, empty: SQLite before 3.35 cannot drop a column. Jobs are read through
    # the view job_rows, which joins them back.
    2: """
    CREATE TABLE job_texts (
        jobkit_id  TEXT PRIMARY KEY REFERENCES jobs (jobkit_id) ON DELETE CASCADE,
        spec_json  TEXT NOT NULL,
        script     TEXT NOT NULL
    );
    INSERT INTO job_texts (jobkit_id, spec_json, script)
        SELECT jobkit_id, spec_json, script FROM jobs;
    UPDATE jobs SET spec_json = '', script = '';
    CREATE VIEW job_rows AS
    SELECT j.jobkit_id,
           j.backend,
           j.scheduler_id,
           j.name,
           j.submit_argv,
           j.created_at,
           j.submitted_at,
           j.workdir,
           j.job_dir,
           j.log_paths,
           j.token,
           j.state,
           j.raw_state,
           j.state_source,
           j.reason,
           j.observed_at,
           j.final_at,
           j.exit_code,
           j.signal,
           j.requeues,
           j.nodes,
           j.elapsed_s,
           j.max_rss,
           j.cpu_time,
           j.extra,
           t.spec_json,
           t.script,
           j.rowid AS row_order
    FROM jobs AS j JOIN job_texts AS t ON t.jobkit_id = j.jobkit_id;
    """,
    # Runs that outlive their jobs, sweeps, and the user's list of bad nodes (issue 16): a
    # row is one attempt of a run (run_id: the run's first attempt; NULL before this
    # migration, meaning the row's own id), possibly one task of a sweep (its rows share
    # sweep_id, an id of its own).
    3: """
    ALTER TABLE jobs ADD COLUMN run_id TEXT;
    ALTER TABLE jobs ADD COLUMN attempt INTEGER NOT NULL DEFAULT 1;
    ALTER TABLE jobs ADD COLUMN sweep_id TEXT;
    ALTER TABLE jobs ADD COLUMN task TEXT;
    CREATE INDEX jobs_run_id ON jobs (run_id);
    CREATE INDEX jobs_sweep_id ON jobs (sweep_id);
    CREATE TABLE bad_nodes (
        backend    TEXT NOT NULL,
        cluster    TEXT NOT NULL DEFAULT '',
        node       TEXT NOT NULL,
        reason     TEXT NOT NULL,
        jobkit_id  TEXT,
        added_at   REAL NOT NULL,
        until      REAL NOT NULL,
        PRIMARY KEY (backend, cluster, node)
    );
    DROP VIEW job_rows;
    CREATE VIEW job_rows AS
    SELECT j.jobkit_id,
           j.backend,
           j.scheduler_id,
           j.name,
           j.submit_argv,
           j.created_at,
           j.submitted_at,
           j.workdir,
           j.job_dir,
           j.log_paths,
           j.token,
           j.state,
           j.raw_state,
           j.state_source,
           j.reason,
           j.observed_at,
           j.final_at,
           j.exit_code,
           j.signal,
           j.requeues,
           j.nodes,
           j.elapsed_s,
           j.max_rss,
           j.cpu_time,
           j.extra,
           j.run_id,
           j.attempt,
           j.sweep_id,
           j.task,
           t.spec_json,
           t.script,
           j.rowid AS row_order
    FROM jobs AS j JOIN job_texts AS t ON t.jobkit_id = j.jobkit_id;
    """,
    # Chains (issue 29, docs/chains.md): one row per stage; the first stage's after_id is
    # NULL. A table of its own, so that reading jobs stays as it was.
    4: """
    CREATE TABLE chain_links (
        jobkit_id    TEXT PRIMARY KEY REFERENCES jobs (jobkit_id) ON DELETE CASCADE,
        chain_id     TEXT NOT NULL,
        position     INTEGER NOT NULL,
        after_id     TEXT,
        condition    TEXT,
        keep_broken  INTEGER NOT NULL DEFAULT 0
    );
    CREATE INDEX chain_links_chain ON chain_links (chain_id, position);
    """,
}

COLUMNS = tuple(f.name for f in fields(JobRecord))
"""The columns of the view `job_rows` a JobRecord is read from, in JobRecord's order."""
SELECT_RECORDS = f"SELECT {', '.join(COLUMNS)} FROM job_rows"
"""The start of every query that reads whole records (WHERE / ORDER BY follow)."""
TEXT_COLUMNS = ("spec_json", "script")
"""Stored in `job_texts` (migration 2); `jobs` keeps these columns empty."""
SHARED_TEXTS_MARK = "@"
"""A `job_texts.spec_json` of `@<jobkit id>` (never JSON) with an empty script: this job's
spec and script are that job's (the tasks of a sweep share the first task's; the script holds
every task's words, so N copies would be N times N)."""


def shared_texts(holder: str) -> str:
    """The spec_json of a row whose spec and script are stored with job `holder`."""
    return f"{SHARED_TEXTS_MARK}{holder}"


def shared_holder(spec_json: str) -> str | None:
    """The job whose texts a row shares (None: the row holds its own)."""
    return spec_json[1:] if spec_json.startswith(SHARED_TEXTS_MARK) else None


JSON_COLUMNS = frozenset({"submit_argv", "log_paths", "extra"})
"""Stored as JSON text."""
PATH_COLUMNS = frozenset({"workdir", "job_dir"})
"""Stored as text, read back as Path."""


@functools.lru_cache(maxsize=1024)
def _shared_path(text: str) -> Path:
    """Path(text), made once per distinct folder (jobs submitted from one folder share it)."""
    return Path(text)


_DECODE: dict[str, Callable[[Any], Any]] = {
    **{name: json.loads for name in JSON_COLUMNS},
    "workdir": _shared_path,
    "job_dir": Path,
    "state_source": source_of,
}
_DECODERS = tuple((i, _DECODE[name]) for i, name in enumerate(COLUMNS) if name in _DECODE)


def record_from_row(row: Sequence[Any]) -> JobRecord:
    """The JobRecord of a row of SELECT_RECORDS."""
    values = list(row)
    for index, decode in _DECODERS:
        values[index] = decode(values[index])
    record = object.__new__(JobRecord)
    # As JobRecord(*values) would, without the frozen __init__'s setattr per field (a status
    # reads 10,000 records).
    record.__dict__.update(zip(COLUMNS, values, strict=True))
    return record


LISTING_COLUMNS = tuple(name for name in COLUMNS if name not in TEXT_COLUMNS)
"""The columns of a listing read without its texts (registry/texts.py)."""
SELECT_LISTING = f"SELECT {', '.join(LISTING_COLUMNS)} FROM job_rows"
"""SELECT_RECORDS without spec_json and script."""
LAZY_DECODED = (*JSON_COLUMNS, "job_dir")
"""Decoded when first asked in a listing: a status table shows none of them."""
LAZY_DECODERS = {name: _DECODE[name] for name in LAZY_DECODED}
if any(hasattr(JobRecord, name) for name in (*LAZY_DECODED, *TEXT_COLUMNS)):
    # A class attribute (a plain default) would be found before JobRecord.__getattr__.
    raise TypeError("a lazily read JobRecord field must have no default but a factory")
_LISTING_KEYS = tuple(
    RAW_PREFIX + name if name in LAZY_DECODED else name for name in LISTING_COLUMNS
)
_LISTING_DECODERS = tuple(
    (i, _DECODE[name])
    for i, name in enumerate(LISTING_COLUMNS)
    if name in _DECODE and name not in LAZY_DECODED
)


def record_from_listing_row(row: Sequence[Any], lazy: ListingTexts) -> JobRecord:
    """The JobRecord of a row of SELECT_LISTING: its spec and script are read, and its JSON
    columns and job folder decoded, when first asked (registry/texts.py)."""
    values = list(row)
    for index, decode in _LISTING_DECODERS:
        values[index] = decode(values[index])
    record = object.__new__(JobRecord)
    record.__dict__.update(zip(_LISTING_KEYS, values, strict=True))
    record.__dict__[LOADER_KEY] = lazy
    return record


def encode(name: str, value: Any) -> Any:
    """A JobRecord field's value as its column stores it."""
    if value is None:
        return None
    if name in JSON_COLUMNS:
        return json.dumps(value, sort_keys=True)
    if name in PATH_COLUMNS or name == "state_source":
        return str(value)
    return value


def encode_columns(values: Mapping[str, Any]) -> dict[str, Any]:
    """Field values (by name) as their columns store them."""
    return {name: encode(name, value) for name, value in values.items()}


def insert_job(record: JobRecord) -> list[tuple[str, tuple[Any, ...]]]:
    """The statements that store a new record: its `jobs` row and its `job_texts` row."""
    row = encode_columns({name: getattr(record, name) for name in COLUMNS})
    texts = tuple(row[name] for name in TEXT_COLUMNS)
    row.update(dict.fromkeys(TEXT_COLUMNS, ""))
    marks = ", ".join("?" for _ in COLUMNS)
    return [
        (f"INSERT INTO jobs ({', '.join(COLUMNS)}) VALUES ({marks})", tuple(row.values())),
        (
            f"INSERT INTO job_texts (jobkit_id, {', '.join(TEXT_COLUMNS)}) VALUES (?, ?, ?)",
            (record.jobkit_id, *texts),
        ),
    ]


def update_sql(names: Sequence[str]) -> str:
    """`UPDATE jobs SET a = ?, b = ? WHERE jobkit_id = ?` for these (non-text) columns."""
    unknown = [name for name in names if name not in COLUMNS or name in TEXT_COLUMNS]
    if unknown:
        raise ValueError(f"not a column of jobs: {unknown[0]!r}")
    return f"UPDATE jobs SET {', '.join(f'{name} = ?' for name in names)} WHERE jobkit_id = ?"
