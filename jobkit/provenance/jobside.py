"""The job's side of its provenance, taken at start by the job script on its first host
(`python -m jobkit.provenance.jobside HOST...`, templates/common/macros.sh.j2): the Python
packages the job sees (importlib.metadata: no pip), torch and its CUDA and NCCL versions
(read from their files: torch is not imported), the GPUs, the hosts and the scheduler's own
record of the job; the conda environment, the loaded environment modules
(provenance/envtools.py) and the container image with its digest (provenance/image.py).
Written with the submit side's record (JOBKIT_PROVENANCE) into
`$JOBKIT_RUN_DIR/provenance/<JOBKIT_JOB_ID>.json`. No environment value of the user's is
read or written (only the scheduler's job ids and conda's and the module systems' own).
Standard library only: it runs under the job's Python.
"""

from __future__ import annotations

import json
import os
import platform
import re
import shutil
import socket
import subprocess
import sys
import time
from importlib import metadata
from importlib.util import find_spec
from pathlib import Path
from typing import Any

from jobkit.provenance.envtools import conda_env, modules
from jobkit.provenance.image import container_image

QUERY_TIMEOUT_S = 20.0
FOLDER = "provenance"
"""Under the run folder: one <JOBKIT_JOB_ID>.json per attempt (and its code.patch)."""


def packages() -> dict[str, str]:
    """name -> version of every distribution this Python sees (sys.path, PYTHONPATH)."""
    found: dict[str, str] = {}
    for dist in metadata.distributions():
        try:
            name = dist.name
        except (KeyError, AttributeError):  # a dist-info without a Name
            continue
        if name:
            found.setdefault(_canonical(name), dist.version or "")
    return dict(sorted(found.items()))


def _canonical(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def torch_versions(found: dict[str, str]) -> dict[str, str | None]:
    """torch, its CUDA (torch/version.py) and NCCL (the nvidia-nccl wheel) versions."""
    cuda = None
    spec = find_spec("torch") if "torch" in found else None
    if spec is not None and spec.origin:
        text = _read(Path(spec.origin).parent / "version.py")
        match = re.search(r"^cuda\s*(?::[^=]*)?=\s*['\"]([^'\"]+)['\"]", text, re.MULTILINE)
        cuda = match.group(1) if match else None
    nccl = next((v for n, v in found.items() if n.startswith("nvidia-nccl")), None)
    return {"torch": found.get("torch"), "cuda": cuda, "nccl": nccl}


def _read(path: Path) -> str:
    try:
        return path.read_text(encoding="utf-8", errors="replace")
    except OSError:
        return ""


def _command(argv: list[str]) -> str | None:
    """A command's output, None when it is not there or fails."""
    if shutil.which(argv[0]) is None:
        return None
    try:
        done = subprocess.run(
            argv, capture_output=True, text=True, errors="replace", timeout=QUERY_TIMEOUT_S
        )
    except (OSError, subprocess.TimeoutExpired):
        return None
    return done.stdout if done.returncode == 0 else None


def gpus() -> list[str]:
    """The GPUs of this host with their driver (nvidia-smi), none without it."""
    out = _command(["nvidia-smi", "--query-gpu=name,driver_version", "--format=csv,noheader"])
    return [line.strip() for line in (out or "").splitlines() if line.strip()]


def scheduler_record() -> dict[str, str] | None:
    """The scheduler's own record of this job, as its command prints it."""
    job = os.environ.get("SLURM_JOB_ID")
    if job:
        return _record(["scontrol", "show", "job", job])
    job = os.environ.get("PBS_JOBID")
    if job:
        return _record(["qstat", "-f", job])
    job = os.environ.get("JOB_ID")
    if job and os.environ.get("SGE_ROOT"):
        return _record(["qstat", "-j", job])
    return None


def _record(argv: list[str]) -> dict[str, str] | None:
    out = _command(argv)
    return {"command": " ".join(argv), "output": out} if out is not None else None


def job_side(hosts: list[str], submit: dict[str, Any] | None = None) -> dict[str, Any]:
    """Everything this module records, as one JSON-ready mapping (the container's image
    from the submit side's spec)."""
    found = packages()
    spec = (submit or {}).get("spec")
    return {
        "taken_at": time.time(),
        "job_id": os.environ.get("JOBKIT_JOB_ID"),
        "attempt": os.environ.get("JOBKIT_ATTEMPT"),
        "host": socket.gethostname(),
        "hosts": hosts,
        "working_folder": os.getcwd(),
        "python": {"executable": sys.executable, "version": platform.python_version()},
        "platform": platform.platform(),
        "packages": found,
        **torch_versions(found),
        "gpus": gpus(),
        "scheduler_record": scheduler_record(),
        "conda": conda_env(),
        "modules": modules(),
        "container": container_image(
            spec if isinstance(spec, dict) else {}, (submit or {}).get("submit_folder")
        ),
    }


def main(argv: list[str]) -> int:
    """Write the record; a failure is one line on stderr and exit 1 (the job script goes
    on: provenance never stops a job), 2 without a run folder."""
    try:
        return write_record(argv)
    except Exception as err:  # whatever it is, the job must go on: said in one line
        print(f"jobkit: provenance not recorded: {type(err).__name__}: {err}", file=sys.stderr)
        return 1


def write_record(argv: list[str]) -> int:
    """provenance/<JOBKIT_JOB_ID>.json in the run folder."""
    run_dir = os.environ.get("JOBKIT_RUN_DIR")
    if not run_dir:
        return 2
    folder = Path(run_dir) / FOLDER
    folder.mkdir(mode=0o700, exist_ok=True)
    job_id = re.sub(r"[^A-Za-z0-9._-]", "_", os.environ.get("JOBKIT_JOB_ID", "job"))
    submit_side = _submit_side(folder, job_id)
    record = {"submit": submit_side, "job": job_side(argv, submit_side)}
    target = folder / f"{job_id}.json"
    temp = folder / f".{job_id}.json.tmp"
    fd = os.open(temp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w", encoding="utf-8") as handle:
        json.dump(record, handle, indent=1, sort_keys=True)
    os.replace(temp, target)
    return 0


def _submit_side(folder: Path, job_id: str) -> dict[str, Any] | None:
    """The submit side's record (JOBKIT_PROVENANCE), its patch copied beside."""
    source = os.environ.get("JOBKIT_PROVENANCE")
    if not source:
        return None
    try:
        data = json.loads(Path(source).read_text(encoding="utf-8"))
        patch = Path(source).with_name("code.patch")
        if patch.is_file():
            shutil.copyfile(patch, folder / f"{job_id}.patch")
    except (OSError, ValueError):
        return None
    return data if isinstance(data, dict) else None


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
