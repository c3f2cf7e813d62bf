"""Apptainer and Singularity: `apptainer exec [--nv] --bind SRC:DST[:ro] --pwd DIR IMAGE CMD`.

Documentation followed (apptainer.org/docs/user/main): `--bind src[:dest[:opts]]` (Bind
Paths and Mounts); `--nv` for NVIDIA GPUs, which needs the driver on the host (GPU Support);
the host's network and environment are the container's by default, and `APPTAINERENV_NAME`
(`SINGULARITYENV_NAME`) sets NAME inside only (Environment and Metadata).
"""

from __future__ import annotations

from jobkit.container.launch import ContainerLaunch
from jobkit.container.words import WORKING_DIR, Inputs, image_word, mount_words, q


def render(given: Inputs, command: str = "apptainer") -> ContainerLaunch:
    """The exec line for `command` (apptainer, or singularity: the same options)."""
    words = [command, "exec"]
    if given.gpus:
        words.append("--nv")
    for mount in given.mounts:
        words += mount_words(mount, "--bind")
    words += ["--pwd", WORKING_DIR]
    words += [q(word) for word in given.option_words]
    words.append(image_word(given.container))
    prefix_name = "SINGULARITYENV_" if command == "singularity" else "APPTAINERENV_"
    exports = [(prefix_name + name, value) for name, value in given.inside_env]
    return ContainerLaunch(runtime=command, prefix=" ".join(words) + " ", exports=exports)
