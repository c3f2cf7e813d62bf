"""`jobkit check` and `jobkit submit`'s check against the real Slurm of tests/cluster: a time
over the partition's MaxTime (a partition of the test's own), an unknown partition, a GPU type
no node has (the test cluster's nodes have no GRES), a missing program, a trainer-config typo,
a QoS MaxWall (a QoS of the test's own), memory directives; each by its exact line."""

from __future__ import annotations

import json
import os
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from jobkit.registry.store import Store
from tests.manager.helpers import Invoke, slurm_spec
from tests.plugins.cluster import run_quietly, scancel_quietly

pytestmark = [pytest.mark.slurm, pytest.mark.usefixtures("slurm_cluster")]
FIRST_EXTRA_LINE = 7
"""slurm_spec writes six lines (name ... run.command); the extra lines start at line 7."""


@pytest.fixture
def short_partition() -> Iterator[str]:
    """A partition of this test's own with MaxTime=1 (minute) on the cluster's nodes; deleted
    afterwards (retried: a cancelled job holds it for a moment)."""
    name = f"jkchk{os.getpid()}"
    made = run_quietly(["scontrol", "create", f"PartitionName={name}", "Nodes=n1,n2", "MaxTime=1"])
    assert made.returncode == 0, made.stderr
    yield name
    for _ in range(10):
        if run_quietly(["scontrol", "delete", f"PartitionName={name}"]).returncode == 0:
            break
        time.sleep(1)


@pytest.fixture
def short_qos() -> Iterator[str]:
    """A QoS of this test's own with MaxWall=2 minutes (no job uses it); deleted afterwards."""
    name = f"jkchk{os.getpid()}"
    made = run_quietly(["sacctmgr", "-i", "add", "qos", name, "MaxWall=00:02:00"])
    assert made.returncode == 0, made.stderr
    yield name
    run_quietly(["sacctmgr", "-i", "delete", "qos", name])


def _check(jobkit: Invoke, spec: Path, *args: str) -> list[str]:
    """`jobkit check` that must find problems: its lines."""
    result = jobkit("check", spec.name, *args)
    assert result.code == 2, (result.out, result.err)
    return result.out.splitlines()


def test_time_over_the_partitions_max_time_stops_submit_and_records_nothing(
    workdir: Path, jobkit: Invoke, short_partition: str
) -> None:
    spec = slurm_spec(
        workdir, "toolong", "true", "resources:", f"  partition: {short_partition}", "  time: 5"
    )
    line = (
        f"toolong.yaml:{FIRST_EXTRA_LINE + 2}: resources.time: 00:05:00 is over partition"
        f" {short_partition}'s MaxTime 00:01:00: the job would never start"
    )
    assert _check(jobkit, spec) == [line]
    refused = jobkit("submit", spec.name)
    assert (refused.code, refused.out) == (2, "")
    assert refused.err.splitlines() == [
        line,
        "jobkit: not submitted: 1 problem (`jobkit check` for more; --no-check submits anyway)",
    ]
    with Store() as store:
        assert store.count() == 0
    assert not (workdir / "logs").exists()
    passed = jobkit("submit", spec.name, "--no-check", "--json")
    assert passed.code == 0, passed.err
    record = json.loads(passed.out)
    try:
        assert record["state"] == "QUEUED" and record["scheduler_id"]
        with Store() as store:
            assert store.count() == 1
    finally:
        scancel_quietly(record["scheduler_id"])


def test_unknown_partition(workdir: Path, jobkit: Invoke) -> None:
    spec = slurm_spec(workdir, "nopart", "true", "resources:", "  partition: nosuchpart")
    (line,) = _check(jobkit, spec)
    known = run_quietly(["sinfo", "--noheader", "--format=%R"]).stdout.split()
    assert line == (
        f"nopart.yaml:{FIRST_EXTRA_LINE + 1}: resources.partition: Slurm has no partition"
        f" 'nosuchpart' (partitions: {', '.join(sorted(set(known)))})"
    )
    assert "debug" in known


def test_gpu_type_no_node_has(workdir: Path, jobkit: Invoke) -> None:
    """The test cluster's nodes have no GRES at all: any GPU request is refused, at the key
    that names the type (sbatch --test-only's own gres refusal is about the same key)."""
    spec = slurm_spec(
        workdir, "gpu", "true", "resources:", "  gpus_per_node: 1", "  gpu_type: a100"
    )
    gres = run_quietly(["sinfo", "--noheader", "--partition=debug", "--format=%G"]).stdout
    assert _check(jobkit, spec) == [
        f"gpu.yaml:{FIRST_EXTRA_LINE + 2}: resources.gpu_type: no node of partition debug has"
        f" GPUs (its nodes' GRES: {gres.strip()})"
    ]


def test_a_gpu_request_without_a_type_blames_gpus_per_node(workdir: Path, jobkit: Invoke) -> None:
    """The user's words: "`check` blames `resources.gpu_type` (never set) for
    `gpus_per_node=1`". sbatch --test-only's gres refusal is about the same key: one line."""
    spec = slurm_spec(workdir, "gpu1", "true", "resources:", "  gpus_per_node: 1")
    gres = run_quietly(["sinfo", "--noheader", "--partition=debug", "--format=%G"]).stdout
    assert _check(jobkit, spec) == [
        f"gpu1.yaml:{FIRST_EXTRA_LINE + 1}: resources.gpus_per_node: no node of partition debug"
        f" has GPUs (its nodes' GRES: {gres.strip()})"
    ]


def test_more_cpus_than_a_node_has_names_the_cpu_key(workdir: Path, jobkit: Invoke) -> None:
    """The user's words: "for `cpus_per_process=2` on 1-CPU nodes [check] names no key at
    all" (sbatch --test-only: "Requested node configuration is not available")."""
    cpus = max(
        int(n) for n in run_quietly(["sinfo", "-h", "-p", "debug", "-N", "-o", "%c"]).stdout.split()
    )
    spec = slurm_spec(workdir, "cpus", "true", "resources:", f"  cpus_per_process: {cpus + 1}")
    assert _check(jobkit, spec) == [
        f"cpus.yaml:{FIRST_EXTRA_LINE + 1}: resources.cpus_per_process: asks for {cpus + 1} CPUs"
        f" per node; no node of partition debug has more than {cpus}"
    ]


def test_missing_program_and_python_script(workdir: Path, jobkit: Invoke) -> None:
    (workdir / "prog.yaml").write_text(
        "name: prog\nbackend: slurm\nlaunch:\n  launcher: srun\nrun:\n"
        "  command: [python3, -u, trian.py, --steps, '5']\n",
        encoding="utf-8",
    )
    lines = _check(jobkit, workdir / "prog.yaml", "--set", "run.command=[trainx, a]")
    assert lines[0].startswith(
        "--set run.command=[trainx, a]: run.command: program 'trainx' not found on PATH (searched "
    )
    assert _check(jobkit, workdir / "prog.yaml") == [
        f"prog.yaml:6: run.command: python script 'trian.py' not found (looked for"
        f" {workdir}/trian.py)"
    ]
    (workdir / "trian.py").write_text("print('hi')\n", encoding="utf-8")
    result = jobkit("check", "prog.yaml")
    assert result.code == 0, result.out
    assert result.out.splitlines()[-1].startswith("ok: prog.yaml (slurm): checked spec, program")
    dry = jobkit("submit", "prog.yaml", "--dry-run", "--set", "run.command=[./nothere.sh]")
    assert dry.code == 2 and dry.err.startswith(
        "--set run.command=[./nothere.sh]: run.command: program './nothere.sh' not found"
        f" (looked for {workdir}/nothere.sh)\n"
    )


def test_trainer_typo_and_every_other_problem_at_once(workdir: Path, jobkit: Invoke) -> None:
    (workdir / "typo.yaml").write_text(
        "name: typo\nbackend: slurm\nresources:\n  partition: nosuchpart\n  mem: 1G\n"
        "scheduler:\n  extra: ['--mem-per-cpu=100M']\n"
        "run:\n  train:\n    config: mlp\n    overrides:\n      train.stepz: 3\n",
        encoding="utf-8",
    )
    lines = _check(jobkit, workdir / "typo.yaml")
    assert len(lines) == 3, lines
    assert lines[0].startswith("typo.yaml:12: run.train.overrides.train.stepz: unknown key")
    assert lines[1] == (
        "typo.yaml:7: scheduler.extra[0]: --mem-per-cpu conflicts with resources.mem (--mem):"
        " Slurm takes only one of --mem, --mem-per-cpu and --mem-per-gpu"
    )
    assert lines[2].startswith(
        "typo.yaml:4: resources.partition: Slurm has no partition 'nosuchpart'"
    )
    data = json.loads(jobkit("check", "typo.yaml", "--json").out)
    assert data["ok"] is False and data["backend"] == "slurm"
    assert [p["text"] for p in data["problems"]] == lines
    assert [(p["line"], p["key"]) for p in data["problems"]] == [
        (12, "run.train.overrides.train.stepz"),
        (7, "scheduler.extra[0]"),
        (4, "resources.partition"),
    ]


def test_memory_over_every_node_and_qos_max_wall(
    workdir: Path, jobkit: Invoke, short_qos: str
) -> None:
    spec = slurm_spec(
        workdir,
        "big",
        "true",
        "resources:",
        "  mem: 100G",
        "  time: 00:05:00",
        f"  qos: {short_qos}",
    )
    most = max(
        int(n) for n in run_quietly(["sinfo", "--noheader", "--Node", "--format=%m"]).stdout.split()
    )
    assert _check(jobkit, spec) == [
        f"big.yaml:{FIRST_EXTRA_LINE + 1}: resources.mem: 102400M per node is more than any node"
        f" of partition debug has ({most}M)",
        f"big.yaml:{FIRST_EXTRA_LINE + 2}: resources.time: 00:05:00 is over QoS {short_qos}'s"
        " MaxWall 00:02:00",
    ]
    fast = jobkit("check", spec.name, "--fast", "--json")
    assert [p["key"] for p in json.loads(fast.out)["problems"]] == ["resources.mem"]


def test_a_good_job_is_ok_with_sbatch_test_only_estimate(workdir: Path, jobkit: Invoke) -> None:
    spec = slurm_spec(workdir, "fine", "true", "resources:", "  time: 00:05:00")
    result = jobkit("check", spec.name)
    assert result.code == 0, result.out
    assert result.out.splitlines()[-1] == (
        "ok: fine.yaml (slurm): checked spec, program, memory directives, partition limits,"
        " node GRES and memory, association and QoS limits, sbatch --test-only"
    )
    assert "note: sbatch --test-only: would start at " in result.out
    data = json.loads(jobkit("check", spec.name, "--json").out)
    assert data["ok"] is True and data["problems"] == []
