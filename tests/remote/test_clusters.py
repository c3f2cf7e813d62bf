"""clusters.yaml: read with file:line: key errors, written by `jobkit clusters add`."""

from __future__ import annotations

from pathlib import Path

import pytest

from jobkit.cli import run
from jobkit.core.errors import JobkitError, SpecError
from jobkit.remote.clusters import Cluster, get_cluster, load_clusters, save_cluster

GOOD = """\
clusters:
  mycluster:
    host: login.example.edu
    workdir: /scratch/alice/jobkit
    backend: slurm
    python: /scratch/alice/venv/bin/python
    defaults: {resources.partition: gpu, resources.account: abc123}
"""


def _write(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "clusters.yaml"
    path.write_text(text)
    return path


def test_the_issues_example_reads_as_written(tmp_path: Path) -> None:
    cluster = load_clusters(_write(tmp_path, GOOD))["mycluster"]
    assert cluster == Cluster(
        "mycluster",
        "login.example.edu",
        "/scratch/alice/jobkit",
        "slurm",
        "/scratch/alice/venv/bin/python",
        {"resources.partition": "gpu", "resources.account": "abc123"},
    )
    assert cluster.default_sets() == [
        "backend=slurm",
        "env.python=/scratch/alice/venv/bin/python",
        'resources.partition="gpu"',
        'resources.account="abc123"',
    ]


@pytest.mark.parametrize(
    ("old", "new", "expected"),
    [
        (
            "workdir: /scratch/alice/jobkit",
            "workdir: scratch/alice",
            "clusters.yaml:4: clusters.mycluster.workdir: 'scratch/alice' must be an absolute path",
        ),
        (
            "workdir: /scratch/alice/jobkit",
            "workdir: '/scratch/a b; rm -rf ~'",
            "clusters.yaml:4: clusters.mycluster.workdir: '/scratch/a b; rm -rf ~' must be",
        ),
        (
            "host: login.example.edu",
            "host: -oProxyCommand=evil",
            "clusters.yaml:3: clusters.mycluster.host: '-oProxyCommand=evil' is not a host name",
        ),
        (
            "backend: slurm",
            "backend: pbs",
            "clusters.yaml:5: clusters.mycluster.backend: 'pbs' cannot be used on a remote"
            " cluster yet",
        ),
        (
            "    backend: slurm\n",
            "    backend: slurm\n    hosts: [a]\n",
            "clusters.yaml:6: clusters.mycluster.hosts: unknown key (known: host, workdir,",
        ),
        (
            "    host: login.example.edu\n",
            "",
            "clusters.yaml:2: clusters.mycluster: `host` is required",
        ),
        (
            "resources.partition: gpu",
            "resources.partition: [a, b]",
            "clusters.yaml:7: clusters.mycluster.defaults.resources.partition: must be a single",
        ),
    ],
)
def test_a_bad_entry_is_one_line_naming_file_line_and_key(
    tmp_path: Path, old: str, new: str, expected: str
) -> None:
    path = _write(tmp_path, GOOD.replace(old, new))
    with pytest.raises(SpecError) as caught:
        load_clusters(path)
    shown = caught.value.show()
    assert "\n" not in shown
    assert shown.startswith(f"{tmp_path}/") and expected in shown, shown


def test_an_unknown_cluster_names_the_known_ones(tmp_path: Path) -> None:
    path = _write(tmp_path, GOOD)
    with pytest.raises(JobkitError, match=r"no cluster 'other' in .* \(known: mycluster\)"):
        get_cluster("other", path)


def test_saving_keeps_the_others_and_reads_back(tmp_path: Path) -> None:
    path = _write(tmp_path, GOOD)
    save_cluster(Cluster("b", "n1", "/tmp/jk", python=None), path)
    found = load_clusters(path)
    assert sorted(found) == ["b", "mycluster"]
    assert found["b"] == Cluster("b", "n1", "/tmp/jk", "slurm", None, {})
    assert path.stat().st_mode & 0o077 == 0


def test_clusters_add_and_list_from_the_cli(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("JOBKIT_HOME", str(tmp_path))
    add = ["clusters", "add", "c1", "--host", "n1", "--workdir", "/tmp/w"]
    assert run([*add, "--default", "resources.partition=debug"]) == 0
    assert load_clusters(tmp_path / "clusters.yaml")["c1"].defaults == {
        "resources.partition": "debug"
    }
    capsys.readouterr()
    assert run(["clusters", "list"]) == 0
    assert capsys.readouterr().out.splitlines() == [
        "NAME  HOST  WORKDIR  BACKEND  PYTHON",
        "c1    n1    /tmp/w   slurm    -",
    ]
    assert run(["clusters", "add", "c2", "--host", "n1", "--workdir", "w"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("jobkit: jobkit clusters add: clusters.c2.workdir: 'w' must be an")
    assert sorted(load_clusters(tmp_path / "clusters.yaml")) == ["c1"]
