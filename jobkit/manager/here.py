"""`jobkit run SPEC --here`: the spec's script run in the foreground in the current allocation,
recorded like any job (docs/interactive.md).

The row's backend is `here` (backends/here.py): its scheduler id is the allocation's id (the
script's JOBKIT_JOB_ID, so the run folder is `{logs.dir}/{name}-{allocation}`), and its state
comes from the script's process and the run folder's `exit_code` file, as for the local
launcher. jobkit writes that file itself when the script stopped before writing it.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import signal
import subprocess
import sys
import threading
from collections.abc import Callable
from pathlib import Path
from typing import IO, TYPE_CHECKING, BinaryIO

from jobkit.backends import launcher_files, launcher_state, processes
from jobkit.backends.base import Allocation
from jobkit.backends.here import NAME
from jobkit.core import private
from jobkit.core.conventions import EXIT_CODE_FILE
from jobkit.core.errors import JobkitError
from jobkit.core.run_files import read_exit_file
from jobkit.manager.submit import SCRIPT_MODE, SCRIPT_NAME, submitter_identity
from jobkit.registry.store import JobRecord, Store

if TYPE_CHECKING:
    from jobkit.spec.schema import JobSpec

_CHUNK = 65536


def run_here(
    store: Store,
    spec: JobSpec,
    script: str,
    *,
    workdir: Path,
    allocation: Allocation,
    scheduler: str,
    on_start: Callable[[JobRecord], None] = lambda record: None,
    stdout_to_stderr: bool = False,
) -> JobRecord:
    """Record the run, start `bash job.sh` in the allocation, copy its output to the terminal
    and to the job's .out/.err, wait, and record how it ended; returns the final row.

    Ctrl-C sends SIGTERM to the script's process group (srun passes it to the step's tasks)
    and the run is recorded CANCELLED; a second Ctrl-C sends SIGKILL. `stdout_to_stderr`:
    the job's stdout goes to our stderr (ours then carries JSON)."""
    files = launcher_files.job_files(spec, allocation.job_id, workdir)
    record = store.create_intent(
        backend=NAME,
        name=spec.name,
        spec=spec.model_dump(mode="json"),
        script=script,
        workdir=workdir,
        extra={
            "submitter": submitter_identity(),
            "allocation": allocation.job_id,
            "allocation_backend": scheduler,
        },
    )
    try:
        script_path = _write_script(record.job_dir, script)
        argv = ["bash", str(script_path)]
        for folder in (files.out.parent, files.run_dir):
            private.make_dir(folder)
        # A previous run in this allocation shares the run folder: its exit code is not ours.
        (files.run_dir / EXIT_CODE_FILE).unlink(missing_ok=True)
        env = {**allocation.environ, "JOBKIT_ID": record.jobkit_id}
        env.setdefault("SLURM_JOB_NAME", spec.name)
        child = subprocess.Popen(
            argv,
            cwd=workdir,
            env=env,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            start_new_session=True,
        )
    except OSError as err:
        store.mark_failed(record.jobkit_id, f"could not start: {err.strerror or err}")
        raise JobkitError(f"cannot start the job's script: {err.strerror or err}") from None
    info = processes.proc_info(child.pid)
    # As the launcher writes it: its time is the run's start (`jobkit status` ELAPSED).
    (files.run_dir / launcher_state.LAUNCHER_PID_FILE).write_text(f"{child.pid}\n")
    launched = launcher_files.Launched(
        host=submitter_identity()["host"],
        pid=child.pid,
        pgid=child.pid,
        start_time=info.start_time if info else "",
    )
    record = store.mark_submitted(
        record.jobkit_id,
        scheduler_id=allocation.job_id,
        argv=argv,
        log_paths=files.as_log_paths(),
        extra={
            **launched.as_extra(),
            "run_dir": str(files.run_dir),
            **({"hosts": json.dumps([allocation.nodes])} if allocation.nodes else {}),
        },
    )
    _observe(store, record)
    on_start(store.get(record.jobkit_id))
    terminal = sys.stderr.buffer if stdout_to_stderr else sys.stdout.buffer
    code = _wait_copying(child, files, record.job_dir, terminal)
    if read_exit_file(str(files.run_dir)) is None:
        _write_exit_code(files.run_dir, code)
    return _observe(store, record)


def _write_script(job_dir: Path, script: str) -> Path:
    private.make_dir(job_dir)
    path = job_dir / SCRIPT_NAME
    private.write_file(path, script, SCRIPT_MODE)
    return path


def _observe(store: Store, record: JobRecord) -> JobRecord:
    """The run's state from its process and exit-code file, stored (as a poll would)."""
    job = record.tracked()
    observation = launcher_state.observe(job)
    store.record_observations({record.jobkit_id: observation})
    return store.get(record.jobkit_id)


def _wait_copying(
    child: subprocess.Popen[bytes],
    files: launcher_files.JobFiles,
    job_dir: Path,
    terminal: BinaryIO,
) -> int:
    """Copy the child's stdout and stderr to ours and to the .out/.err files until it exits;
    its exit code (128+N for a signal N)."""
    assert child.stdout is not None and child.stderr is not None
    with open(files.out, "ab") as out_file, open(files.err, "ab") as err_file:
        copiers = [
            threading.Thread(target=_copy, args=(child.stdout, terminal, out_file), daemon=True),
            threading.Thread(
                target=_copy, args=(child.stderr, sys.stderr.buffer, err_file), daemon=True
            ),
        ]
        for thread in copiers:
            thread.start()
        interrupts = 0
        while True:
            try:
                code = child.wait()
                break
            except KeyboardInterrupt:
                interrupts += 1
                launcher_files.mark_cancelled(job_dir)
                sig = signal.SIGTERM if interrupts == 1 else signal.SIGKILL
                print(f"jobkit: stopping the run (SIG{sig.name[3:]})", file=sys.stderr, flush=True)
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(child.pid, sig)
        for thread in copiers:
            thread.join(timeout=10)
    return code if code >= 0 else 128 - code


def _copy(source: IO[bytes], terminal: BinaryIO, log: IO[bytes]) -> None:
    """Copy bytes from the child's pipe to the terminal and the log file as they come."""
    while True:
        chunk = os.read(source.fileno(), _CHUNK)
        if not chunk:
            return
        log.write(chunk)
        log.flush()
        try:
            terminal.write(chunk)
            terminal.flush()
        except (OSError, ValueError):
            pass  # the terminal went away: the log file still gets everything


def _write_exit_code(run_dir: Path, code: int) -> None:
    """The launcher's contract (docs/design.md): the exit code as a decimal number."""
    tmp = run_dir / f"{EXIT_CODE_FILE}.tmp"
    tmp.write_text(f"{code}\n")
    shutil.move(str(tmp), str(run_dir / EXIT_CODE_FILE))
