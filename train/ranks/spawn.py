"""`python -m train ... --spawn N` (launch.launcher spawn): this process starts N training
processes on this node with torch.multiprocessing and waits for them.

Each child gets RANK = LOCAL_RANK = its index, WORLD_SIZE = LOCAL_WORLD_SIZE = N,
GROUP_RANK 0, MASTER_ADDR (this node's, default 127.0.0.1) and MASTER_PORT (jobkit's rule,
as for every launcher), then runs the normal entry (train.cli.main). The preemption signals
(train.preempt_signals) and SIGINT that reach this parent are passed on to every child, which
checkpoints and exits as under torchrun. The exit code: a child's failure (the first
non-zero one that is not the requeue code), else the requeue code (75) if a child stopped
to be requeued, else 0.
"""

from __future__ import annotations

import contextlib
import os
import signal
import sys
import time
from collections.abc import Callable, Mapping, Sequence
from types import FrameType
from typing import Any

from jobkit.core.conventions import REQUEUE_EXIT_CODE
from train.env.launch import LaunchEnv

POLL_S = 0.2
"""How often the parent looks at its children."""


def child_environ(env: LaunchEnv, index: int, nprocs: int) -> dict[str, str]:
    """The variables child `index` of `nprocs` reads its place in the job from."""
    return {
        "RANK": str(index),
        "LOCAL_RANK": str(index),
        "WORLD_SIZE": str(nprocs),
        "LOCAL_WORLD_SIZE": str(nprocs),
        "GROUP_RANK": "0",
        "GROUP_WORLD_SIZE": "1",
        "MASTER_ADDR": env.master_addr,
        "MASTER_PORT": str(env.master_port),
        "JOBKIT_SPAWNED": "1",
    }


def exit_code(codes: Sequence[int]) -> int:
    """The job's exit code from the children's: a failure wins over a requeue over 0."""
    failures = [code for code in codes if code not in (0, REQUEUE_EXIT_CODE)]
    if failures:
        return failures[0]
    return REQUEUE_EXIT_CODE if REQUEUE_EXIT_CODE in codes else 0


def _child(
    index: int, entry: Callable[[list[str]], int], argv: list[str], variables: Mapping[str, str]
) -> None:
    """One training process (runs in a fresh interpreter: start method `spawn`)."""
    os.environ.update(variables)
    os.environ.update(RANK=str(index), LOCAL_RANK=str(index))
    sys.exit(entry(argv))


def run_spawned(
    entry: Callable[[list[str]], int],
    argv: list[str],
    nprocs: int,
    env: LaunchEnv,
    signals: Sequence[str],
) -> int:
    """Start `nprocs` children running `entry(ARGV)` (train.cli.main: `python -m train ARGV`,
    passed in, pickled by name, so this module does not import the CLI back), pass signals
    on, wait."""
    from torch.multiprocessing.spawn import start_processes

    shared = child_environ(env, 0, nprocs)
    print(
        f"train: spawning {nprocs} process(es) on this node, master"
        f" {env.master_addr}:{env.master_port}",
        flush=True,
    )
    context = start_processes(  # type: ignore[no-untyped-call]
        _child, args=(entry, argv, shared), nprocs=nprocs, join=False, start_method="spawn"
    )
    processes: list[Any] = list(context.processes)

    def forward(signum: int, _frame: FrameType | None) -> None:
        for process in processes:
            if process.exitcode is None and process.pid is not None:
                with contextlib.suppress(ProcessLookupError):
                    os.kill(process.pid, signum)

    names = {*signals, "SIGINT", "SIGTERM"}
    for name in names:
        signal.signal(signal.Signals[name], forward)
    try:
        failed_at: float | None = None
        while any(process.exitcode is None for process in processes):
            time.sleep(POLL_S)
            codes = [process.exitcode for process in processes]
            if failed_at is None and any(
                code not in (None, 0, REQUEUE_EXIT_CODE) for code in codes
            ):
                # One child failed: the others would wait for it in a collective; stop them.
                failed_at = time.monotonic()
                forward(signal.SIGTERM, None)
            if failed_at is not None and time.monotonic() - failed_at > 30:
                forward(signal.SIGKILL, None)
        for process in processes:
            process.join()
    finally:
        for name in names:
            signal.signal(signal.Signals[name], signal.SIG_DFL)
    return exit_code([_as_code(process.exitcode) for process in processes])


def _as_code(exitcode: int | None) -> int:
    """multiprocessing's exit code (-N for signal N) as a shell's (128 + N)."""
    if exitcode is None:
        return 1
    return 128 - exitcode if exitcode < 0 else exitcode
