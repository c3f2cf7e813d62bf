"""The job's environment managers, as the job sees them at start (docs/provenance.md): the
conda environment it runs in (CONDA_PREFIX: its name, the packages its `conda-meta/*.json`
files list, and `conda env export` when conda can be run) and the environment modules it
has loaded (Lmod or Environment Modules: `module list` run through LMOD_CMD / MODULES_CMD,
its output kept as printed and parsed into names; LOADEDMODULES when it cannot be run).
Reads only these managers' own variables. Standard library only: it runs under the job's
Python (provenance/jobside.py).
"""

from __future__ import annotations

import json
import os
import re
import shutil
from pathlib import Path
from typing import Any

from jobkit.provenance.query import run_query

QUERY_TIMEOUT_S = 60.0
"""`conda env export` solves nothing but can take seconds on a big environment."""
OUTPUT_KEPT = 20_000
"""Characters of a command's output kept in the record."""


def _run(argv: list[str], *, stderr: bool = False) -> tuple[str | None, str]:
    """(the command's stdout, or its stderr with `stderr`; None when it failed, why)."""
    done = run_query(argv, QUERY_TIMEOUT_S)
    if isinstance(done, Exception):
        return None, f"{argv[0]}: {type(done).__name__}: {done}"
    if done.returncode != 0:
        last = (done.stderr.strip().splitlines() or ["no message"])[-1]
        return None, f"{' '.join(argv[:3])} exited {done.returncode}: {last[:200]}"
    return (done.stderr if stderr else done.stdout)[:OUTPUT_KEPT], ""


def conda_env() -> dict[str, Any] | None:
    """The conda environment of the job (None: CONDA_PREFIX unset, not in one)."""
    prefix = os.environ.get("CONDA_PREFIX")
    if not prefix:
        return None
    found: dict[str, Any] = {
        "prefix": prefix,
        "name": os.environ.get("CONDA_DEFAULT_ENV"),
        "packages": conda_meta_packages(Path(prefix)),
        "export": None,
        "export_note": None,
    }
    conda = os.environ.get("CONDA_EXE") or shutil.which("conda")
    if not conda or not os.access(conda, os.X_OK):
        found["export_note"] = "conda not found (CONDA_EXE unset, none on PATH): not exported"
        return found
    found["export"], why = _run([conda, "env", "export", "--prefix", prefix])
    found["export_note"] = why or None
    return found


def conda_meta_packages(prefix: Path) -> dict[str, str]:
    """name -> "version build (channel)" from the environment's conda-meta/*.json, the
    record conda itself keeps of every package it installed (no conda run needed)."""
    found: dict[str, str] = {}
    try:
        files = sorted((prefix / "conda-meta").glob("*.json"))
    except OSError:
        return found
    for path in files:
        try:
            data = json.loads(path.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            continue
        if not isinstance(data, dict) or not data.get("name"):
            continue
        channel = str(data.get("channel") or "").rstrip("/").rsplit("/", 2)
        where = channel[-2] if len(channel) >= 2 else channel[-1]  # .../conda-forge/linux-64
        text = f"{data.get('version', '')} {data.get('build', '')}".strip()
        found[str(data["name"])] = f"{text} ({where})" if where else text
    return dict(sorted(found.items()))


def modules() -> dict[str, Any] | None:
    """The loaded environment modules (None: neither Lmod nor Environment Modules here)."""
    lmod = os.environ.get("LMOD_CMD")
    tcl = os.environ.get("MODULES_CMD")
    loaded = os.environ.get("LOADEDMODULES")
    if not (lmod or tcl or os.environ.get("MODULESHOME") or loaded):
        return None
    system = "lmod" if lmod else "environment-modules"
    output, why = None, "module's command not found (LMOD_CMD / MODULES_CMD unset)"
    command = lmod or tcl
    if command:
        # Both print the list on stderr (stdout is shell code for `eval`).
        output, why = _run([command, "bash", "list"], stderr=True)
    names = parse_module_list(output) if output is not None else None
    if names is None:
        names = [name for name in (loaded or "").split(":") if name]
    return {"system": system, "loaded": names, "output": output, "note": why or None}


_ANSI = re.compile(r"\x1b\[[0-9;]*[A-Za-z]")
_ITEM = re.compile(r"(?:^|\s)\d+\)\s+(\S+)")
_MARK = re.compile(r"(?:\([^)]*\)|<[^>]*>)+$")
_FOOTERS = ("where:", "key:")


def parse_module_list(text: str) -> list[str] | None:
    """The module names in `module list`'s output (Lmod: `  1) gcc/12.2.0   2) ...`,
    Environment Modules 3-5: the same numbered items), markers such as `(D)` or `<L>`
    dropped; [] for "No modules loaded"; None when the text is neither."""
    text = _ANSI.sub("", text)
    if re.search(r"no (modules|modulefiles) (are )?loaded", text, re.IGNORECASE):
        return []
    names: list[str] = []
    listing = seen = False
    for line in text.splitlines():
        stripped = line.strip().lower()
        if stripped.startswith("currently loaded"):
            listing = seen = True
            continue
        if stripped.startswith(_FOOTERS):
            listing = False
        if listing:
            names += [_MARK.sub("", item) for item in _ITEM.findall(line)]
    return names if seen else None
