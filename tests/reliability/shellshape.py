"""Does a value stay one word? Compare a script rendered with hostile values against the same
spec rendered with harmless placeholders, line by line and word by word.

A placeholder (`jkph3z`) needs no quoting. Where the hostile value was quoted, the hostile
line splits (POSIX shlex, shell operators split off) into the very words of the placeholder
line with the placeholder replaced by the value. A value that escaped its quotes adds or
moves words or operators (`;`, `|`, `&`, `$(`...), or lines. `#SBATCH` / `#PBS` lines are
split after the prefix, as sbatch and qsub read them (a `#` starts a comment).

This is a static check; the injection run tests execute the scripts for the final word.
"""

from __future__ import annotations

import re
import shlex
from collections.abc import Callable, Mapping

from jobkit.core.overrides import set_value_text

DIRECTIVE_PREFIXES = ("#SBATCH", "#PBS")


def placeholder(index: int) -> str:
    """The harmless stand-in for slot `index`."""
    return f"jkph{index}z"


_PLACEHOLDER = re.compile(r"jkph\d+z")


def words(line: str) -> list[str]:
    """The shell words of one line (directive lines: the words after the prefix)."""
    prefix: list[str] = []
    text = line
    for directive in DIRECTIVE_PREFIXES:
        if line.startswith(directive + " "):
            prefix = [directive]
            text = line[len(directive) + 1 :]
            break
    if text.endswith("\\") and not text.endswith("\\\\"):
        text = text[:-1]  # a line continuation
    lexer = shlex.shlex(text, posix=True, punctuation_chars=True)
    lexer.whitespace_split = True
    return prefix + list(lexer)


def _variants(value: str, directive: bool) -> list[Callable[[str], str]]:
    """How a quoting filter may legitimately present the value inside a word."""
    forms: list[Callable[[str], str]] = [lambda _p: value]
    if value == "~" or value.startswith("~/"):
        forms.append(lambda _p: "$HOME" + value[1:])  # qpath: ~/ means $HOME
    if directive:
        forms.append(lambda _p: value.replace("%", "%%"))  # slurm_filename
    # A trainer override travels as `--set KEY=VALUE` text the trainer reads back as the
    # value (jobkit/core/overrides.py): YAML-quoted where plain text would read otherwise.
    forms.append(lambda _p: set_value_text(value))
    return forms


def compare(
    safe: str, hostile: str, values: Mapping[str, str], split: Mapping[str, list[str]] = {}
) -> list[str]:
    """Problems found comparing two renderings; `values` maps placeholder -> hostile value.

    `split` maps the placeholders of fields whose value is split into words by contract
    (scheduler.extra) to those words: the placeholder's word stands for all of them.
    Empty when every hostile value stayed inside its word(s).
    """
    safe_lines = safe.split("\n")
    hostile_lines = hostile.split("\n")
    if len(safe_lines) != len(hostile_lines):
        return [f"line count changed: {len(safe_lines)} -> {len(hostile_lines)}"]
    problems: list[str] = []
    for number, (p_line, h_line) in enumerate(zip(safe_lines, hostile_lines, strict=True), 1):
        problems.extend(_compare_line(number, p_line, h_line, values, split))
    return problems


def _compare_line(
    number: int,
    p_line: str,
    h_line: str,
    values: Mapping[str, str],
    split: Mapping[str, list[str]],
) -> list[str]:
    """Problems of one hostile line against its safe line (empty when it matches)."""
    if p_line == h_line:
        return []
    try:
        p_words = [w for word in words(p_line) for w in split.get(word, [word])]
        h_words = words(h_line)
    except ValueError as err:
        return [f"line {number}: cannot split ({err}): {h_line!r}"]
    if len(p_words) != len(h_words):
        return [f"line {number}: {len(p_words)} words became {len(h_words)}: {h_line!r}"]
    directive = bool(p_words) and p_words[0] in DIRECTIVE_PREFIXES
    return [
        f"line {number}: word {p_word!r} became {h_word!r}"
        for p_word, h_word in zip(p_words, h_words, strict=True)
        if p_word != h_word and not _word_matches(p_word, h_word, values, directive)
    ]


def _word_matches(p_word: str, h_word: str, values: Mapping[str, str], directive: bool) -> bool:
    """True when h_word is p_word with each placeholder replaced by its value (in one of the
    forms a quoting filter may give it)."""
    names = _PLACEHOLDER.findall(p_word)
    if not names or any(name not in values for name in names):
        return False
    for index in range(max(len(_variants(values[name], directive)) for name in names)):
        expected = p_word
        for name in names:
            forms = _variants(values[name], directive)
            expected = expected.replace(name, forms[min(index, len(forms) - 1)](name))
        if expected == h_word:
            return True
    return False
