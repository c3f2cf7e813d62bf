"""`jobkit shell` and `jobkit run --here` for real: a pseudo-terminal types into the shell
jobkit opens in a Slurm allocation (or on this machine), and `salloc -N 2 jobkit run --here`
runs a two-node command job in the allocation salloc holds (docs/interactive.md)."""

from __future__ import annotations

import os
import pty
import re
import select
import subprocess
import time
from pathlib import Path

import pytest

from tests.e2e.cli import JOBKIT, Jobkit

TYPED = (
    'echo "GOT master=$MASTER_ADDR job=$SLURM_JOB_ID jobkit_job=$JOBKIT_JOB_ID'
    " nccl=$NCCL_IB_DISABLE nodes=$JOBKIT_NNODES node=${SLURMD_NODENAME:-none}"
    ' run_dir=$JOBKIT_RUN_DIR"; exit 3\n'
)
_GOT = re.compile(r"^GOT (.*)$", re.MULTILINE)
_ESCAPES = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]")
"""The terminal controls bash writes around a command line (bracketed paste)."""


def _spec(folder: Path, name: str, text: str) -> Path:
    path = folder / f"{name}.yaml"
    path.write_text(text)
    return path


def _drive(
    argv: list[str], env: dict[str, str], cwd: Path, timeout: float = 420.0
) -> tuple[int, str]:
    """Run argv on a pseudo-terminal; once the shell's `(jobkit ` prompt shows, type TYPED.
    Returns the exit code and everything the terminal showed."""
    pid, fd = pty.fork()
    if pid == 0:  # the child: the terminal is its stdin/stdout/stderr
        os.chdir(cwd)
        os.execve(argv[0], argv, env)
    shown = b""
    typed = False
    deadline = time.monotonic() + timeout
    try:
        while time.monotonic() < deadline:
            ready, _, _ = select.select([fd], [], [], 0.5)
            if ready:
                try:
                    data = os.read(fd, 4096)
                except OSError:  # the child closed the terminal (EIO)
                    break
                if not data:
                    break
                shown += data
            if not typed and b"(jobkit " in shown:
                os.write(fd, TYPED.encode())
                typed = True
        else:
            os.kill(pid, 9)
            raise AssertionError(f"no end after {timeout} s:\n{shown.decode(errors='replace')}")
    finally:
        os.close(fd)
    _, status = os.waitpid(pid, 0)
    text = shown.decode(errors="replace").replace("\r", "")
    return os.waitstatus_to_exitcode(status), _ESCAPES.sub("", text)


def _got(shown: str) -> dict[str, str]:
    """The values the typed echo printed (the echo line itself, typed, has no `GOT ` start)."""
    found = _GOT.findall(shown)
    assert found, shown
    return dict(word.split("=", 1) for word in found[-1].split())


@pytest.mark.slurm
@pytest.mark.slow
@pytest.mark.usefixtures("slurm_cluster")
def test_shell_opens_in_the_allocation_with_the_jobs_environment(
    jobkit: Jobkit, tmp_path: Path
) -> None:
    spec = _spec(
        tmp_path,
        "one",
        "name: one\nbackend: slurm\nresources: {nodes: 1, time: '00:05:00'}\n"
        "env: {nccl: {preset: ethernet}}\nrun: {command: [hostname]}\n",
    )
    argv = [str(JOBKIT), "shell", str(spec), "--set", f"logs.dir={jobkit.logs_dir}"]
    code, shown = _drive(argv, jobkit.env, tmp_path)
    assert code == 3, shown  # the shell's own exit code
    assert (
        "jobkit: asking for the allocation of the job one: salloc --job-name=one --nodes=1" in shown
    )
    granted = re.search(r"Granted job allocation (\d+)", shown)
    assert granted, shown
    got = _got(shown)
    job = granted.group(1)
    assert got["job"] == job and got["jobkit_job"] == job, got
    assert got["node"] in ("n1", "n2") and got["master"] == got["node"], got  # inside, on its node
    assert got["nccl"] == "1" and got["nodes"] == "1", got
    assert got["run_dir"] == str(jobkit.logs_dir / f"one-{job}"), got
    assert Path(got["run_dir"]).is_dir()


def test_local_shell_has_the_jobs_environment(jobkit: Jobkit, tmp_path: Path) -> None:
    spec = _spec(
        tmp_path,
        "loc",
        "name: loc\nbackend: local\nenv: {nccl: {preset: ethernet}}\nrun: {command: [hostname]}\n",
    )
    code, shown = _drive([str(JOBKIT), "shell", str(spec)], jobkit.env, tmp_path, timeout=60)
    assert code == 3, shown
    assert "jobkit: a shell on this machine with the environment of the job loc" in shown
    got = _got(shown)
    assert (got["master"], got["nccl"], got["nodes"], got["node"]) == (
        "127.0.0.1",
        "1",
        "1",
        "none",
    )
    assert got["run_dir"].startswith(str(tmp_path / "logs" / "loc-local-")), got


HERE_JOB = """\
name: {name}
backend: slurm
resources: {{nodes: 2, time: "00:05:00"}}
launch: {{launcher: srun}}
run:
  command:
    - bash
    - -c
    - 'echo "rank=$SLURM_PROCID host=$SLURMD_NODENAME master=$MASTER_ADDR"; exit {code}'
"""


@pytest.mark.slurm
@pytest.mark.slow
@pytest.mark.usefixtures("slurm_cluster")
def test_run_here_in_a_two_node_allocation(jobkit: Jobkit, tmp_path: Path) -> None:
    """One salloc, two runs: one succeeds, one exits 7; each is tracked with its code."""
    ok = _spec(tmp_path, "ok", HERE_JOB.format(name="ok", code=0))
    # Rank 1 fails once rank 0 has written its line and had time to end. A rank still
    # running when another fails is stopped by srun --kill-on-bad-exit, and srun then exits
    # 143 (its code is the highest of its tasks'), not the failed rank's 7: the launcher
    # srun/none exit-code fault of the 2026-11-27 closing note, not what this test is about.
    rank_1_waits = (
        '(( SLURM_PROCID == 0 )) || { until grep -qs "^rank=0" "$JOBKIT_RUN_DIR/rank-0.out";'
        " do sleep 0.2; done; sleep 5; }; "
    )
    bad = _spec(
        tmp_path,
        "bad",
        HERE_JOB.format(name="bad", code="$(( SLURM_PROCID == 1 ? 7 : 0 ))").replace(
            "; exit ", "; " + rank_1_waits + "exit "
        ),
    )
    logs = f"logs.dir={jobkit.logs_dir}"
    inside = (
        f'"$1" run {ok} --here --set {logs}; echo "ok-exit=$?";'
        f' "$1" run {bad} --here --set {logs}; echo "bad-exit=$?"'
    )
    done = _in_two_node_allocation(jobkit, tmp_path, "bash", "-c", inside, "bash", str(JOBKIT))
    both = done.stdout + done.stderr
    assert "ok-exit=0" in done.stdout and "bad-exit=7" in done.stdout, both
    allocation = re.search(r"Granted job allocation (\d+)", done.stderr)
    assert allocation, both
    job = allocation.group(1)
    rows = {}
    for name in ("ok", "bad"):
        listed = jobkit.run("status", "--json", "--name", name)
        assert listed.returncode == 0, listed.stderr
        rows[name] = jobkit.status(_only_id(listed.stdout))
    assert (rows["ok"]["state"], rows["ok"]["exit_code"]) == ("SUCCEEDED", 0), rows["ok"]
    assert (rows["bad"]["state"], rows["bad"]["exit_code"]) == ("FAILED", 7), rows["bad"]
    for name, row in rows.items():
        assert (row["backend"], row["scheduler_id"], row["nodes"]) == ("here", job, "n[1-2]"), row
        run_dir = Path(row["log_paths"]["run_dir"])
        assert run_dir == jobkit.logs_dir / f"{name}-{job}"
        # Each rank's own line first. In `bad`, srun --kill-on-bad-exit may stop rank 0
        # after its line but before its exit, and Slurm then adds its own line to rank 0's
        # output (`slurmstepd-n1: error: *** STEP ... CANCELLED ...`): nothing else may.
        outputs = [(run_dir / f"rank-{r}.out").read_text().splitlines() for r in (0, 1)]
        firsts = [lines[0] if lines else "" for lines in outputs]
        assert firsts == ["rank=0 host=n1 master=n1", "rank=1 host=n2 master=n1"], outputs
        later = [line for lines in outputs for line in lines[1:]]
        assert all(line.startswith("slurmstepd-") and name == "bad" for line in later), outputs
        header = jobkit.logs(row["jobkit_id"], "--all-ranks")
        assert "rank=1 host=n2" in header, header
    assert f"jobkit: {rows['bad']['jobkit_id']} FAILED exit code 7" in done.stderr, both
    assert "n2: task 1: Exited with exit code 7" in (jobkit.logs_dir / f"bad-{job}.err").read_text()


def _in_two_node_allocation(
    jobkit: Jobkit, cwd: Path, *command: str
) -> subprocess.CompletedProcess[str]:
    """`salloc -N2 --ntasks-per-node=1 -t 5 COMMAND...` to its end, output captured."""
    return subprocess.run(
        ["salloc", "-N2", "--ntasks-per-node=1", "-t", "5", *command],
        cwd=cwd,
        env=jobkit.env,
        capture_output=True,
        text=True,
        timeout=420,
        check=False,
    )


def _only_id(status_json: str) -> str:
    import json

    data = json.loads(status_json)
    records = data if isinstance(data, list) else [data]
    assert len(records) == 1, status_json
    return str(records[0]["jobkit_id"])


def test_run_here_refuses_outside_an_allocation(jobkit: Jobkit, tmp_path: Path) -> None:
    spec = _spec(tmp_path, "out", HERE_JOB.format(name="out", code=0))
    done = jobkit.run("run", str(spec), "--here", cwd=tmp_path)
    assert (done.returncode, done.stdout) == (2, "")
    assert done.stderr == (
        f"jobkit: run --here: not inside a slurm allocation; start one (jobkit shell"
        f" {spec}) or queue the job (jobkit submit {spec})\n"
    )
    unflagged = jobkit.run("run", str(spec), cwd=tmp_path)
    assert unflagged.returncode == 2 and "jobkit: run: needs --here" in unflagged.stderr
    no_terminal = jobkit.run("shell", str(spec), cwd=tmp_path)
    assert no_terminal.stderr == "jobkit: shell: needs a terminal (its standard input is not one)\n"


STOPPED_RANK_JOB = """\
name: {name}
backend: slurm
resources: {{nodes: 2, time: "00:05:00"}}
launch: {{launcher: {launcher}}}
run:
  command:
    - bash
    - -c
    - 'if (( ${{SLURM_PROCID:-$SLURM_NODEID}} == 1 )); then sleep 2; exit 7; fi; sleep 120'
"""


@pytest.mark.slurm
@pytest.mark.slow
@pytest.mark.usefixtures("slurm_cluster")
@pytest.mark.parametrize("launcher", ["srun", "none"])
def test_a_rank_stopped_after_another_failed_leaves_the_failures_code(
    jobkit: Jobkit, tmp_path: Path, launcher: str
) -> None:
    """Rank 1 exits 7 while rank 0 still runs: srun --kill-on-bad-exit stops rank 0 and exits
    143 (the highest of its tasks' codes). The job is FAILED with 7, the failed rank's code,
    both as a batch job and under `salloc ... jobkit run --here` (where srun's lines reach the
    .err file through jobkit, not directly)."""
    batch = _spec(tmp_path, "batch", STOPPED_RANK_JOB.format(name="batch", launcher=launcher))
    sub = jobkit.submit(str(batch), "--no-check", venv=False, cwd=tmp_path, timeout=300)
    assert sub.returncode != 0, sub.explain()
    record = jobkit.status(sub.jobkit_id)
    assert (record["state"], record["exit_code"]) == ("FAILED", 7), record
    out = Path(record["log_paths"]["out"]).read_text()
    assert "the program's exit code (the task that failed first): 7" in out, out

    here = _spec(tmp_path, "here", STOPPED_RANK_JOB.format(name="here", launcher=launcher))
    done = _in_two_node_allocation(
        jobkit,
        tmp_path,
        *(str(JOBKIT), "run", str(here), "--here", "--set", f"logs.dir={jobkit.logs_dir}"),
    )
    assert done.returncode == 7, done.stdout + done.stderr
    listed = jobkit.run("status", "--json", "--name", "here")
    row = jobkit.status(_only_id(listed.stdout))
    assert (row["state"], row["exit_code"]) == ("FAILED", 7), row
