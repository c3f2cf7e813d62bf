"""Checks of `container:` against the rest of the spec (CrossFieldError naming the key)."""

from __future__ import annotations

import shlex
from typing import TYPE_CHECKING

from jobkit.container.mounts import parse_mount
from jobkit.core.errors import CrossFieldError

if TYPE_CHECKING:
    from jobkit.spec.schema import JobSpec


def check_container(spec: JobSpec) -> None:
    """What a container cannot do with this spec: pyxis without srun's step, read-only mounts
    on Charliecloud 0.31, env.python naming a host interpreter."""
    container = spec.container
    if container is None:
        return
    if container.runtime == "pyxis" and spec.launch.launcher == "mpirun":
        raise CrossFieldError(
            "container.runtime",
            "pyxis starts srun's tasks in the image; launcher mpirun starts its ranks itself"
            " (use launch.launcher srun or torchrun, or runtime apptainer)",
        )
    if container.runtime == "charliecloud":
        for index, text in enumerate(container.mounts):
            if parse_mount(text).read_only:
                raise CrossFieldError(
                    "container.mounts",
                    f"charliecloud's ch-run has no read-only bind: {text!r} (drop :ro)",
                    path=("container", "mounts", index),
                )
    if container.runtime == "podman":
        _check_podman_options(container.options)
    if spec.env.python not in ("auto", "system"):
        raise CrossFieldError(
            "env.python",
            "inside a container the image's python3 runs: remove env.python (run.python"
            " names another Python inside the image)",
        )
    if spec.env.venv or spec.env.conda:
        key = "env.venv" if spec.env.venv else "env.conda"
        raise CrossFieldError(
            key, "is activated on the host, not inside container.image: remove it"
        )


PODMAN_TASK_OPTIONS = ("--pid", "--sig-proxy", "--pidfile", "--cidfile")
"""podman run options that jobkit's task sets itself (docs/containers.md "How a Podman job
stops"): another value would leave the container running after its job, or signal the
wrong process."""


def _check_podman_options(options: list[str]) -> None:
    """Refuse container.options that would change how a Podman job stops."""
    for index, text in enumerate(options):
        for word in shlex.split(text):
            name = word.split("=", 1)[0]
            if name in PODMAN_TASK_OPTIONS:
                raise CrossFieldError(
                    "container.options",
                    f"{name} is set by jobkit for podman (the program runs in the host's pid"
                    " namespace and jobkit passes the signals on, so that the container stops"
                    ' with its job: docs/containers.md "How a Podman job stops"): remove it',
                    path=("container", "options", index),
                )
