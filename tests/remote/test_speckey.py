"""`cluster: NAME` in a job spec (docs/remote.md): the same as `--on NAME`, read before the
spec is validated; bad values are one line naming file, line and key (exit 2) and nothing is
recorded, rendered or copied. Chains refuse a cluster in one line.

No ssh is needed: every case here stops before anything connects (`--dry-run` connects to
nothing; an unknown name is refused first)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from jobkit.cli import run
from jobkit.remote.clusters import Cluster, save_cluster

SPEC = """\
name: keyed
backend: local
{cluster}
run:
  train:
    config: tiny-lm
    overrides: {{train.steps: 2}}
"""


@pytest.fixture
def home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A JOBKIT_HOME whose clusters.yaml knows `tc` (its workdir is never reached here)."""
    home = tmp_path / "home"
    monkeypatch.setenv("JOBKIT_HOME", str(home))
    save_cluster(Cluster("tc", "n1", "/tmp/jobkit-speckey-never-made", "slurm", "/usr/bin/python3"))
    return home


def _spec(tmp_path: Path, cluster_line: str) -> Path:
    path = tmp_path / "job.yaml"
    path.write_text(SPEC.format(cluster=cluster_line))
    return path


def _nothing_recorded(home: Path) -> None:
    assert not (home / "jobs").exists() or not any((home / "jobs").iterdir())
    assert not (home / "remote").exists()


@pytest.mark.parametrize(
    ("line", "message"),
    [
        ("cluster: nope", "cluster: no cluster 'nope' in {home}/clusters.yaml (known: tc);"),
        ("cluster: [tc]", "cluster: must be the name of a cluster of clusters.yaml (a string)"),
        ("cluster: 3", "cluster: must be the name of a cluster of clusters.yaml (a string)"),
    ],
)
def test_a_bad_cluster_key_is_one_line_naming_file_line_and_key(
    home: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str], line: str, message: str
) -> None:
    spec = _spec(tmp_path, line)
    assert run(["submit", str(spec)]) == 2
    err = capsys.readouterr().err
    assert err.splitlines() == [err.strip()], err  # one line
    assert err.startswith(f"jobkit: {spec}:3: {message.format(home=home)}"), err
    _nothing_recorded(home)


def test_an_unknown_cluster_from_set_names_the_option(
    home: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    spec = _spec(tmp_path, "")
    assert run(["submit", str(spec), "--set", "cluster=zz"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("jobkit: --set cluster=zz: cluster: no cluster 'zz' in "), err
    _nothing_recorded(home)


def test_the_key_renders_for_the_cluster_as_on_does(
    home: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """`cluster: tc` in a `backend: local` file: the cluster's facts are layered over it
    (backend slurm, its python, its PYTHONPATH), exactly as `--on tc` gives."""
    assert run(["submit", str(_spec(tmp_path, "cluster: tc")), "--dry-run", "--json"]) == 0
    keyed = json.loads(capsys.readouterr().out)
    assert run(["submit", str(_spec(tmp_path, "")), "--on", "tc", "--dry-run", "--json"]) == 0
    on = json.loads(capsys.readouterr().out)
    assert keyed["cluster"] == on["cluster"] == "tc"
    assert keyed["backend"] == on["backend"] == "slurm"
    assert "/tmp/jobkit-speckey-never-made/lib" in keyed["script"]
    assert keyed["script"].replace("cluster: tc", "") == on["script"].replace("cluster: tc", "")
    _nothing_recorded(home)


def test_on_wins_over_a_different_key_and_says_so(
    home: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    save_cluster(Cluster("other", "n2", "/tmp/jobkit-speckey-other", "slurm", None))
    spec = _spec(tmp_path, "cluster: tc")
    assert run(["submit", str(spec), "--on", "other", "--dry-run", "--json"]) == 0
    out, err = capsys.readouterr()
    assert json.loads(out)["cluster"] == "other"
    assert f"jobkit: --on other wins over cluster: tc ({spec}:3)" in err.splitlines(), err


def test_a_chain_on_a_cluster_is_refused_in_one_line(
    home: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    keyed = _spec(tmp_path, "cluster: tc")
    plain = tmp_path / "plain.yaml"
    plain.write_text(SPEC.format(cluster=""))
    for argv in (
        ["submit", str(plain), str(keyed), "--chain"],
        ["submit", str(plain), "--after", "jk123", "--on", "tc"],
    ):
        assert run(argv) == 2
        err = capsys.readouterr().err
        assert "Error: chains (--chain, --after) are not submitted to a cluster over ssh yet" in err
    _nothing_recorded(home)


def test_shell_of_a_cluster_spec_opens_there(
    home: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The dry run: salloc on the cluster, from its workdir, with the cluster's facts in the
    rc (the real shell: tests/e2e/test_remote.py); without a terminal: one line, exit 2."""
    spec = _spec(tmp_path, "cluster: tc")
    assert run(["shell", str(spec), "--dry-run"]) == 0
    out = capsys.readouterr().out
    lines = out.splitlines()
    assert lines[0] == (
        "# would run (on tc, in n1:/tmp/jobkit-speckey-never-made), with JOBKIT_SHELL_RC set to:"
    )
    assert "export PYTHONPATH=/tmp/jobkit-speckey-never-made/lib" in lines
    assert lines[-1].startswith("salloc --job-name=keyed --nodes=1 "), lines[-1]
    assert run(["shell", str(spec)]) == 2  # pytest's stdin is no terminal
    err = capsys.readouterr().err
    assert err == "jobkit: shell: needs a terminal (its standard input is not one)\n"
    _nothing_recorded(home)


def test_render_of_a_cluster_spec_says_it_is_rendered_as_written(
    home: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Twice: the second render reads the remembered spec (spec/remembered.py)."""
    spec = _spec(tmp_path, "cluster: tc")
    for _ in range(2):
        assert run(["render", str(spec)]) == 0
        err = capsys.readouterr().err
        assert (
            "jobkit: note: cluster: tc: rendered here as written; `jobkit submit --dry-run`"
            " renders it with the cluster's facts"
        ) in err.splitlines(), err


def test_check_of_a_cluster_spec_says_it_is_checked_here(
    home: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    spec = _spec(tmp_path, "cluster: tc")
    run(["check", str(spec), "--fast"])
    err = capsys.readouterr().err
    assert (
        f"jobkit: note: cluster: tc ({spec}:3): checked here as written, with this machine's"
        " scheduler; `jobkit clusters check tc` checks the cluster"
    ) in err.splitlines(), err


def test_a_sweep_dry_run_on_the_cluster_lists_its_tasks(
    home: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    spec = _spec(tmp_path, "cluster: tc\nsweep: {grid: {optim.lr: [1e-3, 3e-4]}}")
    assert run(["submit", str(spec), "--dry-run", "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert (data["cluster"], data["backend"]) == ("tc", "slurm")
    assert data["sweep"] == [
        {"task": "0", "overrides": {"optim.lr": "1e-3"}},  # as written
        {"task": "1", "overrides": {"optim.lr": "3e-4"}},
    ]
    assert "--array=0-1" in data["script"]
    assert run(["submit", str(spec), "--dry-run"]) == 0
    err = capsys.readouterr().err.splitlines()
    assert err[-3:] == [
        "# sweep: 2 tasks as Slurm array",
        "#   task 0: lr=1e-3",
        "#   task 1: lr=3e-4",
    ], err
    _nothing_recorded(home)
