"""A cluster that cannot be reached, or whose host key changed: one line, never FAILED.

The unreachable cluster is real (ssh to a name that does not resolve: no sshd needed).
The changed host key is ssh's own stderr, recorded from OpenSSH 9.2 (making a real one
needs a second host key on the shared test sshd, which other tests use).
"""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from jobkit.cli import run
from jobkit.cli.status import EXIT_STALE
from jobkit.core import proc
from jobkit.registry.store import Store
from jobkit.remote.clusters import Cluster, save_cluster
from jobkit.remote.transport import HostKeyRefused, Transport, Unreachable

CHANGED_KEY = """\
@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@
@    WARNING: REMOTE HOST IDENTIFICATION HAS CHANGED!     @
@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@
IT IS POSSIBLE THAT SOMEONE IS DOING SOMETHING NASTY!
Someone could be eavesdropping on you right now (man-in-the-middle attack)!
It is also possible that a host key has just been changed.
The fingerprint for the ED25519 key sent by the remote host is
SHA256:3Dq1kq7cQYd2bIhcq3sPc8m1h8WZ0m4p6bHkK1l7C1A.
Please contact your system administrator.
Add correct host key in /root/.ssh/known_hosts to get rid of this message.
Offending ED25519 key in /root/.ssh/known_hosts:3
Host key for login.example.edu has changed and you have requested strict checking.
Host key verification failed.
"""


@pytest.fixture(autouse=True)
def home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("JOBKIT_HOME", str(tmp_path / "h"))
    return tmp_path / "h"


def test_a_changed_host_key_is_refused_in_one_line() -> None:
    transport = Transport(Cluster("c", "login.example.edu", "/w"))
    done = proc.Completed(["ssh", "login.example.edu", "true"], 255, "", CHANGED_KEY, 0.1)
    with pytest.raises(HostKeyRefused) as caught:
        transport.settle(done)
    assert caught.value.show() == (
        "cluster c: the host key of login.example.edu is not the one ~/.ssh/known_hosts"
        " knows: refused (if its admins changed it, check the new key, then `ssh-keygen -R"
        " login.example.edu`)"
    )


def test_an_unreachable_cluster_keeps_the_last_state_and_says_since_when(
    capsys: pytest.CaptureFixture[str],
) -> None:
    save_cluster(Cluster("gone", "no-such-host.invalid", "/w"))
    with Store() as store:
        row = store.create_intent(
            backend="slurm@gone", name="trained", spec={}, script="", workdir=Path("/w")
        )
        store.mark_submitted(row.jobkit_id, scheduler_id="123", argv=[], log_paths={})
    before = time.time()
    assert run(["status"]) == EXIT_STALE  # shown states may be old: said, exit 3
    first = capsys.readouterr()
    assert f"{row.jobkit_id}  123" in first.out and "QUEUED" in first.out, first.out
    assert "FAILED" not in first.out and "UNKNOWN" not in first.out
    (warning,) = [line for line in first.err.splitlines() if "unreachable" in line]
    assert "cluster gone (no-such-host.invalid) unreachable since " in warning, warning
    since = warning.split("unreachable since ", 1)[1][:19]
    assert abs(time.mktime(time.strptime(since, "%Y-%m-%d %H:%M:%S")) - before) < 5
    assert "\n" not in warning
    run(["status"])  # still unreachable: the same `since`, still QUEUED
    again = capsys.readouterr()
    assert f"unreachable since {since}" in again.err
    with Store() as store:
        assert store.get(row.jobkit_id).state == "QUEUED"


def test_unreachable_is_the_transports_own_error() -> None:
    transport = Transport(Cluster("gone", "no-such-host.invalid", "/w"))
    with pytest.raises(Unreachable, match=r"^cluster gone \(no-such-host.invalid\) unreachable"):
        transport.run_script("true")
