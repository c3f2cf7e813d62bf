"""The pure parts of the checks: Slurm's GRES and limit texts, sbatch's refusals, the python
script of a command. GPU GRES cannot exist on the test cluster (no GPUs): the `sinfo %G` texts
here are recorded from GPU clusters (Slurm 22.05 and 23.02 formats)."""

from __future__ import annotations

import pytest

from jobkit.backends.slurm.limits import (
    Node,
    Request,
    node_fit,
    parse_tres,
    partition_limits,
    slurm_seconds,
)
from jobkit.backends.slurm.preflight import translate_refusal
from jobkit.check.program import python_script


def _request(**changes: object) -> Request:
    base: dict[str, object] = {
        "nodes": 1,
        "cpus_per_node": 4,
        "gpus_per_node": 0,
        "gpu_type": None,
        "mem_mb": None,
        "time_s": None,
        "partition": None,
        "account": None,
        "qos": None,
    }
    base.update(changes)
    return Request(**base)  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("gres", "types"),
    [
        ("(null)", set()),
        ("gpu:4", {None}),
        ("gpu:a100:4(S:0-1)", {"a100"}),
        ("gpu:a100:2(S:0),gpu:v100:2(S:1)", {"a100", "v100"}),
        ("gpu:h100:8(S:0-1),shard:h100:64(S:0-1)", {"h100"}),
    ],
)
def test_gpu_types_of_recorded_gres(gres: str, types: set[str | None]) -> None:
    assert Node("n1", "gpu", gres, 4000, 8).gpu_types() == types


def test_a_type_the_partitions_nodes_lack_names_the_types_they_have() -> None:
    nodes = [
        Node("g1", "gpu", "gpu:v100:4(S:0-1)", 64000, 32),
        Node("g2", "gpu", "gpu:a40:4", 64000, 32),
    ]
    (found,) = node_fit(_request(gpus_per_node=1, gpu_type="a100"), "gpu", nodes)
    assert (found.key, found.message) == (
        "resources.gpu_type",
        "no node of partition gpu has GPU type 'a100' (types there: a40, v100)",
    )
    assert node_fit(_request(gpus_per_node=1, gpu_type="a40"), "gpu", nodes) == []
    (too_many,) = node_fit(_request(nodes=3), "gpu", nodes)
    assert too_many.message == "3 nodes asked, partition gpu has 2"


def test_partition_limits_from_scontrol_fields() -> None:
    fields = {"MaxTime": "1-00:00:00", "MaxNodes": "2", "MaxMemPerNode": "8000", "State": "DOWN"}
    found = partition_limits(_request(time_s=2 * 86400, nodes=4, mem_mb=9000), "p", fields)
    assert [f.key for f in found] == [
        "resources.time",
        "resources.nodes",
        "resources.mem",
        "resources.partition",
    ]
    assert (
        found[0].message
        == "2-00:00:00 is over partition p's MaxTime 1-00:00:00: the job would never start"
    )
    assert found[3].message == "partition p is DOWN: it starts no jobs"
    assert partition_limits(_request(time_s=60), "p", {"MaxTime": "UNLIMITED"}) == []


@pytest.mark.parametrize(
    ("said", "key"),
    [
        ("sbatch: error: invalid partition specified: x", "resources.partition"),
        ("sbatch: error: Invalid generic resource (gres) specification", "resources.gpu_type"),
        (
            "sbatch: error: Batch job submission failed: Requested time limit is invalid"
            " (missing or exceeds some limit)",
            "resources.time",
        ),
        ("sbatch: error: Batch job submission failed: Invalid qos specification", "resources.qos"),
        (
            "sbatch: error: Batch job submission failed: Invalid account or account/partition"
            " combination specified",
            "resources.account",
        ),
        (
            "sbatch: fatal: --mem, --mem-per-cpu, and --mem-per-gpu are mutually exclusive.",
            "scheduler.extra",
        ),
        ("allocation failure: Requested node configuration is not available", "resources"),
    ],
)
def test_sbatch_refusals_name_the_key(said: str, key: str) -> None:
    found = translate_refusal(said)
    assert found.key == key
    assert said.split(": ")[-1] in found.message  # sbatch's own words are kept


def test_slurm_limit_texts() -> None:
    assert slurm_seconds("00:02:00") == 120 and slurm_seconds("2-00:00:00") == 172800
    assert (
        slurm_seconds("30:00") == 1800
        and slurm_seconds("") is None
        and slurm_seconds("UNLIMITED") is None
    )
    assert parse_tres("cpu=4,mem=8G,gres/gpu=2,node=1") == {
        "cpu": 4,
        "mem": 8192,
        "gres/gpu": 2,
        "node": 1,
    }


@pytest.mark.parametrize(
    ("argv", "script"),
    [
        (["python3", "-u", "train.py", "--lr", "1"], "train.py"),
        (["/opt/py/bin/python3.11", "a/b.py"], "a/b.py"),
        (["python", "-m", "train"], None),
        (["python", "-c", "print(1)"], None),
        (["bash", "x.py"], None),
        (["python3", "notpy"], None),
    ],
)
def test_the_python_script_of_a_command(argv: list[str], script: str | None) -> None:
    assert python_script(argv) == script
