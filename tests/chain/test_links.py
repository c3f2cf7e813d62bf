"""`--after ID[:COND]` read, and whether a stage can start after a state (pure)."""

from __future__ import annotations

import pytest

from jobkit.chain.links import AfterArg, can_start, chain_condition, parse_after
from jobkit.core.errors import UsageError


@pytest.mark.parametrize(
    ("text", "wanted"),
    [
        ("jk12345", AfterArg("jk12345", "ok")),
        ("2901:any", AfterArg("2901", "any")),
        ("2901:fail", AfterArg("2901", "fail")),
        ("jkab:ok", AfterArg("jkab", "ok")),
    ],
)
def test_after_is_read(text: str, wanted: AfterArg) -> None:
    assert parse_after(text) == wanted


@pytest.mark.parametrize("text", ["2901:later", ":ok", "2901:"])
def test_bad_after_is_one_line(text: str) -> None:
    with pytest.raises(UsageError) as caught:
        parse_after(text)
    assert caught.value.show() == (
        f"--after {text!r}: give ID or ID:COND with COND one of ok, any, fail"
    )


def test_bad_chain_word() -> None:
    with pytest.raises(UsageError, match=r"--chain 'b.yaml': one of ok, any, fail"):
        chain_condition("b.yaml")


@pytest.mark.parametrize(
    ("condition", "state", "wanted"),
    [
        ("ok", "SUCCEEDED", True),
        ("ok", "FAILED", False),
        ("ok", "TIMEOUT", False),
        ("ok", "CANCELLED", False),
        ("ok", "RUNNING", None),
        ("ok", "QUEUED", None),
        ("ok", "SUBMITTING", None),
        ("any", "FAILED", True),
        ("any", "SUCCEEDED", True),
        ("any", "PREEMPTED", None),
        ("fail", "SUCCEEDED", False),
        ("fail", "OUT_OF_MEMORY", True),
    ],
)
def test_can_start(condition: str, state: str, wanted: bool | None) -> None:
    assert can_start(condition, state) is wanted
