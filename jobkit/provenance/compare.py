"""`jobkit diff A B`: what differs between two jobs, section by section, in the order that
explains a changed result best: spec, code (commit and files), packages (and Python, torch,
CUDA, NCCL, GPUs, conda's packages, loaded modules), the container image, hosts, scheduler
settings. Pure, over two Provenance records (the code is
compared through the snapshots on disk, else through the recorded patches)."""

from __future__ import annotations

import difflib
import filecmp
import os
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from jobkit.core.display import printable
from jobkit.provenance.read import Provenance

SECTIONS = ("spec", "code", "packages", "container", "hosts", "scheduler")
LINES_SHOWN = 12
"""Changed lines shown per file (the patch files hold all of them)."""
SCHEDULER_SETTINGS = (
    # Slurm (scontrol show job)
    "Partition", "QOS", "Account", "TimeLimit", "NumNodes", "NumCPUs", "NumTasks",
    "CPUs/Task", "MinMemoryNode", "MinMemoryCPU", "Features", "Requeue", "ReqNodeList",
    "ExcNodeList", "Gres", "TresPerNode", "Dependency", "Reservation", "Nice",
    # PBS (qstat -f)
    "queue", "Resource_List.select", "Resource_List.nodes", "Resource_List.walltime",
    "Resource_List.mem", "Resource_List.ncpus", "Account_Name",
    # Grid Engine (qstat -j)
    "hard resource_list", "parallel environment", "hard_queue_list", "project",
)  # fmt: skip
"""The scheduler's own settings compared (its record's times, ids and states always differ)."""


@dataclass
class Difference:
    """One section's differences: `items` name what differs, `lines` show it."""

    section: str
    items: list[str] = field(default_factory=list)
    lines: list[str] = field(default_factory=list)
    unknown: str | None = None
    """Why this section could not be compared (not recorded for one of the jobs)."""


def compare(a: Provenance, b: Provenance) -> list[Difference]:
    """Every section, in SECTIONS order."""
    return [
        spec_difference(a.spec, b.spec),
        code_difference(a, b),
        packages_difference(a.job, b.job),
        container_difference(a.job, b.job),
        hosts_difference(a.job, b.job),
        scheduler_difference(a.job, b.job),
    ]


def flatten(data: Any, prefix: str = "") -> dict[str, Any]:
    """Dotted key -> leaf value (an empty mapping has no leaves)."""
    if isinstance(data, dict):
        out: dict[str, Any] = {}
        for key, value in data.items():
            out.update(flatten(value, f"{prefix}.{key}" if prefix else str(key)))
        return out
    return {prefix: data}


def spec_difference(a: dict[str, Any], b: dict[str, Any]) -> Difference:
    """The resolved specs' keys whose values differ."""
    flat_a, flat_b = flatten(a), flatten(b)
    found = Difference("spec")
    for key in sorted(flat_a.keys() | flat_b.keys()):
        left, right = flat_a.get(key), flat_b.get(key)
        if left != right:
            found.items.append(key)
            found.lines.append(f"{key}: {_show(left)} -> {_show(right)}")
    return found


def _show(value: Any) -> str:
    return "(unset)" if value is None else repr(value) if isinstance(value, str) else str(value)


def code_difference(a: Provenance, b: Provenance) -> Difference:
    """The commit, and each file whose content differs between the two snapshots."""
    found = Difference("code")
    code_a, code_b = a.code, b.code
    if not code_a.get("git") or not code_b.get("git"):
        found.unknown = "not both from a git work tree: their code cannot be compared"
        return found
    if code_a.get("commit") != code_b.get("commit"):
        found.items.append("commit")
        found.lines.append(f"commit: {code_a.get('commit')} -> {code_b.get('commit')}")
    if code_a.get("tree") == code_b.get("tree"):
        return found
    root_a, root_b = a.snapshot_dir, b.snapshot_dir
    if root_a and root_b and root_a.is_dir() and root_b.is_dir():
        for name in differing_files(root_a, root_b):
            found.items.append(name)
            found.lines.append(f"{name}:")
            found.lines.extend("  " + line for line in changed_lines(root_a / name, root_b / name))
        return found
    changed = sorted(set(code_a.get("changed") or []) ^ set(code_b.get("changed") or []))
    found.items.extend(changed or ["uncommitted changes"])
    found.lines.append(
        "the snapshots are gone: the uncommitted changes differ (compare the patches:"
        f" {a.patch_path or '-'} {b.patch_path or '-'})"
    )
    return found


def differing_files(root_a: Path, root_b: Path) -> list[str]:
    """Paths (relative) present in only one tree or with other contents."""
    files_a, files_b = _files(root_a), _files(root_b)
    differ = files_a ^ files_b
    for name in files_a & files_b:
        if not filecmp.cmp(root_a / name, root_b / name, shallow=False):
            differ.add(name)
    return sorted(differ)


def _files(root: Path) -> set[str]:
    found: set[str] = set()
    for folder, _, names in os.walk(root):
        base = Path(folder).relative_to(root)
        found.update(str(base / name) if str(base) != "." else name for name in names)
    return found


def changed_lines(path_a: Path, path_b: Path) -> list[str]:
    """The changed lines of a text file (- old, + new), at most LINES_SHOWN."""
    old, new = _text_lines(path_a), _text_lines(path_b)
    if old is None or new is None:
        return ["(binary or unreadable: contents differ)"]
    lines = [
        line
        for line in difflib.unified_diff(old, new, lineterm="", n=0)
        if line.startswith(("-", "+")) and not line.startswith(("---", "+++"))
    ]
    if len(lines) > LINES_SHOWN:
        lines = [*lines[:LINES_SHOWN], f"... {len(lines) - LINES_SHOWN} more changed lines"]
    return lines


def _text_lines(path: Path) -> list[str] | None:
    if not path.exists():
        return []
    try:
        return path.read_bytes().decode("utf-8").splitlines()
    except (OSError, UnicodeDecodeError):
        return None


def packages_difference(a: dict[str, Any] | None, b: dict[str, Any] | None) -> Difference:
    """Packages added, removed or at another version; then Python, torch, CUDA, NCCL, GPUs."""
    found = Difference("packages")
    if a is None or b is None:
        found.unknown = _not_recorded(a, b)
        return found
    pkgs_a, pkgs_b = a.get("packages") or {}, b.get("packages") or {}
    for name in sorted(pkgs_a.keys() | pkgs_b.keys()):
        old, new = pkgs_a.get(name), pkgs_b.get(name)
        if old != new:
            found.items.append(name)
            found.lines.append(f"{name}: {old or '(absent)'} -> {new or '(absent)'}")
    for what in ("python", "cuda", "nccl", "gpus"):
        old, new = _software(a, what), _software(b, what)
        if old != new:
            found.items.append(what)
            found.lines.append(f"{what}: {old or '-'} -> {new or '-'}")
    _environment_difference(a, b, found)
    return found


def _environment_difference(a: dict[str, Any], b: dict[str, Any], found: Difference) -> None:
    """conda's environment and packages (conda-meta), the loaded modules."""
    conda_a, conda_b = a.get("conda") or {}, b.get("conda") or {}
    if conda_a.get("prefix") != conda_b.get("prefix"):
        found.items.append("conda")
        found.lines.append(
            f"conda: {conda_a.get('prefix') or '(none)'} -> {conda_b.get('prefix') or '(none)'}"
        )
    pkgs_a, pkgs_b = conda_a.get("packages") or {}, conda_b.get("packages") or {}
    for name in sorted(pkgs_a.keys() | pkgs_b.keys()):
        old, new = pkgs_a.get(name), pkgs_b.get(name)
        if old != new:
            found.items.append(f"conda:{name}")
            found.lines.append(f"conda {name}: {old or '(absent)'} -> {new or '(absent)'}")
    loaded_a = (a.get("modules") or {}).get("loaded") or []
    loaded_b = (b.get("modules") or {}).get("loaded") or []
    if loaded_a != loaded_b:
        found.items.append("modules")
        found.lines.append(
            f"modules: {' '.join(loaded_a) or '(none)'} -> {' '.join(loaded_b) or '(none)'}"
        )


def container_difference(a: dict[str, Any] | None, b: dict[str, Any] | None) -> Difference:
    """The image (runtime, name or path) and its digest."""
    found = Difference("container")
    if a is None or b is None:
        found.unknown = _not_recorded(a, b)
        return found
    image_a, image_b = a.get("container") or {}, b.get("container") or {}
    for key in ("runtime", "image", "digest"):
        old, new = image_a.get(key), image_b.get(key)
        if old != new:
            found.items.append(key)
            found.lines.append(f"{key}: {old or '(none)'} -> {new or '(none)'}")
    return found


def _software(record: dict[str, Any], what: str) -> str | None:
    """The Python version, CUDA or NCCL version, or GPU names a job's record holds."""
    if what == "python":
        return (record.get("python") or {}).get("version")
    if what == "gpus":
        return ", ".join(record.get("gpus") or []) or None
    value = record.get(what)
    return str(value) if value else None


def hosts_difference(a: dict[str, Any] | None, b: dict[str, Any] | None) -> Difference:
    """The allocation's hosts, in order."""
    found = Difference("hosts")
    if a is None or b is None:
        found.unknown = _not_recorded(a, b)
        return found
    if list(a.get("hosts") or []) != list(b.get("hosts") or []):
        found.items.append("hosts")
        found.lines.append(f"hosts: {' '.join(a['hosts'] or [])} -> {' '.join(b['hosts'] or [])}")
    return found


def scheduler_difference(a: dict[str, Any] | None, b: dict[str, Any] | None) -> Difference:
    """The scheduler's settings (SCHEDULER_SETTINGS) that differ in its own records."""
    found = Difference("scheduler")
    if a is None or b is None:
        found.unknown = _not_recorded(a, b)
        return found
    set_a, set_b = settings(a.get("scheduler_record")), settings(b.get("scheduler_record"))
    for key in SCHEDULER_SETTINGS:
        if set_a.get(key) != set_b.get(key):
            found.items.append(key)
            found.lines.append(f"{key}: {set_a.get(key) or '-'} -> {set_b.get(key) or '-'}")
    return found


_PAIR = re.compile(r"(?:^|\s)([A-Za-z_/.]+)=(\S*)")
_LINE = re.compile(r"^\s*([A-Za-z_ .]+?)\s*[=:]\s+(.*)$")


def settings(record: Any) -> dict[str, str]:
    """Key -> value from a scheduler's record: `Key=Value` words (scontrol), `key = value`
    (qstat -f) or `key:   value` lines (qstat -j)."""
    if not isinstance(record, dict) or not isinstance(record.get("output"), str):
        return {}
    text: str = record["output"]
    found: dict[str, str] = {}
    for key, value in _PAIR.findall(text):
        found.setdefault(key, value)
    for line in text.splitlines():
        match = _LINE.match(line)
        if match and "=" not in match.group(1):
            found.setdefault(match.group(1).strip(), match.group(2).strip())
    return found


def _not_recorded(a: dict[str, Any] | None, b: dict[str, Any] | None) -> str:
    which = "either job" if a is None and b is None else "the first" if a is None else "the second"
    return f"not recorded for {which} (not started, or its software record was not taken)"


def as_text(a: Provenance, b: Provenance, found: list[Difference]) -> list[str]:
    """`jobkit diff`'s lines: each section that differs, then those that do not."""
    label_a, label_b = a.record.jobkit_id, b.record.jobkit_id
    lines = [f"jobkit diff {label_a} {label_b}"]
    same: list[str] = []
    for difference in found:
        if difference.unknown:
            lines.append(f"{difference.section}: ? {difference.unknown}")
        elif difference.lines:
            lines.append(f"{difference.section}:")
            lines.extend("  " + line for line in difference.lines)
        else:
            same.append(difference.section)
    if same:
        lines.append(f"same: {', '.join(same)}")
    return [printable(line) for line in lines]  # file names, versions: user text


def as_json(found: list[Difference]) -> dict[str, Any]:
    """`jobkit diff --json`: section -> {differs: [...], lines: [...], unknown}."""
    return {d.section: {"differs": d.items, "lines": d.lines, "unknown": d.unknown} for d in found}
