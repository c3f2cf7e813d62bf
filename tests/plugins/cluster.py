"""Fixtures that find the running test cluster (tests/cluster/up.sh); they never start it.

Markers `slurm`, `pbs` and `ssh` (and `sge`, whose probe tests/plugins/sge.py adds to PROBES):
a test carrying one runs only when that part of the
cluster answers. Otherwise it is skipped with the reason, or failed with the reason when
CI=true or JOBKIT_REQUIRE_CLUSTER=1, so no cluster test can pass by skipping in CI.

Fixtures: `slurm_cluster` (SlurmCluster), `pbs_cluster` (PbsCluster), `ssh_hosts`
(SshHosts), `slurm_submit` (sbatch that cancels leftovers at teardown), `wait_slurm_job`
(the `wait_slurm_job` function below). Plain helpers for other test areas: `sbatch`,
`wait_slurm_job`, `sacct_record`, `squeue_has`, `sacct_answers`, `scancel_quietly`.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from jobkit.backends.pbs.backend import UNKNOWN_JOB_RC

REPO_ROOT = Path(__file__).resolve().parents[2]
CLUSTER_SCRIPTS = REPO_ROOT / "tests" / "cluster"
DEFAULT_STATE_DIR = Path("/var/lib/jobkit-cluster")
START_HINT = "start it as root with: bash tests/cluster/up.sh"
PROBE_TIMEOUT_S = 20.0

# Slurm job states after which a job does not run again on its own.
FINAL_SLURM_STATES = frozenset(
    {
        "BOOT_FAIL",
        "CANCELLED",
        "COMPLETED",
        "DEADLINE",
        "FAILED",
        "NODE_FAIL",
        "OUT_OF_MEMORY",
        "PREEMPTED",
        "TIMEOUT",
    }
)
# sinfo states of a node that takes jobs.
USABLE_NODE_STATES = frozenset({"idle", "mixed", "allocated", "completing", "planned"})
# A cluster that was up may be restarting a daemon (ctl.sh in another test): retry this long.
PROBE_RETRY_S = 30.0


@dataclass(frozen=True)
class SlurmCluster:
    """The running Slurm of tests/cluster/up.sh."""

    state_dir: Path
    cluster_name: str
    account: str
    partition: str
    nodes: tuple[str, ...]
    slurm_conf: Path
    logs_dir: Path
    pid_files: dict[str, Path]
    min_job_age_s: int
    sacct_works: bool
    up_script: Path = CLUSTER_SCRIPTS / "up.sh"
    ctl_script: Path = CLUSTER_SCRIPTS / "ctl.sh"
    status_script: Path = CLUSTER_SCRIPTS / "status.sh"

    def ctl(self, *args: str, timeout: float = 180.0) -> subprocess.CompletedProcess[str]:
        """Run tests/cluster/ctl.sh ARGS (e.g. "stop", "slurmdbd"); raise when it fails."""
        return subprocess.run(
            ["bash", str(self.ctl_script), *args],
            capture_output=True,
            text=True,
            timeout=timeout,
            check=True,
        )

    def pid(self, daemon: str) -> int | None:
        """The pid in DAEMON's pid file (munged, mariadb, slurmdbd, slurmctld, ...)."""
        try:
            return int(self.pid_files[daemon].read_text().strip())
        except (OSError, ValueError):
            return None

    def log(self, daemon: str) -> Path:
        """DAEMON's log file (slurmctld, slurmd-n1, slurmdbd, sshd, ...)."""
        return self.logs_dir / f"{daemon}.log"


@dataclass(frozen=True)
class PbsCluster:
    """Slurm's Torque wrappers (qsub, qstat, qdel) in front of the running Slurm."""

    slurm: SlurmCluster
    qsub: Path
    qstat: Path
    qdel: Path


@dataclass(frozen=True)
class SshHosts:
    """The loopback sshd: `ssh n1` / `ssh n2` work with root's ~/.ssh/config or `config`."""

    hosts: tuple[str, ...]
    port: int
    config: Path
    key: Path
    known_hosts: Path

    def __iter__(self) -> Iterator[str]:
        return iter(self.hosts)

    def __len__(self) -> int:
        return len(self.hosts)

    def argv(self, host: str, *command: str) -> list[str]:
        """ssh argv that runs COMMAND on HOST with the standalone client config."""
        return ["ssh", "-F", str(self.config), host, *command]


@dataclass(frozen=True)
class Probe:
    """Whether one part of the cluster answers; why not when it does not."""

    ok: bool
    reason: str
    slurm: SlurmCluster | None = None
    pbs: PbsCluster | None = None
    ssh: SshHosts | None = None
    other: Any = None
    """What a probe registered by another plugin found (tests/plugins/sge.py)."""


@dataclass(frozen=True)
class SlurmJobEnd:
    """How a Slurm job ended: STATE (e.g. COMPLETED), ExitCode "code:signal", and where read."""

    job_id: str
    state: str
    exit_code: str
    source: str  # "scontrol" or "sacct"


def state_dir() -> Path:
    """The cluster's state folder: JOBKIT_CLUSTER_DIR or /var/lib/jobkit-cluster."""
    return Path(os.environ.get("JOBKIT_CLUSTER_DIR") or DEFAULT_STATE_DIR)


def cluster_required() -> bool:
    """True when a missing cluster must fail tests instead of skipping them (CI)."""
    return (
        os.environ.get("CI", "").lower() == "true"
        or os.environ.get("JOBKIT_REQUIRE_CLUSTER") == "1"
    )


def run_quietly(
    argv: Sequence[str],
    timeout: float = PROBE_TIMEOUT_S,
    cwd: Path | None = None,
    stdin: int | None = None,
) -> subprocess.CompletedProcess[str]:
    """Run ARGV capturing text output; a missing program or a timeout becomes rc 127 / 124."""
    try:
        return subprocess.run(
            list(argv),
            capture_output=True,
            text=True,
            timeout=timeout,
            check=False,
            cwd=cwd,
            stdin=stdin,
        )
    except FileNotFoundError as exc:
        return subprocess.CompletedProcess(list(argv), 127, "", str(exc))
    except subprocess.TimeoutExpired:
        return subprocess.CompletedProcess(list(argv), 124, "", f"timed out after {timeout} s")


def _describe(done: subprocess.CompletedProcess[str]) -> str:
    text = (done.stderr or done.stdout).strip().splitlines()
    return f"`{' '.join(done.args)}` exit {done.returncode}: {text[-1] if text else 'no output'}"


def _read_cluster_json() -> dict[str, Any] | str:
    path = state_dir() / "cluster.json"
    try:
        return dict(json.loads(path.read_text()))
    except OSError:
        return f"no {path} (the test cluster was never started here; {START_HINT})"
    except ValueError as exc:
        return f"{path} is not valid JSON ({exc}); {START_HINT}"


def sacct_answers() -> bool:
    """True when sacct reaches slurmdbd (rc 0, nothing on stderr)."""
    done = run_quietly(["sacct", "-n", "-X", "-o", "JobID", "-S", "now"])
    return done.returncode == 0 and not done.stderr.strip()


def probe_slurm() -> Probe:
    """Does the Slurm of up.sh answer, with both nodes taking jobs?

    While slurmctld's pid file exists (the cluster was up), retry for PROBE_RETRY_S first.
    """
    deadline = time.monotonic() + PROBE_RETRY_S
    while True:
        probe = _probe_slurm_once()
        if probe.ok or time.monotonic() >= deadline:
            return probe
        if not (state_dir() / "run" / "slurmctld.pid").exists():
            return probe
        time.sleep(1.0)


def _probe_slurm_once() -> Probe:
    info = _read_cluster_json()
    if isinstance(info, str):
        return Probe(False, info)
    if shutil.which("sinfo") is None:
        return Probe(False, f"sinfo is not installed; {START_HINT}")
    partition = str(info["partition"])
    nodes = tuple(str(n) for n in info["nodes"])
    done = run_quietly(["sinfo", "-h", "-N", "-p", partition, "-o", "%N %T"])
    if done.returncode != 0:
        return Probe(False, f"Slurm does not answer: {_describe(done)}; {START_HINT}")
    states = dict(line.split(maxsplit=1) for line in done.stdout.splitlines() if line.strip())
    bad = {n: states.get(n, "missing") for n in nodes if states.get(n) not in USABLE_NODE_STATES}
    if bad:
        return Probe(False, f"Slurm nodes not taking jobs: {bad}; {START_HINT}")
    root = Path(str(info["state_dir"]))
    cluster = SlurmCluster(
        state_dir=root,
        cluster_name=str(info["cluster_name"]),
        account=str(info["account"]),
        partition=partition,
        nodes=nodes,
        slurm_conf=Path(str(info["slurm_conf"])),
        logs_dir=Path(str(info["logs"])),
        pid_files={str(k): Path(str(v)) for k, v in info["pid_files"].items()},
        min_job_age_s=int(info["min_job_age_s"]),
        sacct_works=sacct_answers(),
    )
    return Probe(True, "", slurm=cluster)


def probe_pbs() -> Probe:
    """Do Slurm's Torque wrappers answer in front of a running Slurm?"""
    slurm = probe_slurm()
    if slurm.slurm is None:
        return slurm
    paths = {name: shutil.which(name) for name in ("qsub", "qstat", "qdel")}
    missing = [name for name, path in paths.items() if path is None]
    if missing:
        return Probe(False, f"Torque wrappers missing: {missing} (slurm-wlm-torque); {START_HINT}")
    done = run_quietly(["qstat"])
    # Slurm's qstat wrapper exits 153 (PBSE_UNKJOBID) with no output when no job at all is
    # in slurmctld's memory: it answered.
    no_jobs = done.returncode == UNKNOWN_JOB_RC and not (done.stdout + done.stderr).strip()
    if done.returncode != 0 and not no_jobs:
        return Probe(False, f"qstat does not answer: {_describe(done)}")
    pbs = PbsCluster(
        slurm=slurm.slurm,
        qsub=Path(str(paths["qsub"])),
        qstat=Path(str(paths["qstat"])),
        qdel=Path(str(paths["qdel"])),
    )
    return Probe(True, "", pbs=pbs)


def probe_ssh() -> Probe:
    """Does the loopback sshd let root in on every host with the generated key?"""
    info = _read_cluster_json()
    if isinstance(info, str):
        return Probe(False, info)
    ssh = info["ssh"]
    hosts = SshHosts(
        hosts=tuple(str(n) for n in info["nodes"]),
        port=int(ssh["port"]),
        config=Path(str(ssh["config"])),
        key=Path(str(ssh["key"])),
        known_hosts=Path(str(ssh["known_hosts"])),
    )
    for host in hosts:
        done = run_quietly(hosts.argv(host, "true"), stdin=subprocess.DEVNULL)
        if done.returncode != 0:
            return Probe(False, f"ssh to {host} fails: {_describe(done)}; {START_HINT}")
    return Probe(True, "", ssh=hosts)


PROBES: dict[str, Callable[[], Probe]] = {"slurm": probe_slurm, "pbs": probe_pbs, "ssh": probe_ssh}
_PROBE_CACHE = pytest.StashKey[dict[str, Probe]]()


def cached_probe(config: pytest.Config, kind: str) -> Probe:
    """Probe KIND ("slurm", "pbs", "ssh") once per test session."""
    cache = config.stash.setdefault(_PROBE_CACHE, {})
    if kind not in cache:
        cache[kind] = PROBES[kind]()
    return cache[kind]


def require(config: pytest.Config, kind: str) -> Probe:
    """Return KIND's probe when it answers; else skip (or fail when the cluster is required)."""
    probe = cached_probe(config, kind)
    if not probe.ok:
        message = f"{kind} cluster not available: {probe.reason}"
        if cluster_required():
            pytest.fail(message + " (CI=true or JOBKIT_REQUIRE_CLUSTER=1: must not skip)")
        pytest.skip(message)
    return probe


@pytest.hookimpl(tryfirst=True)
def pytest_runtest_setup(item: pytest.Item) -> None:
    """Skip (or fail in CI) tests marked slurm/pbs/ssh when that part of the cluster is down."""
    for kind in PROBES:
        if item.get_closest_marker(kind) is not None:
            require(item.config, kind)


@pytest.fixture(scope="session")
def slurm_cluster(pytestconfig: pytest.Config) -> SlurmCluster:
    """The running Slurm (partition, nodes n1 n2, sacct, ctl.sh for fault injection)."""
    probe = require(pytestconfig, "slurm")
    assert probe.slurm is not None
    return probe.slurm


@pytest.fixture(scope="session")
def pbs_cluster(pytestconfig: pytest.Config) -> PbsCluster:
    """qsub/qstat/qdel (Slurm's Torque wrappers) in front of the running Slurm."""
    probe = require(pytestconfig, "pbs")
    assert probe.pbs is not None
    return probe.pbs


@pytest.fixture(scope="session")
def ssh_hosts(pytestconfig: pytest.Config) -> SshHosts:
    """Hosts n1 n2 on the loopback sshd (port 2222), its client config and key."""
    probe = require(pytestconfig, "ssh")
    assert probe.ssh is not None
    return probe.ssh


# ---- helpers for tests that run Slurm jobs ----


def sbatch(*args: str, cwd: Path, timeout: float = 60.0) -> str:
    """Run `sbatch --parsable ARGS` in CWD; return the job id (raise with stderr on failure)."""
    done = run_quietly(["sbatch", "--parsable", *args], timeout=timeout, cwd=cwd)
    if done.returncode != 0:
        raise RuntimeError(f"sbatch failed: {_describe(done)}")
    return done.stdout.strip().split(";")[0]


def squeue_has(job_id: str) -> bool:
    """True while slurmctld still holds the job's record, finished or not (squeue -t all)."""
    done = run_quietly(["squeue", "-h", "-t", "all", "-j", job_id, "-o", "%i"])
    return done.returncode == 0 and bool(done.stdout.strip())


def sacct_record(job_id: str) -> tuple[str, str] | None:
    """(State, ExitCode) of the job's allocation from sacct, or None when sacct has none.

    State is the first word ("CANCELLED by 0" -> "CANCELLED").
    """
    done = run_quietly(["sacct", "-n", "-X", "-P", "-j", job_id, "-o", "JobID,State,ExitCode"])
    if done.returncode != 0:
        return None
    for line in done.stdout.splitlines():
        fields = line.split("|")
        if len(fields) == 3 and fields[0] == job_id:
            return fields[1].split()[0], fields[2]
    return None


def _scontrol_record(job_id: str) -> tuple[str, str] | None:
    done = run_quietly(["scontrol", "show", "job", "-o", job_id])
    if done.returncode != 0:
        return None
    fields = dict(word.split("=", 1) for word in done.stdout.split() if "=" in word)
    if "JobState" not in fields:
        return None
    return fields["JobState"], fields.get("ExitCode", "")


def wait_slurm_job(job_id: str, timeout: float = 120.0, poll: float = 0.5) -> SlurmJobEnd:
    """Wait until Slurm job JOB_ID reaches a final state; return how it ended.

    Reads `scontrol show job` while slurmctld holds the job, then sacct (after MinJobAge).
    Raises TimeoutError naming the last state seen.
    """
    deadline = time.monotonic() + timeout
    last = "never seen"
    while True:
        record = _scontrol_record(job_id)
        source = "scontrol"
        if record is None:
            record = sacct_record(job_id)
            source = "sacct"
        if record is not None:
            state, exit_code = record
            last = f"{state} ({source})"
            if state in FINAL_SLURM_STATES:
                return SlurmJobEnd(job_id, state, exit_code, source)
        if time.monotonic() >= deadline:
            raise TimeoutError(f"Slurm job {job_id} not finished after {timeout} s: {last}")
        time.sleep(poll)


def scancel_quietly(*job_ids: str) -> None:
    """Cancel JOB_IDS, ignoring ones that already ended (test clean-up)."""
    if job_ids:
        run_quietly(["scancel", *job_ids])


@pytest.fixture
def slurm_submit(slurm_cluster: SlurmCluster) -> Iterator[Callable[..., str]]:
    """submit(*sbatch_args, cwd=PATH) -> job id; jobs still queued or running at teardown are
    cancelled, so a failed test leaves nothing behind on the shared cluster."""
    submitted: list[str] = []

    def submit(*args: str, cwd: Path, timeout: float = 60.0) -> str:
        job_id = sbatch(*args, cwd=cwd, timeout=timeout)
        submitted.append(job_id)
        return job_id

    yield submit
    scancel_quietly(*submitted)


@pytest.fixture(name="wait_slurm_job")
def wait_slurm_job_fixture(slurm_cluster: SlurmCluster) -> Callable[..., SlurmJobEnd]:
    """wait_slurm_job(job_id, timeout=120) -> SlurmJobEnd, with the cluster required."""
    return wait_slurm_job
