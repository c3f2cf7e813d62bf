"""Slurm usage parsing and the per-node formula, fed sacct text captured on the real cluster
(tests/report/data/README.md says how); the live query is tested in
tests/backends/test_report_cluster.py."""

from __future__ import annotations

from pathlib import Path

import pytest

from jobkit.backends.slurm.usage import (
    expand_nodelist,
    parse_cpu_time,
    parse_size_mb,
    parse_usage,
    usage_argv,
)
from jobkit.report.efficiency import job_efficiency, node_figures, step_efficiency

DATA = Path(__file__).parent / "data"


def _capture(name: str) -> str:
    return (DATA / name).read_text(encoding="utf-8")


@pytest.mark.parametrize(
    ("text", "nodes"),
    [
        ("n[1-2]", ("n1", "n2")),
        ("n1", ("n1",)),
        ("gpu[01-03,7],cpu1", ("gpu01", "gpu02", "gpu03", "gpu7", "cpu1")),
        ("a[1-2]-ib,b5", ("a1-ib", "a2-ib", "b5")),
        ("None assigned", ()),
        ("", ()),
        ("n[1-2", ("n[1-2",)),  # not a list Slurm writes: kept as said
    ],
)
def test_nodelists_expand(text: str, nodes: tuple[str, ...]) -> None:
    assert expand_nodelist(text) == nodes


@pytest.mark.parametrize(
    ("text", "seconds"),
    [
        ("00:08.020", 8.02),
        ("00:00:03", 3.0),
        ("01:02:03", 3723.0),
        ("2-00:00:01", 172801.0),
        ("", None),
        ("bogus", None),
    ],
)
def test_cpu_times(text: str, seconds: float | None) -> None:
    assert (
        parse_cpu_time(text) == pytest.approx(seconds) if seconds else parse_cpu_time(text) is None
    )


def test_sizes() -> None:
    assert parse_size_mb("218216K") == pytest.approx(213.1015625)
    assert parse_size_mb("1.5G") == 1536
    assert parse_size_mb("") is None


def test_the_query_is_one_sacct_for_every_job() -> None:
    argv = usage_argv(["285", "286_3"])
    assert argv[:3] == ["sacct", "--noheader", "--parsable2"]
    assert "--jobs=285,286_3" in argv and "--duplicates" not in argv


def test_unsampled_step_keeps_the_exact_total_but_no_node_share() -> None:
    usage = parse_usage(_capture("sacct-2node-srun.txt"))["285"]
    assert (usage.elapsed_s, usage.nodes, usage.cpus) == (5.0, ("n1", "n2"), 2)
    batch, step = usage.steps
    assert (batch.name, batch.nodes, batch.cpu_s) == ("batch", ("n1",), 0.011)
    assert (step.name, step.tasks, step.cpus, step.elapsed_s) == ("0", 2, 2, 4.0)
    assert step.cpu_s == pytest.approx(8.009)
    assert step.per_node == {} and step.max_task_rss_mb is None
    assert "no sample" in (step.note or "")
    # the step kept both CPUs busy: 8.009 s / (2 CPUs x 4 s) is 100.1 %, the whole-second
    # Elapsed's rounding (jobkit/report/efficiency.py cpu_ratio): read as 100 %
    assert step_efficiency(step) == 1.0
    # per node: n1 has the batch step's exact share but not step 0's: unknown, not a guess
    n1, n2 = node_figures(usage)
    assert n1.cpu_s is None and n2.cpu_s is None
    assert job_efficiency(usage) == pytest.approx((0.011 + 8.009) / (2 * 5))


def test_sampled_two_node_step_gives_each_node_its_share_scaled_to_the_exact_total() -> None:
    usage = parse_usage(_capture("sacct-2node-srun.txt"))["286"]
    _, step = usage.steps
    # the samples say 1 s on each node (whole seconds, lagging); TotalCPU is 3.965 s
    assert set(step.per_node) == {"n1", "n2"}
    shares = {node: share.cpu_s for node, share in step.per_node.items()}
    assert shares["n1"] == pytest.approx(3.965 / 2) and shares["n2"] == pytest.approx(3.965 / 2)
    assert sum(v for v in shares.values() if v) == pytest.approx(step.cpu_s)
    # memory: the largest task on n2 (MaxRSS), the smallest on n1 (TRESUsageInMin mem)
    assert step.per_node["n2"].rss_mb == pytest.approx(218216 / 1024)
    assert step.per_node["n1"].rss_mb == pytest.approx(218204 / 1024)
    n1, n2 = node_figures(usage)
    # n1 also ran the batch step (0.010 s); each node held 1 CPU for the job's 5 s
    assert n1.cpu_s == pytest.approx(0.010 + 3.965 / 2)
    assert n1.efficiency == pytest.approx((0.010 + 3.965 / 2) / 5)
    assert n2.efficiency == pytest.approx(3.965 / 2 / 5)
    assert n1.steps == ("batch", "0") and n2.steps == ("0",)
    assert n2.rss_mb == pytest.approx(218216 / 1024)


def test_batch_only_work_shows_the_idle_node_that_one_job_figure_hides() -> None:
    usage = parse_usage(_capture("sacct-2node-batch-only.txt"))
    (job,) = usage.values()
    n1, n2 = node_figures(job)
    # the batch step's exact TotalCPU (1.204 s: the cores were shared) over 1 CPU x 6 s
    assert n1.cpu_s == pytest.approx(1.204) and n1.efficiency == pytest.approx(1.204 / 6)
    assert n2.cpu_s == 0 and n2.efficiency == 0 and n2.steps == ()
    # seff's one figure: the average of the two nodes, half of n1's
    assert job_efficiency(job) == pytest.approx((n1.efficiency + n2.efficiency) / 2, rel=0.01)
