"""`python -m train.preflight`: one node's checks before a job's program starts.

Run once per node by the job script when `launch.preflight: true` (docs/preflight.md):
GPUs (when the job asks for some: visible, enough of them, memory free) and TCP from this node
to MASTER_ADDR:MASTER_PORT. Node 0 listens on MASTER_PORT itself for the length of the check
(the rendezvous is not up yet; it takes the port only after this process has closed it), and
every node, node 0 too, connects to MASTER_ADDR:MASTER_PORT and waits for the listener's
answer: an answer proves that the address reaches node 0, and not some other service. Every
step has a deadline. A problem prints one line `jobkit preflight: node I (HOST): REASON`
(also written to the run folder's `failure` file, first writer wins) and exits 1.

Standard library only, so that a broken torch install is reported here too; torch is imported
only to count GPUs.
"""

from __future__ import annotations

import argparse
import errno
import os
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Sequence
from dataclasses import dataclass

EXIT_OK = 0
EXIT_FAILED = 1
PREFIX = "jobkit preflight:"
HELLO = b"jobkit-preflight "
ANSWER = b"jobkit-preflight ok\n"
LISTEN_GRACE_S = 5.0
"""Node 0's listener outlives the nodes' own deadline by this much (at most half the deadline),
so that a node that cannot connect reports its own line before node 0 reports it missing."""
LOOPBACK_NAMES = ("127.0.0.1", "::1", "localhost")
"""Host names that say nothing in a line (the local backend's one host): the host name instead."""
DEFAULT_TIMEOUT_S = 60.0
"""Seconds for the TCP check (JOBKIT_PREFLIGHT_TIMEOUT_S overrides)."""
ALLREDUCE_FACTOR = 3
"""The all-reduce step (torch import, rendezvous, check) gets this many times as long."""
KILL_AFTER_S = 10.0
"""Seconds between SIGTERM and SIGKILL to an all-reduce past its deadline."""
MIN_FREE_FRACTION = 0.5
"""A GPU with less than this share of its memory free is taken to be busy with another job."""


class PreflightFailure(Exception):
    """A check failed: the reason, without the `node I (HOST):` prefix."""


@dataclass(frozen=True)
class Node:
    """Who runs this check: node index, host name, node count."""

    index: int
    host: str
    count: int

    def line(self, reason: str) -> str:
        """A failure: `jobkit preflight: node I (HOST): REASON`."""
        return f"{PREFIX} node {self.index} ({self.host}): {reason}"

    def line_ok(self, found: str) -> str:
        """A check that passed: `jobkit preflight: node I (HOST) ok: FOUND` (no colon after the
        host, so that `jobkit doctor` tells it from a failure)."""
        return f"{PREFIX} node {self.index} ({self.host}) ok: {found}"


def _reason(err: OSError) -> str:
    """An OSError in a few lower-case words: `connection refused`, `timed out`."""
    if isinstance(err, TimeoutError):
        return "timed out"
    if isinstance(err, socket.gaierror):
        return f"unknown host ({err.strerror or err})"
    text = (
        err.strerror or (errno.errorcode.get(err.errno or 0, "") if err.errno else "") or str(err)
    )
    return text[:1].lower() + text[1:]


# ---- GPUs -----------------------------------------------------------------------------------


def gpu_memory() -> list[tuple[int, int]]:
    """(free, total) bytes of each GPU this process sees (CUDA_VISIBLE_DEVICES applies)."""
    try:
        import torch
    except ImportError:
        return _nvidia_smi_memory()
    if not torch.cuda.is_available():
        return []
    return [torch.cuda.mem_get_info(i) for i in range(torch.cuda.device_count())]


def _nvidia_smi_memory() -> list[tuple[int, int]]:
    """The same from nvidia-smi (every GPU of the host), when torch is not importable."""
    try:
        out = subprocess.run(
            ["nvidia-smi", "--query-gpu=memory.free,memory.total", "--format=csv,noheader,nounits"],
            capture_output=True,
            text=True,
            timeout=30,
            check=True,
        ).stdout
    except (OSError, subprocess.SubprocessError):
        return []
    mib = 1024 * 1024
    rows = [line.split(",") for line in out.splitlines() if line.strip()]
    return [(int(free) * mib, int(total) * mib) for free, total in rows]


def check_gpus(requested: int, memory: list[tuple[int, int]]) -> str:
    """What the GPU check found (one line), or PreflightFailure."""
    if requested <= 0:
        return "no GPU requested"
    if len(memory) < requested:
        raise PreflightFailure(
            f"{requested} GPU(s) requested, {len(memory)} visible"
            f" (CUDA_VISIBLE_DEVICES={os.environ.get('CUDA_VISIBLE_DEVICES', 'unset')})"
        )
    mib = 1024 * 1024
    for index, (free, total) in enumerate(memory[:requested]):
        if total and free / total < MIN_FREE_FRACTION:
            raise PreflightFailure(
                f"GPU {index} has {free // mib} MiB free of {total // mib} MiB:"
                " another process is using it"
            )
    least = min(free for free, _ in memory[:requested]) // mib
    return f"{requested} GPU(s) visible, at least {least} MiB free on each"


# ---- TCP to the master ----------------------------------------------------------------------


class Listener:
    """Node 0's short-lived listener on MASTER_PORT: answers each node that says hello, until
    every node has, or its deadline passes."""

    def __init__(self, port: int, count: int, deadline: float) -> None:
        try:
            self.server = socket.create_server(("", port), backlog=max(count, 8))
        except OSError as err:
            raise PreflightFailure(f"cannot listen on port {port}: {_reason(err)}") from err
        self.count = count
        self.deadline = deadline
        self.seen: set[int] = set()
        self.error = ""
        self.thread = threading.Thread(target=self._serve, daemon=True)
        self.thread.start()

    def _serve(self) -> None:
        connections: list[socket.socket] = []
        try:
            while len(self.seen) < self.count:
                left = self.deadline - time.monotonic()
                if left <= 0:
                    return
                self.server.settimeout(left)
                try:
                    conn, _ = self.server.accept()
                except TimeoutError:
                    return
                conn.settimeout(max(0.1, self.deadline - time.monotonic()))
                try:
                    hello = conn.recv(64)
                    if hello.startswith(HELLO):
                        self.seen.add(int(hello[len(HELLO) :].strip() or b"-1"))
                        conn.sendall(ANSWER)
                except (OSError, ValueError):
                    pass
                connections.append(conn)
        finally:
            self.server.close()  # the port is free before any node goes on
            for conn in connections:
                conn.close()

    def missing(self) -> list[int]:
        """Wait for the listener to end; the node indices that never said hello."""
        self.thread.join()
        return sorted(set(range(self.count)) - self.seen)


def reach_master(node: Node, addr: str, port: int, deadline: float) -> None:
    """Connect to ADDR:PORT and get the listener's answer, retrying until the deadline (node 0
    may not be listening yet); PreflightFailure naming the last error."""
    last = "no answer"
    while True:
        left = deadline - time.monotonic()
        if left <= 0:
            raise PreflightFailure(f"cannot reach {addr}:{port}: {last}")
        try:
            with socket.create_connection((addr, port), timeout=min(left, 5.0)) as conn:
                conn.sendall(HELLO + str(node.index).encode() + b"\n")
                conn.settimeout(max(0.1, deadline - time.monotonic()))
                answer = conn.recv(64)
                if answer == ANSWER:
                    return
                last = "something else answers on that port (not jobkit's preflight listener)"
        except OSError as err:
            last = _reason(err)
        time.sleep(min(0.5, max(0.0, deadline - time.monotonic())))


def check_master(node: Node, addr: str, port: int, timeout: float) -> str:
    """The TCP check of this node (node 0 also listens); one line, or PreflightFailure."""
    start = time.monotonic()
    listener = None
    if node.index == 0:
        grace = min(LISTEN_GRACE_S, timeout / 2)
        listener = Listener(port, node.count, start + timeout + grace)
    reach_master(node, addr, port, start + timeout)
    if listener is not None:
        missing = listener.missing()
        if missing:
            names = ", ".join(str(i) for i in missing)
            raise PreflightFailure(
                f"node(s) {names} did not reach {addr}:{port} within {timeout:g} s"
            )
        return f"{addr}:{port} reached from all {node.count} node(s)"
    return f"{addr}:{port} reached"


# ---- The command ----------------------------------------------------------------------------


def note_failure(line: str) -> None:
    """Write the line to the run folder's `failure` file unless another node was first."""
    run_dir = os.environ.get("JOBKIT_RUN_DIR")
    if not run_dir:
        return
    try:
        fd = os.open(os.path.join(run_dir, "failure"), os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)
    except OSError:
        return
    with os.fdopen(fd, "w", encoding="utf-8") as out:
        out.write(line + "\n")


def run_allreduce(node: Node, command: list[str], timeout: float) -> int:
    """Run this node's part of the all-reduce check (`command`: torchrun or the check itself)
    in a session of its own; past the deadline, SIGTERM to the session, SIGKILL 10 s later.
    Returns the exit code; a failure or the deadline prints this node's line."""
    if not command:
        raise PreflightFailure("allreduce: no command given after --")
    try:
        child = subprocess.Popen(command, start_new_session=True)
    except OSError as err:
        raise PreflightFailure(f"cannot start {command[0]}: {_reason(err)}") from err
    try:
        rc = child.wait(timeout=timeout)
    except subprocess.TimeoutExpired:
        _stop(child)
        raise PreflightFailure(
            f"all-reduce check did not finish within {timeout:g} s"
            " (a rank that never joined, a rendezvous that cannot form)"
        ) from None
    if rc != 0:
        raise PreflightFailure(f"all-reduce check failed (exit code {rc}): see the lines above")
    return EXIT_OK


def _stop(child: subprocess.Popen[bytes]) -> None:
    """SIGTERM to the child's session (torchrun passes it on to its workers), then SIGKILL."""
    for sig, wait in ((signal.SIGTERM, KILL_AFTER_S), (signal.SIGKILL, 5.0)):
        try:
            os.killpg(child.pid, sig)
        except ProcessLookupError:
            return
        try:
            child.wait(timeout=wait)
            return
        except subprocess.TimeoutExpired:
            continue


def _timeout_default() -> float:
    """JOBKIT_PREFLIGHT_TIMEOUT_S (env.vars), else 60 s."""
    text = os.environ.get("JOBKIT_PREFLIGHT_TIMEOUT_S", "")
    try:
        return float(text) if text else DEFAULT_TIMEOUT_S
    except ValueError:
        return DEFAULT_TIMEOUT_S


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="python -m train.preflight",
        description="One node's checks before the job (docs/preflight.md).",
    )
    parser.add_argument(
        "step",
        choices=("node", "allreduce"),
        help="node: GPUs and TCP to MASTER_ADDR:MASTER_PORT; allreduce: run the words after"
        " `--` (torchrun ... python -m train --check) with a deadline.",
    )
    env = os.environ.get
    parser.add_argument(
        "--node-index",
        type=int,
        default=int(env("JOBKIT_NODE_INDEX") or env("SLURM_NODEID") or "0"),
    )
    parser.add_argument("--nnodes", type=int, default=int(env("JOBKIT_NNODES", "1")))
    parser.add_argument(
        "--host", default=env("SLURMD_NODENAME") or socket.gethostname(), help="Name in the lines."
    )
    parser.add_argument("--master-addr", default=env("MASTER_ADDR", "127.0.0.1"))
    parser.add_argument("--master-port", type=int, default=int(env("MASTER_PORT", "29500")))
    parser.add_argument("--gpus", type=int, default=int(env("JOBKIT_GPUS_PER_NODE", "0")))
    parser.add_argument(
        "--timeout",
        type=float,
        default=_timeout_default(),
        help="Seconds for the TCP check; the all-reduce gets three times as long.",
    )
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Run one step on this node; print one line per check; exit 0, or 1 with the reason."""
    words = list(sys.argv[1:] if argv is None else argv)
    cut = words.index("--") if "--" in words else len(words)
    args = _parser().parse_args(words[:cut])
    command = words[cut + 1 :]
    host = socket.gethostname() if args.host in LOOPBACK_NAMES else args.host
    node = Node(args.node_index, host, args.nnodes)
    try:
        if args.step == "allreduce":
            run_allreduce(node, command, ALLREDUCE_FACTOR * args.timeout)
            return EXIT_OK
        gpus = check_gpus(args.gpus, gpu_memory() if args.gpus > 0 else [])
        print(node.line_ok(gpus), flush=True)
        found = check_master(node, args.master_addr, args.master_port, args.timeout)
        print(node.line_ok(found), flush=True)
    except PreflightFailure as err:
        line = node.line(str(err))
        print(line, flush=True)
        note_failure(line)
        return EXIT_FAILED
    return EXIT_OK


if __name__ == "__main__":
    sys.exit(main())
