"""Bad nodes left out (jobkit/manager/badnodes.py): the decisions on registry rows (pure), the
list kept in a real registry, and the exclusion options of Slurm and Grid Engine."""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest

from jobkit.backends.sge.exclude import exclude_args as sge_exclude_args
from jobkit.backends.slurm.backend import SlurmBackend
from jobkit.backends.slurm.exclude import exclude_args, partition_nodes
from jobkit.core.units import format_period, parse_period
from jobkit.manager.badnodes import (
    DEFAULT_HOLD_S,
    Exclusion,
    failure_of,
    hold_seconds,
    newly_failed,
    note_bad_nodes,
    plan_exclusion,
    submit_note,
)
from jobkit.registry.record import JobRecord, new_record
from jobkit.registry.store import BadNode, Store

NOW = 1_800_000_000.0
names = SlurmBackend.node_names


def _record(
    state: str, *, nodes: str | None = "n2", reason: str | None = None, **kw: object
) -> JobRecord:
    spec = kw.pop("spec", {"scheduler": {"exclude_bad_nodes_for": 3600}})
    values: dict[str, object] = {
        "jobkit_id": "jkabc12",
        "scheduler_id": "123",
        "backend": "slurm",
        "name": "job",
        "state": state,
        "nodes": nodes,
        "reason": reason,
        "created_at": NOW - 600,
        "workdir": Path("/w"),
        "job_dir": Path("/w/jobs/jkabc12"),
        "token": "t",
        "spec_json": json.dumps(spec),
        "script": "",
        **kw,
    }
    return new_record(**values)


def _bad(node: str, *, jobkit_id: str | None = "jkabc12", reason: str = "NODE_FAIL") -> BadNode:
    return BadNode("slurm", "", node, reason, jobkit_id, NOW - 7200, NOW + 3600)


# -- what a failed job shows --------------------------------------------------------------


def test_node_fail_names_every_node_of_the_job() -> None:
    failure = failure_of(_record("NODE_FAIL", nodes="n[1-2]"), names)
    assert failure is not None
    assert (failure.nodes, failure.reason, failure.hold_s) == (("n1", "n2"), "NODE_FAIL", 3600)
    assert (failure.backend, failure.cluster, failure.jobkit_id) == ("slurm", "", "jkabc12")


def test_preflight_failure_names_the_node_in_its_line() -> None:
    """The line as the in-job check writes it (train/preflight.py, the run folder's
    `failure` file that refresh makes the job's reason)."""
    from train.preflight import Node

    line = Node(1, "n2", 2).line("cannot reach n1:15123 (timed out after 5 s)")
    failure = failure_of(_record("FAILED", nodes="n[1-2]", reason=line), names)
    assert failure is not None
    assert failure.nodes == ("n2",)
    assert failure.reason == "preflight: cannot reach n1:15123 (timed out after 5 s)"
    passed = Node(0, "n1", 2).line_ok("no GPU requested")
    assert failure_of(_record("FAILED", reason=passed), names) is None


@pytest.mark.parametrize(
    "reason",
    [
        None,
        "exit code 1",
        "jobkit preflight: failed after 3 s: the program is not started",  # no node named
        "jobkit preflight: node 0 (n1) ok: 0 GPUs",  # a passed check
        "jobkit: env.venv: /x/.venv/bin/activate not found on n1",
    ],
)
def test_other_failures_name_no_node(reason: str | None) -> None:
    assert failure_of(_record("FAILED", reason=reason), names) is None


def test_other_ends_other_backends_and_switched_off_name_none() -> None:
    assert failure_of(_record("TIMEOUT"), names) is None
    assert failure_of(_record("NODE_FAIL", backend="ssh"), names) is None
    off = _record("NODE_FAIL", spec={"scheduler": {"exclude_bad_nodes_for": 0}})
    assert failure_of(off, names) is None
    assert failure_of(_record("NODE_FAIL", nodes=None), names) is None


def test_cluster_comes_from_the_scheduler_id() -> None:
    failure = failure_of(_record("NODE_FAIL", scheduler_id="123;west"), names)
    assert failure is not None and failure.cluster == "west"


def test_hold_of_an_older_spec_is_the_default() -> None:
    assert hold_seconds({}) == DEFAULT_HOLD_S == 6 * 3600
    assert hold_seconds({"scheduler": {"exclude_bad_nodes_for": "30m"}}) == 1800


def test_only_rows_that_changed_to_a_failure_in_this_refresh() -> None:
    before = [_record("RUNNING"), _record("FAILED"), _record("RUNNING"), _record("RUNNING")]
    after = [_record("NODE_FAIL"), _record("FAILED"), _record("SUCCEEDED"), _record("FAILED")]
    assert newly_failed(before, after) == [after[0], after[3]]


# -- what a submission leaves out -----------------------------------------------------------


def test_exclusion_names_why_and_until() -> None:
    got = plan_exclusion(
        [_bad("n2")], backend="slurm", excludes=True, usable=("n1", "n2"), needed=1, now=NOW
    )
    until = time.strftime("%H:%M", time.localtime(NOW + 3600))
    assert got.nodes == ("n2",)
    assert got.note == f"excluding n2 (NODE_FAIL of jkabc12 2h ago, until {until}): jobkit nodes"


def test_exclusion_that_leaves_too_few_nodes_is_dropped_with_a_warning() -> None:
    got = plan_exclusion(
        [_bad("n2")], backend="slurm", excludes=True, usable=("n1", "n2"), needed=2, now=NOW
    )
    assert got.nodes == ()
    assert got.note is not None and got.note.startswith("warning: not excluding n2 (")
    assert "needs 2 node(s) and only 1 of the partition's 2 would be left" in got.note


def test_nodes_outside_the_partition_are_not_named() -> None:
    got = plan_exclusion(
        [_bad("gpu7")], backend="slurm", excludes=True, usable=("n1", "n2"), needed=1, now=NOW
    )
    assert got == Exclusion()


def test_backend_that_cannot_exclude_warns() -> None:
    got = plan_exclusion(
        [_bad("n2", jobkit_id=None, reason="flaky")],
        backend="pbs",
        excludes=False,
        usable=None,
        needed=1,
        now=NOW,
    )
    assert got.nodes == ()
    assert got.note is not None
    assert got.note.startswith("warning: the pbs backend cannot leave nodes out; not excluding")
    assert "n2 (flaky: added by hand 2h ago" in got.note


def test_submit_note_read_back_from_extra() -> None:
    facts = Exclusion(("n2",), "excluding n2 (...): jobkit nodes").facts()
    record = _record("QUEUED", extra=facts)
    assert submit_note(record) == "excluding n2 (...): jobkit nodes"
    assert submit_note(_record("QUEUED")) is None
    assert Exclusion().facts() == {}


def test_scheduler_options() -> None:
    assert exclude_args(["n1", "n2"]) == ["--exclude=n1,n2"]
    assert exclude_args([]) == []
    assert sge_exclude_args(["n1", "n2"]) == ["-l", "h=!n1&!n2"]
    sinfo = "n1|norequeue\nn1|debug*\nn2|norequeue\nn2|debug*\nn3|gpu\n"
    assert partition_nodes(sinfo, None) == ("n1", "n2")
    assert partition_nodes(sinfo, "gpu") == ("n3",)
    assert partition_nodes(sinfo, "gpu,norequeue") == ("n1", "n2", "n3")


def test_periods() -> None:
    assert [parse_period(v) for v in ("6h", "30m", "1d", "0", 0, 5, "01:00:00")] == [
        21600,
        1800,
        86400,
        0,
        0,
        300,
        3600,
    ]
    assert [format_period(s) for s in (21600, 5400, 86400, 45)] == ["6h", "90m", "1d", "45s"]
    with pytest.raises(ValueError, match="must be 0 \\(off\\) or a time like 6h"):
        parse_period("soon")


# -- the list kept in the registry ------------------------------------------------------------


def test_status_refresh_puts_the_nodes_on_the_list(jobkit_home: Path) -> None:
    preflight = "jobkit preflight: node 0 (n1): cannot reach n1:15123 (connection refused)"
    before = [
        _record("RUNNING"),
        _record("RUNNING", jobkit_id="jkother"),
        _record("RUNNING", jobkit_id="jkpre01"),
    ]
    after = [
        _record("NODE_FAIL", nodes="n2"),
        _record("SUCCEEDED", jobkit_id="jkother"),
        _record("FAILED", jobkit_id="jkpre01", nodes="n1", reason=preflight),
    ]
    with Store(jobkit_home) as store:
        lines = note_bad_nodes(store, before, after, now=NOW)
        rows = store.bad_nodes("slurm", now=NOW)
        assert note_bad_nodes(store, after, after, now=NOW) == []  # nothing changed: no work
    until = time.strftime("%H:%M", time.localtime(NOW + 3600))
    assert lines == [
        f"n2 left out of later slurm jobs until {until} (NODE_FAIL of jkabc12): jobkit nodes",
        f"n1 left out of later slurm jobs until {until} (failed preflight of jkpre01):"
        " jobkit nodes",
    ]
    assert [(r.node, r.reason, r.jobkit_id, r.until) for r in rows] == [
        ("n1", "preflight: cannot reach n1:15123 (connection refused)", "jkpre01", NOW + 3600),
        ("n2", "NODE_FAIL", "jkabc12", NOW + 3600),
    ]
