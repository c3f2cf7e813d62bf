"""Which files `jobkit logs` picks: .out/.err, one rank, every rank (jobkit/logs/files.py)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from jobkit.core.errors import JobkitError, UsageError
from jobkit.logs.files import Layout, select_files


def spec(
    launcher: str = "torchrun",
    nodes: int = 2,
    nproc: int = 2,
    train: bool = False,
    rdzv: str = "static",
) -> dict[str, Any]:
    run: dict[str, Any] = {"train": {"config": "tiny-lm"}} if train else {"command": ["x"]}
    return {
        "resources": {"nodes": nodes},
        "launch": {"launcher": launcher, "nproc_per_node": nproc, "rdzv": rdzv},
        "run": run,
    }


def paths(tmp_path: Path) -> dict[str, str]:
    run_dir = tmp_path / "job-1"
    run_dir.mkdir(exist_ok=True)
    return {
        "out": str(tmp_path / "job-1.out"),
        "err": str(tmp_path / "job-1.err"),
        "run_dir": str(run_dir),
    }


def names(selection: Any) -> list[tuple[str, str | None]]:
    return [(source.path.name, source.label) for source in selection.sources]


def test_out_and_err(tmp_path: Path) -> None:
    assert names(select_files(paths(tmp_path), spec(), {}, stderr=True)) == [("job-1.err", None)]


def test_default_view_is_rank_0_output_then_the_jobs_own(tmp_path: Path) -> None:
    """Without options: the file holding rank 0's output first, then .out, then [err]."""
    own = [("job-1.out", None), ("job-1.err", "err")]
    static = select_files(paths(tmp_path), spec(), {})
    assert names(static) == [("node-0.out", None), *own]
    assert static.note == (
        f"rank 0's output is in {tmp_path / 'job-1' / 'node-0.out'}; other ranks:"
        f" {tmp_path / 'job-1'}/node-1.out (--rank N, --all-ranks)"
    )
    trained = select_files(paths(tmp_path), spec(nodes=1, nproc=4, train=True), {})
    assert names(trained) == [("node-0.out", None), *own]  # stdout and tracebacks: the host's
    assert trained.note is not None
    assert trained.note.endswith(
        f"other ranks: {tmp_path / 'job-1'}/rank-{{1..3}}.log (--rank N, --all-ranks)"
    )
    srun = select_files(paths(tmp_path), spec("srun"), {})
    assert names(srun) == [("rank-0.out", None), *own]
    # mpirun and submitit write rank 0's output into the job's own files.
    assert names(select_files(paths(tmp_path), spec("mpirun"), {})) == own
    submitit = {"rank_file": str(tmp_path / "1_{rank}_log.out")}
    assert names(select_files(paths(tmp_path), spec("srun"), submitit)) == own


def test_default_view_follows_the_host_that_runs_rank_0(tmp_path: Path) -> None:
    given = paths(tmp_path)
    c10d = spec(rdzv="c10d", nodes=3)
    unknown = select_files(given, c10d, {})
    assert names(unknown)[:3] == [
        ("node-0.out", "node 0"),
        ("node-1.out", "node 1"),
        ("node-2.out", "node 2"),
    ]
    assert unknown.note == "which host runs rank 0 is not known yet: showing every host's output"
    (Path(given["run_dir"]) / "ranks").mkdir()
    (Path(given["run_dir"]) / "ranks" / "0").write_text("2\n")
    assert names(select_files(given, c10d, {}))[0] == ("node-2.out", None)


@pytest.mark.parametrize(
    ("launcher", "train", "expected"),
    [
        ("torchrun", False, "node-1.out"),  # rank 3 is on node 1 (2 per node)
        ("torchrun", True, "rank-3.log"),
        ("srun", False, "rank-3.out"),
        ("srun", True, "rank-3.log"),  # the trainer's own log, not srun's copy of stdout
        ("mpirun", True, "rank-3.log"),
    ],
)
def test_a_rank_of_a_job_not_started_yet_follows_the_predicted_file(
    tmp_path: Path, launcher: str, train: bool, expected: str
) -> None:
    selection = select_files(paths(tmp_path), spec(launcher, train=train), {}, rank=3)
    assert names(selection) == [(expected, None)]


def test_a_node_file_for_one_rank_says_so(tmp_path: Path) -> None:
    selection = select_files(paths(tmp_path), spec(), {}, rank=3)
    assert selection.note == "rank 3 has no file of its own; node-1.out holds every rank on host 1"
    assert not selection.rank_host_pending


def test_the_host_noted_by_torchrun_decides_under_c10d(tmp_path: Path) -> None:
    """c10d put rank 0 and 1 on host 1 (its numbering is its own): ranks/R says so."""
    given = paths(tmp_path)
    noted = Path(given["run_dir"]) / "ranks"
    noted.mkdir()
    for rank, host in ((0, 1), (1, 1), (2, 0), (3, 0)):
        (noted / str(rank)).write_text(f"{host}\n")
    c10d = spec(rdzv="c10d")
    assert names(select_files(given, c10d, {}, rank=0)) == [("node-1.out", None)]
    assert names(select_files(given, c10d, {}, rank=3)) == [("node-0.out", None)]
    # The bundled trainer's own per-rank log still wins over any node file.
    (Path(given["run_dir"]) / "rank-0.log").write_text("step 1\n")
    trained = spec(rdzv="c10d", train=True)
    assert names(select_files(given, trained, {}, rank=0)) == [("rank-0.log", None)]


@pytest.mark.parametrize("junk", ["", "x\n", "-1\n", "\xff"])
def test_an_unreadable_host_note_is_no_answer(tmp_path: Path, junk: str) -> None:
    given = paths(tmp_path)
    (Path(given["run_dir"]) / "ranks").mkdir()
    (Path(given["run_dir"]) / "ranks" / "2").write_text(junk, encoding="latin-1")
    selection = select_files(given, spec(rdzv="c10d"), {}, rank=2)
    assert selection.rank_host_pending
    assert names(selection) == [("node-1.out", None)]


def test_a_c10d_rank_without_a_host_note_is_pending(tmp_path: Path) -> None:
    selection = select_files(paths(tmp_path), spec(rdzv="c10d"), {}, rank=2)
    assert selection.rank_host_pending
    assert selection.note == (
        "which host runs rank 2 is not known yet (c10d rendezvous numbers the hosts as the job"
        " starts): node-1.out is a guess"
    )
    one_host = select_files(paths(tmp_path), spec(rdzv="c10d", nodes=1), {}, rank=1)
    assert not one_host.rank_host_pending and names(one_host) == [("node-0.out", None)]


def test_an_existing_file_of_another_kind_wins_over_the_prediction(tmp_path: Path) -> None:
    given = paths(tmp_path)
    (Path(given["run_dir"]) / "rank-1.out").write_text("x\n")  # e.g. a site template's layout
    assert names(select_files(given, spec("torchrun"), {}, rank=1)) == [("rank-1.out", None)]
    merged = select_files(given, spec("torchrun"), {}, all_ranks=True)
    assert names(merged) == [(f"rank-{r}.out", f"rank {r}") for r in range(4)]


def test_all_ranks_of_a_torchrun_job_are_its_node_files(tmp_path: Path) -> None:
    merged = select_files(paths(tmp_path), spec("torchrun", nodes=3), {}, all_ranks=True)
    assert names(merged) == [(f"node-{n}.out", f"node {n}") for n in range(3)]


def test_a_backend_pattern_names_the_rank_files(tmp_path: Path) -> None:
    extra = {"rank_file": str(tmp_path / "weird {dir}" / "77_{rank}_log.out")}
    one = select_files(paths(tmp_path), spec("srun"), extra, rank=2)
    assert [s.path for s in one.sources] == [tmp_path / "weird {dir}" / "77_2_log.out"]
    merged = select_files(paths(tmp_path), spec("srun"), extra, all_ranks=True)
    assert [s.label for s in merged.sources] == [f"rank {r}" for r in range(4)]


def test_bad_combinations_are_usage_errors(tmp_path: Path) -> None:
    with pytest.raises(UsageError, match="not both"):
        select_files(paths(tmp_path), spec(), {}, rank=0, all_ranks=True)
    with pytest.raises(UsageError, match="per-rank files have none"):
        select_files(paths(tmp_path), spec(), {}, rank=0, stderr=True)
    with pytest.raises(UsageError, match=r"--rank 4: the job has 4 rank\(s\), 0-3"):
        select_files(paths(tmp_path), spec(), {}, rank=4)
    with pytest.raises(JobkitError, match="no run folder"):
        select_files({"out": "x"}, spec(), {}, rank=0)


def test_layout_defaults_for_an_old_or_partial_spec() -> None:
    layout = Layout.from_spec({"run": {"command": ["x"]}})
    assert (layout.nodes, layout.procs_per_node, layout.world_size) == (1, 1, 1)
    gpus = Layout.from_spec({"resources": {"gpus_per_node": 4}, "run": {}})
    assert gpus.procs_per_node == 4
