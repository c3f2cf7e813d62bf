"""The log follower against adversarial writers (tests/logs/ has the plain cases).

Real writer processes; every test runs with inotify and with the polling fallback.
"No line lost or printed twice" is checked line for line against what was written.
"""

from __future__ import annotations

import random
import subprocess
import sys
from collections import Counter
from collections.abc import Callable
from pathlib import Path

import pytest

from jobkit.logs.follow import FollowTiming, LogSource, follow

FAST = FollowTiming(min_poll_s=0.02, max_poll_s=0.25, done_interval_s=0.1)

# Writes the bytes of DATA to TARGET in random-sized chunks (seeded), each flushed, with
# short random pauses: lines, multi-byte characters and CR LF pairs are cut anywhere.
CHUNKED = """
import os, random, sys, time
data, target, seed = open(sys.argv[1], "rb").read(), sys.argv[2], int(sys.argv[3])
rng = random.Random(seed)
fd = os.open(target, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
pos = 0
while pos < len(data):
    size = rng.choice([1, 2, 3, 7, 64, 1000, 4096, 65536])
    os.write(fd, data[pos:pos + size])
    pos += size
    if rng.random() < 0.05:
        time.sleep(rng.uniform(0, 0.01))
"""


def when_exited(*procs: subprocess.Popen[bytes]) -> Callable[[], bool]:
    """is_done(): true once every writer has exited successfully."""

    def done() -> bool:
        codes = [p.poll() for p in procs]
        if any(code not in (None, 0) for code in codes):
            raise AssertionError(f"a writer failed: {codes}")
        return all(code == 0 for code in codes)

    return done


def expected_lines(data: bytes) -> list[str]:
    """The lines the follower must give for `data` (an unfinished last one included):
    UTF-8 with replacement, one trailing CR dropped, as jobkit.logs.follow documents."""
    pieces = data.split(b"\n")
    if pieces and pieces[-1] == b"":
        pieces.pop()
    lines = []
    for piece in pieces:
        text = piece.decode("utf-8", errors="replace")
        lines.append(text[:-1] if text.endswith("\r") else text)
    return lines


def adversarial_bytes(rng: random.Random, count: int) -> bytes:
    """Lines of every awkward kind: multi-byte characters, CR LF, empty lines, long lines,
    invalid UTF-8, a lone CR, ANSI escapes; numbered so a loss or repeat shows."""
    kinds = [
        lambda i: f"plain-{i}\n",
        lambda i: f"ünïcødé-{i}-日本語-🚀\n",
        lambda i: f"crlf-{i}\r\n",
        lambda i: "\n",
        lambda i: f"long-{i}-" + "x" * rng.randint(10_000, 600_000) + "\n",
        lambda i: f"cr-inside-{i}\rstill the same line\n",
        lambda i: f"\x1b[31mansi-{i}\x1b[0m\n",
    ]
    out = bytearray()
    for i in range(count):
        if rng.random() < 0.02:
            out += b"bad-utf8-\xff\xfe-" + str(i).encode() + b"\n"
        else:
            out += rng.choice(kinds)(i).encode()
    out += b"no newline at the very end"
    return bytes(out)


@pytest.fixture(params=["inotify", "poll"])
def use_inotify(request: pytest.FixtureRequest) -> bool:
    return bool(request.param == "inotify")


def test_random_chunks_cut_lines_and_characters_anywhere(
    tmp_path: Path, use_inotify: bool, tally: Callable[[str, int], None]
) -> None:
    rng = random.Random(7)
    data = adversarial_bytes(rng, 3000)
    source = tmp_path / "data"
    source.write_bytes(data)
    target = tmp_path / "not" / "yet" / "job.out"  # neither folder nor file exist yet
    target.parent.mkdir(parents=True)
    writer = subprocess.Popen([sys.executable, "-c", CHUNKED, str(source), str(target), "11"])
    got = [
        line.text
        for line in follow(
            [LogSource(target)], when_exited(writer), timing=FAST, use_inotify=use_inotify
        )
    ]
    assert got == expected_lines(data)
    tally("logs: lines followed through random chunking", len(got))
    tally("logs: bytes followed through random chunking", len(data))


def test_requeues_append_runs_to_the_same_file(
    tmp_path: Path, use_inotify: bool, tally: Callable[[str, int], None]
) -> None:
    """Five runs of a requeued job append to one file, each starting mid-way through the
    previous run's last line being flushed and pausing at random."""
    target = tmp_path / "job.out"
    rng = random.Random(3)
    sources = []
    for run in range(5):
        data = (
            f"run {run} starts\n".encode()
            + adversarial_bytes(rng, 300)[: -len(b"no newline at the very end")]
        )
        data += f"run {run} ends\n".encode()
        path = tmp_path / f"run{run}"
        path.write_bytes(data)
        sources.append(data)
    script = (
        "import subprocess, sys\n"
        "for i, path in enumerate(sys.argv[3:]):\n"
        f"    subprocess.run([sys.executable, '-c', {CHUNKED!r}, path, sys.argv[1], str(i)],"
        " check=True)\n"
    )
    chain = subprocess.Popen(
        [
            sys.executable,
            "-c",
            script,
            str(target),
            "unused",
            *(str(tmp_path / f"run{r}") for r in range(5)),
        ]
    )
    got = [
        line.text
        for line in follow(
            [LogSource(target)], when_exited(chain), timing=FAST, use_inotify=use_inotify
        )
    ]
    assert got == expected_lines(b"".join(sources))
    tally("logs: requeued runs appended and followed", 5)


def test_four_processes_append_to_one_file_at_once(
    tmp_path: Path, use_inotify: bool, tally: Callable[[str, int], None]
) -> None:
    """Four writers append whole lines to the same file concurrently (like tasks sharing an
    output file): every line comes out exactly once, each writer's in its order."""
    target = tmp_path / "shared.out"
    script = (
        "import os, sys\n"
        "fd = os.open(sys.argv[1], os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)\n"
        "tag = sys.argv[2]\n"
        "for i in range(20000):\n"
        "    os.write(fd, f'{tag}-{i}-{\"y\" * (i % 97)}\\n'.encode())\n"
    )
    writers = [
        subprocess.Popen([sys.executable, "-c", script, str(target), f"w{w}"]) for w in range(4)
    ]
    got = [
        line.text
        for line in follow(
            [LogSource(target)], when_exited(*writers), timing=FAST, use_inotify=use_inotify
        )
    ]
    counts = Counter(got)
    assert len(got) == 4 * 20000 and max(counts.values()) == 1
    for w in range(4):
        mine = [int(text.split("-")[1]) for text in got if text.startswith(f"w{w}-")]
        assert mine == list(range(20000))
    tally("logs: lines from 4 concurrent appenders", len(got))


def test_repeated_truncation_starts_again_each_time(
    tmp_path: Path, use_inotify: bool, tally: Callable[[str, int], None]
) -> None:
    """A program that reopens its log with mode "w" five times: each generation is read
    from its top, none lost, none twice (each truncation is followed by a pause longer than
    the poll interval; a rewrite past the read offset between two looks is tested in
    tests/logs/test_follow.py)."""
    target = tmp_path / "job.out"
    script = (
        "import sys, time\n"
        "for gen in range(5):\n"
        "    with open(sys.argv[1], 'wb', buffering=0) as f:\n"
        "        time.sleep(0.6)\n"
        "        for i in range(200 - gen * 30):\n"
        "            f.write(b'gen%d-%d\\n' % (gen, i))\n"
        "    time.sleep(0.6)\n"
    )
    writer = subprocess.Popen([sys.executable, "-c", script, str(target)])
    got = [
        line.text
        for line in follow(
            [LogSource(target)], when_exited(writer), timing=FAST, use_inotify=use_inotify
        )
    ]
    expected = [f"gen{g}-{i}" for g in range(5) for i in range(200 - g * 30)]
    assert got == expected
    tally("logs: truncations followed", 5)


def test_file_created_by_rename_is_read_from_its_top(tmp_path: Path, use_inotify: bool) -> None:
    """The file appears all at once (written elsewhere, renamed into place), then grows."""
    target = tmp_path / "run" / "rank-0.out"
    script = (
        "import os, sys, time\n"
        "target = sys.argv[1]\n"
        "time.sleep(0.4)\n"
        "os.makedirs(os.path.dirname(target), exist_ok=True)\n"
        "tmp = target + '.tmp'\n"
        "with open(tmp, 'wb') as f:\n"
        "    f.write(b''.join(b'first-%d\\n' % i for i in range(1000)))\n"
        "os.rename(tmp, target)\n"
        "with open(target, 'ab', buffering=0) as f:\n"
        "    for i in range(1000):\n"
        "        f.write(b'then-%d\\n' % i)\n"
    )
    writer = subprocess.Popen([sys.executable, "-c", script, str(target)])
    got = [
        line.text
        for line in follow(
            [LogSource(target)], when_exited(writer), timing=FAST, use_inotify=use_inotify
        )
    ]
    assert got == [f"first-{i}" for i in range(1000)] + [f"then-{i}" for i in range(1000)]
