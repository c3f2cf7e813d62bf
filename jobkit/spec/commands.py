"""run.command that is itself a launcher (`torchrun ... main.py`, `srun ...`, `mpirun ...`).

A seed's command line often starts its own launcher; under jobkit's launcher it would run a
launcher inside a launcher (2x2 processes, two rendezvous). check_cross_fields refuses it
unless launch.launcher is `none`, which runs the command as written once per node.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from pathlib import PurePosixPath

_ENV_ASSIGNMENT = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*=")
_PYTHON = re.compile(r"^python(?:\d+(?:\.\d+)?)?$")
_PROGRAMS = {
    "torchrun": "torchrun",
    "srun": "srun",
    "mpirun": "mpirun",
    "mpiexec": "mpirun",
    "deepspeed": "deepspeed",
}
"""A program's file name -> the launcher it is (mpiexec is mpirun's other name)."""
_PYTHON_MODULES = {
    "torch.distributed.run": "torchrun",
    "torch.distributed.launch": "torch.distributed.launch",
    "deepspeed.launcher.runner": "deepspeed",
}
"""`python -m MODULE` -> the launcher it is."""


def command_launcher(argv: Sequence[str]) -> str | None:
    """The launcher `argv` starts (`torchrun`, `srun`, `accelerate launch`...), or None.

    Leading `env` and NAME=value words are skipped: `env OMP_NUM_THREADS=4 torchrun ...`.
    """
    words = list(argv)
    while words and (words[0] == "env" or _ENV_ASSIGNMENT.match(words[0])):
        words.pop(0)
    if not words:
        return None
    program = PurePosixPath(words[0]).name
    if program in _PROGRAMS:
        return _PROGRAMS[program]
    if program == "accelerate" and len(words) > 1 and words[1] == "launch":
        return "accelerate launch"
    if _PYTHON.match(program) and len(words) > 2 and words[1] == "-m":
        return _PYTHON_MODULES.get(words[2])
    return None


def launcher_in_command_message(found: str, launcher: str) -> str:
    """The one line that refuses a launcher inside jobkit's launcher, with the way out."""
    return (
        f"starts its own launcher ({found}), which launch.launcher {launcher} would run inside"
        f" {launcher} (a launcher per process, two rendezvous): set launch.launcher: none to run"
        " the command as written once per node (MASTER_ADDR, MASTER_PORT, NODE_RANK, NNODES"
        " exported), or give run.command only the program (e.g. python main.py) and let"
        f" launch.launcher {launcher} start it"
    )
