"""Stacks of real processes dumped by py-spy (jobkit/hang/stacks.py, through the local
backend) and compared (compare.py): the rank whose stack differs is named."""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Iterator, Sequence
from pathlib import Path

import pytest

from jobkit.backends.base import TrackedJob
from jobkit.backends.local import LocalBackend
from jobkit.hang.compare import compare, summary
from jobkit.hang.stacks import REMOTE_SCRIPT, Frame, RankStack, collect_stacks, parse_dumps
from jobkit.hang.stall import RankBeat

# A "rank": it parks in the function its argument names and says so.
RANK_PROGRAM = """
import sys, time
def all_reduce():
    print("ready", flush=True); time.sleep(600)
def load_batch():
    print("ready", flush=True); time.sleep(600)
{"all_reduce": all_reduce, "load_batch": load_batch}[sys.argv[1]]()
"""


@pytest.fixture
def ranks() -> Iterator[list[subprocess.Popen[str]]]:
    started: list[subprocess.Popen[str]] = []
    yield started
    for proc in started:
        proc.kill()
        proc.wait()


def start(ranks: list[subprocess.Popen[str]], *places: str) -> list[RankBeat]:
    """One process per place; the heartbeats that point at them."""
    for place in places:
        proc = subprocess.Popen(
            [sys.executable, "-c", RANK_PROGRAM, place], stdout=subprocess.PIPE, text=True
        )
        ranks.append(proc)
        assert proc.stdout is not None and proc.stdout.readline() == "ready\n"
    return [
        RankBeat(rank, 9, 0.0, "train", proc.pid, "here", "here", 0, sys.executable)
        for rank, proc in enumerate(ranks)
    ]


def job(tmp_path: Path) -> TrackedJob:
    return TrackedJob("jk1", "jk1", tmp_path, tmp_path)


def test_the_rank_outside_the_majority_is_named(
    tmp_path: Path, ranks: list[subprocess.Popen[str]]
) -> None:
    beats = start(ranks, "all_reduce", "load_batch", "all_reduce")
    stacks = collect_stacks(LocalBackend(), job(tmp_path), beats)
    assert [(s.rank, s.error) for s in stacks] == [(0, None), (1, None), (2, None)]
    assert [s.frames[0].function for s in stacks] == ["all_reduce", "load_batch", "all_reduce"]
    assert stacks[1].frames[-1].function == "<module>"  # innermost first, down to the script
    found = compare(stacks)
    assert found.odd_ranks == (1,) and found.majority is not None
    assert found.majority.ranks == (0, 2) and found.majority.collective == "all_reduce"
    assert summary(stacks[1].frames).startswith("load_batch (<string>:")


def test_two_ranks_the_one_not_waiting_in_a_collective_is_named(
    tmp_path: Path, ranks: list[subprocess.Popen[str]]
) -> None:
    """One against one: the rank in all_reduce waits for the other, which is the stuck one."""
    beats = start(ranks, "all_reduce", "load_batch")
    found = compare(collect_stacks(LocalBackend(), job(tmp_path), beats))
    assert found.odd_ranks == (1,), found


def test_same_place_everywhere_names_no_rank(
    tmp_path: Path, ranks: list[subprocess.Popen[str]]
) -> None:
    beats = start(ranks, "load_batch", "load_batch")
    found = compare(collect_stacks(LocalBackend(), job(tmp_path), beats))
    assert found.odd_ranks == () and len(found.groups) == 1


def test_a_rank_whose_process_is_gone_says_so(
    tmp_path: Path, ranks: list[subprocess.Popen[str]]
) -> None:
    beats = start(ranks, "load_batch")
    ranks[0].kill()
    ranks[0].wait()
    (stack,) = collect_stacks(LocalBackend(), job(tmp_path), beats)
    assert stack.frames == () and stack.error is not None
    assert f"pid {beats[0].pid}" in stack.error, stack.error


class AsNobody(LocalBackend):
    """The local backend, but py-spy runs as user nobody: ptrace of root's process refused."""

    def on_node_argv(
        self, job: TrackedJob, node: str, node_index: int | None, argv: Sequence[str]
    ) -> list[str] | None:
        return ["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups", *argv]


def test_ptrace_refused_is_one_clear_line(
    tmp_path: Path, ranks: list[subprocess.Popen[str]]
) -> None:
    beats = start(ranks, "load_batch")
    (stack,) = collect_stacks(AsNobody(), job(tmp_path), beats)
    assert stack.error is not None and "ptrace not permitted" in stack.error, stack.error


def test_py_spy_missing_is_one_clear_line(
    tmp_path: Path, ranks: list[subprocess.Popen[str]]
) -> None:
    """Neither next to the job's python nor jobkit's, nor on PATH."""
    beats = start(ranks, "load_batch")
    pid = str(beats[0].pid)
    argv = ["sh", "-c", REMOTE_SCRIPT, "x", "/gone/py-spy", "/gone/too/py-spy", pid]
    done = subprocess.run(
        argv, capture_output=True, text=True, env={"PATH": "/usr/bin:/bin"}, check=False
    )
    (stack,) = parse_dumps(done.stdout, beats, "n2")
    assert stack.error == (
        "py-spy not found on n2 (pip install 'jobkit[debug]' into the job's environment)"
    ), stack.error


def test_a_backend_without_node_access_says_so(tmp_path: Path) -> None:
    from jobkit.backends.pbs.backend import PbsBackend

    beats = [RankBeat(0, 1, 0.0, "train", 1, "h", "h", 0, None)]
    (stack,) = collect_stacks(PbsBackend(), job(tmp_path), beats)
    assert stack.error == "stacks cannot be collected for the pbs backend"


def frames(*functions: str) -> tuple[Frame, ...]:
    return tuple(Frame(name, "x.py", 1) for name in functions)


def test_mismatched_collectives_name_the_smaller_group() -> None:
    stacks = [
        RankStack(0, "n1", 1, frames("all_reduce", "step")),
        RankStack(1, "n1", 2, frames("all_reduce", "step")),
        RankStack(2, "n2", 3, frames("broadcast", "save")),
        RankStack(3, "n2", 4, error="pid 4 is gone on n2 (the rank exited)"),
    ]
    found = compare(stacks)
    assert found.odd_ranks == (2,) and found.unknown_ranks == (3,)
    assert found.to_dict()["differing_ranks"] == [2]


class WithoutPySpy(LocalBackend):
    """The local backend on a node where py-spy is not installed (neither next to the job's
    python nor jobkit's, nor on PATH): what a `pip install jobkit[train]` left."""

    def on_node_argv(
        self, job: TrackedJob, node: str, node_index: int | None, argv: Sequence[str]
    ) -> list[str] | None:
        shell, flag, script, name, _job_spy, _our_spy, *pids = argv
        return ["env", "PATH=/usr/bin:/bin", shell, flag, script, name, "/gone", "/gone", *pids]


def stalled_diagnosis(beats: list[RankBeat], stacks: list[RankStack]) -> dict[str, object]:
    """`jobkit doctor --json`'s answer for a running job with no error in its logs whose
    ranks stopped advancing 10 minutes ago at step 10."""
    from jobkit.doctor.diagnosis import Diagnosis
    from jobkit.hang.report import HangReport, no_stack_note
    from jobkit.hang.stall import progress_of

    progress = progress_of(beats, 600.0, 60.0)
    assert progress is not None and progress.stalled
    notes = (no_stack_note(tuple(stacks)),) if not any(s.frames for s in stacks) else ()
    report = HangReport(progress, tuple(stacks), compare(stacks), notes)
    diagnosis = Diagnosis("jk1", "x", "local", None, "RUNNING", None, None, "running")
    diagnosis.add_hang(report)
    assert "\n".join(diagnosis.lines())  # the text renders
    return diagnosis.to_dict()


def test_a_hang_without_py_spy_says_so_in_one_line_with_the_install_command(
    tmp_path: Path, ranks: list[subprocess.Popen[str]]
) -> None:
    """The user's words: doctor on a hung job "silently loses py-spy stacks": no stack could
    be collected, no rank named, and the summary does not say why."""
    beats = start(ranks, "all_reduce", "load_batch")
    stacks = collect_stacks(WithoutPySpy(), job(tmp_path), beats)
    data = stalled_diagnosis(beats, stacks)
    why = (
        "no stack could be collected: py-spy is not installed where the job runs (here):"
        " pip install 'jobkit[debug]' into the job's environment"
    )
    assert data["summary"] == f"no rank advanced for 10m (last step 9); {why}"
    assert data["class"] == "stalled" and data["rank"] is None
    assert data["one_line"] == f"the job is stalled: {data['summary']}"[:137] + "..."


def test_a_hang_in_doctor_json_names_the_rank_node_and_summary(
    tmp_path: Path, ranks: list[subprocess.Popen[str]]
) -> None:
    """The user's words: "`doctor --json` for a hang has rank/node/summary/one_line null"."""
    beats = start(ranks, "all_reduce", "load_batch")
    data = stalled_diagnosis(beats, collect_stacks(LocalBackend(), job(tmp_path), beats))
    assert (data["class"], data["rank"], data["host"], data["node"]) == ("stalled", 1, "here", 0)
    assert data["summary"] == (
        "no rank advanced for 10m (last step 9); rank 1 in load_batch (<string>:6) <"
        " <module> (<string>:7) while rank 0 waits in all_reduce"
    )
    assert str(data["one_line"]).startswith("the job is stalled on rank 1 (here): no rank adv")
