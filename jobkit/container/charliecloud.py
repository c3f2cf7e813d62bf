"""Charliecloud: `ch-run -b SRC:DST -c DIR IMAGE -- CMD`.

Documentation followed (ch-run(1), hpc.github.io/charliecloud): `-b SRC[:DST]` bind-mounts,
and with a read-only image DST must already exist in it; `-c DIR` the working folder; the
environment and the host's network pass through; ch-run refuses to start without $USER.
GPUs: ch-fromhost --nvidia puts the host's driver libraries into the image once (nothing on
the command line). ch-run 0.31 has no read-only bind: `:ro` mounts are refused (spec check).
ch-run binds the host's /tmp at /tmp inside, "or $TMPDIR if set", and a bind cannot enter
that one: Grid Engine (and some Slurm sites) set TMPDIR per job, which would hide every path
under the host's /tmp (a submit folder there); ch-run unsets TMPDIR inside anyway, so it is
started without it and /tmp inside is always the host's (as container/preflight.py assumes).
"""

from __future__ import annotations

from jobkit.container.launch import ContainerLaunch
from jobkit.container.words import WORKING_DIR, Inputs, image_word, mount_words, q

GPU_NOTE = (
    "container.runtime charliecloud: resources.gpus_per_node asks for GPUs; the image needs"
    " the host's driver libraries (ch-fromhost --nvidia IMAGE, once per driver version)"
)


def render(given: Inputs) -> ContainerLaunch:
    """The ch-run line; USER set from id -un when the job's environment lacks it, TMPDIR
    unset (the host's /tmp at /tmp inside)."""
    words = ["env", "-u", "TMPDIR", 'USER="${USER:-$(id -un)}"', "ch-run"]
    for mount in given.mounts:
        words += mount_words(mount, "-b", read_only_suffix=False)
    words += ["-c", WORKING_DIR]
    words += [q(word) for word in given.option_words]
    words += [image_word(given.container), "--"]
    notes = [GPU_NOTE] if given.gpus else []
    return ContainerLaunch(
        runtime="charliecloud",
        prefix=" ".join(words) + " ",
        exports=list(given.inside_env),
        notes=notes,
    )
