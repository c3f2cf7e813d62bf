"""The job side of a function job: `python -m jobkit.api.runner CALL_FILE [item=N]`.

Runs on every rank with the job's Python (no jobkit CLI, no torch import of its own): loads
the pickled call, runs it, and leaves what the submitting side reads (jobkit/api/functions.py)
in `$JOBKIT_RUN_DIR/function/`: rank 0's `result.pkl`, or for each rank whose call raised
`error-rank-R.json` (type, message, traceback, host, time) and `error-rank-R.pkl` (the
exception, when it pickles); that rank then exits 1.
"""

from __future__ import annotations

import contextlib
import json
import os
import pickle
import shutil
import socket
import sys
import time
import traceback
from pathlib import Path
from typing import Any

FUNCTION_DIR = "function"
EXIT_FAILED = 1
EXIT_USAGE = 2


def main(argv: list[str]) -> int:
    """Run the call named by argv; the exit code."""
    if not argv or len(argv) > 2:
        print("usage: python -m jobkit.api.runner CALL_FILE [item=N]", file=sys.stderr)
        return EXIT_USAGE
    call_file = Path(argv[0])
    key, _, number = argv[1].partition("=") if len(argv) == 2 else ("item", "", "0")
    if key != "item" or not number.isdigit():
        print(f"jobkit: runner: expected item=N, got {argv[1]!r}", file=sys.stderr)
        return EXIT_USAGE
    index = int(number)
    rank = int(os.environ.get("RANK") or 0)
    run_dir = Path(os.environ.get("JOBKIT_RUN_DIR") or call_file.parent)
    folder = run_dir / FUNCTION_DIR
    os.makedirs(folder, mode=0o700, exist_ok=True)
    try:
        with open(call_file, "rb") as stream:
            payload = pickle.load(stream)
        if rank == 0:
            shutil.copyfile(call_file, folder / "call.pkl")
        args, kwargs = payload["calls"][index]
        value = payload["fn"](*args, **kwargs)
    except Exception as err:
        _write_error(folder, rank, err)
        traceback.print_exc()
        return EXIT_FAILED
    if rank == 0:
        try:
            data = _dumps(value)
        except Exception as err:
            _write_error(folder, rank, err, what="its return value could not be pickled: ")
            return EXIT_FAILED
        _write_atomic(folder / "result.pkl", data)
    return 0


def _dumps(value: Any) -> bytes:
    try:
        import cloudpickle
    except ImportError:
        return pickle.dumps(value)
    return bytes(cloudpickle.dumps(value))


def _write_error(folder: Path, rank: int, err: BaseException, what: str = "") -> None:
    """This rank's error record (and the exception itself, when it pickles)."""
    record = {
        "rank": rank,
        "host": socket.gethostname(),
        "time": time.time(),
        "type": type(err).__qualname__,
        "message": what + str(err),
        "traceback": "".join(traceback.format_exception(type(err), err, err.__traceback__)),
    }
    # An exception that does not pickle: the record's text still says it all.
    with contextlib.suppress(Exception):
        _write_atomic(folder / f"error-rank-{rank}.pkl", _dumps(err))
    _write_atomic(folder / f"error-rank-{rank}.json", json.dumps(record).encode())


def _write_atomic(path: Path, data: bytes) -> None:
    temp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    fd = os.open(temp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "wb") as stream:
        stream.write(data)
    os.replace(temp, path)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
