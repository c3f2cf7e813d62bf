"""The two sides .ci/run runs at once (tests/plugins/groups.py) and its slowest-tests listing
(.ci/slowest.py): which tests count as the cluster's, shards by file, the merged listing."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.plugins.groups import shard_of

REPO = Path(__file__).resolve().parents[1]


def collected(*args: str, env: dict[str, str] | None = None) -> list[str]:
    """The test ids `pytest --collect-only -q ARGS` selects."""
    done = subprocess.run(
        [sys.executable, "-m", "pytest", "--collect-only", "-q", "-p", "no:cacheprovider", *args],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=120,
        # Without the shard this test itself may run in (.ci/run sets JOBKIT_TEST_SHARD).
        env={**{k: v for k, v in os.environ.items() if k != "JOBKIT_TEST_SHARD"}, **(env or {})},
        check=False,
    )
    assert done.returncode in (0, 5), done.stdout + done.stderr
    return [line for line in done.stdout.splitlines() if "::" in line]


def test_a_cluster_marker_or_fixture_makes_a_test_the_clusters() -> None:
    """test_cpus.py: one test asks for slurm_cluster (and is marked slurm); the others not."""
    cluster = collected("-m", "cluster", "tests/render/test_cpus.py")
    others = collected("-m", "not cluster", "tests/render/test_cpus.py")
    assert cluster == ["tests/render/test_cpus.py::test_slurm_gets_the_request"]
    assert others and not set(cluster) & set(others)


def test_shards_split_by_whole_files_and_cover_everything() -> None:
    files = [
        "tests/spec/test_layering.py",
        "tests/core/test_arrays.py",
        "tests/spec/test_scalars.py",
    ]
    every = collected(*files)
    shards = [collected(*files, env={"JOBKIT_TEST_SHARD": f"{i}/2"}) for i in range(2)]
    assert sorted(shards[0] + shards[1]) == sorted(every)
    for shard in shards:
        assert shard
    assert not {t.split("::")[0] for t in shards[0]} & {t.split("::")[0] for t in shards[1]}


@pytest.mark.parametrize("value", ["2/2", "-1/2", "1", "a/b", "0/0"])
def test_a_bad_shard_is_refused(value: str) -> None:
    with pytest.raises(ValueError):
        shard_of(value)


def test_slowest_merges_the_reports(tmp_path: Path) -> None:
    one, two = tmp_path / "a.xml", tmp_path / "b.xml"
    one.write_text(
        '<testsuites><testsuite><testcase classname="tests.e2e.test_x" name="test_slow"'
        ' time="540.5"/><testcase classname="tests.e2e.test_x" name="test_quick" time="0.1"/>'
        "</testsuite></testsuites>"
    )
    two.write_text(
        '<testsuites><testsuite><testcase classname="tests.spec.test_y" name="test_mid"'
        ' time="12.0"/></testsuite></testsuites>'
    )
    done = subprocess.run(
        [sys.executable, str(REPO / ".ci" / "slowest.py"), "2", str(one), str(two)],
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )
    lines = done.stdout.splitlines()
    assert lines[1:] == [
        "    540.5  tests.e2e.test_x::test_slow",
        "     12.0  tests.spec.test_y::test_mid",
    ]
