"""Sending: a failing webhook is one line without the URL; $NAME reads the URL from the
environment; the command gets the facts in its environment, not its argv."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from jobkit.notify.message import Message
from jobkit.notify.send import SendError, run_command, send_webhook
from jobkit.registry.record import JobRecord
from jobkit.registry.store import Store
from tests.notify.servers import webhook_server


def _record(tmp_path: Path) -> JobRecord:
    with Store(tmp_path / "home") as store:
        record = store.create_intent(
            backend="local",
            name="train",
            spec={"name": "train"},
            script="",
            workdir=tmp_path,
        )
        store.mark_failed(record.jobkit_id, "exit 3")
        return store.get(record.jobkit_id)


def test_webhook_error_never_shows_the_url(tmp_path: Path) -> None:
    message = Message("fail", _record(tmp_path), "CUDA out of memory on rank 0")
    with webhook_server() as hook:
        hook.status = 500
        with pytest.raises(SendError) as caught:
            send_webhook(hook.url, message)
    assert str(caught.value) == "webhook answered HTTP 500"
    assert (
        len(hook.bodies) == 1
        and "diagnosis: CUDA out of memory on rank 0" in hook.bodies[0]["text"]
    )
    with pytest.raises(SendError) as unreachable:
        send_webhook("http://127.0.0.1:9/secret-path", message)
    assert "secret-path" not in str(unreachable.value)
    assert str(unreachable.value).startswith("webhook not reached: ")


def test_webhook_from_the_environment(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    message = Message("fail", _record(tmp_path), None)
    with webhook_server() as hook:
        monkeypatch.setenv("MY_HOOK", hook.url)
        send_webhook("$MY_HOOK", message)
    assert hook.bodies[0]["text"].startswith("jobkit: train (")
    monkeypatch.delenv("MY_HOOK")
    with pytest.raises(SendError, match="the environment variable MY_HOOK is not set"):
        send_webhook("$MY_HOOK", message)


def test_command_gets_the_facts_in_its_environment(tmp_path: Path) -> None:
    record = _record(tmp_path)
    out = tmp_path / "env.json"
    script = tmp_path / "hook.py"
    script.write_text(
        "import json, os, sys\n"
        f"json.dump({{k: v for k, v in os.environ.items() if k.startswith('JOBKIT_NOTIFY')}},"
        f" open({str(out)!r}, 'w'))\n"
        "json.dump(sys.argv[1:], open(sys.argv[1], 'w')) if len(sys.argv) > 1 else None\n"
    )
    run_command(["python3", str(script)], Message("fail", record, "diag"))
    facts = json.loads(out.read_text())
    assert facts["JOBKIT_NOTIFY_EVENT"] == "fail"
    assert facts["JOBKIT_NOTIFY_JOB"] == record.jobkit_id
    assert facts["JOBKIT_NOTIFY_STATE"] == "FAILED"
    assert facts["JOBKIT_NOTIFY_DIAGNOSIS"] == "diag"
    with pytest.raises(SendError, match=r"notify.command false exit 1"):
        run_command(["false"], Message("fail", record, None))
