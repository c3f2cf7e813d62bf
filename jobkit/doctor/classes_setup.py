"""The failure table's first part (doctor/classes.py has the order): a job stopped before
its program ran (preflight, environment, container) or ended by the scheduler (time limit,
 node failure, preemption)."""

from __future__ import annotations

from jobkit.doctor.failure_class import FailureClass, patterns

SETUP_AND_SCHEDULER: tuple[FailureClass, ...] = (
    FailureClass(
        "preflight_failed",
        "the preflight check failed",
        # A node's own line only: without one (the check could not even start, e.g. `train` not
        # importable) the launcher's "failed after" line says less than the error above it.
        patterns(r"^jobkit preflight: node \d+ \([^)\s]*\): (?!ok\b)\S"),
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
        patterns(
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
        "container_runtime_missing",
        "the container runtime is missing",
        patterns(
            r"^jobkit: container\.runtime: ",
            r"\b(?:ch-run|podman|apptainer|singularity): (?:command )?not found",
            r"srun: unrecognized option '--container-image",
        ),
        "The job runs in a container (container.runtime) whose command is not on the node's"
        " PATH (pyxis: srun does not know --container-image, the plug-in is not installed).",
        "container.runtime: a runtime the nodes have (apptainer, charliecloud, podman...), or"
        " env.modules / env.setup lines that put it on PATH (docs/containers.md)",
    ),
    FailureClass(
        "container_image_missing",
        "the container image is not found",
        patterns(
            r"^jobkit: container\.image: ",
            r"ch-run\[\d+\]: error: can't stat: ",
            r"could not open image .*no such file",
            r"^Error: .*: image not known",
            r"^Error: initializing source docker://",
            r"pyxis: failed to import docker image",
        ),
        "The runtime could not find or fetch container.image on the node: a path that does"
        " not exist there, or a name the runtime has neither in its storage nor can pull.",
        "container.image: a path every node sees (a shared file system), or an image built"
        " or imported on every node (podman import, enroot import); docs/containers.md",
    ),
    FailureClass(
        "container_mount_missing",
        "a container mount is missing",
        patterns(
            r"^jobkit: container\.mounts: ",
            r"^Error: statfs .*: no such file or directory",
            r"mount source \S+ doesn't exist",
            r"ch-run\[\d+\]: error: can't bind",
            r"ch-run\[\d+\]: error: can't mkdir: ",
        ),
        "A folder to mount into the container does not exist: its host path on the node, or"
        " (Charliecloud, read-only image) its mount point inside the image.",
        "container.mounts: a host path that exists on every node; with charliecloud, the"
        " mount point made in the image (mkdir -p IMAGE/PATH)",
    ),
    FailureClass(
        "container_gpu_missing",
        "GPU not visible inside the container",
        patterns(
            r"no CUDA device is visible on \S+",  # the bundled trainer (train/ranks/dist.py)
            r"^RuntimeError: Found no NVIDIA driver on your system",
            r"^RuntimeError: No CUDA GPUs are available",
            r"ProcessGroupNCCL is only supported with GPUs, no GPUs found",
            r"NVIDIA-SMI has failed because it couldn't communicate with the NVIDIA driver",
            r"\bnvidia-smi: (?:command )?not found",
            r"Torch not compiled with CUDA enabled",
        ),
        "The program inside the container sees no GPU (torch finds no driver or no device,"
        " or nvidia-smi is missing): the runtime did not pass the host's GPUs and driver in,"
        " or the image's torch is a CPU build.",
        "container.runtime's GPU way (docs/containers.md): apptainer/singularity --nv (the"
        " driver on the host), podman CDI (nvidia-ctk cdi generate on each node), charliecloud"
        " ch-fromhost --nvidia IMAGE, pyxis enroot's hooks; resources.gpus_per_node set; a CUDA"
        " build of torch in container.image",
        container_only=True,
    ),
    FailureClass(
        "read_only_file_system",
        "a write to a read-only file system",
        patterns(r"Read-only file system", r"\bEROFS\b"),
        "The program wrote into a read-only place: inside a container, the image itself"
        " (Apptainer's and Charliecloud's are read-only; Podman's with --read-only); outside"
        " one, a file system mounted read-only.",
        "write into the run folder ($JOBKIT_RUN_DIR) or a container.mounts folder (the"
        " trainer's checkpoint.dir and logging.dir are mounted); or a writable layer:"
        " container.options --writable-tmpfs (apptainer), drop --read-only (podman)",
    ),
    FailureClass(
        "time_limit",
        "killed by the time limit",
        patterns(r"CANCELLED AT \S+ DUE TO TIME LIMIT", r"\bJOB \S+ .*DUE TO TIME LIMIT"),
        "The job ran past its wall-time limit and the scheduler stopped it.",
        "resources.time (ask for more), or checkpoint more often (run.train.overrides:"
        " {checkpoint.every_steps: N}) with scheduler.requeue: true and scheduler.signal",
        states=frozenset({"TIMEOUT"}),
    ),
    FailureClass(
        "node_failure",
        "a node failed",
        patterns(r"DUE TO NODE FAILURE", r"\bNode failure on\b", r"\bNODE_FAIL\b"),
        "A node of the allocation stopped answering the scheduler (hardware, kernel, network);"
        " the job itself may be fine.",
        "submit again (`jobkit submit SPEC`), or let the scheduler requeue it:"
        " scheduler.requeue: true",
        states=frozenset({"NODE_FAIL"}),
    ),
    FailureClass(
        "preempted",
        "preempted by the scheduler",
        patterns(r"DUE TO PREEMPTION"),
        "A job of higher priority took the nodes.",
        "scheduler.requeue: true and scheduler.signal (e.g. USR2@120) so the trainer saves a"
        " checkpoint and the job comes back",
        states=frozenset({"PREEMPTED"}),
    ),
)
