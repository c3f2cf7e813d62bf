"""`jobkit report` on real jobs: a 2-node Slurm job whose CPU and memory are known (the
program measures its own), the bundled trainer's throughput (local backend), and what PBS
(Slurm's Torque wrappers) and Grid Engine can say."""

from __future__ import annotations

import json
import statistics
import textwrap
from pathlib import Path
from typing import Any

import pytest

from tests.e2e.cli import Jobkit, trainer_sets
from tests.e2e.conftest import Figures
from tests.plugins.sge import SgeCluster

BURN = textwrap.dedent(
    """\
    import json, os, sys, time
    mb, seconds, out = int(sys.argv[1]), float(sys.argv[2]), sys.argv[3]
    block = bytearray(mb * 1024 * 1024)
    for i in range(0, len(block), 4096):
        block[i] = 1
    start = time.time()
    while time.time() - start < seconds:
        pass
    node = os.environ.get("SLURMD_NODENAME") or os.uname().nodename
    with open(os.path.join(out, f"burn-{node}.json"), "w") as f:
        json.dump({"cpu_s": time.process_time(), "wall_s": time.time() - start}, f)
    """
)
"""Touches MB megabytes, spins for SECONDS, writes its own CPU time and wall time."""


def _report(jobkit: Jobkit, *ids: str) -> list[dict[str, Any]]:
    done = jobkit.run("report", "--json", *ids)
    assert done.returncode == 0, done.stderr
    data: list[dict[str, Any]] = json.loads(done.stdout)
    return data


def _write_burn(tmp_path: Path) -> Path:
    program = tmp_path / "burn.py"
    program.write_text(BURN)
    return program


@pytest.mark.slurm
@pytest.mark.slow
@pytest.mark.usefixtures("slurm_cluster")
def test_two_node_slurm_job_cpu_and_memory_per_node(
    jobkit: Jobkit, tmp_path: Path, figures: Figures, monkeypatch: pytest.MonkeyPatch
) -> None:
    """srun starts the program on n1 and n2 (one task each); each touches 150 MB and spins
    for 6 s. The report's per-node CPU time matches what each program measured itself, its
    efficiency is that of a busy loop (the 2 cores are shared with other tests: the program's
    own cpu/wall ratio is the reference), and each node's peak memory holds the 150 MB."""
    program, out = _write_burn(tmp_path), tmp_path / "out"
    out.mkdir()
    spec = tmp_path / "burn.yaml"
    spec.write_text(
        textwrap.dedent(
            f"""\
            name: burn
            backend: slurm
            resources:
              nodes: 2
              mem: 600M
              time: "00:10:00"
            scheduler:
              extra: ["--acctg-freq=task=1"]
            launch:
              launcher: srun
            run:
              command: [python3, {json.dumps(str(program))}, "150", "6", {json.dumps(str(out))}]
            """
        )
    )
    small = tmp_path / "small.yaml"
    small.write_text(
        "name: small\nbackend: slurm\nlaunch:\n  launcher: srun\nrun:\n  command: [true]\n"
    )
    burn = jobkit.submit(str(spec), timeout=600)
    assert burn.returncode == 0, burn.explain()
    other = jobkit.submit(str(small), timeout=600)
    assert other.returncode == 0, other.explain()
    proc_log = tmp_path / "proc.jsonl"
    monkeypatch.setenv("JOBKIT_PROC_LOG", str(proc_log))
    reports = _report(jobkit, burn.jobkit_id, other.jobkit_id)
    calls = [json.loads(line)["argv"] for line in proc_log.read_text().splitlines()]
    usage_calls = [a for a in calls if any(w.startswith("--format=JobID,State,Elapsed") for w in a)]
    assert len(usage_calls) == 1, calls  # one sacct for both jobs
    assert f"--jobs={burn.scheduler_id},{other.scheduler_id}" in usage_calls[0]

    report = reports[0]
    assert (report["state"], report["elapsed_source"]) == ("SUCCEEDED", "sacct")
    assert report["time_limit_s"] == 600 and report["mem_request_mb"] == 600
    nodes = {n["node"]: n for n in report["nodes"]}
    assert set(nodes) == {"n1", "n2"}
    for name, node in nodes.items():
        own = json.loads((out / f"burn-{name}.json").read_text())
        assert node["cpus"] == 1
        assert node["cpu_s"] == pytest.approx(own["cpu_s"], abs=max(1.0, 0.25 * own["cpu_s"]))
        busy = own["cpu_s"] / own["wall_s"]  # 1.0 alone on a core, less when shared
        assert 0.5 * busy <= node["efficiency"] <= 1.0, (name, node, own)  # never over a full CPU
        assert 150 <= node["rss_mb"] < 400, (name, node)
    step = next(s for s in report["steps"] if s["name"] == "0")
    assert (step["nodes"], step["tasks"], step["cpus"]) == (["n1", "n2"], 2, 2)
    assert report["peak_mem_mb"] == max(n["rss_mb"] for n in nodes.values())
    sets = report["suggestion"]["sets"]
    assert sets[0] == "--set resources.time=00:01:00"  # elapsed ~10 s x 1.3, rounded up
    assert sets[1] in ("--set resources.mem=256M", "--set resources.mem=320M"), sets
    assert report["gpu"] is None and report["throughput"] is None
    assert "metrics.jsonl" in report["throughput_note"]
    assert reports[1]["state"] == "SUCCEEDED" and reports[1]["usage"]["source"] == "sacct"

    text = jobkit.run("report", burn.scheduler_id)
    assert text.returncode == 0, text.stderr
    lines = text.stdout.splitlines()
    for name, node in nodes.items():
        row = next(line.split() for line in lines if line.strip().startswith(f"{name} "))
        assert row[4] == f"{node['efficiency']:.0%}", (row, node)  # "3.6 s" is two words
    assert "gpu         no GPU (resources.gpus_per_node is 0)" in lines
    assert any(line.startswith("next run    --set resources.time=00:01:00") for line in lines)
    figures(**{f"{n}_efficiency": round(v["efficiency"], 3) for n, v in nodes.items()})


def test_trainer_throughput_from_its_metrics(jobkit: Jobkit, figures: Figures) -> None:
    """The bundled trainer on the local backend: samples/s and tokens/s are the medians of
    metrics.jsonl without the first record; the launcher records no CPU or memory."""
    sub = jobkit.submit(
        "examples/quickstart.yaml",
        *trainer_sets(train__steps=40, logging__every_steps=5),
        venv=False,
        timeout=400,
    )
    assert sub.returncode == 0, sub.explain()
    (report,) = _report(jobkit, sub.jobkit_id)
    run_dir = Path(jobkit.status(sub.jobkit_id)["log_paths"]["run_dir"])
    records = [json.loads(line) for line in (run_dir / "metrics.jsonl").read_text().splitlines()]
    assert len(records) == 8
    steady = records[1:]
    got = report["throughput"]
    assert (got["records"], got["used"], got["last_step"]) == (8, 7, 40)
    assert got["samples_per_s"] == statistics.median(r["samples_per_s"] for r in steady)
    if "tokens_per_s" in records[0]:
        assert got["tokens_per_s"] == statistics.median(r["tokens_per_s"] for r in steady)
    assert report["usage"] is None and "not recorded by the launcher" in report["usage_note"]
    assert report["elapsed_source"] == "registry" and report["elapsed_s"] > 0
    text = jobkit.run("report", sub.jobkit_id).stdout
    assert f"{got['samples_per_s']:.1f} samples/s" in text and "median of 7 of 8 records" in text
    figures(samples_per_s=round(got["samples_per_s"], 1))


@pytest.mark.pbs
@pytest.mark.usefixtures("pbs_cluster")
def test_pbs_through_the_torque_wrappers_says_what_qstat_does_not_report(
    jobkit: Jobkit, tmp_path: Path
) -> None:
    """Slurm's Torque wrappers print no resources_used: the report says so, with the elapsed
    time the registry holds."""
    spec = tmp_path / "pbs.yaml"
    spec.write_text(
        "name: pbsrep\nbackend: pbs\nscheduler:\n  pbs_flavor: torque\n"
        "run:\n  command: [bash, -c, 'sleep 1']\n"
    )
    sub = jobkit.submit(str(spec), timeout=300)
    assert sub.returncode == 0, sub.explain()
    (report,) = _report(jobkit, sub.jobkit_id)
    assert report["state"] == "SUCCEEDED"
    usage = report["usage"]
    if usage is not None:  # the wrappers still list the job: qstat answered, without figures
        assert usage["source"] == "qstat -f" and usage["cpu_s"] is None
        assert any("no resources_used" in note for note in report["notes"]), report
    else:  # qstat forgot the job already
        assert "qstat -f no longer lists the job" in report["usage_note"]
    assert report["peak_mem_mb"] is None and report["cpu_s"] is None
    assert "memory: no peak was measured" in " ".join(report["suggestion"]["notes"])


@pytest.mark.sge
@pytest.mark.slow
def test_grid_engine_cpu_and_memory_from_qacct(
    jobkit: Jobkit, sge_cluster: SgeCluster, tmp_path: Path
) -> None:
    """qacct's cpu and ru_maxrss of a job that touches 120 MB and spins for 3 s (ru_maxrss is
    printed in kilobytes read as bytes: the report must still say ~120 MB, not 120 KB)."""
    program, out = _write_burn(tmp_path), tmp_path / "out"
    out.mkdir()
    spec = tmp_path / "sge.yaml"
    spec.write_text(
        "name: sgerep\nbackend: sge\nrun:\n"
        f"  command: [python3, {json.dumps(str(program))}, '120', '3', {json.dumps(str(out))}]\n"
    )
    sub = jobkit.submit(str(spec), timeout=400)
    assert sub.returncode == 0, sub.explain()
    (own_file,) = out.glob("burn-*.json")
    own = json.loads(own_file.read_text())
    report = _sge_report(jobkit, sub.jobkit_id)
    assert report["usage"]["source"] == "qacct"
    # qacct counts the whole job (torchrun and the program): at least the program's CPU time
    assert own["cpu_s"] - 0.5 <= report["cpu_s"] <= own["cpu_s"] + 10
    assert 120 <= report["peak_mem_mb"] < 1024
    assert report["suggestion"]["sets"][1].startswith("--set resources.mem=")


def _sge_report(jobkit: Jobkit, job: str) -> dict[str, Any]:
    """The report once qacct has the record (written a moment after the job ends)."""
    import time

    deadline = time.monotonic() + 60
    while True:
        (report,) = _report(jobkit, job)
        if report["usage"] is not None or time.monotonic() > deadline:
            return report
        time.sleep(2)
