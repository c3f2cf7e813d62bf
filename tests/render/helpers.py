"""Shared by the render tests: specs, golden files, shell checks, schema walking."""

from __future__ import annotations

import difflib
import os
import shlex
import shutil
import subprocess
import types
from collections.abc import Iterator
from pathlib import Path
from typing import Annotated, Any, Literal, Union, get_args, get_origin

import pytest
import yaml
from pydantic import BaseModel

from jobkit.backends.registry import backend_class, builtin_names
from jobkit.render.engine import render
from jobkit.render.interpreter import Interpreter
from jobkit.spec.schema import JobSpec

HERE = Path(__file__).resolve().parent
REPO = HERE.parents[1]
SPECS_DIR = HERE / "specs"
GOLDEN_DIR = HERE / "golden"
EXAMPLES_DIR = REPO / "examples"
SCRIPT_BACKENDS = tuple(name for name in builtin_names() if backend_class(name).template)
"""Backends that render a jobkit template (submitit writes its own file)."""
"""Backends that render a script (submitit renders none)."""


def spec_from(data: dict[str, Any]) -> JobSpec:
    """A validated spec from plain data (no file, no profile)."""
    return JobSpec.model_validate(data)


def spec_file(path: Path, backend: str | None = None) -> JobSpec:
    """A spec from a YAML file, optionally for another backend."""
    data = yaml.safe_load(path.read_text())
    if backend is not None:
        data["backend"] = backend
    return spec_from(data)


def check_golden(name: str, script: str) -> None:
    """Compare with tests/render/golden/NAME; JOBKIT_UPDATE_GOLDEN=1 rewrites it."""
    golden = GOLDEN_DIR / name
    if os.environ.get("JOBKIT_UPDATE_GOLDEN") == "1":
        golden.parent.mkdir(parents=True, exist_ok=True)
        golden.write_text(script)
        return
    if not golden.exists():
        pytest.fail(
            f"{golden} is missing: run JOBKIT_UPDATE_GOLDEN=1 .venv/bin/pytest tests/render"
        )
    expected = golden.read_text()
    if script != expected:
        diff = "".join(
            difflib.unified_diff(
                expected.splitlines(keepends=True),
                script.splitlines(keepends=True),
                fromfile=f"golden/{name}",
                tofile="rendered",
            )
        )
        pytest.fail(
            f"rendered script differs from golden/{name} (JOBKIT_UPDATE_GOLDEN=1 to accept):\n"
            + diff
        )


def bash_syntax_ok(script: str) -> None:
    """`bash -n` accepts the script."""
    done = subprocess.run(["bash", "-n"], input=script, text=True, capture_output=True, check=False)
    assert done.returncode == 0, done.stderr


def shellcheck(script: str) -> None:
    """`shellcheck -S warning` finds nothing; skipped without shellcheck unless CI=true."""
    exe = shutil.which("shellcheck")
    if exe is None:
        if os.environ.get("CI") == "true":
            pytest.fail("shellcheck is not installed (apt-get install shellcheck)")
        pytest.skip("shellcheck is not installed")
    done = subprocess.run(
        [exe, "-S", "warning", "-s", "bash", "-"],
        input=script,
        text=True,
        capture_output=True,
        check=False,
    )
    assert done.returncode == 0, done.stdout + done.stderr


def directive_lines(script: str, prefix: str) -> list[list[str]]:
    """The words of each `#SBATCH` / `#PBS` line, read with POSIX shell quoting (shlex)."""
    lines = []
    for line in script.split("\n"):  # sbatch and qsub break lines at \n only
        if line.startswith(prefix + " "):
            lines.append(shlex.split(line[len(prefix) :]))
    return lines


GOLDEN_PYTHON = Interpreter(
    "/opt/venvs/jobkit/bin/python",
    "env.python auto: the virtualenv jobkit was run from ($VIRTUAL_ENV)",
)
"""env.python auto's choice in golden scripts: a fixed path, not this machine's."""


def render_file(path: Path, backend: str | None = None) -> str:
    """Render a YAML spec file (env.python auto as GOLDEN_PYTHON)."""
    return render(spec_file(path, backend), interpreter=GOLDEN_PYTHON)


# ---- Walking the schema: every field a string can reach ---------------------------------------


def _strip(annotation: Any) -> Any:
    while get_origin(annotation) is Annotated:
        annotation = get_args(annotation)[0]
    return annotation


def _members(annotation: Any) -> list[Any]:
    annotation = _strip(annotation)
    if get_origin(annotation) in (Union, types.UnionType):
        return [_strip(arg) for arg in get_args(annotation)]
    return [annotation]


def _takes_str(annotation: Any) -> bool:
    return any(member is str for member in _members(annotation))


def string_fields(
    model: type[BaseModel] = JobSpec, prefix: tuple[str, ...] = ()
) -> Iterator[tuple[tuple[str, ...], str]]:
    """(key path, kind) of every place a free string can go.

    kind is 'scalar' (the field is a string), 'list' (a list of strings), 'key' or 'value'
    (a mapping's keys or values). Literal fields (a fixed set of words) are not free strings.
    """
    for name, field in model.model_fields.items():
        path = (*prefix, name)
        members = _members(field.annotation)
        sections = [m for m in members if isinstance(m, type) and issubclass(m, BaseModel)]
        if sections:
            yield from string_fields(sections[0], path)
            continue
        for member in members:
            origin = get_origin(member)
            if member is str:
                yield path, "scalar"
            elif origin is list and _takes_str(get_args(member)[0]):
                yield path, "list"
            elif origin is dict:
                key_type, value_type = get_args(member)
                if _takes_str(key_type):
                    yield path, "key"
                if _takes_str(value_type):
                    yield path, "value"
            elif origin is Literal:
                continue
