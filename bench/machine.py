"""What the figures were taken on: CPU, cores, memory, load, and the versions of the tools."""

from __future__ import annotations

import os
import platform
import subprocess
from pathlib import Path
from typing import Any

from bench import slurm
from bench.procs import load_average


def cpu_model() -> str:
    """The CPU's model name from /proc/cpuinfo (or platform's guess)."""
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown"


def memory_gib() -> float | None:
    """Total memory in GiB."""
    try:
        for line in Path("/proc/meminfo").read_text().splitlines():
            if line.startswith("MemTotal:"):
                return round(int(line.split()[1]) / 1024 / 1024, 1)
    except OSError:
        pass
    return None


def machine() -> dict[str, Any]:
    """CPU model, cores, memory, kernel and the load averages now."""
    return {
        "cpu_model": cpu_model(),
        "cores": os.cpu_count(),
        "mem_gib": memory_gib(),
        "kernel": platform.release(),
        "load_start": load_average(),
    }


def _python_says(python: Path, code: str) -> str | None:
    try:
        done = subprocess.run(
            [str(python), "-c", code], capture_output=True, text=True, timeout=120, check=False
        )
    except OSError:
        return None
    return done.stdout.strip() if done.returncode == 0 and done.stdout.strip() else None


def versions(python: Path, torchx: str | None) -> dict[str, str | None]:
    """Versions of python, torch, jobkit (in the project venv), Slurm and torchx."""
    return {
        "python": _python_says(python, "import platform; print(platform.python_version())"),
        # Its installed version, as torch.__version__ says it (e.g. 2.13.0+cpu), without the
        # seconds of importing torch.
        "torch": _python_says(
            python, "from importlib.metadata import version; print(version('torch'))"
        ),
        "jobkit": _python_says(
            python, "from importlib.metadata import version; print(version('jobkit'))"
        ),
        "slurm": slurm.version(),
        "torchx": torchx,
    }
