"""Text from users and schedulers made safe to print on a terminal, and short enough.

A sweep value, a job name's neighbour, a scheduler's reason or error can hold control
characters (an escape sequence, a carriage return) or bidirectional overrides (U+202E turns
`exe.txt` into `txt.exe` on screen): printed raw they rewrite what the user sees. They are
shown escaped instead (`\\u202e`), visibly. Tables cut long values with an ellipsis (the
full text is in `--json` and the detail view); an error is one line.
"""

from __future__ import annotations

import unicodedata

ELLIPSIS = "\N{HORIZONTAL ELLIPSIS}"
TABLE_CELL_MAX = 60
"""The longest cell of a status table (a longer value ends in an ellipsis)."""
LINE_MAX = 300
"""The longest error line (its first meaningful line, cut)."""
_UNSAFE_CATEGORIES = frozenset({"Cc", "Cf", "Zl", "Zp", "Cs", "Co", "Cn"})
"""Controls, format characters (bidi overrides, zero-width), line and paragraph separators,
surrogates (undecodable bytes), private-use and unassigned code points."""


def _escape(char: str) -> str:
    code = ord(char)
    if code < 0x100:
        return f"\\x{code:02x}"
    return f"\\u{code:04x}" if code < 0x10000 else f"\\U{code:08x}"


def printable(text: str) -> str:
    """`text` with every character that could change the terminal's display escaped.

    Newlines are escaped too: the result is one line. A tab stays (harmless on a terminal;
    a table cell turns it into a space), and so does a backslash.
    """
    if text.isprintable() and text.isascii():
        return text
    return "".join(_escape(c) if _unsafe(c) else c for c in text)


def _unsafe(char: str) -> bool:
    return char != "\t" and unicodedata.category(char) in _UNSAFE_CATEGORIES


def shorten(text: str, limit: int) -> str:
    """At most `limit` characters: a longer text is cut and ends in an ellipsis."""
    return text if len(text) <= limit else text[: max(limit - 1, 0)] + ELLIPSIS


def table_cell(text: str) -> str:
    """A value as a status table shows it: escaped, at most TABLE_CELL_MAX characters."""
    if len(text) <= TABLE_CELL_MAX and text.isascii() and text.isprintable():
        return text  # nearly every cell: nothing to escape or cut (a status of 10,000 rows)
    return shorten(printable(text).replace("\t", " "), TABLE_CELL_MAX)


def printable_lines(text: str) -> str:
    """Each line of a multi-line view escaped (its line breaks kept)."""
    return "\n".join(printable(line) for line in text.split("\n"))


def first_line(text: str) -> tuple[str, int]:
    """A command's output as one line: its meaningful lines (before a `Usage:` block)
    joined with ` / ` while they fit in LINE_MAX (at least the first, cut), escaped; and how
    many other non-blank lines there are."""
    lines = [line.strip() for line in text.splitlines() if line.strip()]
    if not lines:
        return "", 0
    shown = shorten(printable(lines[0]), LINE_MAX)
    taken = 1
    for line in lines[1:]:
        if line.lower().startswith("usage"):
            break
        joined = f"{shown} / {printable(line)}"
        if len(joined) > LINE_MAX:
            break
        shown, taken = joined, taken + 1
    return shown, len(lines) - taken
