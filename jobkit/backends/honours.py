"""Which spec keys a backend honours, and the refusal of a key it cannot (docs/spec.md,
"Keys a backend cannot honour").

Most keys mean the same on every backend (env, run, logs, monitor: the script does them).
The keys in SCHEDULER_KEYS ask the scheduler for something: each backend states in
`Backend.honours` the ones it honours and how. A key the user set that the backend does not
honour is never dropped in silence: spec loading refuses it in one line (or, with
--ignore-unsupported, lists it as ignored). Launcher keys that only some launchers read
(`launch.rdzv_timeout`, `launch.max_restarts`) are checked here too.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import TYPE_CHECKING, Any, Literal, NamedTuple

if TYPE_CHECKING:
    from jobkit.backends.base import Backend
    from jobkit.spec.schema import JobSpec

How = Literal["directive", "launcher", "jobkit"]
"""directive: the scheduler is asked for it (a script directive, a submit option);
launcher: jobkit's launcher or the program's environment does it (a torchrun flag, the
local/ssh time limit); jobkit: jobkit itself acts on it (later attempts, bad nodes)."""

SCHEDULER_KEYS: Mapping[str, str] = {
    "resources.gpu_type": "GPU model request",
    "resources.mem": "memory request",
    "resources.time": "wall-time limit",
    "resources.partition": "partition or queue",
    "resources.account": "account to charge",
    "resources.qos": "quality of service",
    "resources.constraint": "node feature constraint",
    "resources.exclusive": "whole-node request",
    "scheduler.array": "job array",
    "scheduler.dependency": "job dependency",
    "scheduler.mail_user": "scheduler mail",
    "scheduler.mail_type": "scheduler mail",
    "scheduler.requeue": "requeue",
    "scheduler.max_attempts": "later attempts (they need scheduler.requeue)",
    "scheduler.signal": "warning signal before the time limit",
    "scheduler.extra": "raw scheduler directives",
    "scheduler.exclude_bad_nodes_for": "bad-node exclusion (it runs on the hosts the spec names)",
    "code.snapshot": "code snapshot for the job to run from",
    "code.include_untracked": "code snapshot for the job to run from",
    "code.max_size": "code snapshot for the job to run from",
    "notify.from": "notifications sent by the job itself (notify.from: job)",
}
"""Key -> what it asks for (in the refusal's words): the keys whose honouring depends on the
backend. A backend's `honours` names those it honours."""


def runs_snapshots(cls: type[Backend]) -> bool:
    """Whether the backend's jobs run from the code snapshot (it honours `code.snapshot`)."""
    return "code.snapshot" in cls.honours


class Unhonoured(NamedTuple):
    """A key the backend would not honour, and the one line that says so."""

    key: str
    message: str


def option_section_owner(section: str, backends: Mapping[str, type[Backend]]) -> str | None:
    """The backend whose `options_section` is `section` (`sge`, `pbs`, `ssh`), if any."""
    for name, cls in backends.items():
        if cls.options_section == section:
            return name
    return None


def unhonoured(cls: type[Backend], spec: JobSpec, user_set: frozenset[str]) -> list[Unhonoured]:
    """The keys among `user_set` (dotted paths the user gave, with a non-default value) that
    the backend `cls` does not honour for this spec, each with its one-line reason."""
    found: list[Unhonoured] = []
    conditional = dict(cls.unhonoured_here(spec))
    for key in sorted(user_set):
        if key in conditional:
            found.append(Unhonoured(key, conditional[key]))
        elif key in SCHEDULER_KEYS and key not in cls.honours:
            hint = cls.unhonoured_hints.get(key, "remove the key")
            found.append(
                Unhonoured(
                    key, f"the {cls.name} backend has no {SCHEDULER_KEYS[key]} here ({hint})"
                )
            )
        elif (reason := launcher_drops(spec, cls.task_per_process).get(key)) is not None:
            found.append(Unhonoured(key, reason))
    refusal = container_refusal(cls, spec)
    if refusal is not None:
        container_keys = sorted(key for key in user_set if key.startswith("container."))
        key = container_keys[0] if container_keys else "container.runtime"
        if "container.runtime" in user_set:
            key = "container.runtime"
        found.append(Unhonoured(key, refusal))
    return found


def container_refusal(cls: type[Backend], spec: JobSpec) -> str | None:
    """Why the backend `cls` cannot run this spec's container, or None."""
    if spec.container is None or spec.container.runtime in cls.container_runtimes:
        return None
    able = ", ".join(sorted(cls.container_runtimes)) or "none"
    return (
        f"the {cls.name} backend cannot run container.runtime {spec.container.runtime}"
        f" (its runtimes: {able})"
    )


def launcher_drops(spec: JobSpec, task_per_process: bool) -> dict[str, str]:
    """launch.* keys only some launchers read, when this spec's launcher does not; run.python
    beside a run.command."""
    launch = spec.launch
    starter = "the scheduler starts each process" if task_per_process else None
    drops: dict[str, str] = {}
    if launch.launcher not in ("torchrun", "distributed-launch") or starter:
        why = starter or f"launcher {launch.launcher} starts each process (no torchrun)"
        drops["launch.max_restarts"] = f"{why}: nothing restarts workers (remove the key)"
    if launch.launcher != "torchrun" or launch.rdzv != "c10d" or starter:
        why = starter or (
            f"launcher {launch.launcher} has no c10d rendezvous"
            if launch.launcher != "torchrun"
            else "launch.rdzv static has no rendezvous to wait for"
        )
        drops["launch.rdzv_timeout"] = f"{why} (use torchrun with rdzv c10d, or remove the key)"
    if launch.launcher != "torchrun" or starter:
        why = starter or f"launcher {launch.launcher} has no torchrun rendezvous"
        drops["launch.rdzv"] = f"{why} (remove the key)"
    if spec.run.command is not None:
        drops["run.python"] = "is read with run.train only: run.command names its own program"
    return drops


def set_keys(data: Mapping[str, Any], defaults: Mapping[str, Any]) -> Iterator[str]:
    """Dotted paths of the scalars and lists in `data` whose value differs from `defaults`
    (the schema's): what a user layer really asks for."""

    def walk(value: Any, default: Any, path: str) -> Iterator[str]:
        if isinstance(value, Mapping) and not _free_mapping(path):
            for key, child in value.items():
                inner = default.get(key) if isinstance(default, Mapping) else None
                yield from walk(child, inner, f"{path}.{key}" if path else str(key))
        elif value != default and path:
            yield path

    yield from walk(data, defaults, "")


def _free_mapping(path: str) -> bool:
    """Mappings of the user's own keys (env.vars, overrides): one key as a whole."""
    return path.endswith((".vars", ".overrides", "sweep.grid"))
