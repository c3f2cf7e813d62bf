"""The follower against real files written by real writer processes (tests/logs/writer.py)."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from jobkit.logs.follow import FollowTiming, LogLine, LogSource, follow

WRITER = str(Path(__file__).with_name("writer.py"))
FAST = FollowTiming(min_poll_s=0.02, max_poll_s=0.25, done_interval_s=0.1)


def start_writer(path: Path, count: int, *options: str) -> subprocess.Popen[bytes]:
    """Start writer.py in its own process."""
    return subprocess.Popen([sys.executable, WRITER, str(path), str(count), *options])


def when_all_exit(*procs: subprocess.Popen[bytes]) -> Callable[[], bool]:
    """An is_done() that turns true once every writer has exited (successfully)."""

    def done() -> bool:
        codes = [proc.poll() for proc in procs]
        if any(code not in (None, 0) for code in codes):
            raise AssertionError(f"a writer failed: {codes}")
        return all(code == 0 for code in codes)

    return done


@pytest.fixture(params=["inotify", "poll"])
def use_inotify(request: pytest.FixtureRequest) -> bool:
    """Every test runs with inotify and with the polling fallback."""
    return bool(request.param == "inotify")


def texts(lines: Iterator[LogLine]) -> list[str]:
    return [line.text for line in lines]


def test_waits_for_a_file_and_folder_that_do_not_exist_yet(
    tmp_path: Path, use_inotify: bool
) -> None:
    path = tmp_path / "run" / "not" / "yet" / "rank-0.out"
    gate = tmp_path / "go"
    writer = start_writer(path, 50, "--wait", str(gate), "--delay", "0.002")
    lines = follow([LogSource(path)], when_all_exit(writer), timing=FAST, use_inotify=use_inotify)
    time.sleep(0.3)  # the follower starts before the folder exists
    gate.touch()
    assert texts(lines) == [f"line-{i}" for i in range(50)]


def test_partial_lines_are_joined_and_the_last_one_flushed_at_the_end(
    tmp_path: Path, use_inotify: bool
) -> None:
    path = tmp_path / "job.out"
    writer = start_writer(path, 300, "--split", "--tail", "no newline at the end")
    got = texts(
        follow([LogSource(path)], when_all_exit(writer), timing=FAST, use_inotify=use_inotify)
    )
    assert got == [f"line-{i}" for i in range(300)] + ["no newline at the end"]


def test_a_requeued_job_appending_to_the_same_file_is_followed(
    tmp_path: Path, use_inotify: bool
) -> None:
    path = tmp_path / "job.out"
    first = start_writer(path, 100, "--tag", "run1", "--delay", "0.001")
    first.wait()
    second = start_writer(path, 100, "--tag", "run2", "--delay", "0.001", "--wait", str(path))
    got = texts(
        follow(
            [LogSource(path)], when_all_exit(first, second), timing=FAST, use_inotify=use_inotify
        )
    )
    assert got == [f"run1-{i}" for i in range(100)] + [f"run2-{i}" for i in range(100)]


def test_a_truncated_file_is_read_again_from_its_top(tmp_path: Path, use_inotify: bool) -> None:
    path = tmp_path / "job.out"
    path.write_text("".join(f"old-{i}\n" for i in range(200)))
    gate = tmp_path / "truncate-now"
    # Truncates (mode w) once the gate exists, pauses, then writes a shorter new content.
    script = (
        "import os, sys, time\n"
        f"while not os.path.exists({str(gate)!r}): time.sleep(0.01)\n"
        f"f = open({str(path)!r}, 'wb', buffering=0)\n"
        "time.sleep(1.0)\n"
        "for i in range(20): f.write(b'new-%d\\n' % i)\n"
    )
    writer = subprocess.Popen([sys.executable, "-c", script])
    stream = follow([LogSource(path)], when_all_exit(writer), timing=FAST, use_inotify=use_inotify)
    got = [next(stream).text for _ in range(200)]
    gate.touch()
    got += texts(stream)
    assert got == [f"old-{i}" for i in range(200)] + [f"new-{i}" for i in range(20)]


def test_truncated_and_regrown_between_two_looks_is_read_from_its_top(
    tmp_path: Path, use_inotify: bool
) -> None:
    """Rewritten past the old read offset while the follower was not looking: the size never
    went down, yet the new content is read from its top (the bytes before the offset
    changed), none of it lost."""
    path = tmp_path / "job.out"
    path.write_text("".join(f"old-{i}\n" for i in range(100)))
    done: list[bool] = []
    stream = follow([LogSource(path)], lambda: bool(done), timing=FAST, use_inotify=use_inotify)
    got = [next(stream).text for _ in range(100)]
    # The follower is suspended between two looks: truncate, then write more than before.
    path.write_text("".join(f"new-{i}\n" for i in range(300)))
    done.append(True)
    got += texts(stream)
    assert got == [f"old-{i}" for i in range(100)] + [f"new-{i}" for i in range(300)]


def test_appends_with_the_same_bytes_are_still_appends(tmp_path: Path, use_inotify: bool) -> None:
    """The check reads what is before the offset, not what follows: repeated identical lines
    appended to a file are printed once each, never read again from the top."""
    path = tmp_path / "job.out"
    path.write_text("same line\n" * 50)
    done: list[bool] = []
    stream = follow([LogSource(path)], lambda: bool(done), timing=FAST, use_inotify=use_inotify)
    got = [next(stream).text for _ in range(50)]
    with path.open("a") as handle:
        handle.write("same line\n" * 70)
    done.append(True)
    got += texts(stream)
    assert got == ["same line"] * 120


def test_a_replaced_file_is_drained_then_the_new_one_read(
    tmp_path: Path, use_inotify: bool
) -> None:
    path = tmp_path / "job.out"
    # Writes 50 lines, renames the file away (log rotation), keeps writing 50 more to the
    # old descriptor while no file has the name (the follower looks in between), then
    # writes 50 to a new file at the same path.
    script = (
        "import os, time\n"
        f"p = {str(path)!r}\n"
        "f = open(p, 'wb', buffering=0)\n"
        "for i in range(50): f.write(b'a-%d\\n' % i); time.sleep(0.002)\n"
        "os.rename(p, p + '.1')\n"
        "time.sleep(0.6)\n"
        "for i in range(50): f.write(b'b-%d\\n' % i); time.sleep(0.01)\n"
        "f.write(b'b-unfinished')\n"
        "f.close()\n"
        "time.sleep(0.6)\n"
        "g = open(p, 'wb', buffering=0)\n"
        "for i in range(50): g.write(b'c-%d\\n' % i); time.sleep(0.002)\n"
    )
    path.touch()
    writer = subprocess.Popen([sys.executable, "-c", script])
    got = texts(
        follow([LogSource(path)], when_all_exit(writer), timing=FAST, use_inotify=use_inotify)
    )
    expected = [f"{k}-{i}" for k in "ab" for i in range(50)] + ["b-unfinished"]
    assert got == expected + [f"c-{i}" for i in range(50)]


def test_several_files_are_merged_with_their_labels(tmp_path: Path, use_inotify: bool) -> None:
    writers = []
    sources = []
    for rank in range(3):
        path = tmp_path / "run" / f"rank-{rank}.out"
        writers.append(start_writer(path, 200, "--tag", f"r{rank}", "--delay", "0.001"))
        sources.append(LogSource(path, label=f"rank {rank}"))
    got = list(follow(sources, when_all_exit(*writers), timing=FAST, use_inotify=use_inotify))
    for rank in range(3):
        mine = [line.text for line in got if line.label == f"rank {rank}"]
        assert mine == [f"r{rank}-{i}" for i in range(200)]
    assert len(got) == 600
    assert got[0].render().startswith("[rank ")


def test_stops_by_itself_only_after_the_files_are_drained(
    tmp_path: Path, use_inotify: bool
) -> None:
    path = tmp_path / "job.out"
    writer = start_writer(path, 20000)
    writer.wait()
    # The job is already final when following starts: everything is still printed, then it stops.
    started = time.monotonic()
    got = texts(follow([LogSource(path)], lambda: True, timing=FAST, use_inotify=use_inotify))
    assert got == [f"line-{i}" for i in range(20000)]
    assert time.monotonic() - started < 30


def test_a_missing_file_of_a_finished_job_ends_the_follow(tmp_path: Path) -> None:
    assert list(follow([LogSource(tmp_path / "never.out")], lambda: True, timing=FAST)) == []


def chain(*argvs: list[str]) -> subprocess.Popen[bytes]:
    """One process that runs the given commands one after the other (a job and its requeue)."""
    script = (
        "import json, subprocess, sys\n"
        "for argv in sys.argv[1:]:\n"
        "    subprocess.run(json.loads(argv), check=True)\n"
    )
    return subprocess.Popen([sys.executable, "-c", script, *(json.dumps(a) for a in argvs)])


def test_thousands_of_writes_no_line_lost_or_printed_twice(
    tmp_path: Path, use_inotify: bool
) -> None:
    """4 writer processes x 3000 split writes into 2 files, each file written by a job and
    then by its requeued run, which appends."""
    a, b = tmp_path / "rank-0.out", tmp_path / "rank-1.out"
    py = [sys.executable, WRITER]
    jobs = [
        chain(
            [*py, str(path), "3000", "--tag", tag, "--split"],
            [*py, str(path), "3000", "--tag", tag, "--first", "3000", "--split"],
        )
        for path, tag in ((a, "a"), (b, "b"))
    ]
    sources = [LogSource(a, "rank 0"), LogSource(b, "rank 1")]
    got = list(follow(sources, when_all_exit(*jobs), timing=FAST, use_inotify=use_inotify))
    by_label: dict[str | None, list[str]] = {}
    for line in got:
        by_label.setdefault(line.label, []).append(line.text)
    assert by_label["rank 0"] == [f"a-{i}" for i in range(6000)]
    assert by_label["rank 1"] == [f"b-{i}" for i in range(6000)]


def test_following_starts_at_a_given_offset(tmp_path: Path) -> None:
    path = tmp_path / "job.out"
    path.write_bytes(b"skip\nkeep\n")
    got = texts(follow([LogSource(path, start=5)], lambda: True, timing=FAST))
    assert got == ["keep"]


def test_inotify_is_used_on_linux(tmp_path: Path) -> None:
    if not sys.platform.startswith("linux"):
        pytest.skip("inotify is Linux only")
    from jobkit.logs.watch import make_watcher

    watcher = make_watcher([tmp_path / "a" / "b"])
    try:
        assert watcher.kind == "inotify"
        assert watcher.wait(0.05) is False  # nothing changed
        (tmp_path / "a").mkdir()
        assert watcher.wait(2.0) is True  # the ancestor watch saw the folder appear
        while watcher.wait(0.05):
            pass
        (tmp_path / "a" / "b").mkdir()
        assert watcher.wait(2.0) is True
        while watcher.wait(0.05):
            pass
        (tmp_path / "a" / "b" / "f").write_text("x")
        assert watcher.wait(2.0) is True  # and now the folder itself is watched
    finally:
        watcher.close()
