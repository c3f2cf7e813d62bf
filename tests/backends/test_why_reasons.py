"""Slurm's reason codes in plain words (jobkit/backends/slurm/reasons.py), PBS Pro comments
and Grid Engine messages, and the status view's one-line "why". Pure functions: the codes are
Slurm's own strings (job_state_reason.c); the real scheduler runs in test_why_cluster.py."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from jobkit.backends.pbs.parse import parse_pro_json
from jobkit.backends.pbs.waiting import NO_COMMENT, explain_comment, pbs_wait_info
from jobkit.backends.sge.waiting import INFO_OFF_NOTE, parse_qstat_j, sge_wait_info
from jobkit.backends.slurm.reasons import REASONS, explain, family_entry
from jobkit.backends.slurm.waiting import Run, timeline
from jobkit.backends.waiting import UNKNOWN_REASON_HINT, one_line_why, parse_ctime
from jobkit.core.states import State

DATA = Path(__file__).parent / "data"
FACTS = {"job": "42", "partition": "gpu", "qos": "short"}


@pytest.mark.parametrize(
    ("code", "words", "fix", "never"),
    [
        ("Resources", "in use by other jobs", "resources.time", False),
        ("Priority", "higher priority", "sprio -j 42", False),
        ("Dependency", "scheduler.dependency", "scontrol update jobid=42 dependency=", False),
        ("DependencyNeverSatisfied", "can no longer satisfy", "jobkit cancel 42", True),
        ("BeginTime", "begin time", "scontrol update jobid=42 starttime=now", False),
        ("JobHeldUser", "its owner held it", "`scontrol release 42`", False),
        ("JobHeldAdmin", "an administrator held it", "ask your administrators", False),
        (
            "QOSMaxWallDurationPerJobLimit",
            "above its QOS's MaxWall",
            "sacctmgr show qos short",
            True,
        ),
        ("PartitionTimeLimit", "partition's MaxTime", "scontrol show partition gpu", True),
        ("PartitionNodeLimit", "MinNodes..MaxNodes", "--set resources.nodes=", True),
        ("Reservation", "advance reservation", "scontrol show reservation", False),
        ("BadConstraints", "constraints", "--set resources.constraint=", True),
        ("None", "no reason yet", "wait a scheduling cycle", False),
    ],
)
def test_exact_codes(code: str, words: str, fix: str, never: bool) -> None:
    found = explain(code, FACTS)
    assert (found.code, found.known, found.never) == (code, True, never)
    assert words in found.meaning and fix in found.fix, found


@pytest.mark.parametrize(
    ("code", "words", "fix", "never"),
    [
        ("AssocGrpGRES", "association's jobs together already use all the GPUs", "wait", False),
        ("AssocGrpCpuLimit", "all the CPUs its group limit", "resources.cpus_per_task", False),
        ("QOSGrpNodeLimit", "its QOS's jobs together already use all the nodes", "wait", False),
        ("AssocMaxJobsLimit", "you already have as many running jobs", "wait", False),
        ("QOSMaxJobsPerUserLimit", "as many running jobs", "sacctmgr show qos short", False),
        ("QOSMaxCpuPerUserLimit", "your other jobs already use all the CPUs", "wait", False),
        ("AssocMaxCpuPerJobLimit", "more CPUs per job", "jobkit cancel 42", True),
        ("AssocMaxNodePerJobLimit", "more nodes per job", "resources.nodes", True),
        ("QOSMaxGRESPerNode", "more GPUs (generic resources) per node", "gpus_per_node", True),
        ("QOSMaxNodeMinutesPerJob", "nodes x time per job", "resources.time", True),
        ("QOSMinGRES", "fewer GPUs (generic resources) than its QOS's minimum", "more", True),
        (
            "AssocGrpCPUMinutesLimit",
            "used up its budget of minutes of CPUs",
            "administrators",
            False,
        ),
        ("QOSGrpGRESRunMinutes", "running jobs together hold", "wait for them", False),
        ("MaxJobsPerAccount", "your account already has as many running jobs", "wait", False),
    ],
)
def test_limit_families_match_by_their_parts(code: str, words: str, fix: str, never: bool) -> None:
    found = explain(code, FACTS)
    assert found.known and found.never is never, found
    assert words in found.meaning and fix in found.fix, found
    assert code not in REASONS, "a family member must be matched by its parts, not listed"


def test_req_node_not_avail_keeps_slurms_node_list() -> None:
    found = explain("ReqNodeNotAvail, UnavailableNodes:n[1-2]")
    assert found.meaning.endswith("(UnavailableNodes:n[1-2])")
    assert "sinfo -R" in found.fix and not found.never


@pytest.mark.parametrize(
    ("text", "words", "never"),
    [
        ("launch failed requeued held", "could not launch it", True),
        (
            "Nodes required for job are DOWN, DRAINED or reserved for jobs in higher priority"
            " partitions",
            "down, drained, or reserved",
            False,
        ),
    ],
)
def test_sentences_slurm_writes_instead_of_a_code(text: str, words: str, never: bool) -> None:
    found = explain(text, FACTS)
    assert words in found.meaning and found.never is never


def test_unknown_code_is_shown_verbatim_with_where_to_look() -> None:
    found = explain("SomethingNewIn25")
    assert not found.known and found.fix == ""
    assert found.meaning == f"SomethingNewIn25 {UNKNOWN_REASON_HINT}"
    assert "man squeue" in UNKNOWN_REASON_HINT
    assert family_entry("AssocSomething") is None


def test_status_one_line_translates_the_recorded_reason() -> None:
    line = one_line_why("slurm", "QUEUED", "PartitionTimeLimit", "77")
    assert line is not None and line.startswith("WILL NEVER START as it is: its time limit")
    assert "scontrol update jobid=77 timelimit=" in line
    held = one_line_why("submitit", "HELD", "JobHeldUser", "78")
    assert held == (
        "its owner held it (sbatch --hold or `scontrol hold`) (fix: `scontrol release 78`)"
    )
    assert one_line_why("slurm", "RUNNING", "None", "77") is None
    assert one_line_why("local", "QUEUED", "whatever", "x") is None


def test_timeline_of_a_requeued_job_shows_each_run() -> None:
    """The runs sacct --duplicates gives (values as the real cluster printed them)."""
    base = parse_ctime("Wed Nov 25 11:41:43 2026")
    assert base is not None
    runs = [
        Run("278", "REQUEUED", base, base, base, base + 10, "0:0", "n1"),
        Run("278", "PENDING", base + 10, base + 131, None, None, "0:0", None),
    ]
    events = [(e.at - base, e.what, e.detail) for e in timeline(runs)]
    assert events == [
        (0, "submitted", ""),
        (0, "eligible", ""),
        (0, "started", "on n1"),
        (10, "ended", "REQUEUED, exit 0:0"),
        (10, "requeued", "run 2 queued"),
        (131, "eligible", ""),
    ]


def test_pbs_pro_comments_from_a_recorded_sample() -> None:
    """PBS Pro cannot run here: tests/backends/data/pbspro_qstat_f_F_json_x.json is a
    hand-written sample of its `qstat -f -F json -x` (see data/README.md)."""
    jobs = parse_pro_json((DATA / "pbspro_qstat_f_F_json_x.json").read_text())
    queued = pbs_wait_info(jobs["1002.pbs01"], "1002.pbs01")
    assert (queued.state, queued.waiting) == (State.QUEUED, True)
    (reason,) = queued.reasons
    assert reason.explanation.code.startswith("Not Running: Insufficient amount of resource")
    assert reason.explanation.meaning == "the resources it asks for are in use by other jobs now"
    assert [e.what for e in queued.timeline] == ["submitted", "eligible"]
    held = pbs_wait_info(jobs["1003.pbs01"], "1003.pbs01")
    assert held.state is State.HELD and held.reasons[0].explanation.fix.startswith("`qrls 1003")
    running = pbs_wait_info(jobs["1001.pbs01"], "1001.pbs01")
    assert not running.waiting and not running.reasons
    assert [e.what for e in running.timeline] == ["submitted", "eligible", "started"]
    never = explain_comment("Can Never Run: Insufficient amount of queue resource: ncpus", "9")
    assert never.never and "jobkit cancel 9" in never.fix
    no_comment = pbs_wait_info({"job_state": "Q"}, "5", "torque")
    assert no_comment.notes == (NO_COMMENT,)


def test_grid_engine_info_off_is_said() -> None:
    """The text qstat -j prints with schedd_job_info false (SGE 8.1's sge_qstat.c)."""
    text = (
        "==============================================================\n"
        "job_number:                 12\n"
        "submission_time:            Wed Nov 25 11:42:40 2026\n"
        "scheduling info:            (Collecting of scheduler job information is turned off)\n"
    )
    block = parse_qstat_j(text)["12"]
    info = sge_wait_info("12", State.QUEUED, "qw", block)
    assert info.notes == (INFO_OFF_NOTE,) and info.reasons == ()
    assert json.dumps([e.what for e in info.timeline]) == '["submitted"]'
