"""The per-node formula on constructed usage (the cases sacct captures cannot show here)."""

from __future__ import annotations

import pytest

from jobkit.core.usage import NodeShare, StepUsage, Usage
from jobkit.report.efficiency import (
    cpu_ratio,
    job_efficiency,
    node_figures,
    peak_node_rss_mb,
    step_efficiency,
)


def _step(
    name: str, nodes: tuple[str, ...], cpus: int, elapsed: float, cpu: float, **shares: NodeShare
) -> StepUsage:
    return StepUsage(
        name=name,
        nodes=nodes,
        cpus=cpus,
        tasks=len(nodes),
        elapsed_s=elapsed,
        cpu_s=cpu,
        per_node=dict(shares),
    )


def test_two_steps_on_different_nodes_and_times() -> None:
    """4 nodes x 8 CPUs for 100 s: step 0 keeps n1-n2 busy for 50 s, step 1 keeps n3 at half
    for 100 s, n4 runs nothing. seff's one number (25 %) hides all of it."""
    nodes = ("n1", "n2", "n3", "n4")
    usage = Usage(
        source="sacct",
        elapsed_s=100,
        nodes=nodes,
        cpus=32,
        steps=(
            _step(
                "0",
                ("n1", "n2"),
                16,
                50,
                800,
                n1=NodeShare(400),
                n2=NodeShare(400),
            ),
            _step("1", ("n3",), 8, 100, 400, n3=NodeShare(400, 2048)),
        ),
    )
    figures = {f.node: f for f in node_figures(usage)}
    assert figures["n1"].efficiency == pytest.approx(0.5)
    assert figures["n3"].efficiency == pytest.approx(0.5)
    assert figures["n4"].efficiency == 0 and figures["n4"].steps == ()
    assert job_efficiency(usage) == pytest.approx(1200 / 3200)
    assert peak_node_rss_mb(usage, list(figures.values())) == 2048


def test_a_node_whose_share_is_unknown_has_no_figure() -> None:
    """8 tasks on 2 nodes: sacct keeps the extreme tasks only; no per-node sum is invented."""
    usage = Usage(
        source="sacct",
        elapsed_s=10,
        nodes=("n1", "n2"),
        cpus=8,
        steps=(_step("0", ("n1", "n2"), 8, 10, 70),),
    )
    assert [f.cpu_s for f in node_figures(usage)] == [None, None]
    assert job_efficiency(usage) == pytest.approx(70 / 80)


def test_totals_only_give_no_nodes() -> None:
    usage = Usage(source="qacct", elapsed_s=10, nodes=("n1",), cpu_s=5, max_rss_mb=200)
    assert node_figures(usage) == []
    assert job_efficiency(usage) is None and job_efficiency(usage, cpus=1) == 0.5
    assert peak_node_rss_mb(usage, []) == 200


def test_whole_second_elapsed_never_reads_over_a_full_cpu() -> None:
    """What the real cluster recorded (tests/e2e/test_report.py): a busy loop used 6.341 CPU
    seconds on one CPU in an Elapsed of 6 s (sacct rounds to whole seconds): 100 %, not
    106 %. Beyond the one-second window the excess is real (more CPUs than held) and kept."""
    busy = Usage(
        source="sacct",
        elapsed_s=6,
        nodes=("n1",),
        cpus=1,
        steps=(_step("0", ("n1",), 1, 6, 6.341, n1=NodeShare(6.341)),),
    )
    assert node_figures(busy)[0].efficiency == 1.0
    assert step_efficiency(busy.steps[0]) == 1.0
    assert job_efficiency(busy) == 1.0
    assert cpu_ratio(14.0, 2, 6) == 1.0  # 2 CPUs, 6 s: up to 14 s is rounding
    assert cpu_ratio(14.5, 2, 6) == pytest.approx(14.5 / 12)  # threads beyond the allocation
    assert cpu_ratio(3.0, 1, 6) == pytest.approx(0.5)
