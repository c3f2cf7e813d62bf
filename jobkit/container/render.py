"""The container's part of the template context: `container` (a ContainerLaunch, or None)."""

from __future__ import annotations

import dataclasses
from typing import TYPE_CHECKING

from jobkit.container import apptainer, charliecloud, podman, pyxis
from jobkit.container.launch import ContainerLaunch
from jobkit.container.mounts import parse_mount
from jobkit.container.preflight import RUNTIME_COMMANDS
from jobkit.container.words import image_is_path, image_word, inputs, q

if TYPE_CHECKING:
    from jobkit.spec.schema import JobSpec


def container_launch(spec: JobSpec, exported_names: list[str]) -> ContainerLaunch | None:
    """spec.container rendered by its runtime's module; `exported_names` are the variables
    the script exports for the program (env.vars, NCCL...), which must reach inside."""
    if spec.container is None:
        return None
    given = inputs(spec, exported_names)
    runtime = spec.container.runtime
    if runtime in ("apptainer", "singularity"):
        launch = apptainer.render(given, runtime)
    elif runtime == "charliecloud":
        launch = charliecloud.render(given)
    elif runtime == "podman":
        launch = podman.render(given)
    else:
        launch = pyxis.render(given)
    return dataclasses.replace(launch, checks=job_checks(spec), made_dirs=given.made_dirs)


def job_checks(spec: JobSpec) -> list[tuple[str, str, str]]:
    """What the script checks on each node before the launch (container/preflight.py checks
    the same before queueing): the runtime's command, a path image, the mounts' sources."""
    container = spec.container
    assert container is not None
    command = RUNTIME_COMMANDS[container.runtime]
    checks = [
        (f"command -v {command} >/dev/null 2>&1", "container.runtime", f"the command {command}")
    ]
    if image_is_path(container):
        checks.append((f"[[ -e {image_word(container)} ]]", "container.image", container.image))
    for text in container.mounts:
        host = parse_mount(text).host
        checks.append((f"[[ -e {q(host)} ]]", "container.mounts", f"mount source {host}"))
    return checks
