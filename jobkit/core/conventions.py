"""Conventions shared by the Python side, the templates and the trainer, defined once.

Stdlib only: the trainer (train/) imports it too. The templates get these values through
`template_constants()` (render/engine.py), so a name changed here changes everywhere.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from jobkit.core import ports

REQUEUE_EXIT_CODE = 75
"""EX_TEMPFAIL: the program's "checkpoint saved, run me again" exit code."""

EXIT_CODE_FILE = "exit_code"
"""The job's exit code, left in the run folder by the script (Slurm, PBS, SGE) or launcher."""
TIMED_OUT_FILE = "timed_out"
"""Left in the run folder by the local/ssh launcher that stopped the job at resources.time."""
FAILURE_FILE = "failure"
"""One line the script leaves when it stops the job before the program runs."""
FINISHED_FILE = "finished"
"""The trainer's note that training is complete (the script trusts it over a late signal)."""
REQUEUE_MARKER_FILE = "requeue-requested"
"""The trainer's note that it saved a checkpoint and asks to be requeued."""
REQUEUE_REFUSED_FILE = "requeue-refused"
"""The job script's note `JOB_ID why` that it could not requeue itself: jobkit resubmits
the run as its next attempt (docs/runs.md)."""
PREEMPTED_FILE = "preempted"
"""The job script's note `JOB_ID PreemptTime=...` that Slurm preempted the job (its step was
signalled, the script saw only a failed step): jobkit reports PREEMPTED (docs/runs.md)."""
SWEEP_OVERRIDES_FILE = "sweep-overrides.json"
"""A sweep task's overrides as a JSON object (key -> value as written), left by the script."""
RANKS_DIR = "ranks"
"""ranks/R holds the node index of the host that runs rank R."""
CHECKPOINTS_DIR = "checkpoints"
METRICS_FILE = "metrics.jsonl"
HEARTBEAT_DIR = "heartbeat"
"""heartbeat/rank-R.json: each rank's last progress (step, time, pid, host, phase), written by
the bundled trainer and read by `jobkit status` and `jobkit doctor` (jobkit/hang)."""
HEARTBEAT_EVERY_S = 1.0
"""The trainer rewrites a rank's heartbeat at most this often while its step advances."""


def heartbeat_file(rank: int) -> str:
    """`rank-R.json`: rank R's heartbeat inside HEARTBEAT_DIR."""
    return f"rank-{rank}.json"


def log_stem(name: str, job_id: str) -> str:
    """`{name}-{JOBID}`: the base name of a job's .out, .err and run folder."""
    return f"{name}-{job_id}"


def logs_folder(workdir: Path, logs_dir: str) -> Path:
    """`logs.dir` made absolute against the submission directory."""
    folder = Path(logs_dir)
    return folder if folder.is_absolute() else workdir / folder


def job_log_paths(workdir: Path, logs_dir: str, name: str, job_id: str) -> dict[str, str]:
    """Absolute 'out', 'err' and 'run_dir' of a job: `{logs.dir}/{name}-{JOBID}{.out,.err,/}`."""
    stem = log_stem(name, job_id)
    folder = logs_folder(workdir, logs_dir).resolve()
    return {
        "out": str(folder / f"{stem}.out"),
        "err": str(folder / f"{stem}.err"),
        "run_dir": str(folder / stem),
    }


def template_constants() -> dict[str, Any]:
    """What every template gets from here: file names, the requeue code, the port rule."""
    return {
        "requeue_exit_code": REQUEUE_EXIT_CODE,
        "run_files": {
            "exit_code": EXIT_CODE_FILE,
            "timed_out": TIMED_OUT_FILE,
            "failure": FAILURE_FILE,
            "finished": FINISHED_FILE,
            "requeue_marker": REQUEUE_MARKER_FILE,
            "requeue_refused": REQUEUE_REFUSED_FILE,
            "preempted": PREEMPTED_FILE,
            "ranks": RANKS_DIR,
            "sweep_overrides": SWEEP_OVERRIDES_FILE,
        },
        "port_rule": {
            "base": ports.PORT_BASE,
            "span": ports.PORT_SPAN,
            "decimal_digits": ports.DECIMAL_DIGITS,
            "base36_chars": ports.BASE36_CHARS,
        },
    }
