"""pyxis (Slurm's SPANK plug-in for enroot): the launching srun gets `--container-image`,
`--container-mounts` and `--container-workdir`; every task of the step runs in the image.

Documentation followed (github.com/NVIDIA/pyxis, README "Usage"): `--container-image=[USER@]
[REGISTRY#]IMAGE[:TAG]|PATH`, `--container-mounts=SRC:DST[:FLAGS][,SRC:DST...]`,
`--container-workdir=PATH`; the task's environment passes in and enroot's hooks give the
Slurm-allocated GPUs and the host network. Only on Slurm (backends/honours.py).
"""

from __future__ import annotations

from jobkit.container.launch import ContainerLaunch
from jobkit.container.words import WORKING_DIR, Inputs, q


def render(given: Inputs) -> ContainerLaunch:
    """The srun options (no prefix: the step's tasks start inside the image)."""
    mounts = ",".join(
        f"{mount.host}:{mount.inside}{':ro' if mount.read_only else ''}" for mount in given.mounts
    )
    words = [
        "--container-image=" + q(given.container.image),
        "--container-mounts=" + mounts,
        "--container-workdir=" + WORKING_DIR,
        *(q(word) for word in given.option_words),
    ]
    return ContainerLaunch(
        runtime="pyxis", srun_options=" ".join(words) + " ", exports=list(given.inside_env)
    )
