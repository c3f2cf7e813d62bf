"""The submit command of a chain's stage on each backend (dry runs: nothing is run)."""

from __future__ import annotations

from pathlib import Path

import pytest

from jobkit.backends.base import After
from jobkit.core.errors import JobkitError
from jobkit.manager.submit import plan_submission
from jobkit.spec.load import load_spec


def _plan(tmp_path: Path, backend: str, after: tuple[After, ...], keep: bool = False) -> list[str]:
    extra = {"pbs": "pbs:\n  flavor: torque\n", "ssh": "ssh:\n  hosts: [n1]\n"}.get(backend, "")
    path = tmp_path / "job.yaml"
    path.write_text(f"name: s\nbackend: {backend}\nrun:\n  command: 'true'\n{extra}")
    spec = load_spec(path, profile_dirs=[]).spec
    return plan_submission(spec, workdir=tmp_path, after=after, keep_broken=keep).argv


def test_slurm(tmp_path: Path) -> None:
    argv = _plan(tmp_path, "slurm", (After("123;c1", "ok"),))
    assert argv[-3:-1] == ["--dependency=afterok:123", "--kill-on-invalid-dep=yes"]
    argv = _plan(tmp_path, "slurm", (After("7_2", "fail"),), keep=True)
    assert argv[-3:-1] == ["--dependency=afternotok:7_2", "--kill-on-invalid-dep=no"]
    assert "--dependency=afterany:9" in _plan(tmp_path, "slurm", (After("9", "any"),))


def test_pbs(tmp_path: Path) -> None:
    argv = _plan(tmp_path, "pbs", (After("55.server", "any"),))
    assert argv[1:3] == ["-W", "depend=afterany:55.server"]


def test_sge_holds_and_checks_the_exit_code(tmp_path: Path) -> None:
    after = After("77", "ok", {"run_dir": "/runs/prep-77"})
    argv = _plan(tmp_path, "sge", (after,))
    i = argv.index("-hold_jid")
    assert argv[i : i + 4] == [
        "-hold_jid",
        "77",
        "-v",
        "JOBKIT_CHAIN_AFTER=ok:/runs/prep-77/exit_code",
    ]
    argv = _plan(tmp_path, "sge", (After("77", "any", {"run_dir": "/r"}),))
    assert "-v" not in argv  # any end will do: nothing to check
    with pytest.raises(JobkitError, match="holds ',' or '='"):
        _plan(tmp_path, "sge", (After("77", "ok", {"run_dir": "/a,b"}),))


@pytest.mark.parametrize("backend", ["local", "ssh"])
def test_launchers_start_behind_the_waiter(tmp_path: Path, backend: str) -> None:
    after = After("jkabcde", "ok", {"pid": "42", "start_time": "9", "run_dir": "/r/prep"})
    argv = _plan(tmp_path, backend, (after,))
    assert argv[1:3] == ["-m", "jobkit.backends.chain_wait"]
    assert argv[argv.index("--after") + 1] == "ok,42,9,jkabcde,/r/prep"
    assert argv[-3:-1] == ["--", "bash"]


def test_submitit_refuses(tmp_path: Path) -> None:
    with pytest.raises(JobkitError, match="the submitit backend cannot start a job after another"):
        _plan(tmp_path, "submitit", (After("1", "ok"),))
