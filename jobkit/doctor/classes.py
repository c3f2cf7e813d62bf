"""The failure table: each class of failure `jobkit doctor` knows, as data.

A class matches a job when one of its patterns matches a line of the job's logs, or when the
scheduler's final state, or the signal that ended the job, is one of its own. The table is in
priority order: when several classes match, the first wins (a specific cause before the
generic one, a cause before what it brings about: a rank that raised makes the others lose
their connection, so "Python exception" comes before "rendezvous connection failed").
docs/troubleshooting.md is the same table for people; tests/doctor/test_classes.py checks
that every class there is here.
"""

from __future__ import annotations

import re

from jobkit.doctor.classes_resources import RESOURCES
from jobkit.doctor.classes_setup import SETUP_AND_SCHEDULER
from jobkit.doctor.failure_class import FailureClass, patterns

__all__ = ["BY_NAME", "CLASSES", "EXCEPTION_LINE", "UNKNOWN", "FailureClass"]


EXCEPTION_LINE = re.compile(
    r"^(?P<exc>[A-Za-z_][\w.]*(?:Error|Exception|Exit|Interrupt|Warning|Failure))(?::\s*(?P<msg>.*))?$"
)
"""The last line of a Python traceback: `ValueError: message`."""

CLASSES: tuple[FailureClass, ...] = (
    *SETUP_AND_SCHEDULER,
    *RESOURCES,
    FailureClass(
        "segfault",
        "segmentation fault",
        patterns(
            r"Segmentation fault",
            r"\bSIGSEGV\b",
            r"exitcode\s*:\s*-11\b",
            r"signal 11\b",
        ),
        "A process crashed in native code (a C/C++/CUDA extension, or mismatched library"
        " versions).",
        "env.vars: {PYTHONFAULTHANDLER: 1} to see the Python stack; check that torch and the"
        " extensions come from the same environment (env.python)",
        signals=frozenset({11}),
    ),
    FailureClass(
        "nccl_error",
        "NCCL error",
        patterns(
            r"NCCL error",
            r"\bnccl(?:System|Internal|UnhandledCuda|Remote|InvalidUsage)Error\b",
            r"NCCL WARN",
            r"DistBackendError",
        ),
        "NCCL (the GPU collective library) failed, most often on the network between nodes:"
        " a wrong interface, InfiniBand not usable, or a peer that died.",
        "env.nccl: ethernet (or env.nccl.socket_ifname: IFACE), and env.debug: true to see"
        " NCCL_DEBUG=INFO",
        follows_peers=True,
    ),
    FailureClass(
        "crash_at_exit",
        "crashed at exit, after its work",
        patterns(r"terminate called without an active exception"),
        "A process aborted (SIGABRT) as it exited: a C++ thread of the process group (gloo,"
        " NCCL) was still running while Python tore down, a known race that strikes some runs"
        " only. When the trainer's `finished` note or the program's final lines are there, the"
        " work itself completed; the signals the launchers sent the other ranks afterwards are"
        " a consequence, not the cause.",
        "end the program with torch.distributed.destroy_process_group() (after a barrier)"
        " before it exits; the bundled trainer does",
        follows_peers=True,
    ),
    FailureClass(
        "launch_env_missing",
        "the launcher did not set RANK / WORLD_SIZE",
        patterns(
            r"environment variable (?:RANK|WORLD_SIZE|LOCAL_RANK|MASTER_ADDR|MASTER_PORT)"
            r" expected, but not set"
        ),
        "The program initialises torch.distributed from the environment (env://), but the"
        " launcher that started it did not set the variable: launch.launcher none or mpirun"
        " leave RANK and WORLD_SIZE to the program.",
        "launch.launcher torchrun or srun (each process gets RANK, LOCAL_RANK, WORLD_SIZE,"
        " MASTER_ADDR, MASTER_PORT); with mpirun read OMPI_COMM_WORLD_RANK / PMI_RANK, with"
        " none NODE_RANK and NNODES",
    ),
    FailureClass(
        "python_exception",
        "a rank raised a Python exception",
        (EXCEPTION_LINE,),
        "The program raised an exception on this rank and stopped; the other ranks were"
        " stopped after it.",
        "the program, at the frame named; the full traceback: `jobkit logs ID --rank R`",
    ),
    FailureClass(
        "killed",
        "killed (SIGKILL)",
        patterns(r"exitcode\s*:\s*-9\b", r"Signals\.SIGKILL", r"^Killed$", r"\(SIGKILL\)"),
        "A process was killed from outside: most often the kernel's OOM killer, or the"
        " scheduler after a cancel or time limit.",
        "resources.mem if memory ran out (`jobkit report ID` shows MaxRSS)",
        signals=frozenset({9}),
        follows_peers=True,
    ),
    FailureClass(
        "rendezvous_connect",
        "rendezvous connection failed",
        patterns(
            r"RendezvousConnectionError",
            r"The connection to the C10d store has failed",
            r"TCP client failed to connect",
            r"DistNetworkError",
            r"Connection (?:refused|reset by peer)",
            r"Connection closed by peer",
        ),
        "A rank could not reach (or lost) the rendezvous at MASTER_ADDR:MASTER_PORT: the master"
        " host is not reachable from this node, something else listens on the port, or the"
        " rank holding it died.",
        "launch.master_port (a free port; auto avoids clashes); check that the first host of"
        " the allocation resolves and is reachable from every node",
        follows_peers=True,
    ),
    FailureClass(
        "rendezvous_timeout",
        "rendezvous or collective timed out",
        patterns(
            r"RendezvousTimeoutError",
            r"DistStoreError: .*[Tt]imeout",
            r"wait timeout after \d+ms",
            r"Timed out after \d+ seconds waiting for clients",
            r"Timed out initializing process group",
            r"\d+/\d+ clients joined",
        ),
        "Not every rank joined in time: the world size the program expects is larger than the"
        " ranks started, or a rank never started (or hangs) on another node.",
        "resources.nodes x launch.nproc_per_node must be the world size the program expects;"
        " if some nodes start late, a longer launch.rdzv_timeout (torchrun's rendezvous:"
        " RendezvousTimeoutError, N/M clients joined) or run.train.overrides"
        " distributed.timeout (the bundled trainer's process group)",
        follows_peers=True,
    ),
    FailureClass(
        "nccl_timeout",
        "NCCL watchdog timeout",
        patterns(
            r"Watchdog caught collective operation timeout",
            r"ProcessGroupNCCL.*[Tt]imeout",
            r"NCCL watchdog",
        ),
        "A collective (all-reduce...) did not finish in time: usually one rank hangs, died, or"
        " runs different code (a different number of steps); the ranks that report it are"
        " often the ones waiting.",
        "find the stuck rank (`jobkit doctor ID` while it runs collects every rank's stack);"
        " env.debug: true; run.train.overrides distributed.timeout",
        follows_peers=True,
    ),
    FailureClass(
        "cancelled",
        "cancelled",
        patterns(r"\*\*\* JOB \S+ ON \S+ CANCELLED AT \S+ \*\*\*$", r"\bcancelled by jobkit\b"),
        "Someone cancelled the job (jobkit cancel, scancel, qdel): nothing failed on its own.",
        "nothing to fix: `jobkit submit SPEC` to run it again",
        states=frozenset({"CANCELLED"}),
    ),
    # Last: a non-zero exit is the fallback when no line says why (a timeout, a signal...).
    FailureClass(
        "program_exit",
        "the program exited with an error code",
        patterns(r"^\s*exitcode\s*:\s*[1-9]\d*\b"),
        "torchrun's report names the first rank whose program ended with a non-zero exit"
        " code, without a Python exception in its output (sys.exit(N), a shell command that"
        " failed); the job's exit code is that code.",
        "the program: why it ended with that code; its output: `jobkit logs ID --rank R`",
    ),
)

UNKNOWN = FailureClass(
    "unknown",
    "no known failure pattern",
    (),
    "None of the known failure patterns is in the logs; the last lines of the first failing"
    " rank are shown.",
    "read the whole output: `jobkit logs ID --all-ranks`",
)

BY_NAME: dict[str, FailureClass] = {c.name: c for c in (*CLASSES, UNKNOWN)}
