"""The bundled trainer trains inside a container (docs/containers.md) on the real 2-node
Slurm, with Charliecloud and with Podman, and on the local backend; a missing image, runtime
or mount stops the job with one line that `jobkit doctor` classifies.

The image is tests/cluster/image.sh's (Debian bookworm, python3, the pinned CPU torch),
built once per CI run into $JOBKIT_TEST_IMAGES (default /var/lib/jobkit-cluster/images).
Podman runs with this machine's site facts in container.options (runc, lowered rlimits:
/work/shared/CONTAINERS-HERE.md), as a site profile would give them.

CPU (issue 25): every job's ranks run one torch thread (ONE_THREAD); torchrun runs inside the
image in the Slurm and local training tests, the cancel, the failing program and on Grid
Engine; the retried run's ranks are srun tasks, and the ssh and PBS jobs start their one
trainer per node themselves (launch.launcher none): no torchrun agent.
Long waits poll the run folder in-process and `jobkit status` only now and then (_await).
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import shlex
import signal
import subprocess
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import yaml

from jobkit.backends.processes import descendants
from jobkit.container import podman
from jobkit.container.spec import Container
from jobkit.container.words import BindMount, Inputs, trainer_packages
from jobkit.core.paths import templates_dir
from jobkit.core.states import State
from jobkit.provenance.image import listing_digest
from tests.cluster import image_build
from tests.e2e import runs
from tests.e2e.cli import JOBKIT, Jobkit, _submission, trainer_sets
from tests.provenance.repo import git, make_repo

IMAGES = Path(os.environ.get("JOBKIT_TEST_IMAGES", "/var/lib/jobkit-cluster/images"))
ROOTFS = IMAGES / "torch"
PODMAN_IMAGE = "localhost/jobkit-torch:test"
PODMAN_SITE = ["--runtime runc", "--ulimit nofile=1024:1024", "--ulimit nproc=4096:4096"]
STEPS = 12
TINY = trainer_sets(train__steps=STEPS, logging__every_steps=2, checkpoint__every_steps=6)
ONE_THREAD = {"OMP_NUM_THREADS": "1"}
"""env.vars of every job: one torch thread a rank. torch's default, two threads on the two busy
cores (no Slurm binding here), cost a rank of this tiny model ~0.4 CPU-s more a step; the
thread count changes nothing these tests check."""
STATUS_EVERY_S = 15.0
"""_await's `jobkit status` interval."""


def _missing(what: str) -> None:
    """No test image: the test fails in CI (JOBKIT_REQUIRE_CLUSTER), else skips."""
    why = f"no test image ({what}): run tests/cluster/image.sh"
    if os.environ.get("JOBKIT_REQUIRE_CLUSTER") == "1":
        pytest.fail(why)
    pytest.skip(why)


@pytest.fixture(scope="module", autouse=True)
def _image_built() -> None:
    """Every test here runs Podman or Charliecloud (installed with the image) or the image:
    wait for .ci/run's build of it (tests/cluster/image_build.py)."""
    image_build.wait()


@pytest.fixture(scope="module")
def podman_image() -> str:
    """Podman's copy of the test image."""
    done = subprocess.run(
        ["podman", "--runtime", "runc", "image", "exists", PODMAN_IMAGE], check=False
    )
    if done.returncode != 0:
        _missing(PODMAN_IMAGE)
    return PODMAN_IMAGE


@pytest.fixture(scope="module")
def image() -> Path:
    """The test image as a directory (Charliecloud's)."""
    if not (ROOTFS / "usr" / "bin" / "python3").exists():
        _missing(str(ROOTFS))
    # ch-run binds onto folders that exist in a read-only image (ch-run(1)): those of the
    # bundled trainer's packages (jobkit check names them when missing). /tmp is the host's.
    for package in trainer_packages():
        (ROOTFS / package.lstrip("/")).mkdir(parents=True, exist_ok=True)
    return ROOTFS


def _job(
    folder: Path,
    backend: str,
    container: dict[str, Any],
    nodes: int = 2,
    launcher: str = "torchrun",
) -> Path:
    spec = {
        "name": f"ct-{container['runtime']}",
        "backend": backend,
        "resources": {"nodes": nodes, **({"partition": "debug"} if backend == "slurm" else {})},
        "launch": {"launcher": launcher, "nproc_per_node": 1},
        "container": container,
        "env": {"vars": ONE_THREAD},
        "run": {"train": {"config": "tiny-lm"}},
    }
    path = folder / "job.yaml"
    path.write_text(yaml.safe_dump(spec))
    return path


def _trained(jobkit: Jobkit, spec: Path, nodes: int) -> str:
    sub = jobkit.submit(str(spec), *TINY, venv=False, cwd=spec.parent)
    assert sub.returncode == 0 and f"{sub.jobkit_id} SUCCEEDED" in sub.stderr, sub.explain()
    run_dir = Path(jobkit.status(sub.jobkit_id)["log_paths"]["run_dir"])
    for rank in range(nodes):
        assert f"step {STEPS}/{STEPS} loss" in runs.rank_log(run_dir, rank)
    runs.assert_loss_fell(run_dir, by=0.05)
    # Written inside the image, found outside it in the run folder.
    assert STEPS in runs.checkpoint_steps(run_dir)
    return sub.jobkit_id


def _await(
    jobkit: Jobkit, job: str, ready: Callable[[], object], timeout: float, what: str
) -> None:
    """Wait until `ready()` (what the job writes into its folders), polled in-process; `jobkit
    status` only every STATUS_EVERY_S, so that a job that ended without it fails then. (A
    `jobkit status` every 2 s, ~0.4 CPU-s each, through the queue waits cost tens of CPU-s.)
    That status runs in this process (Jobkit.status_here); a CLI call confirms an end."""
    deadline = time.monotonic() + timeout
    asked = time.monotonic()
    while not ready():
        assert time.monotonic() < deadline, f"timed out after {timeout} s waiting for {what}"
        if time.monotonic() - asked >= STATUS_EVERY_S:
            seen = jobkit.status_here(job)
            record = jobkit.status(job) if seen is None or State(seen["state"]).is_final else seen
            # Ended: `ready()` now or never (it may have come true since it was asked).
            if State(record["state"]).is_final:
                assert ready(), (what, record)
                return
            asked = time.monotonic()
        time.sleep(0.5)


def _shown_image(jobkit: Jobkit, job: str) -> str:
    """`jobkit show`'s container line (docs/provenance.md: recorded by the job at start)."""
    lines = jobkit.run("show", job).stdout.splitlines()
    found = [line for line in lines if line.startswith("  container ")]
    assert len(found) == 1, lines
    return found[0].split(None, 1)[1]


@pytest.mark.slurm
def test_charliecloud_on_two_slurm_nodes(jobkit: Jobkit, image: Path, tmp_path: Path) -> None:
    spec = _job(tmp_path, "slurm", {"image": str(image), "runtime": "charliecloud"})
    _trained(jobkit, spec, nodes=2)


@pytest.mark.slurm
def test_podman_on_two_slurm_nodes(jobkit: Jobkit, podman_image: str, tmp_path: Path) -> None:
    container = {"image": podman_image, "runtime": "podman", "options": PODMAN_SITE}
    job = _trained(jobkit, _job(tmp_path, "slurm", container), nodes=2)
    inspect = ["podman", "image", "inspect", "--format", "{{.Digest}}", podman_image]
    digest = subprocess.run(inspect, capture_output=True, text=True, check=True).stdout.strip()
    assert _shown_image(jobkit, job) == f"podman {podman_image} {digest}"


def test_charliecloud_on_the_local_backend(jobkit: Jobkit, image: Path, tmp_path: Path) -> None:
    spec = _job(tmp_path, "local", {"image": str(image), "runtime": "charliecloud"}, nodes=1)
    job = _trained(jobkit, spec, nodes=1)
    shown = _shown_image(jobkit, job)
    assert shown == f"charliecloud {image} {listing_digest(image)}", shown


DOCTOR_CASES = {
    # Apptainer has no Debian package here: its command is really missing on this machine.
    "container_runtime_missing": (
        {"image": "/img/none.sif", "runtime": "apptainer"},
        "container.runtime",
        "the command apptainer not found",
    ),
    "container_image_missing": (
        {"image": "/nonexistent/jobkit-image", "runtime": "charliecloud"},
        "container.image",
        "/nonexistent/jobkit-image not found",
    ),
    "container_mount_missing": (
        {"image": "IMAGE", "runtime": "charliecloud", "mounts": ["/nonexistent/data:/mnt"]},
        "container.mounts",
        "mount source /nonexistent/data not found",
    ),
}


@pytest.mark.parametrize("wanted", sorted(DOCTOR_CASES))
def test_check_refuses_and_doctor_classifies(
    jobkit: Jobkit, image: Path, tmp_path: Path, wanted: str
) -> None:
    """Each missing piece: `jobkit check` names the key (exit 2, nothing queued); submitted
    anyway (--no-check), the job stops before the launch with one line, and `jobkit doctor`
    gives the class and the key to change."""
    container, key, words = DOCTOR_CASES[wanted]
    container = {k: (str(image) if v == "IMAGE" else v) for k, v in container.items()}
    spec = _job(tmp_path, "local", container, nodes=1)
    checked = jobkit.run("check", str(spec), *jobkit.common_sets(venv=False), cwd=tmp_path)
    assert checked.returncode == 2 and f": {key}: " in checked.stdout + checked.stderr, (
        checked.stdout + checked.stderr
    )
    sub = jobkit.submit(str(spec), *TINY, "--no-check", venv=False, cwd=tmp_path)
    assert sub.returncode != 0 and f"{sub.jobkit_id} FAILED" in sub.stderr, sub.explain()
    record = jobkit.status(sub.jobkit_id)
    failure = (Path(record["log_paths"]["run_dir"]) / "failure").read_text()
    assert failure.startswith(f"jobkit: {key}: {words} on "), failure
    done = jobkit.run("doctor", "--json", sub.jobkit_id, timeout=120)
    diagnosis = json.loads(done.stdout)
    assert diagnosis["class"] == wanted, diagnosis
    assert key in diagnosis["fix"], diagnosis


@pytest.mark.slurm
@pytest.mark.timeout(900)  # waits behind the other lanes' jobs, then the clean-up
def test_cancel_leaves_no_container(jobkit: Jobkit, podman_image: str, tmp_path: Path) -> None:
    """`jobkit cancel` of a Podman job on two Slurm nodes: the trainer gets Slurm's SIGTERM
    (jobkit's task passes it on: podman run's proxy once lost it, and the container trained
    on after the job had ended) and saves a checkpoint; no container and no trainer process
    is left."""
    container = {"image": podman_image, "runtime": "podman", "options": PODMAN_SITE}
    spec = _job(tmp_path, "slurm", container)
    long = trainer_sets(train__steps=100000, logging__every_steps=1)
    output = tmp_path / "submit.out"
    started = subprocess.Popen(
        [str(JOBKIT), "submit", str(spec), *jobkit.common_sets(venv=False), *long],
        cwd=tmp_path,
        env=jobkit.env,
        stdout=output.open("w"),
        stderr=subprocess.STDOUT,
        text=True,
    )
    assert started.wait(timeout=120) == 0, output.read_text()
    job, _ = jobkit.submitted(output)
    run_dir = Path(jobkit.status(job)["log_paths"]["run_dir"])
    # Queued (behind the other lanes' jobs), started, trained a step.
    _await(jobkit, job, lambda: runs.metrics(run_dir), timeout=900, what="the first step")
    assert jobkit.run("cancel", job).returncode == 0
    jobkit.wait_state(job, {"CANCELLED"}, timeout=120)

    def left() -> list[str]:
        """Containers mounting the run folder, processes whose JOBKIT_RUN_DIR it is."""
        listed = subprocess.run(
            ["podman", "--runtime", "runc", "ps", "--no-trunc", "--format", "{{.ID}} {{.Mounts}}"],
            capture_output=True,
            text=True,
            check=False,
        ).stdout
        found = [line for line in listed.splitlines() if str(run_dir) in line]
        marker = f"JOBKIT_RUN_DIR={run_dir}\0".encode()
        for environ in Path("/proc").glob("[0-9]*/environ"):
            try:
                if marker in environ.read_bytes():
                    found.append(str(environ.parent))
            except OSError:
                continue
        return found

    # podman's --rm clean-up after Slurm's kill took over 60 s on a machine loaded to 18-26
    # (CI); a container that is never removed still fails here
    runs.wait_for(lambda: not left(), timeout=180, what="no container left")
    # Both ranks stopped on their own (a rank whose SIGTERM came after the other's vote says
    # "preempted by a signal on another rank"), not killed.
    logs = [runs.rank_log(run_dir, rank) for rank in (0, 1)]
    assert all("(preempted by " in log for log in logs), logs
    assert any("(preempted by SIGTERM)" in log for log in logs), logs


def _podman_task(
    run_dir: Path, program: str, site: list[str] = PODMAN_SITE
) -> subprocess.Popen[str]:
    """jobkit's Podman task (templates/common/podman-task.sh) running PROGRAM (sh code) in
    the test image, as the rendered scripts start it: their prefix, their two scripts."""
    given = Inputs(
        container=Container(image=PODMAN_IMAGE, runtime="podman"),
        mounts=[BindMount(shlex.quote(str(run_dir)), shlex.quote(str(run_dir)))],
        inside_env=[],
        option_words=shlex.split(" ".join(site)),
    )
    scripts = "".join(
        f"{name}={shlex.quote((templates_dir() / source).read_text())}\n"
        for name, source in podman.SCRIPTS
    )
    line = podman.render(given).prefix + f"sh -c {shlex.quote(program)}"
    return subprocess.Popen(
        ["bash", "-c", f"{scripts}exec {line}"],
        cwd=run_dir,
        env={**os.environ, "JOBKIT_RUN_DIR": str(run_dir)},
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        start_new_session=True,
    )


def _process_tree(root: int) -> list[int]:
    """ROOT and its descendants: the processes Slurm's proctrack/linuxproc signals."""
    return [root, *(process.pid for process in descendants(root))]


def _sweep(root: int, *signals: signal.Signals) -> None:
    """Each signal to every process of ROOT's tree, one sweep per signal (as slurmstepd
    ends a step: SIGCONT, then SIGTERM at once; SIGKILL after KillWait)."""
    for sig in signals:
        for pid in _process_tree(root):
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, sig)


def _runc_started(root: int, within_s: float) -> bool:
    """True once a `runc` runs in ROOT's tree (podman run passing a signal on)."""
    deadline = time.monotonic() + within_s
    while time.monotonic() < deadline:
        for pid in _process_tree(root):
            with contextlib.suppress(OSError):
                program = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")[0]
                if program.rsplit(b"/", 1)[-1] == b"runc":
                    return True
    return False


def _containers_of(run_dir: Path) -> list[str]:
    """The containers that mount RUN_DIR, running or not."""
    listed = subprocess.run(
        [
            "podman",
            "--runtime",
            "runc",
            "ps",
            "--all",
            "--no-trunc",
            "--format",
            "{{.ID}} {{.Mounts}}",
        ],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    return [line for line in listed.splitlines() if str(run_dir) in line]


STARTED_AND_TRAPPED = """\
trap 'echo "TERM after $(cat started)" >>signals; {then}' TERM
echo 0 >started
while :; do sleep 0.2; done
"""


def test_the_podman_task_keeps_the_programs_exit_code(podman_image: str, tmp_path: Path) -> None:
    """Nothing signalled: the task exits with the program's own code, and leaves nothing in
    the run folder."""
    task = _podman_task(tmp_path, "echo inside; exit 5")
    output, _ = task.communicate(timeout=120)
    assert task.returncode == 5 and output == "inside\n", (task.returncode, output)
    assert sorted(os.listdir(tmp_path)) == []


def test_slurms_cont_then_term_reaches_the_program_in_podman(
    podman_image: str, tmp_path: Path
) -> None:
    """What lost a container in CI: slurmstepd's SIGCONT, then SIGTERM at once, to every
    process of the step (podman run's own proxy gave up there, and the container trained on
    for 35 minutes after the job was cancelled). The program gets SIGTERM, the task waits
    for it to end and exits with its code, and no container is left."""
    program = STARTED_AND_TRAPPED.format(then="sleep 2; exit 7")
    task = _podman_task(tmp_path, program)
    runs.wait_for(lambda: (tmp_path / "started").exists(), timeout=120, what="the program")
    # The SIGTERM while podman run's proxy passes SIGCONT on (its `runc kill` child is
    # started): that lost the SIGTERM, every time here, before the task had its own.
    _sweep(task.pid, signal.SIGCONT)
    _runc_started(task.pid, within_s=0.5)
    _sweep(task.pid, signal.SIGTERM)
    task.communicate(timeout=60)
    assert task.returncode == 7, task.returncode
    assert (tmp_path / "signals").read_text() == "TERM after 0\n"
    runs.wait_for(lambda: not _containers_of(tmp_path), timeout=60, what="no container left")
    assert sorted(os.listdir(tmp_path)) == ["signals", "started"]


GATED_RUNC = """\
#!/bin/sh
# runc, but `runc {step}` waits until {gate} exists, after telling {waiting}.
for word; do
  if [ "$word" = {step} ]; then
    : >{waiting}
    while [ ! -e {gate} ]; do sleep 0.05; done
    break
  fi
done
exec runc "$@"
"""


@dataclass(frozen=True)
class GatedRunc:
    """A runtime for podman that holds `runc STEP` (create: podman is still making the
    container; start: it is made, its program not started) until the gate is opened: the
    moment a signal comes, made certain (found in CI, where the load made it now and then)."""

    site: list[str]
    waiting: Path
    gate: Path


def _gated_runc(folder: Path, step: str) -> GatedRunc:
    runtime, waiting, gate = folder / "runc", folder / "waiting", folder / "gate"
    runtime.write_text(
        GATED_RUNC.format(step=step, waiting=shlex.quote(str(waiting)), gate=shlex.quote(str(gate)))
    )
    runtime.chmod(0o755)
    return GatedRunc([f"--runtime {shlex.quote(str(runtime))}", *PODMAN_SITE[1:]], waiting, gate)


def _signalled_while_held(
    run_dir: Path, folder: Path, step: str, send: Callable[[subprocess.Popen[str]], None]
) -> subprocess.Popen[str]:
    """The Podman task of a program that loops until its SIGTERM trap ends it (7), started
    with `runc STEP` held until `send(task)` has signalled; returned once it has ended.
    Whatever fails on the way, the task's tree is killed before it is reaped (its program
    would loop forever, and a reaped pid may be another process's already)."""
    runc = _gated_runc(folder, step)
    task = _podman_task(run_dir, STARTED_AND_TRAPPED.format(then="exit 7"), runc.site)
    try:
        try:
            runs.wait_for(runc.waiting.exists, timeout=60, what=f"runc {step}", poll_s=0.05)
            send(task)
        finally:
            runc.gate.touch()
        task.communicate(timeout=60)
    except BaseException:
        if task.poll() is None:
            _sweep(task.pid, signal.SIGKILL)
            task.communicate(timeout=30)
        raise
    return task


@pytest.mark.parametrize("to", ["the task", "the task and podman"])
def test_a_sigterm_before_the_program_started_reaches_it(
    podman_image: str, tmp_path: Path, tmp_path_factory: pytest.TempPathFactory, to: str
) -> None:
    """A SIGTERM once podman has made the container, before its program starts (a job
    cancelled as it starts; `runc start` held until the signal is sent). To the task alone,
    it is kept and passed on once the program has written its pid: the program's trap runs
    (exit 7). To podman and its runc as well (a scheduler's sweep), the container is never
    started: the task removes it and ends with 143. Either way the task ends (the program
    would loop forever) and no container is left, running or not."""

    def send(task: subprocess.Popen[str]) -> None:
        assert not (tmp_path / "started").exists()
        if to == "the task":
            os.kill(task.pid, signal.SIGTERM)
        else:
            _sweep(task.pid, signal.SIGTERM)

    task = _signalled_while_held(tmp_path, tmp_path_factory.mktemp("gated-runc"), "start", send)
    trapped = (tmp_path / "signals").exists()
    if to == "the task":
        assert (task.returncode, trapped) == (7, True)
        assert (tmp_path / "signals").read_text() == "TERM after 0\n"
    else:
        assert (task.returncode, trapped) == (143, False)
        assert not (tmp_path / "started").exists()
    runs.wait_for(lambda: not _containers_of(tmp_path), timeout=60, what="no container left")


def test_a_podman_run_stopped_while_it_creates_leaves_no_container(
    podman_image: str, tmp_path: Path, tmp_path_factory: pytest.TempPathFactory
) -> None:
    """SIGTERM to the task and podman (a scheduler's sweep) while podman run is creating the
    container (`runc create`, conmon's child, held until the sweep is done). Mostly podman
    has it in its store, created, and stops before it starts it, so --rm never runs and no
    conmon is there to remove it: the task removes it at its end (podman GLOBAL rm --force,
    the container's id from --cidfile) and ends with 143. Podman may also finish what it was
    creating and start it first (1 run in 4 here): then the program gets the kept SIGTERM
    from the task and its trap ends it (7). Either way no container is left."""
    task = _signalled_while_held(
        tmp_path,
        tmp_path_factory.mktemp("gated-runc"),
        "create",
        lambda task: _sweep(task.pid, signal.SIGTERM),
    )
    runs.wait_for(lambda: not _containers_of(tmp_path), timeout=60, what="no container left")
    if (tmp_path / "started").exists():
        assert task.returncode == 7, task.returncode
        assert (tmp_path / "signals").read_text() == "TERM after 0\n"
        assert sorted(os.listdir(tmp_path)) == ["signals", "started"]
    else:
        assert task.returncode == 143, task.returncode
        assert sorted(os.listdir(tmp_path)) == []


def test_a_killed_podman_task_takes_its_container_with_it(
    podman_image: str, tmp_path: Path
) -> None:
    """SIGKILL to the task and the podman client, no SIGTERM first (srun's kill of a step, a
    lost ssh session): the first process inside sees its task gone, sends the program
    SIGTERM, then SIGKILL 10 s later (this program ignores SIGTERM): no container is left,
    and the task's folder goes with it."""
    program = STARTED_AND_TRAPPED.format(then=":")
    task = _podman_task(tmp_path, program)
    runs.wait_for(lambda: (tmp_path / "started").exists(), timeout=120, what="the program")
    killed = time.monotonic()
    _sweep(task.pid, signal.SIGKILL)
    task.communicate(timeout=30)
    runs.wait_for(lambda: not _containers_of(tmp_path), timeout=60, what="no container left")
    assert time.monotonic() - killed >= 10, "SIGKILL before the 10 s the program is given"
    assert (tmp_path / "signals").read_text() == "TERM after 0\n"
    runs.wait_for(
        lambda: sorted(os.listdir(tmp_path)) == ["signals", "started"],
        timeout=30,
        what="the task's folder removed",
    )


def _checkpoints_in(folder: Path) -> list[int]:
    """Steps of the complete checkpoints (step-N.pt) in `folder`."""
    names = [path.name for path in folder.glob("step-*.pt")] if folder.is_dir() else []
    return sorted(int(name[5:-3]) for name in names if name[5:-3].isdigit())


@pytest.mark.slurm
@pytest.mark.timeout(900)  # two jobs, each may wait behind others in the shared queue
def test_a_retried_podman_run_resumes_from_its_mounted_checkpoint_dir(
    jobkit: Jobkit, podman_image: str, tmp_path: Path
) -> None:
    """checkpoint.dir outside the run folder (in /tmp, which Podman does not share): jobkit
    mounts it (container/outputs.py), so the checkpoints of attempt 1, cancelled mid-run on
    two Slurm nodes, are on the host, and `jobkit retry`'s attempt 2 resumes from the newest
    instead of starting again from step 0 in a fresh container's writable layer. The ranks
    are srun tasks, each in its container (no torchrun agent: the mount is the subject)."""
    container = {"image": podman_image, "runtime": "podman", "options": PODMAN_SITE}
    spec = _job(tmp_path, "slurm", container, launcher="srun")
    # The paced dataset (tests/e2e/paced_data.py), imported from the submission folder.
    paced = (Path(__file__).parent / "paced_data.py").read_text()
    (tmp_path / "paced_data.py").write_text(paced)
    checkpoints = tmp_path / "outside" / "ckpt"
    steps = 40
    sets = trainer_sets(
        train__steps=steps,
        logging__every_steps=2,
        checkpoint__every_steps=5,
        checkpoint__dir=str(checkpoints),
        data__name="paced_data:paced_chars",
        data__args__delay_s=0.02,  # 16 samples a step: 0.32 s a step at least
    )
    done = jobkit.run("submit", str(spec), *jobkit.common_sets(venv=False), *sets, cwd=tmp_path)
    first = _submission(done.returncode, done.stdout, done.stderr, 0.0)
    assert first.returncode == 0, first.explain()
    run_dir = Path(jobkit.status(first.jobkit_id)["log_paths"]["run_dir"])
    # Queued (behind the other lanes' jobs), started, trained to step 10.
    _await(
        jobkit,
        first.jobkit_id,
        lambda: max(_checkpoints_in(checkpoints), default=0) >= 10,
        timeout=900,
        what="step 10",
    )
    assert jobkit.run("cancel", first.jobkit_id).returncode == 0
    jobkit.wait_state(first.jobkit_id, {"CANCELLED"}, timeout=120)
    saved = max(_checkpoints_in(checkpoints))
    assert saved < steps, f"attempt 1 finished before the cancel ({saved})"

    retried = jobkit.run("retry", "--json", first.jobkit_id)
    assert retried.returncode == 0, retried.stdout + retried.stderr
    second = json.loads(retried.stdout)
    assert second["attempt"] == 2, second
    _await(
        jobkit,
        second["jobkit_id"],
        lambda: steps in _checkpoints_in(checkpoints),
        timeout=600,
        what=f"attempt 2's step {steps}",
    )
    final = jobkit.wait_state(second["jobkit_id"], {"SUCCEEDED", "FAILED"}, timeout=120)
    assert final["state"] == "SUCCEEDED", final
    resumed = runs.resumed_steps(run_dir)
    assert len(resumed) == 1 and saved <= resumed[0] < steps, (saved, resumed)
    assert f"step {steps}/{steps} loss" in runs.rank_log(run_dir, 1)
    assert steps in _checkpoints_in(checkpoints)
    assert not (run_dir / "checkpoints").exists()


FAILING = """\
import os, sys, traceback
rank = int(os.environ["RANK"])
print(f"rank {rank} of {os.environ['WORLD_SIZE']} in the image", flush=True)
if rank == 1:
    try:
        raise ValueError("bad batch 7 on rank 1")
    except ValueError:
        traceback.print_exc()
        sys.exit(3)
"""


@pytest.mark.slurm
def test_a_failing_program_inside_charliecloud_is_the_programs_failure(
    jobkit: Jobkit, image: Path, tmp_path: Path
) -> None:
    """Rank 1 of 2 (Slurm nodes, Charliecloud, torchrun) raises and exits 3: the job fails
    with the program's exit code, not ch-run's; `jobkit doctor` names the exception on rank
    1, not a container class; each rank's log is there (`jobkit logs --rank`)."""
    (tmp_path / "fail.py").write_text(FAILING)
    spec = _job(tmp_path, "slurm", {"image": str(image), "runtime": "charliecloud"})
    data = yaml.safe_load(spec.read_text())
    data["run"] = {"command": ["python3", "fail.py"]}
    spec.write_text(yaml.safe_dump(data))
    sub = jobkit.submit(str(spec), venv=False, cwd=tmp_path)
    assert sub.returncode != 0 and f"{sub.jobkit_id} FAILED" in sub.stderr, sub.explain()
    record = jobkit.status(sub.jobkit_id)
    assert record["exit_code"] == 3, record
    diagnosis = json.loads(jobkit.run("doctor", "--json", sub.jobkit_id, timeout=120).stdout)
    assert diagnosis["class"] == "python_exception", diagnosis
    assert diagnosis["rank"] == 1, diagnosis
    assert "ValueError: bad batch 7 on rank 1" in diagnosis["summary"], diagnosis
    for rank in (0, 1):
        logs = jobkit.run("logs", sub.jobkit_id, "--rank", str(rank))
        assert f"rank {rank} of 2 in the image" in logs.stdout, logs.stdout + logs.stderr
    assert "Traceback" in jobkit.run("logs", sub.jobkit_id, "--rank", "1").stdout


BACKEND_KEYS: dict[str, tuple[int, dict[str, Any]]] = {
    "ssh": (2, {"ssh": {"hosts": ["n1", "n2"]}}),
    # Slurm's Torque wrappers: qsub runs the script on one node (no PBS_NODEFILE here).
    "pbs": (1, {"pbs": {"flavor": "torque"}}),
    "sge": (2, {"sge": {"pe": "jobkit", "spawner": "qrsh"}}),
}


@pytest.mark.parametrize(
    "backend",
    [
        pytest.param("ssh", marks=pytest.mark.ssh),
        pytest.param("pbs", marks=pytest.mark.pbs),
        pytest.param("sge", marks=pytest.mark.sge),
    ],
)
def test_charliecloud_trains_on_the_ssh_pbs_and_sge_backends(
    jobkit: Jobkit, image: Path, tmp_path: Path, backend: str, request: pytest.FixtureRequest
) -> None:
    """The node command these backends share (templates/common/nodes.sh.j2) inside
    Charliecloud: two ssh hosts (n1, n2), the Torque wrappers' qsub (one node), two Grid
    Engine hosts (qrsh -inherit); the bundled trainer's loss falls, checkpoint in the run
    folder. On ssh and PBS each node's one trainer is the node command itself (launch.launcher
    none: the same container line, no torchrun agent; torchrun inside Charliecloud is the
    Slurm and local tests'). On Grid Engine too: the trainer cannot read $PE_HOSTFILE (the
    spool is not in the image) and, given MASTER_ADDR, says so and trains."""
    request.getfixturevalue(
        {"ssh": "ssh_hosts", "pbs": "pbs_cluster", "sge": "sge_cluster"}[backend]
    )
    nodes, keys = BACKEND_KEYS[backend]
    container = {"image": str(image), "runtime": "charliecloud"}
    spec = _job(tmp_path, backend, container, nodes, launcher="none")
    data = {**yaml.safe_load(spec.read_text()), **keys}
    spec.write_text(yaml.safe_dump(data))
    job = _trained(jobkit, spec, nodes=nodes)
    if backend == "sge":
        run_dir = Path(jobkit.status(job)["log_paths"]["run_dir"])
        unchecked = r"launch: cannot read PE_HOSTFILE=\S+: .*: MASTER_ADDR=\S+ is not checked"
        assert re.search(unchecked, runs.rank_log(run_dir, 0)), runs.rank_log(run_dir, 0)


INSIDE_FAILURES = {
    # The image's torch is a CPU build (no GPU on this machine either): what torch raises
    # when a program asks it for a GPU it cannot have.
    "container_gpu_missing": (
        "import torch; torch.zeros(1, device='cuda')",
        "AssertionError: Torch not compiled with CUDA enabled",
    ),
    # Charliecloud's image is read-only (ch-run without -w).
    "read_only_file_system": (
        "open('/opt/jobkit-out', 'w')",
        "OSError: [Errno 30] Read-only file system: '/opt/jobkit-out'",
    ),
}


@pytest.mark.parametrize("wanted", sorted(INSIDE_FAILURES))
def test_doctor_names_a_gpu_missing_or_a_read_only_image(
    jobkit: Jobkit, image: Path, tmp_path: Path, wanted: str
) -> None:
    """A real program inside Charliecloud (local backend) that asks torch for a GPU, or
    writes into the image: `jobkit doctor` gives the container's class, its line and fix."""
    code, line = INSIDE_FAILURES[wanted]
    spec = _job(tmp_path, "local", {"image": str(image), "runtime": "charliecloud"}, nodes=1)
    data = yaml.safe_load(spec.read_text())
    data["run"] = {"command": ["python3", "-c", code]}
    data["launch"] = {"launcher": "none"}
    spec.write_text(yaml.safe_dump(data))
    sub = jobkit.submit(str(spec), venv=False, cwd=tmp_path)
    assert sub.returncode != 0 and f"{sub.jobkit_id} FAILED" in sub.stderr, sub.explain()
    diagnosis = json.loads(jobkit.run("doctor", "--json", sub.jobkit_id, timeout=120).stdout)
    assert diagnosis["class"] == wanted, diagnosis
    assert line in [e["text"] for e in diagnosis["evidence"]], diagnosis
    assert "container" in diagnosis["fix"], diagnosis


@pytest.mark.parametrize("runtime", ["charliecloud", "podman"])
def test_a_container_job_runs_its_code_snapshot(
    jobkit: Jobkit, runtime: str, tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    """The snapshot is mounted inside (docs/provenance.md): the program runs there, and an
    edit made right after the submit is not what runs."""
    image_name = str(
        request.getfixturevalue("image" if runtime == "charliecloud" else "podman_image")
    )
    sub = make_repo(tmp_path, 'import os\nprint("code v1 in", os.getcwd())\n')
    container: dict[str, Any] = {"image": image_name, "runtime": runtime}
    if runtime == "podman":
        container["options"] = PODMAN_SITE
    spec = {"name": "frozen-ct", "backend": "local", "container": container}
    spec["run"] = {"command": ["python3", "prog.py"]}
    (sub / "job.yaml").write_text(yaml.safe_dump(spec))
    git(sub, "add", "job.yaml")
    git(sub, "commit", "-qm", "job")
    done = jobkit.run("submit", "job.yaml", *jobkit.common_sets(venv=False), "--json", cwd=sub)
    assert done.returncode == 0 and "not frozen" not in done.stderr, done.stderr
    job = str(json.loads(done.stdout)["jobkit_id"])
    (sub / "prog.py").write_text('print("code v2: edited after the submit")\n')
    record = jobkit.wait_state(job, {"SUCCEEDED", "FAILED", "CANCELLED"}, timeout=300)
    shown = json.loads(jobkit.run("show", job, "--json").stdout)
    code_dir = shown["submit"]["code"]["code_dir"]
    output = (Path(record["log_paths"]["run_dir"]) / "node-0.out").read_text()
    assert record["state"] == "SUCCEEDED" and f"code v1 in {code_dir}\n" in output, output
