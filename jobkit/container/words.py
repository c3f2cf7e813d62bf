"""What every runtime's module builds from: the mounts as shell words, the variables set
inside, and the per-node working folder. Shell words are text for the script: literal
values quoted, the job's own variables ("$JOBKIT_RUN_DIR") left for bash to expand."""

from __future__ import annotations

import importlib.util
import shlex
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from jobkit.container.mounts import parse_mount
from jobkit.container.outputs import trainer_output_dirs

if TYPE_CHECKING:
    from jobkit.container.spec import Container
    from jobkit.spec.schema import JobSpec

SUBMIT_DIR = '"$JOBKIT_WORKDIR"'
"""The submission folder (every template sets JOBKIT_WORKDIR before the launch)."""
RUN_DIR = '"$JOBKIT_RUN_DIR"'
WORKING_DIR = '"$PWD"'
CODE_DIR = '"$JOBKIT_CODE_DIR"'
"""The frozen code's folder (docs/provenance.md): the job's working folder when set."""
CODE_DIR_VARIABLE = "JOBKIT_CODE_DIR"
"""Where the node's command starts (run.workdir already entered): the same folder inside."""

LAUNCH_VARIABLES = (
    "MASTER_ADDR",
    "MASTER_PORT",
    "JOBKIT_*",
    "NCCL_*",
    "SLURM_*",
    "TORCH_*",
    "CUDA_VISIBLE_DEVICES",
)
"""The launch's own variables, for a runtime that passes none by itself (podman's `-e`,
where NAME* is every variable starting with NAME)."""


@dataclass(frozen=True)
class BindMount:
    """A mount as shell words (host, inside) and whether it is read-only."""

    host: str
    inside: str
    read_only: bool = False
    when_set: str = ""
    """A variable's name: mounted only when the job's script has it non-empty."""


def mount_words(mount: BindMount, option: str, *, read_only_suffix: bool = True) -> list[str]:
    """`option HOST:INSIDE[:ro]` as shell words; a `when_set` mount as one word that bash
    expands to both, or to nothing (`${VAR:+option "$VAR":"$VAR"}`)."""
    pair = f"{mount.host}:{mount.inside}{':ro' if mount.read_only and read_only_suffix else ''}"
    if mount.when_set:
        return [f"${{{mount.when_set}:+{option} {pair}}}"]
    return [option, pair]


@dataclass(frozen=True)
class Inputs:
    """What a runtime's module renders from."""

    container: Container
    mounts: list[BindMount]
    inside_env: list[tuple[str, str]]
    """Variables for inside only: container.env, PYTHONPATH for the bundled trainer."""
    passed_names: list[str] = field(default_factory=list)
    """Names of the job's variables (env.vars, NCCL presets...) that must reach inside."""
    gpus: bool = False
    option_words: list[str] = field(default_factory=list)
    made_dirs: list[str] = field(default_factory=list)
    """Host folders the script creates before the launch (shell words): a bind mount needs
    its source, and the trainer's checkpoint.dir may not exist yet."""


def q(word: str) -> str:
    """A literal word quoted for the shell."""
    return shlex.quote(word)


FROZEN_CODE_RUNTIMES = ("apptainer", "singularity", "charliecloud", "podman")
"""Runtimes that get the frozen code's folder mounted (its path is known only at submit:
a mount the script makes when JOBKIT_CODE_DIR is set). pyxis is not among them: its
mounts are one srun option, untried here; its jobs run the submit folder (said at submit)."""

PATH_RUNTIMES = ("apptainer", "singularity", "charliecloud")
"""Runtimes whose image is a file or folder unless it names a URI (docker://, oras://...)."""


def image_is_path(container: Container) -> bool:
    """Whether container.image names a file or folder on the nodes."""
    return container.runtime in PATH_RUNTIMES and "://" not in container.image


def image_word(container: Container) -> str:
    """container.image as a shell word: a relative path is the submission folder's."""
    image = container.image
    if image_is_path(container) and not image.startswith("/"):
        return f"{SUBMIT_DIR}/{q(image)}"
    return q(image)


def package_dir(name: str) -> str | None:
    """The folder of the package `name` on this machine (found without importing it)."""
    found = importlib.util.find_spec(name)
    if found is None or not found.submodule_search_locations:
        return None
    return str(Path(next(iter(found.submodule_search_locations))).resolve())


def trainer_packages() -> list[str]:
    """The bundled trainer's packages, `train` and the `jobkit` it imports (its config
    loader), mounted read-only: the image needs only their third-party needs (torch,
    numpy, PyYAML, pydantic)."""
    return [found for name in ("train", "jobkit") if (found := package_dir(name)) is not None]


def inputs(spec: JobSpec, exported_names: list[str]) -> Inputs:
    """The mounts (the submission folder, the run folder, the bundled trainer's packages and
    the folders it writes into (container/outputs.py), then container.mounts), the
    variables and the options of `spec.container`."""
    container = spec.container
    assert container is not None
    mounts = [BindMount(SUBMIT_DIR, SUBMIT_DIR), BindMount(RUN_DIR, RUN_DIR)]
    if container.runtime in FROZEN_CODE_RUNTIMES:
        mounts.append(BindMount(CODE_DIR, CODE_DIR, when_set=CODE_DIR_VARIABLE))
    inside_env = [(name, str(value)) for name, value in container.env.items()]
    packages = trainer_packages() if spec.run.train is not None else []
    for package in packages:
        mounts.append(BindMount(q(package), q(package), read_only=True))
    parents = dict.fromkeys(str(Path(package).parent) for package in packages)
    if parents:
        inside_env.append(("PYTHONPATH", ":".join(parents)))
    made_dirs = [q(folder) for folder in trainer_output_dirs(spec)]
    mounts += [BindMount(folder, folder) for folder in made_dirs]
    for text in container.mounts:
        mount = parse_mount(text)
        mounts.append(BindMount(q(mount.host), q(mount.inside), mount.read_only))
    words: list[str] = []
    for entry in container.options:
        words += shlex.split(entry)
    return Inputs(
        container=container,
        mounts=mounts,
        inside_env=inside_env,
        passed_names=exported_names,
        gpus=spec.resources.gpus_per_node > 0,
        option_words=words,
        made_dirs=made_dirs,
    )
