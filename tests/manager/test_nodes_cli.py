"""`jobkit nodes` (jobkit/cli/nodes.py) on a registry of the test's own, and the spec key
scheduler.exclude_bad_nodes_for; no scheduler involved."""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest

from jobkit.registry.store import Store
from tests.manager.helpers import Invoke


def test_add_list_json_and_clear(jobkit: Invoke, jobkit_home: Path) -> None:
    empty = jobkit("nodes")
    assert (empty.code, empty.out) == (0, "")
    assert empty.err == "no bad nodes: every node is used\n"

    added = jobkit("nodes", "--add", "n2", "--for", "2h", "--reason", "ECC errors")
    assert added.code == 0, added.err
    header, row = added.out.splitlines()
    assert header.split() == ["NODE", "BACKEND", "WHY", "JOB", "SINCE", "UNTIL"]
    assert row.split()[:4] == ["n2", "slurm", "ECC", "errors"]
    assert row.endswith("(in 2h)") or row.endswith("(in 1h)")

    jobkit("nodes", "--add", "n1", "--backend", "sge", "--for", "30m")
    listed = json.loads(jobkit("nodes", "--json").out)
    assert [(r["node"], r["backend"], r["reason"], r["jobkit_id"]) for r in listed] == [
        ("n1", "sge", "added by hand", None),
        ("n2", "slurm", "ECC errors", None),
    ]
    assert 7100 < listed[1]["until"] - time.time() <= 7200 and not listed[1]["expired"]

    only_sge = json.loads(jobkit("nodes", "--backend", "sge", "--json").out)
    assert [r["node"] for r in only_sge] == ["n1"]

    cleared = jobkit("nodes", "--clear", "n2")
    assert cleared.code == 0 and cleared.out.splitlines()[0] == "removed 1 entry"
    assert [r["node"] for r in json.loads(jobkit("nodes", "--json").out)] == ["n1"]
    assert jobkit("nodes", "--clear-all").out.splitlines() == ["removed 1 entry"]
    assert json.loads(jobkit("nodes", "--json").out) == []


def test_expired_entries_shown_with_all(jobkit: Invoke, jobkit_home: Path) -> None:
    with Store(jobkit_home) as store:
        now = time.time()
        store.add_bad_nodes(
            "slurm", "", ["n1"], reason="NODE_FAIL", jobkit_id="jkold01", until=now - 60
        )
    assert json.loads(jobkit("nodes", "--json").out) == []
    shown = jobkit("nodes", "--all")
    assert shown.code == 0
    assert shown.out.splitlines()[1].split()[:4] == ["n1", "slurm", "NODE_FAIL", "jkold01"]
    assert shown.out.rstrip().endswith("(expired)")


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (("--add", "n2;rm"), "jobkit: --add 'n2;rm': not a node name (letters, digits, . _ -)"),
        (
            ("--add", "n2", "--for", "soon"),
            "jobkit: --for 'soon': must be 0 (off) or a time like 6h, 30m, 1d, minutes or"
            " HH:MM:SS (got 'soon')",
        ),
        (
            ("--add", "n2", "--for", "0"),
            "jobkit: --for '0': must be longer than 0 (use --clear to remove)",
        ),
        (("--add", "n2", "--backend", "lsf"), "jobkit: --backend 'lsf': not a backend"),
        (("--add", "n2", "--clear", "n1"), "jobkit: give one of --add, --clear, --clear-all"),
    ],
)
def test_bad_input_is_one_line(jobkit: Invoke, args: tuple[str, ...], message: str) -> None:
    result = jobkit("nodes", *args)
    assert result.code == 2
    assert result.err.strip() == message


def test_spec_key_accepts_periods_and_zero(workdir: Path, jobkit: Invoke) -> None:
    from jobkit.spec.load import load_spec

    spec = workdir / "job.yaml"
    for text, seconds in (("0", 0), ("30m", 1800), ("01:00:00", 3600), ("90", 5400)):
        spec.write_text(
            "name: k\nbackend: slurm\nrun:\n  command: [true]\n"
            f"scheduler:\n  exclude_bad_nodes_for: {text}\n"
        )
        assert load_spec(spec).spec.scheduler.exclude_bad_nodes_for == seconds, text
    spec.write_text(
        "name: k\nbackend: slurm\nrun:\n  command: [true]\n"
        "scheduler:\n  exclude_bad_nodes_for: soon\n"
    )
    bad = jobkit("render", str(spec))
    assert bad.code == 2
    assert "job.yaml:6: scheduler.exclude_bad_nodes_for: must be 0 (off) or a time" in bad.err
