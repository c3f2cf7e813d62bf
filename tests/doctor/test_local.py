"""Failures reproduced for real with the local backend: each case is a small job that fails
the way users' jobs do (a port taken, a world that never assembles, a rank that raises, a
memory limit, a missing module...), and `jobkit doctor ID --json` must name the class, the
rank, the host and the fix. The jobs run side by side (one registry for the module)."""

from __future__ import annotations

import json
import socket
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from tests.manager.helpers import run_jobkit_process

pytestmark = pytest.mark.slow

HOST = socket.gethostname()
RAISE = """\
import os, time
def load_batch(rank):
    raise ValueError(f"bad batch on rank {rank}")
if os.environ["RANK"] == "1":
    load_batch(1)
time.sleep(5)
"""
UNUSED_MODEL = """\
from torch import nn
class TwoHeads(nn.Module):
    def __init__(self, n, c):
        super().__init__()
        self.used = nn.Linear(n, c)
        self.unused = nn.Linear(n, c)
    def forward(self, x):
        return self.used(x)
def build(info):
    return TwoHeads(info["in_features"], info["num_classes"])
"""
NEVER_ASSEMBLES = (
    "import datetime, torch.distributed as d;"
    " d.init_process_group('gloo', timeout=datetime.timedelta(seconds=3))"
)


ANY_RANK = -1
"""Case.rank when every rank fails the same way: which one the logs show first is a race."""


@dataclass(frozen=True)
class Case:
    procs: int
    command: list[str]
    cls: str
    rank: int | None
    fix: str
    extra: str = ""


def _cases(folder: Path, port: int) -> dict[str, Case]:
    py = sys.executable
    return {
        "raises": Case(2, [py, str(folder / "raise.py")], "python_exception", 1, "--rank 1"),
        "port": Case(
            2,
            [py, "-c", "import time; time.sleep(5)"],
            "port_in_use",
            None,
            "launch.master_port",
            f"  master_port: {port}\n  rdzv: static\n",
        ),
        "never_assembles": Case(
            2,
            ["bash", "-c", f'WORLD_SIZE=3 exec {py} -c "{NEVER_ASSEMBLES}"'],
            "rendezvous_timeout",
            ANY_RANK,  # every rank fails alike: either may be first
            "launch.nproc_per_node",
        ),
        "world_size": Case(
            2,
            ["bash", "-c", f"WORLD_SIZE=1 exec {py} -m train --config mlp"],
            "world_size",
            ANY_RANK,  # every rank fails alike: either may be first
            "launch.nproc_per_node",
        ),
        "oom": Case(
            1,
            ["bash", "-c", f"ulimit -v 300000; exec {py} -c 'x = bytearray(2 * 1024**3)'"],
            "host_oom",
            0,
            "resources.mem",
        ),
        "no_module": Case(
            1, [py, "-c", "import flash_attn_missing"], "module_not_found", 0, "env.venv"
        ),
        "no_command": Case(
            1, ["scontrol_missing", "show", "hostnames"], "command_not_found", 0, "env.modules"
        ),
        "disk_full": Case(
            1,
            [py, "-c", "open('/dev/full', 'w').write('x' * 99999)"],
            "disk_full",
            0,
            "checkpoint.keep_last",
        ),
        "no_exec": Case(1, [str(folder / "noexec.sh")], "permission_denied", 0, "chmod +x"),
        "segfault": Case(
            2,
            [py, "-c", "import ctypes; ctypes.string_at(0)"],
            "segfault",
            ANY_RANK,  # every rank fails alike: either may be first (rank 1 was, in CI)
            "PYTHONFAULTHANDLER",
        ),
        "unused": Case(
            2,
            [
                py,
                "-m",
                "train",
                "--config",
                "mlp",
                "--set",
                "model.name=unused_model:build",
                "--set",
                "model.args={}",
                "--set",
                "train.steps=3",
            ],
            "unused_parameters",
            None,
            "distributed.find_unused_parameters: true",
            f"env:\n  vars:\n    PYTHONPATH: {folder}\n",
        ),
        "trainer_config": Case(
            1,
            [py, "-m", "train", "--config", "mlp", "--set", "train.steps=-1"],
            "trainer_config",
            0,
            "run.train.overrides",
        ),
    }


@dataclass
class Batch:
    home: Path
    folder: Path
    ids: dict[str, str]

    def jobkit(self, *args: str, timeout: float = 120) -> Any:
        return run_jobkit_process(
            *args, cwd=self.folder, env={"JOBKIT_HOME": str(self.home)}, timeout=timeout
        )

    def doctor(self, name: str) -> dict[str, Any]:
        done = self.jobkit("doctor", self.ids[name], "--json")
        assert done.returncode == 0, done.stderr
        data: dict[str, Any] = json.loads(done.stdout)
        return data


def _spec(folder: Path, name: str, case: Case) -> Path:
    launch = f"launch:\n  nproc_per_node: {case.procs}\n"
    extra = case.extra
    if extra.startswith("  "):
        launch, extra = launch + extra, ""
    path = folder / f"{name}.yaml"
    path.write_text(
        f"name: {name}\nbackend: local\n{launch}{extra}"
        f"run:\n  command: {json.dumps(case.command)}\n"
    )
    return path


@pytest.fixture(scope="module")
def batch(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Batch]:
    """Every case submitted at once (and a job to cancel), waited for until all are final."""
    folder = tmp_path_factory.mktemp("doctor-local")
    (folder / "raise.py").write_text(RAISE)
    (folder / "unused_model.py").write_text(UNUSED_MODEL)
    (folder / "noexec.sh").write_text("echo never\n")
    (folder / "noexec.sh").chmod(0o644)
    taken = socket.socket()
    taken.bind(("0.0.0.0", 0))
    taken.listen()
    result = Batch(folder / "home", folder, {})
    cases = _cases(folder, taken.getsockname()[1])
    sleeper = Case(1, ["sleep", "300"], "cancelled", None, "jobkit submit")
    for name, case in {**cases, "cancelled": sleeper}.items():
        # --no-check: these jobs are meant to fail at run time (submit refuses a missing program)
        done = result.jobkit("submit", "--no-check", str(_spec(folder, name, case)))
        assert done.returncode == 0, done.stderr
        result.ids[name] = done.stdout.split()[1]
    cancel = result.jobkit("cancel", result.ids["cancelled"])
    assert cancel.returncode == 0, cancel.stderr
    deadline = time.monotonic() + 300
    while True:
        listed = json.loads(result.jobkit("status", "--json").stdout)
        if all(r["state"] not in ("RUNNING", "QUEUED", "SUBMITTING") for r in listed):
            break
        assert time.monotonic() < deadline, listed
        time.sleep(1)
    taken.close()
    yield result


CASE_NAMES = [
    "raises",
    "port",
    "never_assembles",
    "world_size",
    "oom",
    "no_module",
    "no_command",
    "disk_full",
    "no_exec",
    "segfault",
    "unused",
    "trainer_config",
]


@pytest.mark.parametrize("name", CASE_NAMES)
def test_local_failure_is_classified(batch: Batch, name: str) -> None:
    case = _cases(batch.folder, 0)[name]
    found = batch.doctor(name)
    assert found["outcome"] == "failed" and found["state"] == "FAILED", found
    assert found["class"] == case.cls, json.dumps(found, indent=1)
    if case.rank == ANY_RANK:  # the ranks fail alike: the first is one of the job's ranks
        assert found["rank"] in range(case.procs), found
    elif case.rank is not None:
        assert found["rank"] == case.rank, found
    assert found["host"] == HOST and found["node"] == 0, found
    assert case.fix in found["fix"], found["fix"]
    assert found["evidence"] and ":" in found["evidence"][0]["where"], found


def test_the_exception_and_its_frame(batch: Batch) -> None:
    found = batch.doctor("raises")
    assert found["summary"] == "ValueError: bad batch on rank 1"
    assert found["frame"] == f"{batch.folder / 'raise.py'}:3 in load_batch"
    text = batch.jobkit("doctor", batch.ids["raises"]).stdout
    assert "first rank  1, host " + HOST in text and "ValueError: bad batch on rank 1" in text


def test_module_not_found_names_the_python(batch: Batch) -> None:
    found = batch.doctor("no_module")
    assert "flash_attn_missing" in found["summary"]
    assert any(sys.executable in note or "python" in note for note in found["notes"]), found


def test_cancelled(batch: Batch) -> None:
    found = batch.doctor("cancelled")
    assert (found["state"], found["class"]) == ("CANCELLED", "cancelled"), found


def test_status_shows_each_failed_jobs_diagnosis(batch: Batch) -> None:
    """Under the table, one line per failed job (the cached diagnosis), none for the
    cancelled one."""
    table = batch.jobkit("status").stdout.split("diagnosis (jobkit doctor ID")[1]
    notes = {line.split()[0]: line for line in table.splitlines()[1:]}
    assert sorted(notes) == sorted(batch.ids[name] for name in CASE_NAMES), table
    assert all(len(line) < 160 for line in notes.values()), table
    raised = notes[batch.ids["raises"]]
    assert raised.endswith(
        f"a rank raised a Python exception on rank 1 ({HOST}): ValueError: bad batch on rank 1"
    ), raised
