"""Logs on disk as the seed projects keep them (docs/logs.md, "The latest links"): real jobs
leave logs/latest -> the newest run folder and latest-node-N.out -> latest/node-N.out, local
jobs write node-N-STAMP.out behind a node-N.out link; env.log_level DEBUG shows the trainer's
debug lines; an elastic Slurm job (nodes 1:2) runs with torchrun's c10d rendezvous."""

from __future__ import annotations

import json
import os
import re
import subprocess
import threading
import time
from pathlib import Path

import pytest

from jobkit.doctor.scan import job_files
from jobkit.render.engine import render
from tests.backends.cli import Jobkit
from tests.render.helpers import GOLDEN_PYTHON, spec_from

PRINT_ENV = (
    "import os; print('env', os.environ['RANK'], os.environ['WORLD_SIZE'],"
    " os.environ['GROUP_WORLD_SIZE'], flush=True)"
)


@pytest.fixture
def jobkit(tmp_path: Path, jobkit_home: Path) -> Jobkit:
    workdir = tmp_path / "work dir"  # a space: the links must survive quoting
    workdir.mkdir()
    return Jobkit(workdir=workdir, home=jobkit_home)


def write_spec(jobkit: Jobkit, name: str, **sections: object) -> str:
    spec = {"name": name, "backend": "local", **sections}
    spec.setdefault("run", {"command": ["python", "-c", PRINT_ENV]})
    path = jobkit.workdir / f"{name}.yaml"
    path.write_text(json.dumps(spec))  # JSON is YAML
    return path.name


def submit_and_wait(jobkit: Jobkit, spec: str, timeout: float = 300) -> dict[str, object]:
    done = jobkit.run("submit", spec, "--wait", timeout=timeout)
    assert done.returncode == 0, done.stdout + done.stderr
    return jobkit.status("--last")


def run_dir_of(job: dict[str, object]) -> Path:
    paths = job["log_paths"]
    assert isinstance(paths, dict)
    return Path(paths["run_dir"])


@pytest.mark.slow
def test_latest_links_follow_the_newest_local_job_and_debug_lines_show(jobkit: Jobkit) -> None:
    trainer = {"train": {"config": "tiny-lm", "overrides": {"train.steps": 2}}}
    first = submit_and_wait(
        jobkit, write_spec(jobkit, "dbg", env={"log_level": "DEBUG"}, run=trainer)
    )
    logs = jobkit.workdir / "logs"
    first_dir = run_dir_of(first)
    assert os.readlink(logs / "latest") == first_dir.name
    # At DEBUG the trainer's debug lines reach its log and the console (node-0.out).
    rank_log = (first_dir / "rank-0.log").read_text()
    assert re.search(r"rank 0: debug: joining the process group: backend gloo", rank_log)
    assert "debug: joined the process group (gloo)" in (first_dir / "node-0.out").read_text()
    # node-0.out links to the timestamped file the launcher wrote.
    stamped = os.readlink(first_dir / "node-0.out")
    assert re.fullmatch(r"node-0-\d{8}-\d{6}\.out", stamped), stamped
    assert (first_dir / stamped).is_file() and not (first_dir / stamped).is_symlink()
    # doctor reads each node's output once (the link, not the stamped file as well).
    files = [path.name for path, _, _ in job_files(first["log_paths"], {})]  # type: ignore[arg-type]
    assert files.count("node-0.out") == 1 and stamped not in files, files
    shown = jobkit.run("logs", str(first["jobkit_id"]))
    assert "debug: joined the process group (gloo)" in shown.stdout, shown.stderr

    second = submit_and_wait(jobkit, write_spec(jobkit, "plain"))
    second_dir = run_dir_of(second)
    assert os.readlink(logs / "latest") == second_dir.name
    assert os.readlink(logs / "latest-node-0.out") == "latest/node-0.out"
    assert (logs / "latest-node-0.out").read_text() == (second_dir / "node-0.out").read_text()
    assert "env 0 1 1" in (logs / "latest-node-0.out").read_text()
    assert not list(logs.glob(".*.tmp"))


@pytest.mark.slow
def test_concurrent_jobs_leave_a_whole_latest_link(jobkit: Jobkit) -> None:
    """Three real jobs start at once into one logs folder; meanwhile a reader checks that
    `latest` always resolves (rename is atomic: there is never a moment without a link)."""
    specs = [write_spec(jobkit, f"c{i}") for i in range(3)]
    logs = jobkit.workdir / "logs"
    seen: set[str] = set()
    broken: list[str] = []
    stop = threading.Event()

    def watch() -> None:
        while not stop.is_set():
            try:
                seen.add(os.readlink(logs / "latest"))
            except FileNotFoundError:
                if seen:  # once made, the link must never be missing
                    broken.append("latest missing")
            time.sleep(0.001)

    reader = threading.Thread(target=watch)
    reader.start()
    try:
        runs = [jobkit.start("submit", spec, "--wait") for spec in specs]
        for process in runs:
            out, err = process.communicate(timeout=300)
            assert process.returncode == 0, out + err
    finally:
        stop.set()
        reader.join()
    assert not broken
    folders = {path.name for path in logs.iterdir() if path.is_dir() and not path.is_symlink()}
    assert os.readlink(logs / "latest") in folders and seen <= folders, (seen, folders)
    assert not list(logs.glob(".*.tmp"))


def test_many_link_updates_at_once_never_break_the_link(tmp_path: Path) -> None:
    """The rendered jobkit_link function itself, run by 6 shells 60 times each on one folder
    while this process reads the link: every read sees a whole link to one of the targets."""
    text = render(spec_from({"name": "x", "run": {"command": "p"}}), interpreter=GOLDEN_PYTHON)
    function = re.search(r"^jobkit_link\(\) \{\n.*?^\}\n", text, re.M | re.S)
    assert function is not None
    logs = tmp_path / "logs"
    logs.mkdir()
    loop = (
        f'jobkit_logs_dir="$1"; JOBKIT_JOB_ID="$2"\n{function.group(0)}'
        'for i in $(seq 60); do jobkit_link "run-$JOBKIT_JOB_ID-$i" latest; done\n'
    )
    shells = [subprocess.Popen(["bash", "-c", loop, "link", str(logs), str(n)]) for n in range(6)]
    reads, bad = 0, []
    while any(shell.poll() is None for shell in shells):
        try:
            target = os.readlink(logs / "latest")
            reads += 1
            if not re.fullmatch(r"run-\d-\d+", target):
                bad.append(target)
        except FileNotFoundError:
            if reads:
                bad.append("missing")
    assert all(shell.wait() == 0 for shell in shells)
    assert not bad and reads > 0
    assert re.fullmatch(r"run-\d-60", os.readlink(logs / "latest"))
    assert sorted(path.name for path in logs.iterdir()) == ["latest"]


@pytest.mark.slurm
@pytest.mark.slow
@pytest.mark.usefixtures("slurm_cluster")
def test_an_elastic_slurm_job_runs_with_c10d_and_moves_latest(jobkit: Jobkit) -> None:
    """nodes 1:2: Slurm gives 1 or 2 nodes (others' jobs share the cluster); torchrun runs
    with min 1, max 2 nodes and c10d rendezvous (its INFO lines: env.log_level INFO) and
    forms a world of that many nodes. With fewer than max nodes c10d waits its last-call
    time (30 s) before it starts."""
    spec = write_spec(
        jobkit,
        "elastic",
        backend="slurm",
        resources={"nodes": "1:2", "time": 5},
        launch={"rdzv_timeout": 120},
        env={"log_level": "INFO"},
    )
    job = submit_and_wait(jobkit, spec, timeout=400)
    run_dir = run_dir_of(job)
    logs = jobkit.workdir / "logs"
    assert os.readlink(logs / "latest") == run_dir.name == f"elastic-{job['scheduler_id']}"
    out = Path(str(job["log_paths"]["out"])).read_text()  # type: ignore[index]
    nodes = int(re.search(r"on (\d) node\(s\)", out)[1])  # type: ignore[index]
    assert nodes in (1, 2), out
    for n in range(nodes):
        text = (logs / f"latest-node-{n}.out").read_text()
        # torchrun's launch configuration and rendezvous result, at LOGLEVEL=INFO.
        for setting in (
            r"min_nodes\s+: 1",
            r"max_nodes\s+: 2",
            r"rdzv_backend\s+: c10d",
            r"rdzv_configs\s+: \{'join_timeout': '120'",
            rf"group_world_size={nodes}$",
        ):
            assert re.search(setting, text, re.M), (setting, text)
        # The world it got: one process per node.
        assert re.search(rf"^env \d {nodes} {nodes}$", text, re.M), text
