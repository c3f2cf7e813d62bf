"""Files to the cluster and back with tar over ssh (the path taken where rsync is missing on
either side), through the real loopback sshd (`ssh n1`)."""

from __future__ import annotations

from pathlib import Path

import pytest

from jobkit.remote import mirror, ship
from jobkit.remote.clusters import Cluster
from jobkit.remote.transport import Transport

pytestmark = pytest.mark.ssh


def test_tar_over_ssh_ships_and_fetches_back(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, ssh_hosts: object
) -> None:
    home = tmp_path / "home"
    (home / "jobs" / "jk1").mkdir(parents=True)
    (home / "jobs" / "jk1" / "job.sh").write_text("#!/bin/sh\necho it's here\n")
    workdir = tmp_path / "cluster"
    monkeypatch.setenv("JOBKIT_HOME", str(home))
    transport = Transport(Cluster("c", "n1", str(workdir)))
    logs = f"{workdir}/logs dir"
    done = ship._tar(transport, home, ["jobs/jk1"], [logs])
    assert done.returncode == 0, done.stderr
    assert (workdir / "jobs" / "jk1" / "job.sh").read_text() == "#!/bin/sh\necho it's here\n"
    assert (workdir / "jobs" / "jk1").stat().st_mode & 0o077 == 0
    assert Path(logs).is_dir()
    run_dir = Path(logs) / "run-1"
    (run_dir / "checkpoints").mkdir(parents=True)
    (run_dir / "metrics.jsonl").write_text('{"step": 1}\n')
    (run_dir / "checkpoints" / "step-1.pt").write_bytes(b"x" * 1000)
    root = tmp_path / "copies"
    root.mkdir()
    fetched = mirror._tar(transport, [str(run_dir), f"{logs}/missing.out"], root)
    assert fetched.returncode == 0, fetched.stderr
    copy = root / str(run_dir).lstrip("/")
    assert (copy / "metrics.jsonl").read_text() == '{"step": 1}\n'
    assert not (copy / "checkpoints").exists()  # checkpoints stay on the cluster
