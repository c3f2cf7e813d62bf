"""Before queueing (`jobkit check`) and as the job starts (the script's container block): the
runtime is on PATH, the image exists, every mount's host path exists; Charliecloud's mount
points exist in a directory image (ch-run(1): "With a read-only image (the default), DST
must exist"). Each problem names the key to change; `jobkit doctor` knows the same lines."""

from __future__ import annotations

import shutil
import subprocess
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

from jobkit.backends.preflight import Finding
from jobkit.container.mounts import parse_mount
from jobkit.container.outputs import trainer_output_dirs
from jobkit.container.words import image_is_path, trainer_packages

if TYPE_CHECKING:
    from jobkit.container.spec import Container
    from jobkit.spec.schema import JobSpec

RUNTIME_COMMANDS = {
    "apptainer": "apptainer",
    "singularity": "singularity",
    "charliecloud": "ch-run",
    "podman": "podman",
    "pyxis": "srun",
}
"""The command each runtime is started with (pyxis: srun's --container-image)."""

HOST_SHARED = ("/tmp",)
"""Folders ch-run binds from the host by default (ch-run(1): --private-tmp is off): a mount
point under them exists whenever the host path does."""


def image_path(container: Container, workdir: Path) -> Path | None:
    """container.image as a path on this machine, when it is one."""
    if not image_is_path(container):
        return None
    return workdir / Path(container.image).expanduser()


def container_findings(
    spec: JobSpec,
    workdir: Path,
    *,
    on_this_machine: bool,
    which: Callable[[str], str | None] = shutil.which,
) -> list[Finding]:
    """The problems of spec.container seen from this machine. `on_this_machine`: the job runs
    here (local), so the runtime and a podman image are checked here too."""
    container = spec.container
    if container is None:
        return []
    found: list[Finding] = []
    command = RUNTIME_COMMANDS[container.runtime]
    if on_this_machine and which(command) is None:
        found.append(Finding("container.runtime", f"{command} not found on PATH"))
    image = image_path(container, workdir)
    if image is not None and not image.exists():
        found.append(Finding("container.image", f"{image} not found"))
    podman_here = on_this_machine and container.runtime == "podman" and which("podman")
    if podman_here and not podman_image_exists(container.image):
        found.append(Finding("container.image", f"podman has no image {container.image} here"))
    inside: list[str] = [str(workdir), *trainer_packages()] if spec.run.train else [str(workdir)]
    inside += trainer_output_dirs(spec)
    for text in container.mounts:
        mount = parse_mount(text)
        inside.append(mount.inside)
        if not Path(mount.host).exists():
            found.append(Finding("container.mounts", f"mount source {mount.host} not found"))
    if container.runtime == "charliecloud" and image is not None and image.is_dir():
        found += _charliecloud_mount_points(image, inside)
    return found


def podman_image_exists(name: str) -> bool:
    """`podman image exists NAME` (exit 0: it is in this machine's storage)."""
    try:
        done = subprocess.run(
            ["podman", "image", "exists", name], capture_output=True, timeout=60, check=False
        )
    except (OSError, subprocess.TimeoutExpired):
        return True  # cannot tell: the job's own check says so if it is missing
    return done.returncode == 0


def _charliecloud_mount_points(image: Path, inside: list[str]) -> list[Finding]:
    missing = [
        path
        for path in dict.fromkeys(inside)
        if not path.startswith(tuple(f"{shared}/" for shared in HOST_SHARED))
        and not (image / path.lstrip("/")).is_dir()
    ]
    return [
        Finding(
            "container.image",
            f"{image} has no folder {path} to mount on (ch-run needs it in a read-only image:"
            f" mkdir -p {image}{path})",
        )
        for path in missing
    ]
