"""The variables a job's script exports from the spec (docs/spec.md, "Logging and
debugging", "NCCL"): the GPU request, NCCL preset and keys, threads per process, debug and
log levels, env.nccl.vars and env.vars, later sources winning."""

from __future__ import annotations

import re
from typing import TYPE_CHECKING

from jobkit.backends.registry import backend_class
from jobkit.core.errors import SpecError
from jobkit.render.quoting import shell_word
from jobkit.spec.derived import NODE_LAUNCHERS

if TYPE_CHECKING:
    from jobkit.spec.schema import JobSpec


DEBUG_VARS = {
    "TORCH_DISTRIBUTED_DEBUG": "DETAIL",
    "TORCH_CPP_LOG_LEVEL": "INFO",
    "TORCH_SHOW_CPP_STACKTRACES": "1",
    "TORCH_NCCL_ASYNC_ERROR_HANDLING": "1",
    "NCCL_DEBUG": "INFO",
    "NCCL_DEBUG_SUBSYS": "INIT,NET",
    "PYTHONFAULTHANDLER": "1",
    "LOGLEVEL": "INFO",
    "CUDA_LAUNCH_BLOCKING": "1",
}
"""What `env.debug: true` exports (torchrun reads LOGLEVEL for its own logging;
CUDA_LAUNCH_BLOCKING=1 makes a CUDA error point at the kernel that caused it, slowly)."""


LOG_LEVEL_VARS = {
    "DEBUG": {
        "JOBKIT_LOG_LEVEL": "DEBUG",
        "LOGLEVEL": "DEBUG",
        "TORCH_CPP_LOG_LEVEL": "INFO",
        "TORCH_DISTRIBUTED_DEBUG": "DETAIL",
    },
    "INFO": {"JOBKIT_LOG_LEVEL": "INFO", "LOGLEVEL": "INFO", "TORCH_CPP_LOG_LEVEL": "INFO"},
    "WARNING": {
        "JOBKIT_LOG_LEVEL": "WARNING",
        "LOGLEVEL": "WARNING",
        "TORCH_CPP_LOG_LEVEL": "WARNING",
    },
    "ERROR": {"JOBKIT_LOG_LEVEL": "ERROR", "LOGLEVEL": "ERROR", "TORCH_CPP_LOG_LEVEL": "ERROR"},
}
"""What `env.log_level` exports: the bundled trainer's level (train/reporting/runlog.py reads
JOBKIT_LOG_LEVEL), torchrun's (LOGLEVEL) and PyTorch's C++ one (TORCH_CPP_LOG_LEVEL, which has
no DEBUG: INFO is its most verbose)."""


NCCL_PRESETS = {
    "auto": {},
    "ethernet": {"NCCL_IB_DISABLE": "1", "NCCL_SOCKET_NTHREADS": "4", "NCCL_NSOCKS_PERTHREAD": "4"},
    "infiniband": {"NCCL_IB_DISABLE": "0"},
}
"""What each `env.nccl.preset` exports; the nccl keys and nccl.vars override them."""


NCCL_KEYS = {
    "socket_ifname": "NCCL_SOCKET_IFNAME",
    "ib_hca": "NCCL_IB_HCA",
    "ib_gid_index": "NCCL_IB_GID_INDEX",
    "p2p_level": "NCCL_P2P_LEVEL",
    "socket_nthreads": "NCCL_SOCKET_NTHREADS",
    "nsocks_perthread": "NCCL_NSOCKS_PERTHREAD",
}
"""env.nccl keys and the variable each sets."""


_ENV_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")


def env_exports(spec: JobSpec) -> list[tuple[str, str]]:
    """Exported variables, later sources winning: the GPU request, NCCL preset, the nccl
    keys, threads per process, debug, log_level, torchrun restart fix, nccl.vars, env.vars."""
    nccl = spec.env.nccl
    exports: dict[str, str] = {}
    if spec.resources.gpus_per_node:
        # The bundled trainer then trains on CUDA or stops: never silently on CPU.
        exports["JOBKIT_GPUS_PER_NODE"] = str(spec.resources.gpus_per_node)
    exports.update(NCCL_PRESETS[nccl.preset])
    for key, name in NCCL_KEYS.items():
        value = getattr(nccl, key)
        if value is not None and value != "":  # an empty text leaves NCCL's own default
            exports[name] = str(value)
    threads = spec.cpus_per_process
    submitit = backend_class(spec.backend).task_per_process  # one task per process: no torchrun
    if threads is not None:
        exports["OMP_NUM_THREADS"] = str(threads)
    elif spec.launch.launcher in NODE_LAUNCHERS and spec.procs_per_node > 1 and not submitit:
        # What torchrun sets anyway for several processes, said here: no warning banner.
        exports["OMP_NUM_THREADS"] = "1"
    if spec.env.debug:
        exports.update(DEBUG_VARS)
    if spec.env.log_level:
        exports.update(LOG_LEVEL_VARS[spec.env.log_level])
    if spec.launch.launcher in ("torchrun", "distributed-launch") and spec.launch.max_restarts > 0:
        # torchrun's store shared with its workers hands restarted workers the previous
        # attempt's addresses on several nodes (pytorch#135712): they fail or hang.
        exports["TORCH_DISABLE_SHARE_RDZV_TCP_STORE"] = "1"
    for source in (nccl.vars, spec.env.vars):
        for name, value in source.items():
            exports[name] = shell_word(value)
    for name in exports:
        if not _ENV_NAME.match(name):
            raise SpecError(f"is not a valid environment variable name: {name!r}", key="env.vars")
    return list(exports.items())
