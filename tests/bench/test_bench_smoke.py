"""The bench command runs in its smallest mode (--smoke: --quick with the fewest rounds,
steps and runs that still go through every path of a case; the trainer case's contenders
that differ only in an argument's value share a run) and writes results that parse.

These tests check that every case runs and reports its figures; they never judge a timing
(performance is measured by `python -m bench`, on purpose not asserted here).
"""

from __future__ import annotations

import json
import math
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from tests.plugins.cluster import SlurmCluster

REPO = Path(__file__).resolve().parents[2]
STATUSES = {"ok", "skipped", "not available", "failed"}


def run_bench(tmp_path: Path, *args: str, timeout: float) -> tuple[dict[str, Any], str]:
    """`python -m bench --smoke ARGS --out tmp/results.json`; the JSON and the printed table."""
    out = tmp_path / "results.json"
    markdown = tmp_path / "results.md"
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "bench",
            "--smoke",
            "--python",
            sys.executable,
            "--out",
            str(out),
            "--markdown",
            str(markdown),
            *args,
        ],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=timeout,
        env={**_env(), "JOBKIT_BENCH_POOL": str(tmp_path / "pool.json")},
        check=False,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    document = json.loads(out.read_text())
    assert markdown.read_text().startswith("Run of ")
    return document, done.stdout


def _env() -> dict[str, str]:
    import os

    return {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}


def check_document(document: dict[str, Any], cases: list[str]) -> None:
    """The shape every results file has: machine, versions, and each case's figures."""
    assert document["schema"] == 1
    assert document["quick"] is True
    machine = document["machine"]
    assert machine["cores"] >= 1 and machine["mem_gib"] > 0 and machine["cpu_model"]
    assert len(machine["load_start"]) == 3 and len(machine["load_end"]) == 3
    assert set(document["versions"]) == {"python", "torch", "jobkit", "slurm", "torchx"}
    assert document["versions"]["jobkit"]
    assert list(document["cases"]) == cases
    for case in document["cases"].values():
        assert case["status"] in STATUSES
        assert case["status"] != "failed", case
        if case["status"] != "ok":
            assert case["reason"]
            continue
        assert case["stats"], case["name"]
        for row in case["stats"]:
            assert row["n"] == len(row["values"]) >= 1, row
            for key in ("median", "min", "max"):
                assert isinstance(row[key], float) and math.isfinite(row[key]), row
            assert row["min"] <= row["median"] <= row["max"], row
        for t in case["targets"]:
            assert t["met"] in (True, False, None) and t["goal"], t


def test_quick_bench_runs_the_local_cases(tmp_path: Path) -> None:
    document, table = run_bench(tmp_path, "--cases", "cli,trainer,gpu", timeout=540)
    check_document(document, ["cli_startup", "trainer", "gpu"])
    cli = document["cases"]["cli_startup"]
    assert cli["status"] == "ok"
    names = [row["name"] for row in cli["stats"]]
    assert "jobkit render wall_s" in names
    assert cli["facts"]["torch_imported"] is False
    for verb in ("render", "submit --dry-run", "status"):
        assert cli["facts"]["imports"][verb]["exit"] == 0, verb
    trainer = document["cases"]["trainer"]
    assert trainer["status"] == "ok"
    assert {row["name"] for row in trainer["stats"]} >= {
        "plain fp32 steps_per_s",
        "trainer fp32 steps_per_s",
    }
    gpu = document["cases"]["gpu"]
    assert gpu["status"] == "ok" or gpu["reason"] == "no CUDA"
    assert "CLI start-up" in table and "Trainer overhead" in table


@pytest.mark.slurm
@pytest.mark.slow
@pytest.mark.timeout(1200)
def test_quick_bench_runs_the_cluster_cases(tmp_path: Path, slurm_cluster: SlurmCluster) -> None:
    document, _ = run_bench(
        tmp_path, "--cases", "status,submit,logs", "--pool-ran", "0", timeout=1100
    )
    check_document(document, ["status_scale", "submit_train", "log_follow"])
    for case in document["cases"].values():
        assert case["status"] == "ok", case
    status = document["cases"]["status_scale"]["facts"]["sizes"]
    assert set(status) == {"10", "100"}
    for size, facts in status.items():
        assert facts["first_exit"] == 0
        assert facts["first_calls"].get("squeue") == 1, facts
        assert sum(facts["states_after_first"].values()) == int(size)
    assert document["cases"]["log_follow"]["facts"]["backend"] == "slurm"
    pool = json.loads((tmp_path / "pool.json").read_text())
    assert len(pool["ids"]) >= 100
