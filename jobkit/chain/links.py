"""What a chain's link means: `--after ID[:ok|any|fail]` read, and whether a stage waiting
with a condition can still start once its previous stage reached a state (pure)."""

from __future__ import annotations

from typing import NamedTuple

from jobkit.core.errors import UsageError
from jobkit.core.states import FINAL_STATES, State

CONDITIONS = ("ok", "any", "fail")
"""ok: after the previous stage succeeded; any: after it ended; fail: after it failed."""
NEVER_WORDS = "WILL NEVER START"


class AfterArg(NamedTuple):
    """`--after ID[:COND]` as given."""

    job: str
    condition: str


def parse_after(text: str) -> AfterArg:
    """`jk12345`, `2901:any` -> (id, condition); UsageError in one line otherwise."""
    job, condition = text.rsplit(":", 1) if ":" in text else (text, "ok")
    if condition not in CONDITIONS or not job.strip():
        raise UsageError(
            f"--after {text!r}: give ID or ID:COND with COND one of {', '.join(CONDITIONS)}"
        )
    return AfterArg(job.strip(), condition)


def chain_condition(value: str) -> str:
    """`--chain` / `--chain any`: the condition between consecutive stages."""
    if value not in CONDITIONS:
        raise UsageError(f"--chain {value!r}: one of {', '.join(CONDITIONS)}")
    return value


def can_start(condition: str, state: str) -> bool | None:
    """Whether a stage waiting with `condition` starts after one in `state`: None while that
    state is not final (or not a state jobkit knows), then True or False."""
    try:
        known = State(state)
    except ValueError:
        return None
    if known not in FINAL_STATES:
        return None
    if condition == "any":
        return True
    succeeded = known == State.SUCCEEDED
    return succeeded if condition == "ok" else not succeeded
