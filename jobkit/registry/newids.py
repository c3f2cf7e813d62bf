"""New jobkit ids (`jk` + 5 base-36 characters) and submission tokens, checked unused
against the registry's jobs and sweeps."""

from __future__ import annotations

import secrets
import sqlite3

from jobkit.registry.reader import ID_PREFIX

ID_ALPHABET = "0123456789abcdefghijklmnopqrstuvwxyz"


ID_LENGTH = 5
"""Characters after `jk`: 36**5 = 60 million ids; a collision is retried."""


IDS_PER_QUERY = 500
"""Ids bound in one `IN (...)` query (SQLite allows 32766 variables; this stays far below)."""


def new_jobkit_id() -> str:
    """A fresh id: `jk` and 5 base-36 characters; never all digits, so never a scheduler id."""
    number = secrets.randbelow(len(ID_ALPHABET) ** ID_LENGTH)  # one draw, not one a letter
    letters = []
    for _ in range(ID_LENGTH):
        number, digit = divmod(number, len(ID_ALPHABET))
        letters.append(ID_ALPHABET[digit])
    return ID_PREFIX + "".join(letters)


def new_token() -> str:
    """A unique submission token (goes into the job's comment for adoption)."""
    return secrets.token_hex(8)


def unused_id(conn: sqlite3.Connection) -> str:
    """A new jobkit id that is neither a job's id nor a sweep's."""
    while True:
        candidate = new_jobkit_id()
        taken = conn.execute(
            "SELECT 1 FROM jobs WHERE jobkit_id = ? OR sweep_id = ? LIMIT 1",
            (candidate, candidate),
        ).fetchone()
        if taken is None:
            return candidate


def unused_ids(conn: sqlite3.Connection, count: int, *, avoid: set[str]) -> list[str]:
    """`count` new jobkit ids, none a job's id or a sweep's (nor in `avoid`), each checked
    by the hundred rather than one query each."""
    chosen: list[str] = []
    taken = set(avoid)
    while len(chosen) < count:
        fresh = {new_jobkit_id() for _ in range(count - len(chosen))} - taken
        wanted = sorted(fresh)
        for start in range(0, len(wanted), IDS_PER_QUERY):
            chunk = wanted[start : start + IDS_PER_QUERY]
            marks = ", ".join("?" for _ in chunk)
            found = conn.execute(
                f"SELECT jobkit_id FROM jobs WHERE jobkit_id IN ({marks})"
                f" UNION SELECT sweep_id FROM jobs WHERE sweep_id IN ({marks})",
                (*chunk, *chunk),
            )
            fresh -= {row[0] for row in found}
        chosen.extend(sorted(fresh))
        taken |= fresh
    return chosen
