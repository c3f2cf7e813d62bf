"""The job spec's field types: what each kind of value may hold, normalised as it loads
(durations in seconds, memory in megabytes, commands as argument lists)."""

from __future__ import annotations

import re
import shlex
from typing import Annotated

from pydantic import (
    AfterValidator,
    BeforeValidator,
    Field,
    WithJsonSchema,
)

from jobkit.backends.registry import backend_names, builtin_names, is_known
from jobkit.core.units import parse_duration, parse_memory_mb

LAUNCHERS = ("torchrun", "srun", "mpirun", "spawn", "distributed-launch", "none")

_FORBIDDEN_CHARS = {"\n": "newline", "\r": "carriage return", "\x00": "NUL"}


def _no_control_chars(value: str) -> str:
    for char, label in _FORBIDDEN_CHARS.items():
        if char in value:
            raise ValueError(f"must not contain a {label} (it would end the script line)")
    return value


SafeStr = Annotated[str, AfterValidator(_no_control_chars)]
"""Any string that reaches a script: newline, CR and NUL are refused."""

NonEmptySafeStr = Annotated[SafeStr, Field(min_length=1)]

_NAME_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._+-]{0,127}$")


def _job_name(value: str) -> str:
    if not _NAME_RE.match(value):
        raise ValueError(
            "must start with a letter or digit and hold only letters, digits and . _ + -"
            f" (at most 128 characters; got {value!r})"
        )
    return value


JobName = Annotated[str, AfterValidator(_job_name)]


def _backend_name(value: str) -> str:
    if not is_known(value):
        raise ValueError(f"must be one of: {', '.join(backend_names())} (got {value!r})")
    return value


BackendName = Annotated[
    str, AfterValidator(_backend_name), WithJsonSchema({"enum": list(builtin_names())})
]
"""A backend in backends/registry.py (built in, or a plug-in's entry point)."""

_ENV_NAME_RE = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")


def _env_name(value: str) -> str:
    if not _ENV_NAME_RE.match(value):
        raise ValueError(f"is not a valid environment variable name: {value!r}")
    return value


EnvName = Annotated[str, AfterValidator(_env_name)]


def _duration(value: object) -> int:
    return parse_duration(value)


def _memory(value: object) -> int:
    return parse_memory_mb(value)


class SourceText:
    """Marker on a type: this key reads an unquoted YAML scalar as written (`24:00:00`), not
    as YAML 1.1's number (jobkit/spec/scalars.py)."""


DurationSeconds = Annotated[int, BeforeValidator(_duration), SourceText()]
MemoryMB = Annotated[int, BeforeValidator(_memory), SourceText()]


def _as_list(value: object) -> object:
    """Accept a single string where a list of strings is expected."""
    return [value] if isinstance(value, str) else value


def _as_argv(value: object) -> object:
    """A command given as one string is split like a shell would (no expansion)."""
    if isinstance(value, str):
        _no_control_chars(value)
        try:
            return shlex.split(value)
        except ValueError as err:
            raise ValueError(f"cannot be split into arguments: {err}") from None
    return value


StrList = Annotated[list[SafeStr], BeforeValidator(_as_list)]


def _shell_words(value: str) -> str:
    try:
        shlex.split(value)
    except ValueError as err:
        raise ValueError(f"cannot be split into words like a shell: {err}") from None
    return value


ShellWordsList = Annotated[
    list[Annotated[SafeStr, AfterValidator(_shell_words)]], BeforeValidator(_as_list)
]
"""Entries each split like a shell into words (an unclosed quote is refused here)."""
Argv = Annotated[list[SafeStr], BeforeValidator(_as_argv), Field(min_length=1)]
ScalarValue = SafeStr | int | float | bool

_SIGNAL_RE = re.compile(r"^(?:B:)?(?:SIG)?(?P<sig>[A-Z0-9]+)@(?P<secs>\d+)$")
_ARRAY_RE = re.compile(r"^\d+(?:-\d+)?(?::\d+)?(?:,\d+(?:-\d+)?(?::\d+)?)*(?:%\d+)?$")
_HOST_RE = re.compile(r"^[A-Za-z0-9_]([A-Za-z0-9._:-]*[A-Za-z0-9_])?$")


def _signal(value: str) -> str:
    match = _SIGNAL_RE.match(value.strip())
    if not match:
        raise ValueError(f"must look like USR2@120 (signal@seconds before the end; got {value!r})")
    return f"{match['sig']}@{match['secs']}"


def _array(value: object) -> str:
    text = str(value).strip()
    if not _ARRAY_RE.match(text):
        raise ValueError(f"must look like 0-9, 1,3,5 or 0-99%10 (got {value!r})")
    return text


def _host(value: str) -> str:
    if not _HOST_RE.match(value):
        raise ValueError(f"is not a host name: {value!r}")
    return value


HostName = Annotated[str, AfterValidator(_host)]


def _python_choice(value: str) -> str:
    if value in ("auto", "system") or value.startswith(("/", "~/")):
        return value
    raise ValueError(
        f"must be auto, system or an absolute path to a python (got {value!r}; a path relative"
        " to where you submit would not mean the same on the compute nodes)"
    )


PythonChoice = Annotated[NonEmptySafeStr, AfterValidator(_python_choice)]
