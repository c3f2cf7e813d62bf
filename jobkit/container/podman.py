"""Podman: `podman [GLOBAL] run --rm --network host --pid host -v SRC:DST[:ro] -w DIR -e NAME
IMAGE CMD`.

Documentation followed (docs.podman.io, podman-run(1)): `-v SRC:DST[:ro]`; `--network host`;
`--pid host`, as Apptainer and Charliecloud have by default: the program is not PID 1 (which
ignores SIGTERM without a handler), hang stacks and cancel see its processes, and torchrun's
c10d rendezvous, which names a node by host name and pid, tells two containers of one host
apart; `-e NAME` without a value takes NAME from the host, and `NAME*` every variable starting
with NAME (values never in argv: they come from the script's environment); `--device
nvidia.com/gpu=all` gives the GPUs through CDI (podman 4.1+, nvidia-ctk cdi generate on the
host). Podman's global options (`--runtime`, `--root`...) must come before `run`: those in
container.options are moved there.

The container runs outside the job's processes (conmon starts it), and podman run's signal
proxy stops for good at the first signal it fails to pass on (Slurm's SIGCONT, then SIGTERM
at once, did that here): jobkit's task (templates/common/podman-task.sh) runs podman run
without the proxy, passes the signals to the program itself and waits for it; the container's
first process (podman-inside.sh) stops the program when that task is gone.
"""

from __future__ import annotations

from jobkit.container.launch import ContainerLaunch
from jobkit.container.words import LAUNCH_VARIABLES, WORKING_DIR, Inputs, mount_words, q

GLOBAL_OPTIONS = (
    "--runtime",
    "--root",
    "--runroot",
    "--storage-driver",
    "--storage-opt",
    "--cgroup-manager",
    "--events-backend",
    "--tmpdir",
    "--conmon",
    "--log-level",
)
"""podman(1)'s options that belong before the subcommand (each takes one value)."""


SCRIPTS = (
    ("jobkit_podman_task", "common/podman-task.sh"),
    ("jobkit_podman_inside", "common/podman-inside.sh"),
)
"""The task around podman run and the first process inside (docs/containers.md "How a Podman
job stops"): the shell variables that hold them, and their templates."""
TASK = ["sh", "-c", '"$jobkit_podman_task"', "jobkit-podman"]
TASK_OPTIONS = "@jobkit-task"
"""Where the task puts the run options it owns (--sig-proxy=false, --pidfile, --cidfile...)."""
INSIDE = ["sh", "-c", '"$jobkit_podman_inside"', "jobkit-inside"]


def split_global(words: list[str]) -> tuple[list[str], list[str]]:
    """container.options' words: (podman's global options, the rest for `run`)."""
    global_words: list[str] = []
    run_words: list[str] = []
    index = 0
    while index < len(words):
        word = words[index]
        name = word.split("=", 1)[0]
        if name in GLOBAL_OPTIONS:
            takes_next = "=" not in word and index + 1 < len(words)
            global_words += words[index : index + 2] if takes_next else [word]
            index += 2 if takes_next else 1
            continue
        run_words.append(word)
        index += 1
    return global_words, run_words


def render(given: Inputs) -> ContainerLaunch:
    """The podman run line; every variable the program needs named with -e."""
    global_words, run_words = split_global(given.option_words)
    words = [*TASK, "podman", *map(q, global_words), "run", TASK_OPTIONS]
    words += ["--rm", "--network", "host", "--pid", "host"]
    if given.gpus:
        words += ["--device", "nvidia.com/gpu=all"]
    for mount in given.mounts:
        words += mount_words(mount, "-v")
    words += ["-w", WORKING_DIR]
    names = [*LAUNCH_VARIABLES, *given.passed_names, *(name for name, _ in given.inside_env)]
    for name in dict.fromkeys(names):
        words += ["-e", q(name)]
    words += [q(word) for word in run_words]
    words += [q(given.container.image), *INSIDE]
    return ContainerLaunch(
        runtime="podman",
        prefix=" ".join(words) + " ",
        exports=list(given.inside_env),
        scripts=list(SCRIPTS),
    )
