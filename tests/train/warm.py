"""`python -m train` in a child forked from the test's own process, where torch is imported.

Each trainer process spends most of its CPU importing torch and torch._dynamo (which every
torch optimizer imports): about 4 of a 5-second tiny run on the CI machine. A run is
therefore started here by forking this process once those are imported, so that the child
begins where a fresh interpreter would have finished importing them, and then runs
train/__main__.py as `python -m train` does: with the given argv, environment, working
folder and standard streams, in its own session (process group), with default signal
handlers and Python's default warning filters, and with every module that is not installed
(the repository's `train`, `jobkit` and `tests`, a test's plug-in folder) imported afresh.

`start` runs one process. `start_ranks` runs N ranks of one job on this host the way the
trainer's `env` launch expects (RANK, LOCAL_RANK, WORLD_SIZE, LOCAL_WORLD_SIZE, GROUP_RANK,
GROUP_WORLD_SIZE, MASTER_ADDR, MASTER_PORT), under a small supervisor that does for them
what torchrun does: passes signals on, stops the others once one fails, and exits with the
first failure's code.

What this does not redo is reading the environment while importing torch, and it is not
torchrun: a test whose subject is either (torchrun's own behaviour, the launch it reports,
the process start-up) starts real processes (`nproc` under torchrun, or `fresh=True`).

`Forked` offers the part of subprocess.Popen the trainer's tests use.
"""

from __future__ import annotations

import atexit
import contextlib
import faulthandler
import os
import runpy
import selectors
import signal
import subprocess
import sys
import time
import traceback
import warnings
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Literal

WarningAction = Literal["default", "ignore"]

_INSTALLED = tuple(
    str(Path(root).resolve()) + os.sep for root in {sys.prefix, sys.base_prefix, sys.exec_prefix}
)
_PYTHON_DEFAULT_FILTERS: tuple[tuple[WarningAction, type[Warning], str], ...] = (
    ("default", DeprecationWarning, "__main__"),
    ("ignore", DeprecationWarning, ""),
    ("ignore", PendingDeprecationWarning, ""),
    ("ignore", ImportWarning, ""),
    ("ignore", ResourceWarning, ""),
)
"""A fresh interpreter's warning filters (CPython 3.11, no -W, no PYTHONWARNINGS)."""


def preload() -> None:
    """Import what every trainer process imports first: torch and torch._dynamo."""
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message="Failed to initialize NumPy")
        import torch
        import torch._dynamo  # what torch.optim imports on its first step
        import torch.distributed  # noqa: F401


class Forked:
    """A forked trainer process: pid, text pipes for stdout and stderr, and the Popen calls
    the tests make (poll, wait, communicate, send_signal, kill)."""

    def __init__(self, pid: int, stdout_fd: int, stderr_fd: int, args: list[str]) -> None:
        self.pid = pid
        self.args = args
        self.returncode: int | None = None
        self._fds = {stdout_fd: "stdout", stderr_fd: "stderr"}
        self._read: dict[str, bytearray] = {"stdout": bytearray(), "stderr": bytearray()}

    def poll(self) -> int | None:
        """The exit code (-N for signal N) once the child ended, else None."""
        if self.returncode is None:
            pid, status = os.waitpid(self.pid, os.WNOHANG)
            if pid:
                self.returncode = os.waitstatus_to_exitcode(status)
        return self.returncode

    def wait(self, timeout: float | None = None) -> int:
        """Wait for the child's end; subprocess.TimeoutExpired after `timeout` seconds."""
        deadline = None if timeout is None else time.monotonic() + timeout
        while self.poll() is None:
            if deadline is not None and time.monotonic() >= deadline:
                raise subprocess.TimeoutExpired(self.args, timeout or 0.0)
            time.sleep(0.02)
        assert self.returncode is not None
        return self.returncode

    def communicate(self, timeout: float | None = None) -> tuple[str, str]:
        """Read stdout and stderr to their end and wait; what was read before a timeout is
        kept for the next call, as Popen does."""
        deadline = None if timeout is None else time.monotonic() + timeout
        with selectors.DefaultSelector() as selector:
            for fd in self._fds:
                selector.register(fd, selectors.EVENT_READ)
            while self._fds:
                left = None if deadline is None else deadline - time.monotonic()
                if left is not None and left <= 0:
                    raise subprocess.TimeoutExpired(self.args, timeout or 0.0)
                for key, _ in selector.select(left):
                    fd = int(key.fd)
                    chunk = os.read(fd, 65536)
                    if chunk:
                        self._read[self._fds[fd]] += chunk
                        continue
                    selector.unregister(fd)
                    os.close(fd)
                    del self._fds[fd]
        left = None if deadline is None else max(deadline - time.monotonic(), 0.0)
        self.wait(left)
        return tuple(  # type: ignore[return-value]
            self._read[name].decode("utf-8", "replace") for name in ("stdout", "stderr")
        )

    def send_signal(self, number: int) -> None:
        """Signal the child, if it has not been waited for yet."""
        if self.poll() is None:
            os.kill(self.pid, number)

    def kill(self) -> None:
        self.send_signal(signal.SIGKILL)


def start(args: Sequence[str], env: Mapping[str, str], cwd: Path) -> Forked:
    """Fork, and run `python -m train ARGS` in the child (in its own session)."""
    return _fork(lambda: _run_as_main(list(args), dict(env), cwd), args)


def start_ranks(args: Sequence[str], env: Mapping[str, str], cwd: Path, ranks: int) -> Forked:
    """Fork a supervisor (in its own session) that forks RANKS `python -m train ARGS` on this
    host with RANK, LOCAL_RANK, WORLD_SIZE, ... set (the trainer's `env` launch), and does
    what torchrun does for them (tests/train/warm.py has the why). ENV holds MASTER_PORT."""
    job = {**env, "MASTER_ADDR": "127.0.0.1"}
    return _fork(lambda: _supervise(list(args), job, cwd, ranks), args)


def _fork(child: Callable[[], None], args: Sequence[str]) -> Forked:
    """Fork with stdout and stderr on two new pipes; the child runs CHILD and never returns."""
    preload()
    out_read, out_write = os.pipe()
    err_read, err_write = os.pipe()
    sys.stdout.flush()
    sys.stderr.flush()
    pid = os.fork()
    if pid == 0:
        code = 1
        try:
            os.close(out_read)
            os.close(err_read)
            os.setsid()
            null = os.open(os.devnull, os.O_RDONLY)
            for source, target in ((null, 0), (out_write, 1), (err_write, 2)):
                os.dup2(source, target)
                os.close(source)
            child()
        finally:
            os._exit(code)  # reached only when CHILD failed before it could exit itself
    os.close(out_write)
    os.close(err_write)
    return Forked(pid, out_read, err_read, [sys.executable, "-m", "train", *args])


FORWARDED = (
    signal.SIGTERM,
    signal.SIGINT,
    signal.SIGHUP,
    signal.SIGQUIT,
    signal.SIGUSR1,
    signal.SIGUSR2,
)
"""The signals the supervisor passes on to the ranks, as torchrun does."""
STOP_GRACE_S = 30.0
"""How long the other ranks have after SIGTERM, once one failed, before SIGKILL."""


def _supervise(args: list[str], env: dict[str, str], cwd: Path, ranks: int) -> None:
    """The supervisor: start the ranks, pass signals on to them, and once one fails stop
    the others (SIGTERM, SIGKILL after STOP_GRACE_S). Exits 0 when every rank did, else
    with the exit code of the first rank that failed (128 + N for signal N)."""
    _default_signals()
    children: dict[int, int] = {}

    def forward(number: int, _frame: object) -> None:
        for pid in list(children):
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, number)

    for number in FORWARDED:  # before the ranks exist: a signal then is not lost
        signal.signal(number, forward)
    for rank in range(ranks):
        rank_env = {
            **env,
            "RANK": str(rank),
            "LOCAL_RANK": str(rank),
            "WORLD_SIZE": str(ranks),
            "LOCAL_WORLD_SIZE": str(ranks),
            "GROUP_RANK": "0",
            "GROUP_WORLD_SIZE": "1",
        }
        pid = os.fork()
        if pid == 0:
            _run_as_main(args, rank_env, cwd)
        children[pid] = rank
    failed: int | None = None
    kill_at: float | None = None
    while children:
        pid, status = os.waitpid(-1, os.WNOHANG)
        if pid == 0:
            if kill_at is not None and time.monotonic() >= kill_at:
                forward(signal.SIGKILL, None)
                kill_at = None
            time.sleep(0.02)
            continue
        if children.pop(pid, None) is None:
            continue
        code = os.waitstatus_to_exitcode(status)
        if code != 0 and failed is None:
            failed = code if code > 0 else 128 - code
            forward(signal.SIGTERM, None)
            kill_at = time.monotonic() + STOP_GRACE_S
    os._exit(failed or 0)


def _run_as_main(args: list[str], env: dict[str, str], cwd: Path) -> None:
    """Run as a fresh `python -m train ARGS` would, on the standard streams already set up,
    and leave with its exit code (os._exit: nothing of the test process runs again)."""
    code = 1
    try:
        _default_signals()
        faulthandler.disable()
        atexit._clear()  # the test process's exit handlers are not the child's
        warnings.resetwarnings()
        for action, category, module in reversed(_PYTHON_DEFAULT_FILTERS):
            warnings.filterwarnings(action, category=category, module=module)
        sys.stdin = open(0, encoding="utf-8", closefd=False)  # noqa: SIM115
        sys.stdout = open(1, "w", encoding="utf-8", closefd=False, buffering=1)  # noqa: SIM115
        sys.stderr = open(  # noqa: SIM115
            2, "w", encoding="utf-8", errors="backslashreplace", closefd=False, buffering=1
        )
        os.chdir(cwd)
        os.environ.clear()
        os.environ.update(env)
        _threads_from(env)
        _forget_uninstalled_modules()
        extra = [p for p in env.get("PYTHONPATH", "").split(os.pathsep) if p]
        sys.path[:0] = [str(cwd), *extra]
        sys.argv = ["-m", *args]
        runpy.run_module("train", run_name="__main__", alter_sys=True)
        code = 0
    except SystemExit as stop:
        code = _exit_code(stop.code)
    except BaseException:  # a fresh interpreter prints it and exits 1
        traceback.print_exc()
        code = 1
    finally:
        try:
            atexit._run_exitfuncs()
            sys.stdout.flush()
            sys.stderr.flush()
        finally:
            os._exit(code)


def _default_signals() -> None:
    """Signal handling of a fresh interpreter: nothing blocked, SIGINT raises
    KeyboardInterrupt, every other catchable signal at its default."""
    signal.pthread_sigmask(signal.SIG_SETMASK, [])
    for number in signal.valid_signals():
        if number in (signal.SIGKILL, signal.SIGSTOP):
            continue
        try:
            if number == signal.SIGINT:
                signal.signal(number, signal.default_int_handler)
            elif number in (signal.SIGPIPE, signal.SIGXFSZ):
                signal.signal(number, signal.SIG_IGN)  # as CPython sets them at start-up
            else:
                signal.signal(number, signal.SIG_DFL)
        except (OSError, ValueError):
            continue


def _threads_from(env: Mapping[str, str]) -> None:
    """torch's thread count as OMP_NUM_THREADS would have set it when importing torch."""
    import torch

    wanted = env.get("OMP_NUM_THREADS", "").strip()
    if wanted.isdigit() and int(wanted) > 0:
        torch.set_num_threads(int(wanted))


def _forget_uninstalled_modules() -> None:
    """Drop every module that is not part of the Python installation or the venv, so that
    the repository's modules and a test's plug-ins are imported afresh, from the child's
    sys.path, as in a new process."""
    for name, module in list(sys.modules.items()):
        path = getattr(module, "__file__", None)
        if path and not os.path.realpath(path).startswith(_INSTALLED):
            del sys.modules[name]


def _exit_code(code: object) -> int:
    """SystemExit's code as the interpreter turns it into an exit status."""
    if code is None:
        return 0
    if isinstance(code, int):
        return code & 0xFF
    print(code, file=sys.stderr)
    return 1
