"""The failure table's second part (doctor/classes.py has the order): what the program
lacked (memory, GPUs, a port, its world, its config, a module or command, the run folder,
 disk, permissions)."""

from __future__ import annotations

import re

from jobkit.doctor.failure_class import FailureClass, patterns

TRAINER_CONFIG_LINE = re.compile(r"^(?:--set \S+|\S+\.ya?ml:\d+|python -m train|train): (?!\d)\S.*")
"""A line of the bundled trainer's own errors: `--set KEY: ...`, `FILE.yaml:LINE: KEY: ...`,
`train: ...` (train/cli.py)."""

RESOURCES: tuple[FailureClass, ...] = (
    FailureClass(
        "host_oom",
        "out of host memory",
        patterns(
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
        patterns(
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
        patterns(r"Duplicate GPU detected", r"share one GPU \("),
        "Two processes of one host use the same GPU: more processes than GPUs, or"
        " CUDA_VISIBLE_DEVICES binds every task to the same device.",
        "launch.nproc_per_node equal to resources.gpus_per_node (one process per GPU), and no"
        " CUDA_VISIBLE_DEVICES of your own in env.vars",
    ),
    FailureClass(
        "unused_parameters",
        "DDP: parameters without gradients",
        patterns(r"Expected to have finished reduction in the prior iteration"),
        "The model has parameters that took no part in the loss, so DistributedDataParallel"
        " waited for their gradients forever.",
        "run.train.overrides: {distributed.find_unused_parameters: true} (or use every"
        " parameter in forward)",
    ),
    FailureClass(
        "port_in_use",
        "master port already in use",
        patterns(r"[Aa]ddress already in use", r"\bEADDRINUSE\b", r"errno: 98\b"),
        "The rendezvous port (MASTER_PORT) on the master host is taken by another process,"
        " often another job on the same node.",
        "launch.master_port: auto (derived from the job id) or another free port",
    ),
    FailureClass(
        "world_size",
        "wrong world size or rank",
        patterns(
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
        patterns(r"ModuleNotFoundError: No module named '[^']+'", r"ImportError: "),
        "The Python the job runs with cannot import a module: it is not installed in that"
        " environment, or the job runs another Python than you expect.",
        "env.python, env.venv or env.conda (the environment that has the module), or install"
        " it there",
    ),
    FailureClass(
        "command_not_found",
        "a command was not found",
        patterns(
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
        patterns(r"^jobkit: run folder .* is gone"),
        "The job's run folder (logs.dir/NAME-ID: node logs, exit code, checkpoints of the"
        " bundled trainer) was deleted, or its file system is not mounted here: what the job"
        " wrote there is lost, and its end cannot be read from it.",
        "keep logs.dir on a file system nothing cleans or unmounts (not a node's /tmp); submit"
        " again (the checkpoints under the run folder went with it)",
    ),
    FailureClass(
        "disk_full",
        "disk full or quota exceeded",
        patterns(
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
        patterns(r"Permission denied", r"PermissionError", r"\bEACCES\b"),
        "The job could not read, write or run a file: its mode, owner or mount forbids it"
        " (a script without the execute bit, a read-only folder).",
        "the file's permissions (chmod +x for a script), or run.command / logs.dir pointing at"
        " a place the job may use",
    ),
)
