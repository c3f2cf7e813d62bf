"""The test cluster of tests/cluster/up.sh does what the rest of the suite relies on.

Real Slurm 22.05 (two slurmd: n1, n2; slurmdbd for sacct), Slurm's Torque wrappers and the
loopback sshd. Timeouts are generous: on a shared machine other jobs may be queued first.
"""

from __future__ import annotations

import re
import shlex
import socket
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.plugins.cluster import (
    PbsCluster,
    SlurmCluster,
    SshHosts,
    sacct_record,
    sbatch,
    scancel_quietly,
    squeue_has,
    wait_slurm_job,
)

Submit = Callable[..., str]

JOB_TIMEOUT_S = 300.0


def _wait_for(predicate: Callable[[], bool], timeout: float, what: str, poll: float = 0.5) -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() >= deadline:
            raise AssertionError(f"{what}: not true after {timeout} s")
        time.sleep(poll)


def _node_states(cluster: SlurmCluster) -> dict[str, str]:
    done = subprocess.run(
        ["sinfo", "-h", "-N", "-p", cluster.partition, "-o", "%N %T"],
        capture_output=True,
        text=True,
        timeout=30,
        check=True,
    )
    return dict(line.split(maxsplit=1) for line in done.stdout.splitlines())


@dataclass(frozen=True)
class FinishedJob:
    job_id: str
    submit_dir: Path
    output: str


@pytest.fixture(scope="module")
def two_node_job(
    slurm_cluster: SlurmCluster, tmp_path_factory: pytest.TempPathFactory
) -> FinishedJob:
    """A 2-node batch job (one srun task per node), submitted from a tmp dir, finished."""
    submit_dir = tmp_path_factory.mktemp("two-node")
    (submit_dir / "job.sh").write_text(
        "#!/bin/bash\n"
        "#SBATCH --job-name=jk-two-node\n"
        "#SBATCH --nodes=2\n"
        "#SBATCH --ntasks-per-node=1\n"
        "#SBATCH --time=5\n"
        "#SBATCH --output=two-node-%j.out\n"
        'echo "pwd=$PWD"\n'
        'echo "submit_dir=$SLURM_SUBMIT_DIR"\n'
        'for h in $(scontrol show hostnames "$SLURM_JOB_NODELIST"); do\n'
        '  echo "resolves $h $(getent hosts "$h" | cut -d" " -f1)"\n'
        "done\n"
        "srun bash -c 'echo \"task rank=$SLURM_PROCID nodeid=$SLURM_NODEID"
        " node=$SLURMD_NODENAME\"'\n"
    )
    job_id = sbatch("-p", slurm_cluster.partition, "job.sh", cwd=submit_dir)
    try:
        end = wait_slurm_job(job_id, timeout=JOB_TIMEOUT_S)
    finally:
        scancel_quietly(job_id)
    output = (submit_dir / f"two-node-{job_id}.out").read_text()
    assert end.state == "COMPLETED", f"job {job_id} ended {end}; output:\n{output}"
    return FinishedJob(job_id, submit_dir, output)


@pytest.mark.slurm
@pytest.mark.cluster_alone  # waits for both nodes idle
def test_sinfo_lists_both_nodes_idle_in_the_default_partition(
    slurm_cluster: SlurmCluster,
) -> None:
    assert slurm_cluster.nodes == ("n1", "n2")
    # Other tests' jobs may still be finishing: wait until both nodes are idle.
    _wait_for(
        lambda: _node_states(slurm_cluster) == {"n1": "idle", "n2": "idle"},
        JOB_TIMEOUT_S,
        "sinfo -N shows n1 and n2 idle",
    )
    default = subprocess.run(
        ["sinfo", "-h", "-o", "%P"], capture_output=True, text=True, timeout=30, check=True
    )
    assert f"{slurm_cluster.partition}*" in default.stdout.split(), "debug is the default"


@pytest.mark.slurm
def test_two_node_job_runs_one_srun_task_on_each_node(two_node_job: FinishedJob) -> None:
    tasks = sorted(re.findall(r"task rank=(\d) nodeid=(\d) node=(\w+)", two_node_job.output))
    assert tasks == [("0", "0", "n1"), ("1", "1", "n2")], two_node_job.output


@pytest.mark.slurm
def test_job_runs_in_its_submit_dir_and_resolves_the_node_names(
    two_node_job: FinishedJob,
) -> None:
    lines = two_node_job.output.splitlines()
    assert f"pwd={two_node_job.submit_dir}" in lines
    assert f"submit_dir={two_node_job.submit_dir}" in lines
    assert "resolves n1 127.0.0.1" in lines and "resolves n2 127.0.0.1" in lines


@pytest.mark.slurm
def test_sacct_reports_the_finished_job_completed(
    slurm_cluster: SlurmCluster, two_node_job: FinishedJob
) -> None:
    assert slurm_cluster.sacct_works
    job_id = two_node_job.job_id
    expected = {
        job_id: ["COMPLETED", "0:0", "n[1-2]"],
        f"{job_id}.0": ["COMPLETED", "0:0", "n[1-2]"],
    }

    def rows() -> dict[str, list[str]]:
        done = subprocess.run(
            ["sacct", "-j", job_id, "-n", "-P", "-o", "JobID,State,ExitCode,NodeList"],
            capture_output=True,
            text=True,
            timeout=30,
            check=True,
        )
        table = {line.split("|")[0]: line.split("|")[1:] for line in done.stdout.splitlines()}
        return {key: table.get(key, []) for key in expected}

    # slurmctld sends the job's records to slurmdbd asynchronously: allow them a moment.
    _wait_for(lambda: rows() == expected, 30, f"sacct -j {job_id} shows job and step COMPLETED")
    assert sacct_record(job_id) == ("COMPLETED", "0:0")


@pytest.mark.slurm
def test_finished_job_leaves_squeue_but_stays_in_sacct(
    slurm_cluster: SlurmCluster, two_node_job: FinishedJob
) -> None:
    # MinJobAge=10 s and a purge pass every 10 s: gone from slurmctld within ~20 s.
    _wait_for(
        lambda: not squeue_has(two_node_job.job_id),
        slurm_cluster.min_job_age_s + 60,
        f"job {two_node_job.job_id} left squeue",
    )
    scontrol = subprocess.run(
        ["scontrol", "show", "job", two_node_job.job_id],
        capture_output=True,
        text=True,
        timeout=30,
        check=False,
    )
    assert scontrol.returncode != 0 and "Invalid job id" in scontrol.stderr
    assert sacct_record(two_node_job.job_id) == ("COMPLETED", "0:0")


@pytest.mark.slurm
def test_job_can_import_torch_from_the_test_virtualenv(
    slurm_submit: Submit, tmp_path: Path
) -> None:
    python = shlex.quote(sys.executable)
    (tmp_path / "torch.sh").write_text(
        "#!/bin/bash\n"
        f"exec {python} -c 'import sys, torch; print(\"torch\", torch.__version__, sys.prefix)'\n"
    )
    job_id = slurm_submit(
        "--time=5", "--output=torch-%j.out", "--error=torch-%j.err", "torch.sh", cwd=tmp_path
    )
    end = wait_slurm_job(job_id, timeout=JOB_TIMEOUT_S)
    output = (tmp_path / f"torch-{job_id}.out").read_text()
    errors = (tmp_path / f"torch-{job_id}.err").read_text()
    assert end.state == "COMPLETED", output + errors
    assert re.fullmatch(rf"torch \S+ {re.escape(sys.prefix)}\n", output), output + errors


SIGNAL_JOB = """#!/bin/bash
trap 'echo "got {sig} after ${{SECONDS}}s"; exit 0' {sig}
echo started
while :; do sleep 1; done
"""


@pytest.mark.slurm
@pytest.mark.slow
def test_batch_shell_receives_the_preemption_signal_before_the_time_limit(
    slurm_submit: Submit, tmp_path: Path
) -> None:
    """--signal=B:SIG@50 with --time=2: SIG reaches the batch shell before the limit.

    sbatch(1): "the signal may be sent up to 60 seconds earlier than specified": due 70 s
    into the job, it comes 10-70 s in (seen: 40-70 s), never before the trap is set, and
    before the 120 s limit would end the job as TIMEOUT.
    """
    jobs = {}
    for sig in ("USR1", "USR2"):
        (tmp_path / f"{sig}.sh").write_text(SIGNAL_JOB.format(sig=sig))
        jobs[sig] = slurm_submit(
            "--time=2", f"--signal=B:{sig}@50", f"--output={sig}-%j.out", f"{sig}.sh", cwd=tmp_path
        )
    for sig, job_id in jobs.items():
        end = wait_slurm_job(job_id, timeout=JOB_TIMEOUT_S)
        output = (tmp_path / f"{sig}-{job_id}.out").read_text()
        assert (end.state, end.exit_code) == ("COMPLETED", "0:0"), output
        assert re.search(rf"^got {sig} after \d+s$", output, re.MULTILINE), output


CHECKPOINT_JOB = """#!/bin/bash
# Two workers, each saving a checkpoint on SIGTERM: one needs 2 s, the other 30 s. The save
# is written only when its sleep ran to the end: Slurm's SIGKILL (proctrack/linuxproc) reaches
# the sleep and its shell one after the other, and a shell between the two wrote "saved"
# 10 s into a 30 s save (CI).
worker() {
  trap "echo \\$SECONDS > term-$1; sleep $2 && echo saved > checkpoint-$1; exit 0" TERM
  touch "started-$1"
  while :; do sleep 1; done
}
worker quick 2 &
worker slow 30 &
trap '' TERM  # the batch shell itself waits for its workers
wait
wait
"""


@pytest.mark.slurm
def test_cancel_sends_sigterm_and_kills_after_killwait(
    slurm_submit: Submit, tmp_path: Path
) -> None:
    """KillWait=10: a worker saving in 2 s on SIGTERM finishes; one needing 30 s is killed."""
    (tmp_path / "ckpt.sh").write_text(CHECKPOINT_JOB)
    job_id = slurm_submit("--time=5", "--output=ckpt-%j.out", "ckpt.sh", cwd=tmp_path)
    started = [tmp_path / "started-quick", tmp_path / "started-slow"]
    _wait_for(lambda: all(path.exists() for path in started), JOB_TIMEOUT_S, "both workers run")
    subprocess.run(["scancel", job_id], timeout=60, check=True)
    assert wait_slurm_job(job_id, timeout=120).state == "CANCELLED"
    output = (tmp_path / f"ckpt-{job_id}.out").read_text()
    for tag in ("quick", "slow"):
        assert (tmp_path / f"term-{tag}").exists(), f"{tag} got no SIGTERM: {output}"
    assert (tmp_path / "checkpoint-quick").read_text() == "saved\n"
    assert not (tmp_path / "checkpoint-slow").exists(), "SIGKILL came after KillWait"


@pytest.mark.pbs
def test_qsub_runs_a_pbs_script_and_qstat_reports_it(
    pbs_cluster: PbsCluster, tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    (tmp_path / "pbs.sh").write_text(
        "#!/bin/bash\n"
        "#PBS -N jk-pbs\n"
        "#PBS -l nodes=1\n"
        "#PBS -l walltime=00:02:00\n"
        'echo "pbs-hello on $SLURMD_NODENAME"\n'
        "sleep 5\n"
    )
    submitted = subprocess.run(
        [str(pbs_cluster.qsub), "pbs.sh"],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )
    job_id = submitted.stdout.strip()
    assert job_id.isdigit(), submitted.stdout
    request.addfinalizer(lambda: scancel_quietly(job_id))
    report = subprocess.run(
        ["qstat", "-f", job_id], capture_output=True, text=True, timeout=60, check=True
    )
    assert re.search(rf"^Job Id:\s+{job_id}$", report.stdout, re.MULTILINE), report.stdout
    assert "Job_Name = jk-pbs" in report.stdout
    assert re.search(r"job_state = [QRC]$", report.stdout, re.MULTILINE), report.stdout
    end = wait_slurm_job(job_id, timeout=JOB_TIMEOUT_S)
    assert end.state == "COMPLETED"
    # The Torque wrappers ignore -o: output lands in <script>.o<id> in the submit dir.
    output = (tmp_path / f"pbs.sh.o{job_id}").read_text()
    assert re.fullmatch(r"pbs-hello on n[12]\n", output), output


@pytest.mark.ssh
def test_ssh_n1_and_n2_work_with_no_prompt(ssh_hosts: SshHosts) -> None:
    me = socket.gethostname()
    for host in ssh_hosts:
        # root's ~/.ssh/config (the managed block) ...
        plain = subprocess.run(
            ["ssh", host, "hostname"],
            capture_output=True,
            text=True,
            timeout=30,
            check=True,
            stdin=subprocess.DEVNULL,
        )
        # ... and the standalone config file give the same answer without a prompt.
        standalone = subprocess.run(
            ssh_hosts.argv(host, "hostname"),
            capture_output=True,
            text=True,
            timeout=30,
            check=True,
            stdin=subprocess.DEVNULL,
        )
        assert plain.stdout.strip() == standalone.stdout.strip() == me
        assert plain.stderr == standalone.stderr == ""
    assert ssh_hosts.port == 2222 and ssh_hosts.key.is_file()


@pytest.mark.slurm
@pytest.mark.ssh
def test_status_script_reports_everything_up(slurm_cluster: SlurmCluster) -> None:
    done = subprocess.run(
        ["bash", str(slurm_cluster.status_script)],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    assert done.stdout.rstrip().endswith("status: UP")
    for daemon in slurm_cluster.pid_files:
        assert re.search(rf"^  {daemon} +up +pid \d+", done.stdout, re.MULTILINE), daemon


@pytest.mark.slurm
@pytest.mark.pbs
@pytest.mark.ssh
@pytest.mark.cluster_alone  # up.sh (under CI=true it clears leftover jobs)
@pytest.mark.hosts_alone  # ... of Grid Engine too, and reconfigures its queue
def test_up_again_is_harmless_and_keeps_every_daemon(slurm_cluster: SlurmCluster) -> None:
    before = {daemon: slurm_cluster.pid(daemon) for daemon in slurm_cluster.pid_files}
    assert all(before.values()), before
    done = subprocess.run(
        ["bash", str(slurm_cluster.up_script)],
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
        stdin=subprocess.DEVNULL,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    assert "started" not in done.stdout and "restarting" not in done.stdout, done.stdout
    after = {daemon: slurm_cluster.pid(daemon) for daemon in slurm_cluster.pid_files}
    assert after == before
