"""Every user-given field of the job spec, found by walking the schema, and how to put a
value there: the injection tests try each hostile string in each of these slots.

A slot is one place a string can go: a scalar field, one item of a list field, one value
or one key of a mapping field. `env.setup` is left out: it is the one field the schema
documents as shell code, rendered as written (docs/spec.md).
"""

from __future__ import annotations

import copy
import shlex
from dataclasses import dataclass
from typing import Any, Literal, get_origin

from jobkit.spec.walk import iter_fields, section_model, union_members

CODE_FIELDS = {("env", "setup")}
"""Fields that are shell code by contract (not quoted, so not tried)."""
TRAIN_FIELDS = {("run", "train", "config"), ("run", "train", "overrides"), ("run", "python")}
"""Fields that only matter with run.train (the others are tried with run.command)."""
BACKENDS = ("slurm", "pbs-pro", "pbs-torque", "sge", "ssh", "local", "submitit")
"""Backends the static injection test renders for (PBS in both flavours)."""

SlotKind = Literal["scalar", "item", "value", "key"]


SHELL_WORDS_FIELDS = {("launch", "extra_args"), ("container", "options")}
"""Fields whose entries are split like a shell (spec/values.py ShellWordsList)."""


@dataclass(frozen=True)
class Slot:
    """One place a string can go in a spec."""

    path: tuple[str, ...]
    kind: SlotKind

    @property
    def key(self) -> str:
        """`env.vars[value]`, `resources.partition`: how the slot is named in counts."""
        dotted = ".".join(self.path)
        return dotted if self.kind == "scalar" else f"{dotted}[{self.kind}]"

    @property
    def train(self) -> bool:
        """True when the slot only exists with run.train."""
        return self.path in TRAIN_FIELDS

    @property
    def text_typed(self) -> bool:
        """True when the field's own type is text (else a string must be refused)."""
        return self.kind != "scalar" or _accepts_str(self.path)

    def put(self, spec: dict[str, Any], value: str, *, other: str = "x") -> None:
        """Place `value` in this slot of `spec` (in place); `other` fills the paired half
        of a mapping entry."""
        parent = spec
        for part in self.path[:-1]:
            parent = parent.setdefault(part, {})
        last = self.path[-1]
        if self.path == ("env", "python") and self.kind == "scalar":
            value = "/" + value  # env.python takes auto, system or an absolute path
        if self.path == ("container", "image"):
            value = "/" + value  # absolute: a relative image is the submit folder's (one word)
        if self.path == ("notify", "webhook"):
            value = "https://example.org/" + value  # a URL with its scheme (or $NAME)
        if self.path in SHELL_WORDS_FIELDS:
            value = shlex.quote(value)  # each entry is split like a shell: one word, quoted
        if self.kind == "scalar":
            parent[last] = value
        elif self.kind == "item":
            items = parent.get(last)
            if self.path == ("run", "command"):
                items = list(items or ["jkprog"])
            else:
                items = list(items or [])
            items.append(value)
            parent[last] = items
        elif self.kind == "value":
            parent.setdefault(last, {})[f"JKV{len(parent.get(last, {}))}"] = value
        else:
            parent.setdefault(last, {})[value] = other


def _annotation(path: tuple[str, ...]) -> Any:
    for found, field in iter_fields():
        if found == path:
            return field.annotation
    raise KeyError(path)


def _accepts_str(path: tuple[str, ...]) -> bool:
    return any(member is str for member in union_members(_annotation(path)))


def slots() -> list[Slot]:
    """Every slot of every leaf field of the schema, in schema order."""
    found: list[Slot] = []
    for path, field in iter_fields():
        if section_model(field.annotation) is not None or path in CODE_FIELDS:
            continue
        origins = {get_origin(member) for member in union_members(field.annotation)}
        if list in origins:
            found.append(Slot(path, "item"))
        elif dict in origins:
            found.append(Slot(path, "value"))
            found.append(Slot(path, "key"))
        else:
            found.append(Slot(path, "scalar"))
    return found


def base_spec(backend: str, *, train: bool = False) -> dict[str, Any]:
    """A small valid spec for `backend` (pbs-pro / pbs-torque pick the PBS flavour)."""
    spec: dict[str, Any] = {"name": "inj", "backend": backend.split("-")[0]}
    if backend.startswith("pbs"):
        spec["pbs"] = {"flavor": backend.split("-")[1]}
    spec["ssh"] = {"hosts": ["n1"]}  # used by the ssh backend only
    spec["run"] = {"train": {"config": "tiny-lm"}} if train else {"command": ["jkprog", "x"]}
    return spec


def needs(slot: Slot, spec: dict[str, Any]) -> None:
    """Add what a slot's field needs to be checked at all (cross-field rules)."""
    if slot.path == ("resources", "gpu_type"):
        spec.setdefault("resources", {})["gpus_per_node"] = 1
    if slot.path == ("scheduler", "mail_type"):
        spec.setdefault("scheduler", {}).setdefault("mail_user", "jk@example.org")
    if slot.path == ("ssh", "hosts"):
        spec["ssh"]["hosts"] = []  # the hostile host alone
    if slot.path == ("run", "command"):
        spec["run"]["command"] = ["jkprog"]
    if slot.path[0] == "container":  # a container section needs its image and runtime
        container = spec.setdefault("container", {})
        container.setdefault("image", "/img/jk.sif")  # container.image's own slot overwrites it
        container.setdefault("runtime", "apptainer")


def spec_with(backend: str, slot: Slot, value: str) -> dict[str, Any]:
    """The base spec of `backend` with `value` in `slot` (and what that field needs)."""
    spec = base_spec(backend, train=slot.train)
    needs(slot, spec)
    slot.put(spec, value)
    return spec


def combined(backend: str, chosen: list[Slot], values: dict[Slot, str]) -> dict[str, Any]:
    """One spec with values[slot] in every chosen slot (all of one run variant)."""
    train = any(slot.train for slot in chosen)
    spec = base_spec(backend, train=train)
    for slot in chosen:
        needs(slot, spec)
    for slot in chosen:
        slot.put(spec, values[slot])
    return copy.deepcopy(spec)
