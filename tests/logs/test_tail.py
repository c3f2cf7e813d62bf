"""tail() and tail_offset(): the last lines, read from the end of the file."""

from __future__ import annotations

from pathlib import Path

import pytest

from jobkit.logs.follow import LogSource, follow, tail, tail_offset


@pytest.mark.parametrize(
    ("content", "n", "expected"),
    [
        (b"", 3, []),
        (b"a\nb\nc\n", 2, ["b", "c"]),
        (b"a\nb\nc\n", 10, ["a", "b", "c"]),
        (b"a\nb\nc", 2, ["b", "c"]),  # an unfinished last line counts as a line
        (b"a\nb\nc\n", 0, []),
        (b"\n\n", 1, [""]),
        (b"only", 1, ["only"]),
        (b"x\r\ny\r\n", 1, ["y"]),
        (b"caf\xc3\xa9\n\xff\n", 2, ["café", "\ufffd"]),
    ],
)
def test_tail_small_files(tmp_path: Path, content: bytes, n: int, expected: list[str]) -> None:
    path = tmp_path / "f.out"
    path.write_bytes(content)
    assert tail(path, n) == expected


def test_tail_of_a_missing_file_is_empty(tmp_path: Path) -> None:
    assert tail(tmp_path / "missing", 5) == []
    assert tail_offset(tmp_path / "missing", 5) == 0


def test_tail_across_many_blocks(tmp_path: Path) -> None:
    path = tmp_path / "big.out"
    lines = [f"line {i} " + "x" * (i % 300) for i in range(50_000)]  # ~8 MB, many 64 KiB blocks
    path.write_text("\n".join(lines) + "\n")
    assert tail(path, 1) == lines[-1:]
    assert tail(path, 777) == lines[-777:]
    assert tail(path, 60_000) == lines


def test_tail_offset_then_follow_prints_the_last_lines_once(tmp_path: Path) -> None:
    path = tmp_path / "job.out"
    path.write_bytes(b"1\n2\n3\n4\npartial")
    offset = tail_offset(path, 2)
    assert path.read_bytes()[offset:] == b"3\n4\npartial"
    got = [line.text for line in follow([LogSource(path, start=offset)], lambda: True)]
    assert got == ["3", "4", "partial"]


def test_tail_offset_without_any_newline_starts_at_zero(tmp_path: Path) -> None:
    path = tmp_path / "job.out"
    path.write_bytes(b"no newline yet")
    assert tail_offset(path, 3) == 0
