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
from dataclasses import dataclass


@dataclass(frozen=True)
class FailureClass:
    """One kind of failure: how it shows, what it means, what to change."""

    name: str
    """Stable id (JSON, the status cache), e.g. `port_in_use`."""
    title: str
    """A few words for people: `master port already in use`."""
    patterns: tuple[re.Pattern[str], ...]
    explanation: str
    fix: str
    """The spec key (or trainer key, or command) to change, and to what."""
    states: frozenset[str] = frozenset()
    """jobkit states (the scheduler's final state) that show this class by themselves."""
    signals: frozenset[int] = frozenset()
    """Signals that, ending the job, show this class by themselves."""

    def matches(self, text: str) -> re.Match[str] | None:
        """The first pattern's match in one log line, or None."""
        for pattern in self.patterns:
            found = pattern.search(text)
            if found:
                return found
        return None


def _p(*patterns: str) -> tuple[re.Pattern[str], ...]:
    return tuple(re.compile(p) for p in patterns)


TRAINER_CONFIG_LINE = re.compile(r"^(?:--set \S+|\S+\.ya?ml:\d+|python -m train|train): (?!\d)\S.*")
"""A line of the bundled trainer's own errors: `--set KEY: ...`, `FILE.yaml:LINE: KEY: ...`,
`train: ...` (train/cli.py)."""

EXCEPTION_LINE = re.compile(
    r"^(?P<exc>[A-Za-z_][\w.]*(?:Error|Exception|Exit|Interrupt|Warning|Failure))(?::\s*(?P<msg>.*))?$"
)
"""The last line of a Python traceback: `ValueError: message`."""

CLASSES: tuple[FailureClass, ...] = (
    FailureClass(
        "preflight_failed",
        "the preflight check failed",
        # A node's own line only: without one (the check could not even start, e.g. `train` not
        # importable) the launcher's "failed after" line says less than the error above it.
        _p(r"^jobkit preflight: node \d+ \([^)\s]*\): (?!ok\b)\S"),
        "launch.preflight checked the nodes before the program (GPUs, TCP to"
        " MASTER_ADDR:MASTER_PORT, an all-reduce over every rank) and one check failed on the"
        " node named in the line: the program was not started (docs/preflight.md).",
        "what the line names: a node that cannot reach MASTER_ADDR:MASTER_PORT (a firewall, a"
        " MASTER_ADDR or MASTER_PORT of your own in env.vars, the wrong network interface),"
        " fewer GPUs than resources.gpus_per_node or a GPU another process holds, an all-reduce"
        " that fails (env.nccl); then submit again",
    ),
    FailureClass(
        "environment_missing",
        "the job's environment is missing",
        _p(
            r"^jobkit: env\.\w+: .* not found on ",
            r"EnvironmentNameNotFound",
            r"[Cc]ould not find conda environment",
        ),
        "The job script checked the Python environment (env.venv, env.conda, env.python) before"
        " starting the program and did not find it on this host.",
        "the spec key named in the line: env.venv or env.python a path that exists on every"
        " compute node, env.conda an environment `conda env list` shows there (or its prefix)",
    ),
    FailureClass(
        "time_limit",
        "killed by the time limit",
        _p(r"CANCELLED AT \S+ DUE TO TIME LIMIT", r"\bJOB \S+ .*DUE TO TIME LIMIT"),
        "The job ran past its wall-time limit and the scheduler stopped it.",
        "resources.time (ask for more), or checkpoint more often (run.train.overrides:"
        " {checkpoint.every_steps: N}) with scheduler.requeue: true and scheduler.signal",
        states=frozenset({"TIMEOUT"}),
    ),
    FailureClass(
        "node_failure",
        "a node failed",
        _p(r"DUE TO NODE FAILURE", r"\bNode failure on\b", r"\bNODE_FAIL\b"),
        "A node of the allocation stopped answering the scheduler (hardware, kernel, network);"
        " the job itself may be fine.",
        "submit again (`jobkit submit SPEC`), or let the scheduler requeue it:"
        " scheduler.requeue: true",
        states=frozenset({"NODE_FAIL"}),
    ),
    FailureClass(
        "preempted",
        "preempted by the scheduler",
        _p(r"DUE TO PREEMPTION"),
        "A job of higher priority took the nodes.",
        "scheduler.requeue: true and scheduler.signal (e.g. USR2@120) so the trainer saves a"
        " checkpoint and the job comes back",
        states=frozenset({"PREEMPTED"}),
    ),
    FailureClass(
        "host_oom",
        "out of host memory",
        _p(
            r"\boom[-_ ]kill",
            r"Out of memory: Killed process",
            r"exceeded (?:job )?memory limit",
            r"^MemoryError\b",
            r"DefaultCPUAllocator: can't allocate memory",
            r"std::bad_alloc",
        ),
        "A rank used more memory than the node (or the job's memory limit) allows: the kernel"
        " or the scheduler killed it, or an allocation failed.",
        "resources.mem (more memory per node), or less per rank: a smaller"
        " data.batch_size_per_rank (run.train.overrides) or fewer launch.nproc_per_node",
        states=frozenset({"OUT_OF_MEMORY"}),
    ),
    FailureClass(
        "cuda_oom",
        "CUDA out of memory",
        _p(
            r"CUDA out of memory",
            r"torch\.(?:cuda\.)?OutOfMemoryError",
            r"CUBLAS_STATUS_ALLOC_FAILED",
            r"cudaErrorMemoryAllocation",
        ),
        "A rank asked its GPU for more memory than it has.",
        "run.train.overrides: a smaller data.batch_size_per_rank (with"
        " train.grad_accum_steps to keep the global batch), amp.dtype: bf16, or"
        " model.activation_checkpointing: true",
    ),
    FailureClass(
        "duplicate_gpu",
        "two ranks on one GPU",
        _p(r"Duplicate GPU detected", r"share one GPU \("),
        "Two processes of one host use the same GPU: more processes than GPUs, or"
        " CUDA_VISIBLE_DEVICES binds every task to the same device.",
        "launch.nproc_per_node equal to resources.gpus_per_node (one process per GPU), and no"
        " CUDA_VISIBLE_DEVICES of your own in env.vars",
    ),
    FailureClass(
        "unused_parameters",
        "DDP: parameters without gradients",
        _p(r"Expected to have finished reduction in the prior iteration"),
        "The model has parameters that took no part in the loss, so DistributedDataParallel"
        " waited for their gradients forever.",
        "run.train.overrides: {distributed.find_unused_parameters: true} (or use every"
        " parameter in forward)",
    ),
    FailureClass(
        "port_in_use",
        "master port already in use",
        _p(r"[Aa]ddress already in use", r"\bEADDRINUSE\b", r"errno: 98\b"),
        "The rendezvous port (MASTER_PORT) on the master host is taken by another process,"
        " often another job on the same node.",
        "launch.master_port: auto (derived from the job id) or another free port",
    ),
    FailureClass(
        "world_size",
        "wrong world size or rank",
        _p(
            r"^launch environment: .*(?:world size|not below|exceeds|differs)",
            r"SLURM_NTASKS=\d+ differs",
            r"[Ii]nvalid rank\b",
            r"[Rr]ank \d+ is out of bounds",
        ),
        "The ranks and world size the program sees do not fit together: a RANK or WORLD_SIZE set"
        " by hand, or tasks and processes per node that disagree.",
        "resources.nodes, launch.nproc_per_node and resources.tasks_per_node; no RANK /"
        " WORLD_SIZE of your own in env.vars or run.command",
    ),
    FailureClass(
        "trainer_config",
        "the trainer's config was refused",
        (TRAINER_CONFIG_LINE,),
        "The bundled trainer stopped on a config value or setup problem, before training.",
        "the trainer key named in the line, in run.train.config or run.train.overrides",
    ),
    FailureClass(
        "module_not_found",
        "a Python module is missing",
        _p(r"ModuleNotFoundError: No module named '[^']+'", r"ImportError: "),
        "The Python the job runs with cannot import a module: it is not installed in that"
        " environment, or the job runs another Python than you expect.",
        "env.python, env.venv or env.conda (the environment that has the module), or install"
        " it there",
    ),
    FailureClass(
        "command_not_found",
        "a command was not found",
        _p(
            r"(?P<cmd>[\w./-]+): command not found",
            r"exec: (?P<cmd>[^:\s]+): not found",
            r"^(?:\S+: )?(?:line \d+: )?(?P<cmd>[\w./-]+): not found$",
        ),
        "A command the job runs is not on PATH on the compute node (e.g. `scontrol` inside a"
        " container, or a tool only on the login node).",
        "env.modules or env.setup (put it on PATH), or run.command with the full path; in a"
        " container, bind the Slurm commands into it",
    ),
    FailureClass(
        "run_folder_missing",
        "the run folder is gone",
        _p(r"^jobkit: run folder .* is gone"),
        "The job's run folder (logs.dir/NAME-ID: node logs, exit code, checkpoints of the"
        " bundled trainer) was deleted, or its file system is not mounted here: what the job"
        " wrote there is lost, and its end cannot be read from it.",
        "keep logs.dir on a file system nothing cleans or unmounts (not a node's /tmp); submit"
        " again (the checkpoints under the run folder went with it)",
    ),
    FailureClass(
        "disk_full",
        "disk full or quota exceeded",
        _p(
            r"No space left on device",
            r"\bENOSPC\b",
            r"Disk quota exceeded",
            r"\bEDQUOT\b",
            # torch.save on a full disk: the zip writer's own words, without errno.
            r"PytorchStreamWriter failed writing file",
            r"unexpected pos \d+ vs \d+",
        ),
        "A write failed because the file system (or your quota) is full: checkpoints, logs or"
        " a cache.",
        "free space, or write elsewhere: logs.dir, checkpoint.dir (run.train.overrides),"
        " fewer checkpoints (checkpoint.keep_last)",
    ),
    FailureClass(
        "permission_denied",
        "permission denied",
        _p(r"Permission denied", r"PermissionError", r"\bEACCES\b"),
        "The job could not read, write or run a file: its mode, owner or mount forbids it"
        " (a script without the execute bit, a read-only folder).",
        "the file's permissions (chmod +x for a script), or run.command / logs.dir pointing at"
        " a place the job may use",
    ),
    FailureClass(
        "segfault",
        "segmentation fault",
        _p(
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
        _p(
            r"NCCL error",
            r"\bnccl(?:System|Internal|UnhandledCuda|Remote|InvalidUsage)Error\b",
            r"NCCL WARN",
            r"DistBackendError",
        ),
        "NCCL (the GPU collective library) failed, most often on the network between nodes:"
        " a wrong interface, InfiniBand not usable, or a peer that died.",
        "env.nccl: ethernet (or env.nccl.socket_ifname: IFACE), and env.debug: true to see"
        " NCCL_DEBUG=INFO",
    ),
    FailureClass(
        "crash_at_exit",
        "crashed at exit, after its work",
        _p(r"terminate called without an active exception"),
        "A process aborted (SIGABRT) as it exited: a C++ thread of the process group (gloo,"
        " NCCL) was still running while Python tore down, a known race that strikes some runs"
        " only. When the trainer's `finished` note or the program's final lines are there, the"
        " work itself completed; the signals the launchers sent the other ranks afterwards are"
        " a consequence, not the cause.",
        "end the program with torch.distributed.destroy_process_group() (after a barrier)"
        " before it exits; the bundled trainer does",
    ),
    FailureClass(
        "launch_env_missing",
        "the launcher did not set RANK / WORLD_SIZE",
        _p(
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
        _p(r"exitcode\s*:\s*-9\b", r"Signals\.SIGKILL", r"^Killed$", r"\(SIGKILL\)"),
        "A process was killed from outside: most often the kernel's OOM killer, or the"
        " scheduler after a cancel or time limit.",
        "resources.mem if memory ran out (`jobkit report ID` shows MaxRSS)",
        signals=frozenset({9}),
    ),
    FailureClass(
        "rendezvous_connect",
        "rendezvous connection failed",
        _p(
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
    ),
    FailureClass(
        "rendezvous_timeout",
        "rendezvous or collective timed out",
        _p(
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
    ),
    FailureClass(
        "nccl_timeout",
        "NCCL watchdog timeout",
        _p(
            r"Watchdog caught collective operation timeout",
            r"ProcessGroupNCCL.*[Tt]imeout",
            r"NCCL watchdog",
        ),
        "A collective (all-reduce...) did not finish in time: usually one rank hangs, died, or"
        " runs different code (a different number of steps); the ranks that report it are"
        " often the ones waiting.",
        "find the stuck rank (`jobkit doctor ID` while it runs collects every rank's stack);"
        " env.debug: true; run.train.overrides distributed.timeout",
    ),
    FailureClass(
        "cancelled",
        "cancelled",
        _p(r"\*\*\* JOB \S+ ON \S+ CANCELLED AT \S+ \*\*\*$", r"\bcancelled by jobkit\b"),
        "Someone cancelled the job (jobkit cancel, scancel, qdel): nothing failed on its own.",
        "nothing to fix: `jobkit submit SPEC` to run it again",
        states=frozenset({"CANCELLED"}),
    ),
    # Last: a non-zero exit is the fallback when no line says why (a timeout, a signal...).
    FailureClass(
        "program_exit",
        "the program exited with an error code",
        _p(r"^\s*exitcode\s*:\s*[1-9]\d*\b"),
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
