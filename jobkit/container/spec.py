"""The `container:` section: which image, which runtime, what is mounted and set inside.

The same section on every backend that honours it (backends/honours.py refuses it elsewhere);
what it renders to is the runtime's module's business (container/render.py).
"""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import AfterValidator, BeforeValidator, Field

from jobkit.container.mounts import check_mount
from jobkit.spec.model import StrictModel, empty_dict, empty_list
from jobkit.spec.values import (
    EnvName,
    NonEmptySafeStr,
    SafeStr,
    ScalarValue,
    ShellWordsList,
    _as_list,
)

Runtime = Literal["apptainer", "singularity", "pyxis", "charliecloud", "podman"]

MountText = Annotated[SafeStr, AfterValidator(check_mount)]


class Container(StrictModel):
    """The image the launcher runs in on every node (docs/containers.md)."""

    image: NonEmptySafeStr = Field(
        description="The image: a .sif or directory path (relative: to the submission"
        " directory), docker://..., or a name the runtime knows (podman's localhost/NAME:TAG,"
        " an enroot/pyxis image)."
    )
    runtime: Runtime = Field(
        description="apptainer | singularity | pyxis (Slurm only) | charliecloud | podman."
    )
    mounts: Annotated[list[MountText], BeforeValidator(_as_list)] = Field(
        default_factory=empty_list,
        description="HOST:CONTAINER[:ro], absolute paths; the submission folder, the run folder"
        " and the bundled trainer's package are mounted without asking.",
    )
    env: dict[EnvName, ScalarValue] = Field(
        default_factory=empty_dict,
        description="Variables set inside the container only (env.vars and the launch's"
        " MASTER_ADDR, ranks, NCCL_*, JOBKIT_* reach it too).",
    )
    options: ShellWordsList = Field(
        default_factory=empty_list,
        description="Words for the runtime's run command, each entry split like a shell and"
        " every word quoted: site facts such as podman's `--runtime runc` (a global option,"
        " placed before `run`) or `--ulimit nofile=1024:1024`. podman's --pid, --sig-proxy,"
        " --pidfile and --cidfile are jobkit's (how the job stops) and refused.",
    )
