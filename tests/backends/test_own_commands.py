"""Each backend runs its own scheduler's commands (issue 22 item 10, backends/commands.py).

This machine has two `qdel`s: Slurm's Torque wrapper in /usr/bin (it runs scancel) and Grid
Engine's under $SGE_ROOT/bin/lx-amd64. `jobkit cancel` of a Grid Engine job used to run
whichever came first on PATH: with /usr/bin first, `qdel 12` went to Slurm.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from jobkit.backends.commands import GRID_ENGINE, PBS
from jobkit.core.errors import SchedulerError
from tests.plugins.sge import SgeCluster


def _program(path: Path) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("#!/bin/sh\nexit 0\n")
    path.chmod(0o755)
    return path


@pytest.fixture
def two_qdels(tmp_path: Path) -> dict[str, Path]:
    """A Torque-wrapper folder (qsub, qstat, qdel) and a Grid Engine root (the same three
    plus qconf and qacct under bin/lx-amd64)."""
    torque = tmp_path / "usr-bin"
    root = tmp_path / "sge"
    sge_bin = root / "bin" / "lx-amd64"
    for name in ("qsub", "qstat", "qdel"):
        _program(torque / name)
        _program(sge_bin / name)
    _program(sge_bin / "qconf")
    _program(sge_bin / "qacct")
    return {"torque": torque, "root": root, "sge_bin": sge_bin}


def test_grid_engine_commands_come_from_sge_root_whatever_path_says(
    two_qdels: dict[str, Path],
) -> None:
    env = {"SGE_ROOT": str(two_qdels["root"]), "SGE_ARCH": "lx-amd64",
           "PATH": f"{two_qdels['torque']}:{two_qdels['sge_bin']}"}  # fmt: skip
    assert GRID_ENGINE.argv(["qdel", "12"], env) == [str(two_qdels["sge_bin"] / "qdel"), "12"]
    # without SGE_ARCH: the one arch folder there is
    del env["SGE_ARCH"]
    assert GRID_ENGINE.resolve("qstat", env) == str(two_qdels["sge_bin"] / "qstat")


def test_grid_engine_without_sge_root_takes_the_path_folder_that_has_qconf(
    two_qdels: dict[str, Path],
) -> None:
    env = {"PATH": f"{two_qdels['torque']}:{two_qdels['sge_bin']}"}
    assert GRID_ENGINE.resolve("qdel", env) == str(two_qdels["sge_bin"] / "qdel")


def test_grid_engine_never_falls_back_to_another_schedulers_qdel(
    two_qdels: dict[str, Path],
) -> None:
    env = {"PATH": str(two_qdels["torque"])}
    with pytest.raises(SchedulerError) as err:
        GRID_ENGINE.resolve("qdel", env)
    assert err.value.show() == (
        f"qdel: Grid Engine's qdel was not found (the qdel on PATH, {two_qdels['torque']}/qdel,"
        " is another scheduler's): set SGE_ROOT (source $SGE_ROOT/$SGE_CELL/common/settings.sh)"
        " or JOBKIT_SGE_BIN"
    )


def test_a_configured_folder_wins_and_must_hold_the_command(
    two_qdels: dict[str, Path], tmp_path: Path
) -> None:
    env = {"JOBKIT_SGE_BIN": str(two_qdels["sge_bin"]), "PATH": str(two_qdels["torque"])}
    assert GRID_ENGINE.resolve("qdel", env) == str(two_qdels["sge_bin"] / "qdel")
    env["JOBKIT_SGE_BIN"] = str(tmp_path / "nowhere")
    with pytest.raises(SchedulerError, match="Grid Engine's qdel is not in JOBKIT_SGE_BIN="):
        GRID_ENGINE.resolve("qdel", env)


def test_pbs_skips_grid_engines_commands(two_qdels: dict[str, Path], tmp_path: Path) -> None:
    env = {"PATH": f"{two_qdels['sge_bin']}:{two_qdels['torque']}"}
    assert PBS.argv(["qdel", "12"], env) == [str(two_qdels["torque"] / "qdel"), "12"]
    pbs_exec = tmp_path / "opt-pbs"
    _program(pbs_exec / "bin" / "qstat")
    env["PBS_EXEC"] = str(pbs_exec)
    assert PBS.resolve("qstat", env) == str(pbs_exec / "bin" / "qstat")


def _slurm_state(job: str) -> str:
    done = subprocess.run(
        ["squeue", "--noheader", f"--jobs={job}", "--format=%T|%r"],
        capture_output=True, text=True, errors="replace", timeout=60, check=False,
    )  # fmt: skip
    return done.stdout.strip()


@pytest.mark.sge
@pytest.mark.slurm
@pytest.mark.timeout(300)
def test_cancel_of_a_grid_engine_job_runs_grid_engines_qdel(
    sge_cluster: SgeCluster, slurm_cluster: object, tmp_path: Path
) -> None:
    """PATH ordered so that the Torque wrappers' qdel (/usr/bin) comes first, Grid Engine's
    after it: `jobkit cancel` of a held Grid Engine job deletes that job (qstat -j no longer
    knows it) by running $SGE_ROOT/bin/lx-amd64/qdel, and a held Slurm job is untouched.
    Before, /usr/bin/qdel ran (it is scancel underneath): exit 1 and the Grid Engine job
    stayed."""
    assert Path("/usr/bin/qdel").read_text(errors="replace").startswith("#!")  # the wrapper
    sge_bin = sge_cluster.env["PATH"].split(os.pathsep)[0]
    env = dict(os.environ)
    env["PATH"] = os.pathsep.join(
        ["/usr/bin", str(Path(sys.executable).parent), *env["PATH"].split(os.pathsep)]
    )
    env["JOBKIT_HOME"] = str(tmp_path / "home")
    proc_log = tmp_path / "proc.jsonl"
    env["JOBKIT_PROC_LOG"] = str(proc_log)
    spec = tmp_path / "held.yaml"
    spec.write_text(
        "name: held\nbackend: sge\nrun:\n  command: [sleep, '300']\nscheduler:\n  extra: ['-h']\n"
    )
    slurm = subprocess.run(
        ["sbatch", "--parsable", "--hold", "-o", "/dev/null", "--wrap", "true"],
        capture_output=True, text=True, timeout=60, check=True,
    ).stdout.strip()  # fmt: skip

    def jobkit(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [sys.executable, "-m", "jobkit", *args],
            cwd=tmp_path, env=env, capture_output=True, text=True, timeout=120, check=False,
        )  # fmt: skip

    try:
        submitted = jobkit("submit", str(spec), "--json")
        assert submitted.returncode == 0, submitted.stderr
        job = json.loads(submitted.stdout)
        number = job["scheduler_id"]
        qstat = [f"{sge_bin}/qstat", "-j", number]
        assert subprocess.run(qstat, env=env, capture_output=True, timeout=60).returncode == 0
        cancelled = jobkit("cancel", job["jobkit_id"])
        assert cancelled.returncode == 0, cancelled.stderr
        gone = subprocess.run(qstat, env=env, capture_output=True, text=True, timeout=60)
        assert gone.returncode != 0, gone.stdout  # Grid Engine no longer knows the job
        runs = [json.loads(line)["argv"] for line in proc_log.read_text().splitlines()]
        qdels = [argv for argv in runs if Path(argv[0]).name == "qdel"]
        assert qdels == [[f"{sge_bin}/qdel", number]], runs
        assert all(Path(argv[0]).parent == Path(sge_bin) for argv in runs), runs
        assert _slurm_state(slurm) == "PENDING|JobHeldUser"
    finally:
        subprocess.run(["scancel", slurm], capture_output=True, timeout=60, check=False)
