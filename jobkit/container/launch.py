"""ContainerLaunch: what the templates put around the per-node command."""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass(frozen=True)
class ContainerLaunch:
    """A runtime's rendering. `prefix` goes before the command each node (or, with srun
    tasks and mpirun, each process) runs, ending with a space; `srun_options` are added to
    the launching srun (pyxis); `exports` are set in the script before the launch (NAME,
    value): the container's own variables, under the name the runtime reads them from."""

    runtime: str
    prefix: str = ""
    srun_options: str = ""
    exports: list[tuple[str, str]] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    checks: list[tuple[str, str, str]] = field(default_factory=list)
    """(shell test, spec key, what is missing) run before the launch on each node."""
    scripts: list[tuple[str, str]] = field(default_factory=list)
    """(shell variable, template file): helper scripts the prefix runs with `sh -c`, set in the
    script before the launch (templates/common/container.sh.j2)."""
    made_dirs: list[str] = field(default_factory=list)
    """Host folders (shell words) created before the launch: the sources of the mounts of
    the trainer's checkpoint.dir and logging.dir (container/outputs.py)."""
