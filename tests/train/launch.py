"""Start the trainer as a user would: `python -m train` alone or under torchrun.

A run alone, and the ranks of a run that is not about torchrun (`ranks=N`: the trainer's
`env` launch), are forked from the test's process with torch already imported (tests/train/
warm.py: the same `python -m train` from its first line, without paying torch's import
again); `nproc=N` runs N ranks under the real torchrun, and `fresh=True` a fresh process.
"""

from __future__ import annotations

import os
import re
import socket
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

from tests.train import warm

REPO_ROOT = Path(__file__).resolve().parents[2]
PYTHON = sys.executable
TORCHRUN = str(Path(sys.executable).with_name("torchrun"))
# Launcher variables that must not leak in from the shell running pytest (e.g. inside sbatch).
_LAUNCH_PREFIXES = ("SLURM_", "PBS_", "OMPI_", "PMI_", "PMIX_", "TORCHELASTIC_", "JOBKIT_")
_LAUNCH_NAMES = {
    "RANK",
    "LOCAL_RANK",
    "WORLD_SIZE",
    "LOCAL_WORLD_SIZE",
    "GROUP_RANK",
    "GROUP_WORLD_SIZE",
    "MASTER_ADDR",
    "MASTER_PORT",
    "MPI_LOCALRANKID",
    "MPI_LOCALNRANKS",
}
FINAL_LOSS = re.compile(r"^final loss (\S+)$", re.MULTILINE)
STEP_LINE = re.compile(r"^step (\d+)/\d+ loss (\S+)", re.MULTILINE)

# Small, fast variants of the bundled configs.
TINY_LM = (
    "model.args={d_model: 32, n_layers: 2, n_heads: 4, dropout: 0.1}",
    "data.args={context: 32}",
    "data.batch_size_per_rank=8",
    "logging.every_steps=1",
)
SMALL_MLP = ("logging.every_steps=1", "data.args={samples: 1024}")


def clean_env(**extra: str) -> dict[str, str]:
    """os.environ without any launcher's variables, plus `extra`."""
    env = {
        key: value
        for key, value in os.environ.items()
        if not key.startswith(_LAUNCH_PREFIXES) and key not in _LAUNCH_NAMES
    }
    env["PYTHONUNBUFFERED"] = "1"
    env["OMP_NUM_THREADS"] = "1"
    env.update(extra)
    return env


def free_port() -> int:
    """A TCP port on 127.0.0.1 that nothing listens on right now."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def set_args(overrides: tuple[str, ...] | list[str]) -> list[str]:
    """--set k=v for each override."""
    args: list[str] = []
    for item in overrides:
        args += ["--set", item]
    return args


@dataclass
class Result:
    """A finished trainer process."""

    returncode: int
    stdout: str
    stderr: str
    run_dir: Path

    @property
    def final_loss(self) -> str:
        """The text after `final loss ` (full precision), or '' if absent."""
        found = FINAL_LOSS.findall(self.stdout)
        return found[-1] if found else ""

    def losses(self) -> list[float]:
        """Every logged step loss, in order."""
        return [float(loss) for _step, loss in STEP_LINE.findall(self.stdout)]

    def rank_log(self, rank: int) -> str:
        return (self.run_dir / f"rank-{rank}.log").read_text(encoding="utf-8")

    def explain(self) -> str:
        return (
            f"rc={self.returncode}\n--- stdout\n{self.stdout[-4000:]}"
            f"\n--- stderr\n{self.stderr[-4000:]}"
        )


class Launcher:
    """Runs the trainer in `root` with run folders under root/<name>."""

    def __init__(self, root: Path) -> None:
        self.root = root

    def run_dir(self, name: str) -> Path:
        path = self.root / name
        path.mkdir(parents=True, exist_ok=True)
        return path

    def argv(self, config: str | None, overrides, nproc: int, extra: list[str]) -> list[str]:
        train_args = [*(["--config", config] if config else []), *set_args(overrides), *extra]
        if nproc == 0:
            return [PYTHON, "-m", "train", *train_args]
        return [
            TORCHRUN,
            "--nproc-per-node",
            str(nproc),
            "--rdzv-backend",
            "c10d",
            "--rdzv-endpoint",
            f"127.0.0.1:{free_port()}",
            "--no-python",
            PYTHON,
            "-m",
            "train",
            *train_args,
        ]

    def start(
        self,
        name: str,
        config: str | None,
        overrides=(),
        nproc: int = 0,
        extra: list[str] | None = None,
        env: dict[str, str] | None = None,
        fresh: bool = False,
        ranks: int = 0,
    ) -> tuple[subprocess.Popen[str] | warm.Forked, Path]:
        """Start without waiting. nproc N: N ranks under torchrun; ranks N: N forked ranks
        (`env` launch); neither: one `python -m train`, forked unless `fresh`."""
        run_dir = self.run_dir(name)
        argv = self.argv(config, overrides, nproc, extra or [])
        environ = clean_env(JOBKIT_RUN_DIR=str(run_dir), **(env or {}))
        if ranks and nproc:
            raise ValueError("ranks (forked, env launch) and nproc (torchrun) exclude each other")
        if ranks:
            environ["MASTER_PORT"] = str(free_port())
            return warm.start_ranks(argv[3:], environ, self.root, ranks), run_dir
        if nproc == 0 and not fresh:
            return warm.start(argv[3:], environ, self.root), run_dir
        process = subprocess.Popen(
            argv,
            cwd=self.root,
            env=environ,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            start_new_session=True,
        )
        return process, run_dir

    def run(
        self,
        name: str,
        config: str | None,
        overrides=(),
        nproc: int = 0,
        extra: list[str] | None = None,
        env: dict[str, str] | None = None,
        timeout: float = 180,
        fresh: bool = False,
        ranks: int = 0,
    ) -> Result:
        """Run to the end and return what it printed."""
        process, run_dir = self.start(name, config, overrides, nproc, extra, env, fresh, ranks)
        try:
            stdout, stderr = process.communicate(timeout=timeout)
        finally:
            if process.poll() is None:
                os.killpg(process.pid, 9)
                process.wait()
        return Result(process.returncode, stdout, stderr, run_dir)


def wait_for(predicate, timeout: float = 60.0, interval: float = 0.05) -> bool:
    """Poll `predicate` until it is true or `timeout` seconds passed."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return True
        time.sleep(interval)
    return False
