"""Which program is a scheduler's own command when two schedulers' tools share a name.

A machine can hold two `qsub`/`qstat`/`qdel`: Slurm's Torque wrappers in /usr/bin and Grid
Engine's under $SGE_ROOT/bin/<arch> (this project's test machine has both). Running whichever
comes first on PATH could make `jobkit cancel` of Grid Engine job 12 cancel Slurm job 12.
So a backend whose command names are shared states where its own commands are
(CommandPlace) and runs them by absolute path (`place.argv(argv)`).
"""

from __future__ import annotations

import os
import platform
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from jobkit.core.errors import SchedulerError

GRID_ENGINE_MARKER = "qconf"
"""A command only Grid Engine has: a folder holding it holds Grid Engine's commands."""


@dataclass(frozen=True)
class CommandPlace:
    """Where one scheduler's commands are, in the order they are looked for: the folder in
    `setting` (an environment variable), the scheduler's own folders, then PATH folders
    that `on_path` accepts."""

    scheduler: str
    """The scheduler's name as a user knows it (messages)."""
    setting: str
    """An environment variable naming the folder of the commands (it wins when set)."""
    own_folders: Callable[[Mapping[str, str]], list[Path]]
    """The scheduler's own folders from its environment ($SGE_ROOT/bin/<arch>...)."""
    on_path: Callable[[Path], bool]
    """Whether a PATH folder holding the command holds this scheduler's."""
    hint: str
    """What the user sets so the commands are found (end of the error message)."""

    def resolve(self, name: str, environ: Mapping[str, str] | None = None) -> str:
        """The absolute path of this scheduler's `name`; SchedulerError when it has none."""
        env = os.environ if environ is None else environ
        configured = env.get(self.setting)
        folders = [Path(configured)] if configured else self.own_folders(env)
        for folder in folders:
            if _is_program(folder / name):
                return str(folder / name)
        if not configured:
            for folder in _path_folders(env):
                if _is_program(folder / name) and self.on_path(folder):
                    return str(folder / name)
        raise SchedulerError([name], None, "", "", reason=self._not_found(name, configured, env))

    def argv(self, argv: Sequence[str], environ: Mapping[str, str] | None = None) -> list[str]:
        """argv with its command replaced by this scheduler's own (absolute path)."""
        return [self.resolve(argv[0], environ), *argv[1:]]

    def _not_found(self, name: str, configured: str | None, env: Mapping[str, str]) -> str:
        if configured:
            return f"{self.scheduler}'s {name} is not in {self.setting}={configured}"
        others = [str(f / name) for f in _path_folders(env) if _is_program(f / name)]
        seen = f" (the {name} on PATH, {others[0]}, is another scheduler's)" if others else ""
        return f"{self.scheduler}'s {name} was not found{seen}: {self.hint}"


def _is_program(path: Path) -> bool:
    return path.is_file() and os.access(path, os.X_OK)


def _path_folders(env: Mapping[str, str]) -> list[Path]:
    return [Path(p) for p in env.get("PATH", os.defpath).split(os.pathsep) if p]


def holds_grid_engine(folder: Path) -> bool:
    """True when `folder` holds Grid Engine's commands (its `qconf` is there)."""
    return _is_program(folder / GRID_ENGINE_MARKER)


_ARCHES = {"x86_64": "lx-amd64", "amd64": "lx-amd64", "aarch64": "lx-arm64", "i686": "lx-x86"}


def grid_engine_folders(env: Mapping[str, str]) -> list[Path]:
    """$SGE_ROOT/bin/<arch>: the arch of this machine ($SGE_ARCH, else the name Grid
    Engine's util/arch gives it), else the one arch folder there is."""
    root = env.get("SGE_ROOT")
    if not root:
        return []
    bin_dir = Path(root) / "bin"
    arch = env.get("SGE_ARCH") or _ARCHES.get(platform.machine().lower(), "")
    if arch and (bin_dir / arch).is_dir():
        return [bin_dir / arch]
    try:
        found = sorted(p for p in bin_dir.iterdir() if p.is_dir())
    except OSError:
        return []
    return found if len(found) == 1 else []


def pbs_folders(env: Mapping[str, str]) -> list[Path]:
    """$PBS_EXEC/bin (PBS Pro and OpenPBS name their installation so)."""
    root = env.get("PBS_EXEC")
    return [Path(root) / "bin"] if root else []


GRID_ENGINE = CommandPlace(
    scheduler="Grid Engine",
    setting="JOBKIT_SGE_BIN",
    own_folders=grid_engine_folders,
    on_path=holds_grid_engine,
    hint="set SGE_ROOT (source $SGE_ROOT/$SGE_CELL/common/settings.sh) or JOBKIT_SGE_BIN",
)
"""Grid Engine's commands: $JOBKIT_SGE_BIN, $SGE_ROOT/bin/<arch>, or a PATH folder with qconf."""

PBS = CommandPlace(
    scheduler="PBS",
    setting="JOBKIT_PBS_BIN",
    own_folders=pbs_folders,
    on_path=lambda folder: not holds_grid_engine(folder),
    hint="put PBS's commands on PATH, or set PBS_EXEC or JOBKIT_PBS_BIN",
)
"""PBS's commands: $JOBKIT_PBS_BIN, $PBS_EXEC/bin, or the first on PATH that is not Grid
Engine's (Slurm's Torque wrappers count as PBS: that is what they are for)."""
