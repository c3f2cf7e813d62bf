"""`notify.from: job`: the job sends its own messages, with no jobkit process watching, on
the local backend and on the real Slurm, to a stdlib HTTP server (webhook) and aiosmtpd
(mail). The URL reaches the job through a 0600 file (never the script or argv), which the
job removes at its end; a later `jobkit watch` sends nothing again; bad config is one line."""

from __future__ import annotations

import json
import stat
import subprocess
import time
from pathlib import Path

import pytest

from tests.e2e.cli import JOBKIT, Jobkit
from tests.e2e.test_notify import write_spec
from tests.notify.servers import smtp_server, webhook_server

FAILING = (
    "bash -c 'while [ ! -e {go} ]; do sleep 0.2; done; echo torch.OutOfMemoryError: CUDA out"
    " of memory. Tried to allocate 2.00 GiB >&2; exit 1'"
)


def _submit(jobkit: Jobkit, spec: str, cwd: Path, env: dict[str, str]) -> str:
    done = subprocess.run(
        [str(JOBKIT), "submit", spec, *jobkit.common_sets(False), "--json"],
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 0, done.stderr
    return str(json.loads(done.stdout)["jobkit_id"])


def _until(check: object, what: str, timeout: float = 300) -> None:
    deadline = time.monotonic() + timeout
    while not check():  # type: ignore[operator]
        assert time.monotonic() < deadline, what
        time.sleep(0.2)


def _secret_file(jobkit: Jobkit, job: str) -> Path:
    return jobkit.logs_dir / ".jobkit-notify" / f"{job}.json"


def _check_sent_by_job(
    jobkit: Jobkit, job: str, cwd: Path, bodies: list[dict[str, object]], backend: str
) -> None:
    """Start then fail, each once, from the job: the diagnosis in the message, the secret
    file gone, the job's own lines in its output, nothing more from a watcher."""
    texts = [str(body["text"]) for body in bodies]
    assert len(texts) == 2, texts
    assert texts[0].startswith(f"jobkit: nj ({job}) RUNNING after "), texts
    assert texts[1].startswith(f"jobkit: nj ({job}) FAILED after "), texts
    assert f"{backend} job " in texts[1] and "exit code 1" in texts[1], texts
    assert "diagnosis: CUDA out of memory" in texts[1], texts
    assert f"look further: jobkit doctor {job}" in texts[1], texts
    _until(lambda: not _secret_file(jobkit, job).exists(), "the secret file stayed", 60)
    record = jobkit.wait_state(job, {"FAILED"}, timeout=120)
    said = Path(record["log_paths"]["out"]).read_text()
    assert said.count(f"jobkit: notify: {job} start: sent by webhook") == 1, said
    assert said.count(f"jobkit: notify: {job} fail: sent by webhook") == 1, said
    watched = jobkit.run("watch", job, "--interval", "0.3", cwd=cwd)
    assert watched.returncode == 0, watched.stderr
    assert "notify:" not in watched.stderr, watched.stderr
    assert len(bodies) == 2, bodies
    claims = sorted(p.name for p in Path(record["log_paths"]["run_dir"]).glob("notified-*"))
    assert claims == ["notified-fail.1.json", "notified-start.1.json"], claims


def test_local_job_sends_its_own_messages(jobkit: Jobkit, tmp_path: Path) -> None:
    go = tmp_path / "go"
    with webhook_server() as hook:
        spec = write_spec(
            tmp_path,
            FAILING.format(go=go),
            ["from: job", "on: [start, fail]", "webhook: $TEST_HOOK_URL"],
        )
        job = _submit(jobkit, spec, tmp_path, {**jobkit.env, "TEST_HOOK_URL": hook.url})
        _until(lambda: hook.bodies, "no start message")
        secret = _secret_file(jobkit, job)
        assert stat.S_IMODE(secret.stat().st_mode) == 0o600
        assert stat.S_IMODE(secret.parent.stat().st_mode) == 0o700
        assert hook.url in secret.read_text()
        script = next((jobkit.home / "jobs").glob(f"**/{job}/*.sh")).read_text()
        assert "secret-token" not in script and "TEST_HOOK_URL" not in script
        ps = subprocess.run(["ps", "-eo", "args"], capture_output=True, text=True, check=True)
        assert "secret-token" not in ps.stdout
        go.touch()
        _until(lambda: len(hook.bodies) >= 2, "no fail message")
        _check_sent_by_job(jobkit, job, tmp_path, hook.bodies, "local")


@pytest.mark.slurm
def test_slurm_job_sends_its_own_webhook_and_mail(
    jobkit: Jobkit, slurm_cluster: object, tmp_path: Path
) -> None:
    """The batch script on the Slurm node sends: no jobkit runs after the submit."""
    go = tmp_path / "go"
    with webhook_server() as hook, smtp_server() as box:
        spec = write_spec(
            tmp_path,
            FAILING.format(go=go),
            [
                "from: job",
                "on: [start, fail]",
                "webhook: $TEST_HOOK_URL",
                "email: alice@example.org",
                f"smtp: {box.address}",
            ],
        )
        path = Path(spec)
        path.write_text(
            path.read_text().replace("backend: local", "backend: slurm")
            + "resources:\n  partition: debug\n  time: '00:05:00'\n"
        )
        job = _submit(jobkit, spec, tmp_path, {**jobkit.env, "TEST_HOOK_URL": hook.url})
        _until(lambda: hook.bodies and box.mails, "no start message", 600)
        go.touch()
        _until(lambda: len(hook.bodies) >= 2 and len(box.mails) >= 2, "no fail message")
        _check_sent_by_job(jobkit, job, tmp_path, hook.bodies, "slurm")
        assert [m["Subject"] for m in box.mails] == [
            f"jobkit: nj ({job}) RUNNING",
            f"jobkit: nj ({job}) FAILED",
        ]
        assert "diagnosis: CUDA out of memory" in box.mails[1].get_payload()


@pytest.mark.parametrize(
    ("lines", "backend", "said"),
    [
        (
            ["from: job", "on: [fail, stall]", "webhook: https://h.example/x"],
            "local",
            ":7: notify: notify.on: stall needs a watcher (jobkit watch)",
        ),
        (
            ["from: job", "webhook: https://h.example/x"],
            "sge",
            ":8: notify.from: the sge backend has no notifications sent by the job itself",
        ),
        (
            ["from: job", "webhook: $H7_UNSET_HOOK"],
            "local",
            "notify.webhook: the environment variable H7_UNSET_HOOK is not set here",
        ),
    ],
)
def test_bad_job_notify_is_one_line(
    jobkit: Jobkit, tmp_path: Path, lines: list[str], backend: str, said: str
) -> None:
    spec = write_spec(tmp_path, "true", lines)
    path = Path(spec)
    path.write_text(path.read_text().replace("backend: local", f"backend: {backend}"))
    env = {k: v for k, v in jobkit.env.items() if k != "H7_UNSET_HOOK"}
    done = subprocess.run(
        [str(JOBKIT), "submit", spec, *jobkit.common_sets(False)],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode != 0
    out = done.stderr.strip().splitlines()
    assert len(out) == 1 and said in out[0], done.stderr
    assert not (jobkit.home / "jobs").exists() or not any((jobkit.home / "jobs").iterdir())
    assert not (jobkit.logs_dir / ".jobkit-notify").exists()
