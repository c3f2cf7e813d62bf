"""libyaml and PyYAML's own parser give the loader the same result (jobkit/core/yamlsrc.py).

The loader parses with libyaml (C) where PyYAML has it and hands any text libyaml refuses to
PyYAML's parser for its message. So the one way the two could disagree is libyaml accepting
a text PyYAML reads differently or refuses: every YAML file of the repository, a set of
tricky texts and a few thousand mutated specs (Hypothesis, derandomized) are loaded both
ways and must give the same data, key lines and source text, or the same refusal.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml
from hypothesis import HealthCheck, given, settings

from jobkit.core import yamlsrc
from jobkit.core.errors import SpecError
from tests.reliability.test_spec_fuzz import YAML_SNIPPETS, mutated_texts

ROOT = Path(__file__).resolve().parents[2]

TRICKY = [
    "time: 24:00:00\nport: 0123\nflag: on\nwhen: 2001-12-14\nhex: 0x1F\nsixty: 1:30\n",
    "a: &x {b: 1, c: [1, 2]}\nd: *x\ne:\n  <<: *x\n  b: 2\n",
    "s: |\n  line one\n  line two\nf: >-\n  folded\n  text\nq: 'it''s'\nd: \"tab\\there\"\n",
    "k: !!str 5\nb: !!bool yes\nn: !!null ''\nf: !!float 1\ni: !!int '7'\n",
    "\ufeffname: bom\n",
    'name: caf\u00e9\nu: "\\u00e9\\x41"\nnel: a\u0085b\nline: a\u2028b\n',
    "# comment only\nname: x # trailing\nlist:\n- a\n-  b\n- - c\n  - d\n",
    "? complex\n: value\n? [a, b]\n: flow key\n",
    "a: {b: {c: {d: [1, {e: f}]}}}\n",
    "empty:\nnull_word: null\ntilde: ~\nlist: []\nmap: {}\n",
    "a: 1\n---\nb: 2\n",
    "a: b: c\n",
    "a: [1, 2\nb: 3\n",
    "\ta: 1\n",
    "a: 1\na: 2\n",
    "a: *nowhere\n",
    "a: 'unterminated\n",
    "x: %bad\n",
    "- a\n- b\n",
    "plain\n",
    "",
    "   \n",
    "a: " + "[" * 70 + "]" * 70 + "\n",
    "a: " + "[" * 2000 + "\n",
    "a:\n" + "".join("  " * i + "- \n" for i in range(1, 80)),
    "a: \x07bell\n",
    "a: \x00\n",
    "k: !custom tag\n",
    "%YAML 1.1\n---\na: 1\n",
    "%YAML 2.0\n---\na: 1\n",
    "a: 1\n...\n",
    "a: 9" + "9" * 5000 + "\n",
    "a: 2001-13-45\n",
    "name: crlf\r\nrun:\r\n  command: [a, b]\r\nlist:\r\n- x\r\n",
    "name: cr\rrun:\r  command: [a]\rk: v\r",
    "name: mixed\n\r\nk: |\r\n  one\r\n  two\nz: 1\n",
    "a: 'multi\n  line\n\n  quoted'\nb: \"x\\\n  y\"\nc: plain\n  continued\n",
]


def _outcome(text: str, *, pure: bool, monkeypatch: pytest.MonkeyPatch) -> Any:
    monkeypatch.setattr(yamlsrc, "_FORCE_PURE", pure)
    try:
        doc = yamlsrc.load_yaml_text(text, "f.yaml", empty_ok=True)
    except SpecError as err:
        return ("refused", err.show())
    return ("loaded", doc.data, doc.lines, doc.source_text)


def _same_both_ways(text: str, monkeypatch: pytest.MonkeyPatch) -> None:
    fast = _outcome(text, pure=False, monkeypatch=monkeypatch)
    pure = _outcome(text, pure=True, monkeypatch=monkeypatch)
    assert fast == pure, f"the parsers disagree on {text[:200]!r}"


def test_libyaml_is_what_runs() -> None:
    """The fast path is taken where PyYAML has libyaml (every PyPI wheel of this platform)."""
    assert yaml.__with_libyaml__
    assert yamlsrc._LibyamlParser is not None


def test_every_yaml_file_of_the_repository(monkeypatch: pytest.MonkeyPatch) -> None:
    files = [
        p
        for pattern in ("*.yaml", "*.yml")
        for p in ROOT.rglob(pattern)
        if not any(part.startswith(".") or part == "node_modules" for part in p.parts)
    ]
    assert len(files) >= 20
    for path in files:
        _same_both_ways(path.read_bytes().decode("utf-8", errors="replace"), monkeypatch)


@pytest.mark.parametrize("text", TRICKY)
def test_tricky_texts(text: str, monkeypatch: pytest.MonkeyPatch) -> None:
    _same_both_ways(text, monkeypatch)


@pytest.mark.parametrize("snippet", YAML_SNIPPETS)
def test_snippets_as_values(snippet: bytes, monkeypatch: pytest.MonkeyPatch) -> None:
    text = snippet.decode("utf-8", errors="replace")
    _same_both_ways(text, monkeypatch)
    _same_both_ways("name: x\nrun:\n  args:" + text + "\n", monkeypatch)


@settings(
    max_examples=1500,
    derandomize=True,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture],
)
@given(mutated_texts())
def test_mutated_specs(monkeypatch: pytest.MonkeyPatch, raw: bytes) -> None:
    text = raw.decode("utf-8", errors="replace")
    _same_both_ways(text, monkeypatch)


def test_the_fast_path_is_libyaml() -> None:
    """libyaml really parsed (its marks carry no buffer, PyYAML's do): the speed-up of
    docs/benchmarks.md is libyaml's."""
    loader = yamlsrc._LibyamlLoader("a: 1\n")
    try:
        node = loader.get_single_node()
    finally:
        loader.dispose()
    assert node is not None and node.start_mark.buffer is None
