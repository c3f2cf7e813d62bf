"""The processes .ci/run runs at once (tests/plugins/groups.py) and its slowest-tests listing
(.ci/slowest.py): which tests count as the cluster's, which need it alone, shards by file
balanced by recorded seconds, the merged listing and the durations table (.ci/durations.py)."""

from __future__ import annotations

import os
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.plugins.groups import balance, lane_items, recorded_seconds, shard_items, shard_of

REPO = Path(__file__).resolve().parents[1]


def collected(*args: str, env: dict[str, str] | None = None) -> list[str]:
    """The test ids `pytest --collect-only -q ARGS` selects."""
    done = subprocess.run(
        [sys.executable, "-m", "pytest", "--collect-only", "-q", "-p", "no:cacheprovider", *args],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=120,
        # Without the shard or lane this test itself may run in (.ci/run sets them).
        env={
            **{
                k: v
                for k, v in os.environ.items()
                if k not in ("JOBKIT_TEST_SHARD", "JOBKIT_TEST_LANE")
            },
            **(env or {}),
        },
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


def test_the_lanes_split_the_cluster_tests_and_the_last_has_the_hosts() -> None:
    """.ci/run's lanes (JOBKIT_TEST_LANE): a test that asks for a Slurm fixture uses the Slurm
    nodes even when unmarked; test_installed needs Slurm and ssh (a Slurm file); ssh or SGE
    only: the last lane, whatever the balance."""
    files = [
        "tests/render/test_cpus.py",
        "tests/e2e/test_installed.py",
        "tests/backends/test_ssh.py",
    ]
    rest = "cluster and not cluster_alone"
    slurm = collected("-m", f"{rest} and (slurm or pbs)", *files)
    hosts = collected("-m", f"{rest} and not slurm and not pbs", *files)
    assert "tests/render/test_cpus.py::test_slurm_gets_the_request" in slurm
    assert "tests/e2e/test_installed.py::test_the_examples_run_from_a_copied_folder" in slurm
    assert hosts and all(test.startswith("tests/backends/test_ssh.py::") for test in hosts)
    lanes = [collected("-m", rest, *files, env={"JOBKIT_TEST_LANE": f"{i}/3"}) for i in range(3)]
    assert sorted(lanes[0] + lanes[1] + lanes[2]) == sorted(slurm + hosts)
    assert set(hosts) <= set(lanes[2])
    assert lanes[0] and lanes[1]  # the two Slurm files, one a lane (the hosts' lane is full)


def test_the_last_lane_takes_fewer_slurm_files_after_the_hosts_tests() -> None:
    """lane_items: the ssh and Grid Engine tests' seconds come first in the last lane; the
    Slurm files are balanced over every lane from there, whole files."""
    items = [
        Stand(Path("h.py"), "h.py::t1", ("cluster", "ssh")),
        Stand(Path("h.py"), "h.py::t2", ("cluster", "sge")),
        Stand(Path("a.py"), "a.py::t", ("cluster", "slurm")),
        Stand(Path("b.py"), "b.py::t1", ("cluster", "slurm")),
        Stand(Path("b.py"), "b.py::t2", ("cluster", "pbs")),
        Stand(Path("c.py"), "c.py::t", ("cluster", "slurm")),
        Stand(Path("d.py"), "d.py::t", ("cluster", "pbs")),
    ]
    seconds = {
        "h.py::t1": 60.0, "h.py::t2": 30.0,  # the hosts' lane starts at 90 s
        "a.py::t": 100.0, "b.py::t1": 50.0, "b.py::t2": 30.0, "c.py::t": 70.0, "d.py::t": 40.0,
    }  # fmt: skip
    lanes = [lane_items(items, i, 3, seconds) for i in range(3)]
    kept = [[item.nodeid for item in keep] for keep, _ in lanes]
    # a (100) -> lane 0; b (80) -> 1; c (70) -> 1 (80 < 90); d (40) -> 2 (90 + 40)
    assert kept == [
        ["a.py::t"],
        ["b.py::t1", "b.py::t2", "c.py::t"],
        ["h.py::t1", "h.py::t2", "d.py::t"],
    ]
    for keep, left in lanes:
        assert sorted(i.nodeid for i in keep + left) == sorted(i.nodeid for i in items)


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


def test_balance_puts_the_heaviest_first_on_the_lightest_shard() -> None:
    weights = {"a": 10.0, "b": 6.0, "c": 5.0, "d": 4.0, "e": 1.0}
    placed = balance(weights, 2)
    loads = [sum(w for u, w in weights.items() if placed[u] == s) for s in range(2)]
    assert placed == {"a": 0, "b": 1, "c": 1, "d": 0, "e": 1}
    assert loads == [14.0, 12.0]
    assert balance({"x": 1.0, "y": 1.0}, 3) == {"x": 0, "y": 1}  # ties: by name, lowest shard
    assert balance(weights, 2, head=[20.0]) == {"a": 1, "b": 1, "c": 1, "d": 0, "e": 1}


@dataclass
class Stand:
    """What shard_items reads of a collected test: its file, id and markers."""

    path: Path
    nodeid: str
    markers: tuple[str, ...] = ()

    def get_closest_marker(self, name: str) -> str | None:
        return name if name in self.markers else None


def test_every_file_with_a_preemption_test_lands_in_one_shard() -> None:
    """Jobs of norequeue are preempted by any urgent job: such tests never run at once, even
    when the preemption files weigh more than a shard's share."""
    items = [
        Stand(Path("a.py"), "a.py::t1", ("preemption",)),
        Stand(Path("a.py"), "a.py::t2"),  # goes along with its file
        Stand(Path("b.py"), "b.py::t", ("preemption",)),
        Stand(Path("c.py"), "c.py::t"),
        Stand(Path("d.py"), "d.py::t"),
    ]
    seconds = {"a.py::t1": 50.0, "a.py::t2": 5.0, "b.py::t": 50.0, "c.py::t": 20.0}
    shards = [shard_items(items, i, 2, seconds) for i in range(2)]
    kept = [[item.nodeid for item in keep] for keep, _ in shards]
    assert kept == [["a.py::t1", "a.py::t2", "b.py::t"], ["c.py::t", "d.py::t"]]
    for keep, left in shards:
        assert sorted(i.nodeid for i in keep + left) == sorted(i.nodeid for i in items)
    marked = collected(
        "-m",
        "preemption",
        "tests/e2e/test_preemption.py",
        "tests/e2e/test_attempts.py",
        "tests/manager/test_attempts.py",
    )
    assert {t.split("::")[0] for t in marked} == {
        "tests/e2e/test_preemption.py",
        "tests/e2e/test_attempts.py",
        "tests/manager/test_attempts.py",
    }


def test_the_tests_that_stop_daemons_need_the_cluster_alone() -> None:
    faults = "tests/reliability/test_scheduler_faults.py"
    alone = collected("-m", "cluster_alone", "tests/cluster/test_ctl.py", faults)
    ctl = [t for t in alone if t.startswith("tests/cluster/test_ctl.py::")]
    assert len(ctl) == 6  # every test of test_ctl.py
    assert {t.split("::")[1] for t in alone if t.startswith(faults)} == {
        "test_submit_while_slurmctld_is_down",
        "test_status_while_slurmctld_is_down",
        "test_finished_job_keeps_its_last_state_until_sacct_answers",
        "test_real_accounting_switch",
    }


def test_the_files_ci_collects_for_the_cluster_alone_tests_hold_them_all() -> None:
    """.ci/run collects only the test files that hold the marker's name for that phase (its
    grep): every test with the marker is in one of them (no conftest or plugin gives it)."""
    marked = collected("-m", "cluster_alone", "tests")
    pattern = "mark." + "cluster_alone"  # as .ci/run greps it (not written here as one word)
    grep = subprocess.run(
        ["grep", "-rl", "--include=test_*.py", pattern, "tests"],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )
    assert marked
    assert {test.split("::")[0] for test in marked} == set(grep.stdout.split())


def test_durations_table_is_read_and_written(tmp_path: Path) -> None:
    table = recorded_seconds()
    assert table, "tests/plugins/durations.json lists the slow tests"
    assert all(test.startswith("tests/") and "::" in test for test in table)
    report = tmp_path / "r.xml"
    report.write_text(
        '<testsuites><testsuite><testcase classname="tests.e2e.test_slurm"'
        ' name="test_two_slurm_nodes_train_the_bundled_model[srun]" time="21.84"/>'
        '<testcase classname="tests.spec.test_layering" name="test_quick" time="0.1"/>'
        "</testsuite></testsuites>"
    )
    out = tmp_path / "durations.json"
    subprocess.run(
        [sys.executable, str(REPO / ".ci" / "durations.py"), str(out), str(report)],
        timeout=60,
        check=True,
    )
    assert recorded_seconds(out) == {
        "tests/e2e/test_slurm.py::test_two_slurm_nodes_train_the_bundled_model[srun]": 21.8
    }
    assert recorded_seconds(tmp_path / "missing.json") == {}


def test_durations_of_several_runs_are_averaged(tmp_path: Path) -> None:
    """One cluster test's time moves by minutes between runs: the table takes the mean."""
    case = '<testcase classname="tests.e2e.test_slurm" name="test_a" time="{}"/>'
    reports = []
    for index, seconds in enumerate(["100.0", "160.0", "0.3"]):
        report = tmp_path / f"r{index}.xml"
        quick = case.replace("test_a", "test_q").format(seconds if index == 2 else "0.4")
        report.write_text(
            f"<testsuites><testsuite>{case.format(seconds)}{quick}</testsuite></testsuites>"
        )
        reports.append(str(report))
    out = tmp_path / "durations.json"
    subprocess.run(
        [sys.executable, str(REPO / ".ci" / "durations.py"), str(out), *reports],
        timeout=60,
        check=True,
    )
    # test_a: (100 + 160 + 0.3) / 3; test_q's mean (0.37 s) is under MIN_SECONDS
    assert recorded_seconds(out) == {"tests/e2e/test_slurm.py::test_a": 86.8}


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


def test_an_unlisted_cluster_test_weighs_as_the_median_listed_one() -> None:
    """A new e2e test is minutes long: counted as 0.2 s, every new one landed in one lane."""
    items = [
        Stand(Path("a.py"), "a.py::t", ("cluster",)),
        Stand(Path("b.py"), "b.py::t", ("cluster",)),
        Stand(Path("c.py"), "c.py::t", ("cluster",)),
        Stand(Path("new1.py"), "new1.py::t", ("cluster",)),
        Stand(Path("new2.py"), "new2.py::t", ("cluster",)),
        Stand(Path("unit.py"), "unit.py::t"),
    ]
    seconds = {"a.py::t": 100.0, "b.py::t": 60.0, "c.py::t": 40.0}
    kept = [[i.nodeid for i in shard_items(items, s, 2, seconds)[0]] for s in range(2)]
    # weights a 100, b 60, new1 60, new2 60 (the median), c 40, unit 0.2: 160.2 and 160
    assert kept == [["a.py::t", "new2.py::t", "unit.py::t"], ["b.py::t", "c.py::t", "new1.py::t"]]


def test_slowest_lists_the_tests_that_used_the_most_cpu(tmp_path: Path) -> None:
    """A real pytest run with tests/plugins/cpu.py: a test that burns CPU in a child process
    it waits for gets about that much in its `cpu_s` property, and .ci/slowest.py lists it
    first, with the total."""
    (tmp_path / "conftest.py").write_text('pytest_plugins = ["tests.plugins.cpu"]\n')
    (tmp_path / "test_burn.py").write_text(
        "import subprocess, sys\n"
        "BURN = 'import time\\nt = time.process_time()\\n'\n"
        "BURN += 'while time.process_time() - t < 1.5: pass'\n"
        "def test_burns():\n"
        "    subprocess.run([sys.executable, '-c', BURN], check=True)\n"
        "def test_idle():\n"
        "    pass\n"
    )
    report = tmp_path / "report.xml"
    subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", f"--junitxml={report}"],
        cwd=tmp_path,
        env={**os.environ, "PYTHONPATH": str(REPO)},
        capture_output=True,
        timeout=120,
        check=True,
    )
    done = subprocess.run(
        [sys.executable, str(REPO / ".ci" / "slowest.py"), "1", str(report)],
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )
    lines = done.stdout.splitlines()
    cpu_at = next(i for i, line in enumerate(lines) if line.lstrip().startswith("CPU-s"))
    seconds, test = lines[cpu_at + 1].split()
    assert test == "test_burn::test_burns" and 1.4 <= float(seconds) <= 3.0, lines
    assert len(lines) == cpu_at + 2, lines


CLAIMED_TEST = """\
import os
import time
from pathlib import Path

import pytest

pytestmark = pytest.mark.{marker}
LOG = Path(os.environ["CLAIMS_LOG"])


def note(what: str) -> None:
    with LOG.open("a") as log:
        log.write(f"{{os.environ['JOBKIT_TEST_LANE']}} {{what}}\\n")


@pytest.fixture(scope="module")
def built() -> str:
    note("setup {name}")
    return "{name}"


@pytest.mark.parametrize("n", range({count}))
def test_it(built: str, n: int, request: pytest.FixtureRequest) -> None:
    note(request.node.nodeid)
    time.sleep(0.2)
"""


def test_lanes_that_claim_run_every_file_once_whole_and_the_hosts_in_the_last(
    tmp_path: Path,
) -> None:
    """Three real pytest processes with tests/plugins/claims.py on a made-up suite: every
    test runs once, a file's tests in one lane with its module fixture built once, the ssh
    file in the last lane; each lane reports what the others ran as deselected."""
    files = {"a.py": ("slurm", 2), "b.py": ("pbs", 1), "c.py": ("slurm", 3), "h.py": ("ssh", 2)}
    for name, (marker, count) in files.items():
        text = CLAIMED_TEST.format(marker=marker, name=name, count=count)
        (tmp_path / f"test_{name}").write_text(text)
    log, claims = tmp_path / "ran.log", tmp_path / "claims"
    plugins = ("claims", "groups", "gates")  # claims first: groups imports it
    argv = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider"]
    argv += [word for name in plugins for word in ("-p", f"tests.plugins.{name}")]
    argv += ["-W", "ignore::pytest.PytestUnknownMarkWarning"]
    env = {
        **{k: v for k, v in os.environ.items() if not k.startswith("JOBKIT_TEST_")},
        "PYTHONPATH": str(REPO),
        "CLAIMS_LOG": str(log),
        "JOBKIT_TEST_CLAIMS": str(claims),
    }
    lanes = [
        subprocess.Popen(
            argv,
            cwd=tmp_path,
            env={**env, "JOBKIT_TEST_LANE": f"{i}/3"},
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
        )
        for i in range(3)
    ]
    outputs = [lane.communicate(timeout=120)[0] for lane in lanes]
    assert [lane.returncode for lane in lanes] == [0, 0, 0], outputs
    ran = [line.split(" ", 1) for line in log.read_text().splitlines()]
    tests = [(lane, what) for lane, what in ran if not what.startswith("setup ")]
    every = [
        f"test_{name}::test_it[{n}]" for name, (_, count) in files.items() for n in range(count)
    ]
    assert sorted(what for _, what in tests) == sorted(every)  # each once
    lane_of = {what.split("::")[0]: lane for lane, what in tests}
    for lane, what in tests:
        assert lane_of[what.split("::")[0]] == lane, ran  # a file whole in one lane
    setups = sorted(what for _, what in ran if what.startswith("setup "))
    assert setups == sorted(f"setup {name}" for name in files)  # once a file
    assert lane_of["test_h.py"] == "2/3"
    for index, output in enumerate(outputs):
        count = sum(1 for lane, _ in tests if lane == f"{index}/3")
        assert f"{count} passed" in output and f"{8 - count} deselected" in output, output
    notes = sorted(path.read_text() for path in claims.iterdir())
    assert len(notes) == 3 and all(note.startswith("lane ") for note in notes), notes
