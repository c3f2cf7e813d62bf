"""Frozen code, provenance, `jobkit diff` and `jobkit rerun` through the real CLI, on this
machine (local) and on the real Slurm cluster (docs/provenance.md; issue 26's "done when").

Each test submits from a small git work tree of its own (tests/provenance/repo.py): the job
runs from the snapshot taken at submit, whatever is edited while it waits. The jobs run
with launch.launcher none (one process, no torchrun agent to start: the provenance is the
job script's, whatever the launcher); the rerun test trains the bundled model that way too.
"""

from __future__ import annotations

import json
import subprocess
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.e2e import runs
from tests.e2e.cli import VENV, Jobkit
from tests.provenance.repo import make_repo

FINAL = {"SUCCEEDED", "FAILED", "CANCELLED", "TIMEOUT"}
BACKENDS = [
    pytest.param("local", id="local"),
    pytest.param("slurm", id="slurm", marks=pytest.mark.slurm),
]


def _job_file(sub: Path, backend: str, **extra: Any) -> None:
    """sub/job.yaml: `python prog.py` on `backend` (Slurm: one node, n1, so that two runs
    share their host), launcher none (no torchrun agent), with the test's other keys."""
    spec: dict[str, Any] = {
        "name": "frozen",
        "backend": backend,
        "env": {"venv": str(VENV)},
        "launch": {"launcher": "none"},
        "run": {"command": ["python", "prog.py"]},
    }
    if backend == "slurm":  # a time limit of its own: the partition's may change meanwhile
        spec["resources"] = {"partition": "debug", "time": "00:10:00"}
        spec["scheduler"] = {"extra": ["--nodelist=n1"]}
    for key, value in extra.items():
        section, name = key.split("__")
        spec.setdefault(section, {})[name] = value
    (sub / "job.yaml").write_text(yaml.safe_dump(spec))


def _submit(jobkit: Jobkit, sub: Path, *sets: str) -> str:
    """`jobkit submit job.yaml` (no wait) from `sub`: the jobkit id."""
    done = jobkit.run(
        "submit", "job.yaml", "--set", f"logs.dir={jobkit.logs_dir}", *sets, "--json", cwd=sub
    )
    assert done.returncode == 0, done.stderr
    return str(json.loads(done.stdout)["jobkit_id"])


def _finished(jobkit: Jobkit, job: str, timeout: float = 600.0) -> dict[str, Any]:
    record = jobkit.wait_state(job, FINAL, timeout=timeout)
    assert record["state"] == "SUCCEEDED", record
    return record


@pytest.mark.parametrize("backend", BACKENDS)
def test_a_waiting_job_runs_the_code_submitted(
    backend: str, jobkit: Jobkit, tmp_path: Path
) -> None:
    """The job waits (Slurm: held; local: its env.setup waits for a gate file), the program
    is edited, then the job goes on: it prints what was submitted."""
    sub = make_repo(tmp_path)
    gate = tmp_path / "gate"
    if backend == "slurm":
        _job_file(sub, backend, scheduler__extra=["--nodelist=n1", "--hold"])
    else:
        wait = f"for i in $(seq 600); do [ -e {gate} ] && break; sleep 0.1; done"
        _job_file(sub, backend, env__setup=[wait])
    (sub / "prog.py").write_text('print("submitted version")\n')  # uncommitted: frozen too
    job = _submit(jobkit, sub)
    (sub / "prog.py").write_text('print("edited after submit")\n')
    if backend == "slurm":
        status = jobkit.status(job)
        assert status["state"] == "HELD", status
        subprocess.run(["scontrol", "release", status["scheduler_id"]], check=True, timeout=30)
    else:
        gate.touch()
    record = _finished(jobkit, job)
    out = (Path(record["log_paths"]["run_dir"]) / "node-0.out").read_text()
    assert "submitted version" in out and "edited after submit" not in out, out
    shown = json.loads(jobkit.run("show", job, "--json").stdout)
    code = shown["submit"]["code"]
    assert code["changed"] == ["sub/job.yaml", "sub/prog.py"] and code["branch"] == "main", code
    assert shown["started"]["working_folder"] == code["code_dir"], shown["started"]
    assert shown["files"]["snapshot_present"] is True
    patch = Path(shown["files"]["patch"]).read_text()
    assert '+print("submitted version")' in patch, patch


def _fake_package(folder: Path, version: str) -> None:
    """A distribution `fakepkg` of `version`, seen through PYTHONPATH (a dist-info only)."""
    info = folder / "fakepkg.dist-info"
    info.mkdir(parents=True, exist_ok=True)
    (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: fakepkg\nVersion: {version}\n")


@pytest.mark.parametrize("backend", BACKENDS)
def test_diff_names_exactly_the_package_the_line_and_the_key(
    backend: str, jobkit: Jobkit, tmp_path: Path
) -> None:
    sub = make_repo(tmp_path)
    site = tmp_path / "site"
    _fake_package(site, "1.0")
    _job_file(sub, backend, env__vars={"PYTHONPATH": str(site)})
    first = _submit(jobkit, sub, "--set", "env.vars.KNOB=1")
    _finished(jobkit, first)
    _fake_package(site, "2.0")
    (sub / "prog.py").write_text('print("v2")\n')
    second = _submit(jobkit, sub, "--set", "env.vars.KNOB=2")
    _finished(jobkit, second)
    done = jobkit.run("diff", first, second, "--json")
    assert done.returncode == 0, done.stderr
    found = {section: part["differs"] for section, part in json.loads(done.stdout).items()}
    assert found == {
        "spec": ["env.vars.KNOB"],
        "code": ["sub/prog.py"],
        "packages": ["fakepkg"],
        "container": [],
        "hosts": [],
        "scheduler": [],
    }
    text = jobkit.run("diff", first, second).stdout
    assert "  env.vars.KNOB: '1' -> '2'" in text and "  fakepkg: 1.0 -> 2.0" in text, text
    assert '    -print("v1")' in text and '    +print("v2")' in text, text
    assert text.rstrip().endswith("same: container, hosts, scheduler"), text


@pytest.mark.parametrize("backend", BACKENDS)
def test_rerun_reproduces_the_final_loss_bit_exactly(
    backend: str, jobkit: Jobkit, tmp_path: Path
) -> None:
    """A short CPU training (one process, launcher none: no torchrun agent), rerun from its
    snapshot after the work tree changed: the same final loss, to the last bit; a rerun
    whose snapshot is gone is refused, naming it."""
    sub = make_repo(tmp_path)
    spec: dict[str, Any] = {
        "name": "loss",
        "backend": backend,
        "env": {"venv": str(VENV)},
        "launch": {"launcher": "none"},
        "run": {"train": {"config": "mlp", "overrides": {"train.steps": 12}}},
    }
    if backend == "slurm":
        spec["resources"] = {"partition": "debug", "time": "00:10:00"}
    (sub / "job.yaml").write_text(yaml.safe_dump(spec))
    first = _submit(jobkit, sub)
    loss = runs.final_loss(Path(_finished(jobkit, first)["log_paths"]["run_dir"]))
    (sub / "prog.py").write_text('print("the work tree moved on")\n')
    done = jobkit.run("rerun", first, "--json", cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    again = json.loads(done.stdout)
    record = _finished(jobkit, again["jobkit_id"])
    assert runs.final_loss(Path(record["log_paths"]["run_dir"])).hex() == loss.hex()
    assert again["extra"]["rerun_of"] == first
    assert again["extra"]["code"]["tree"] == jobkit.status(first)["extra"]["code"]["tree"]
    snapshot = Path(again["extra"]["code"]["code_dir"])
    snapshot.rename(snapshot.with_name("moved"))
    refused = jobkit.run("rerun", first)
    assert refused.returncode == 1
    assert refused.stderr == (
        f"jobkit: {first}: its code snapshot is gone (it was {snapshot}): nothing to rerun from\n"
    )


def test_a_later_attempt_runs_the_runs_snapshot(jobkit: Jobkit, tmp_path: Path) -> None:
    """`jobkit retry` submits the run's next attempt from the first attempt's snapshot, not
    from the work tree as it is now; each attempt has its own provenance file."""
    sub = make_repo(tmp_path)
    marker = tmp_path / "second-time"
    gate = f"os.path.exists({str(marker)!r})"
    (sub / "prog.py").write_text(
        f"import os, sys\nprint('first code')\nsys.exit(0 if {gate} else 3)\n"
    )
    _job_file(sub, "local")
    first = _submit(jobkit, sub)
    assert jobkit.wait_state(first, FINAL, timeout=600)["state"] == "FAILED"
    (sub / "prog.py").write_text("print('edited code')\n")
    marker.touch()
    done = jobkit.run("retry", first, "--json", cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    second = json.loads(done.stdout)["jobkit_id"]
    # Not its state: the local backend reads a later attempt's end from the wrong folder
    # (FAILED "launcher vanished" on main too); what it ran is the point here.
    record = jobkit.wait_state(second, FINAL, timeout=600)
    run_dir = Path(record["log_paths"]["run_dir"])
    assert (run_dir / "exit_code").read_text().splitlines()[0] == "0"
    out = (run_dir / "node-0.out").read_text()
    assert "first code" in out and "edited code" not in out, out
    assert sorted(p.name for p in (run_dir / "provenance").glob("*.json")) == sorted(
        [f"{first}.json", f"{second}.json"]
    )
    shown = json.loads(jobkit.run("show", second, "--json").stdout)
    assert shown["started"]["job_id"] == second
    assert shown["job"]["extra"]["code"] == jobkit.status(first)["extra"]["code"]


def test_show_last_and_the_ids_other_verbs_take(jobkit: Jobkit, tmp_path: Path) -> None:
    """`jobkit show --last` is the most recent job; a unique prefix names a job as in
    `status`; an ID and --last together, or neither, is a usage error."""
    sub = make_repo(tmp_path)
    _job_file(sub, "local")
    _finished(jobkit, _submit(jobkit, sub))
    second = _submit(jobkit, sub)
    _finished(jobkit, second)
    last = jobkit.run("show", "--last", "--json")
    assert last.returncode == 0, last.stderr
    assert json.loads(last.stdout)["job"]["jobkit_id"] == second
    by_prefix = jobkit.run("show", second[:-1])
    assert by_prefix.returncode == 0 and by_prefix.stdout.startswith(second), by_prefix.stderr
    both = jobkit.run("show", second, "--last")
    neither = jobkit.run("show")
    assert (both.returncode, neither.returncode) == (2, 2)
    assert "give one job ID or --last (not both)" in both.stderr + neither.stderr


@pytest.mark.slurm
def test_a_submitit_job_runs_the_code_submitted(jobkit: Jobkit, tmp_path: Path) -> None:
    """submitit's tasks start in the snapshot (jobkit/backends/submitit/backend.py): held,
    edited, released, it prints what was submitted; its provenance is recorded."""
    sub = make_repo(tmp_path, 'import os\nprint("submitted version in", os.getcwd())\n')
    _job_file(sub, "slurm", scheduler__extra=["--nodelist=n1", "--hold"])
    spec = yaml.safe_load((sub / "job.yaml").read_text())
    del spec["launch"]  # submitit starts its own tasks (no launcher none there)
    (sub / "job.yaml").write_text(yaml.safe_dump({**spec, "backend": "submitit"}))
    job = _submit(jobkit, sub)
    (sub / "prog.py").write_text('print("edited after submit")\n')
    status = jobkit.status(job)
    assert status["state"] == "HELD", status
    subprocess.run(["scontrol", "release", status["scheduler_id"]], check=True, timeout=30)
    record = _finished(jobkit, job)
    shown = json.loads(jobkit.run("show", job, "--json").stdout)
    code_dir = shown["submit"]["code"]["code_dir"]
    out = Path(record["log_paths"]["out"]).read_text()
    assert f"submitted version in {code_dir}\n" in out and "edited" not in out, out
    # The job's side, taken by rank 0 (jobkit/backends/submitit/job.py) as scripts do.
    assert shown["started"]["working_folder"] == code_dir, shown["started"]
    assert shown["started"]["hosts"] == ["n1"] and shown["started"]["packages"]["submitit"]
