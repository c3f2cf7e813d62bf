"""Notifications from real jobs on the local backend, to real receivers: a stdlib HTTP server
(webhook), aiosmtpd (mail) and a command. A failed job gives exactly one message with the
diagnosis even with two `jobkit watch` running at once; a stalled job gives one stall
message; bad config is one line at submit, nothing recorded; the URL never reaches argv."""

from __future__ import annotations

import json
import subprocess
import time
from pathlib import Path

import pytest

from tests.e2e.cli import JOBKIT, Jobkit
from tests.notify.servers import smtp_server, webhook_server


def write_spec(folder: Path, command: str, notify: list[str], name: str = "nj") -> str:
    path = folder / f"{name}.yaml"
    lines = [
        f"name: {name}",
        "backend: local",
        "launch:",
        "  launcher: none",
        "run:",
        f"  command: {json.dumps(command)}",
        "notify:",
        *[f"  {line}" for line in notify],
    ]
    path.write_text("\n".join(lines) + "\n")
    return str(path)


def submit(jobkit: Jobkit, spec: str, cwd: Path, *options: str) -> str:
    done = jobkit.run("submit", spec, *jobkit.common_sets(False), "--json", *options, cwd=cwd)
    assert done.returncode == 0, done.stderr
    return str(json.loads(done.stdout)["jobkit_id"])


def watchers(jobkit: Jobkit, job: str, count: int, cwd: Path) -> list[str]:
    """`count` `jobkit watch JOB --interval 0.3` at once, to the job's end: their stderr."""
    procs = [
        subprocess.Popen(
            [str(JOBKIT), "watch", job, "--interval", "0.3"],
            cwd=cwd,
            env=jobkit.env,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            text=True,
        )
        for _ in range(count)
    ]
    return [proc.communicate(timeout=120)[1] for proc in procs]


def test_failed_job_one_webhook_message_with_two_watchers(jobkit: Jobkit, tmp_path: Path) -> None:
    with webhook_server() as hook:
        spec = write_spec(
            tmp_path,
            "bash -c 'echo CUDA out of memory. Tried to allocate 2.00 GiB >&2; sleep 1; exit 1'",
            ["on: [fail, end]", "webhook: $TEST_HOOK_URL"],
        )
        jobkit_env = {**jobkit.env, "TEST_HOOK_URL": hook.url}
        done = subprocess.run(
            [str(JOBKIT), "submit", spec, *jobkit.common_sets(False), "--json"],
            cwd=tmp_path,
            env=jobkit_env,
            capture_output=True,
            text=True,
            timeout=60,
        )
        assert done.returncode == 0, done.stderr
        job = json.loads(done.stdout)["jobkit_id"]
        procs = [
            subprocess.Popen(
                [str(JOBKIT), "watch", job, "--interval", "0.3"],
                cwd=tmp_path,
                env=jobkit_env,
                stdout=subprocess.DEVNULL,
                stderr=subprocess.PIPE,
                text=True,
            )
            for _ in range(2)
        ]
        said = [proc.communicate(timeout=120)[1] for proc in procs]
    events = sorted(body["text"].split("\n")[0].split(" ")[3] for body in hook.bodies)
    assert events == ["FAILED", "FAILED"], hook.bodies  # fail and end: one message each
    sent = "".join(said)
    assert sent.count(f"notify: {job} fail: sent by webhook") == 1, said
    assert sent.count(f"notify: {job} end: sent by webhook") == 1, said
    text = hook.bodies[0]["text"]
    assert text.startswith(f"jobkit: nj ({job}) FAILED after "), text
    assert "exit code 1" in text and f"look further: jobkit doctor {job}" in text, text
    assert "diagnosis: " in text and "out of memory" in text.lower(), text
    assert hook.bodies[0]["username"] == "jobkit"
    assert "secret-token" not in sent  # the URL is never printed


def test_mail_and_command_get_one_message_per_event(jobkit: Jobkit, tmp_path: Path) -> None:
    facts = tmp_path / "facts.txt"
    go = tmp_path / "go"
    hook_script = tmp_path / "hook.sh"
    hook_script.write_text(
        '#!/bin/bash\necho "$JOBKIT_NOTIFY_EVENT $JOBKIT_NOTIFY_STATE $JOBKIT_NOTIFY_JOB'
        f' $JOBKIT_NOTIFY_EXIT_CODE" >> {facts}\n'
    )
    hook_script.chmod(0o700)
    with smtp_server() as box:
        spec = write_spec(
            tmp_path,
            f"bash -c 'while [ ! -e {go} ]; do sleep 0.2; done; exit 4'",
            [
                "on: [start, fail]",
                "email: alice@example.org",
                f"smtp: {box.address}",
                f"command: [{hook_script}]",
            ],
        )
        job = submit(jobkit, spec, tmp_path)
        procs = [
            subprocess.Popen(
                [str(JOBKIT), "watch", job, "--interval", "0.3"],
                cwd=tmp_path,
                env=jobkit.env,
                stdout=subprocess.DEVNULL,
                stderr=subprocess.PIPE,
                text=True,
            )
            for _ in range(2)
        ]
        deadline = time.monotonic() + 120
        while not box.mails:  # the job runs until the start message came
            assert time.monotonic() < deadline, "no start message"
            time.sleep(0.2)
        go.touch()
        said = [proc.communicate(timeout=120)[1] for proc in procs]
    assert [m["Subject"] for m in box.mails] == [
        f"jobkit: nj ({job}) RUNNING",
        f"jobkit: nj ({job}) FAILED",
    ], said
    mail = box.mails[1]
    assert mail["To"] == "alice@example.org"
    assert "exit code 4" in mail.get_payload()
    assert facts.read_text().splitlines() == [f"start RUNNING {job} ", f"fail FAILED {job} 4"]


def test_stalled_job_one_stall_message(jobkit: Jobkit, tmp_path: Path) -> None:
    """A job that wrote one heartbeat and then nothing for longer than monitor.stall_after."""
    beat = (
        'mkdir -p $JOBKIT_RUN_DIR/heartbeat; printf \'{"rank": 0, "step": 7, "time": %s}\''
        " $(date +%s) > $JOBKIT_RUN_DIR/heartbeat/rank-0.json; sleep 12"
    )
    with webhook_server() as hook:
        spec = write_spec(
            tmp_path, f"bash -c {json.dumps(beat)}", ["on: stall", f"webhook: {hook.url}"]
        )
        path = Path(spec)
        path.write_text(path.read_text() + "monitor:\n  stall_after: '00:00:04'\n")
        job = submit(jobkit, spec, tmp_path)
        said = watchers(jobkit, job, 2, tmp_path)
    assert len(hook.bodies) == 1, (hook.bodies, said)
    text = hook.bodies[0]["text"]
    assert text.startswith(f"jobkit: nj ({job}) STALLED (no progress for "), text
    assert "diagnosis: stalled at step 7" in text, text


def test_bad_config_is_one_line_at_submit(jobkit: Jobkit, tmp_path: Path) -> None:
    spec = write_spec(tmp_path, "true", ["webhook: hooks.example.org/T0/secret"])
    done = jobkit.run("submit", spec, cwd=tmp_path)
    assert done.returncode == 2
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith(f"jobkit: {spec}:8: notify.webhook: "), (
        done.stderr
    )
    assert "needs its scheme" in lines[0]
    assert not (jobkit.home / "jobs").exists() or not any((jobkit.home / "jobs").iterdir())


@pytest.mark.slurm
def test_slurm_failed_job_one_message_from_submit_wait_and_watch(
    jobkit: Jobkit, slurm_cluster: object, tmp_path: Path
) -> None:
    """`jobkit submit --wait` and a `jobkit watch` follow the same failing Slurm job: one
    webhook message, with the diagnosis."""
    with webhook_server() as hook:
        spec = write_spec(
            tmp_path,
            "bash -c 'echo torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00"
            " GiB >&2; exit 1'",
            ["on: fail", f"webhook: {hook.url}"],
        )
        path = Path(spec)
        path.write_text(
            path.read_text().replace("backend: local", "backend: slurm")
            + "resources:\n  partition: debug\n  time: '00:05:00'\n"
        )
        out = tmp_path / "submit.out"
        with out.open("w") as sink:
            waiting = subprocess.Popen(
                [str(JOBKIT), "submit", spec, *jobkit.common_sets(False), "--wait"],
                cwd=tmp_path,
                env=jobkit.env,
                stdout=sink,
                stderr=subprocess.STDOUT,
            )
        job, _ = jobkit.submitted(out)
        watched = watchers(jobkit, job, 1, tmp_path)
        assert waiting.wait(timeout=600) == 1
    said = out.read_text() + "".join(watched)
    assert len(hook.bodies) == 1, (hook.bodies, said)
    assert said.count(f"notify: {job} fail: sent by webhook") == 1, said
    text = hook.bodies[0]["text"]
    assert text.startswith(f"jobkit: nj ({job}) FAILED after "), text
    assert "slurm job " in text and "exit code 1" in text, text
    assert "diagnosis: CUDA out of memory" in text, text
