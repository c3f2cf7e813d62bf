"""Slurm host and task list expansion (pure, no torch)."""

from __future__ import annotations

import pytest

from train.env.hostlist import (
    HostlistError,
    expand_hostlist,
    expand_tasks_per_node,
    unique_in_order,
)


@pytest.mark.parametrize(
    ("text", "hosts"),
    [
        ("n[1-2]", ["n1", "n2"]),
        ("gpu-[01-03,07],cpu5", ["gpu-01", "gpu-02", "gpu-03", "gpu-07", "cpu5"]),
        ("a[1-2]-b[3-4]", ["a1-b3", "a1-b4", "a2-b3", "a2-b4"]),
        ("n[8-10]", ["n8", "n9", "n10"]),
        ("n[098-101]", ["n098", "n099", "n100", "n101"]),
        ("rack[1-2]n[01,03]", ["rack1n01", "rack1n03", "rack2n01", "rack2n03"]),
        ("login", ["login"]),
        ("x1,y[2],z", ["x1", "y2", "z"]),
        ("  n[1-2] ", ["n1", "n2"]),
        ("", []),
    ],
)
def test_expand_hostlist(text: str, hosts: list[str]) -> None:
    assert expand_hostlist(text) == hosts


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("n[1-", "unbalanced '[' in host list 'n[1-'"),
        ("n]1", "unbalanced ']' in host list 'n]1'"),
        ("n[3-1]", "range '3-1' goes downwards in host list 'n[3-1]'"),
        ("n[a]", "bad range 'a' in host list 'n[a]'"),
        ("n[1,,2]", "bad range '' in host list 'n[1,,2]'"),
        ("n1,,n2", "empty entry in host list 'n1,,n2'"),
        ("n[[1]]", "nested '[' in host list 'n[[1]]'"),
    ],
)
def test_bad_hostlist(text: str, message: str) -> None:
    with pytest.raises(HostlistError) as caught:
        expand_hostlist(text)
    assert str(caught.value) == message


@pytest.mark.parametrize(
    ("text", "counts"),
    [("2(x3),1", [2, 2, 2, 1]), ("4", [4]), ("1(x2)", [1, 1]), ("3,1(x2),2", [3, 1, 1, 2])],
)
def test_tasks_per_node(text: str, counts: list[int]) -> None:
    assert expand_tasks_per_node(text) == counts


@pytest.mark.parametrize("text", ["2(x)", "x", "", "2(3)"])
def test_bad_tasks_per_node(text: str) -> None:
    with pytest.raises(HostlistError, match="bad tasks-per-node entry"):
        expand_tasks_per_node(text)


def test_unique_in_order() -> None:
    assert unique_in_order(["c2", "c2", "c1", "c2", "c3"]) == ["c2", "c1", "c3"]
