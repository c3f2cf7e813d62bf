"""The quoting filters every spec value reaches a script through: `q` (one shell word),
`qpath`, `qjoin`, `dq`/`dqwords` (#SBATCH / #PBS directive values), and `indent`."""

from __future__ import annotations

import re
import shlex
from collections.abc import Iterable

import jinja2

from jobkit.core.errors import SpecError

_DIRECTIVE_SAFE = re.compile(r"^[A-Za-z0-9@%+=:,./_-]+$")


def shell_word(value: object) -> str:
    """A scalar as text: booleans as YAML writes them (true/false), numbers as Python does."""
    if isinstance(value, jinja2.Undefined):
        str(value)  # StrictUndefined raises its own error here
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (str, int, float)):
        return str(value)
    raise TypeError(
        f"cannot quote {type(value).__name__} value {value!r} (expected text or a number)"
    )


def quote(value: object) -> str:
    """The `q` filter: one shell word, quoted like shlex.quote."""
    return shlex.quote(shell_word(value))


def quote_path(value: object) -> str:
    """The `qpath` filter: like `q`, but a leading `~/` means $HOME (of the host it runs on)."""
    text = shell_word(value)
    if text == "~":
        return '"$HOME"'
    if text.startswith("~/"):
        rest = text[2:]
        return '"$HOME"/' + shlex.quote(rest) if rest else '"$HOME"/'
    return shlex.quote(text)


def quote_join(values: Iterable[object]) -> str:
    """The `qjoin` filter: each item quoted, joined by spaces."""
    if isinstance(values, (str, bytes)):
        raise TypeError("qjoin needs a list of words, not a single string")
    return " ".join(quote(value) for value in values)


def directive_quote(value: object) -> str:
    """The `dq` filter: a value inside an #SBATCH / #PBS line.

    sbatch (and Slurm's PBS wrappers) read these lines with their own rules: a backslash
    escapes the next character even inside quotes, and an unquoted `#` starts a comment.
    Double quotes with `\\` and `"` escaped read back the same there and in POSIX shlex.
    """
    text = shell_word(value)
    if _DIRECTIVE_SAFE.match(text):
        return text
    return '"' + text.replace("\\", "\\\\").replace('"', '\\"') + '"'


def directive_words(line: str) -> str:
    """The `dqwords` filter: a scheduler.extra entry split like a shell and each word quoted."""
    try:
        words = shlex.split(shell_word(line))
    except ValueError as err:
        raise SpecError(f"cannot split {line!r} into words: {err}", key="scheduler.extra") from None
    return " ".join(directive_quote(word) for word in words)


def indent_lines(text: str, width: int | str = 4, first: bool = False, blank: bool = False) -> str:
    """The `indent` filter, breaking lines at "\n" only.

    Jinja's own uses str.splitlines(), which also breaks at U+2028, NEL, vertical tab, form
    feed...: a quoted value holding one would come out changed (a newline and the
    indentation in its middle).
    """
    indention = width if isinstance(width, str) else " " * width
    lines = (text + "\n").split("\n")[:-1]
    if blank:
        result = ("\n" + indention).join(lines)
    else:
        result = lines.pop(0) if lines else ""
        if lines:
            result += "\n" + "\n".join(indention + line if line else line for line in lines)
    return indention + result if first else result
