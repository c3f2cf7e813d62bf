"""docs/spec.md is generated from the schema and must be up to date."""

from __future__ import annotations

from jobkit.spec.doc import DOC_PATH, generate, stale_diff
from jobkit.spec.walk import iter_fields


def test_spec_doc_is_up_to_date() -> None:
    diff = stale_diff()
    assert not diff, (
        "docs/spec.md is out of date; regenerate it with"
        " `.venv/bin/python -m jobkit.spec.doc --write`:\n" + diff
    )


def test_every_key_is_documented() -> None:
    text = DOC_PATH.read_text(encoding="utf-8")
    for path, _ in iter_fields():
        assert f"| `{'.'.join(path)}` |" in text


def test_generation_is_deterministic() -> None:
    assert generate() == generate()
