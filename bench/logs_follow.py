"""How fast and how cheap following is: line delay and idle CPU of the log follower.

    .venv/bin/python bench/logs_follow.py [--lines 100] [--interval 0.2] [--idle 30]

1. Library, inotify and polling: a writer process appends a line holding its
   CLOCK_MONOTONIC time every --interval seconds; a follower process (jobkit.logs.follow)
   computes, for each line it gets, now - written. Median, p95 and max are printed.
2. `jobkit logs -f ID` end to end: a local job (real detached process, real registry) writes
   timestamped lines; the delay is taken when the line comes out of the CLI's stdout pipe.
3. Idle CPU: the CPU time a follower process uses over --idle seconds while nothing is
   written (after a 2 s settling period), for the library in both modes and for the CLI
   following a silent running job (which also asks the backend for the job's state).
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

FOLLOWER = """
import sys, time, os
from pathlib import Path
from jobkit.logs.follow import follow, LogSource
path, stop, inotify = Path(sys.argv[1]), Path(sys.argv[2]), sys.argv[3] == "1"
for line in follow([LogSource(path)], stop.exists, use_inotify=inotify):
    if line.text.strip():
        print(f"{time.monotonic() - float(line.text):.6f}", flush=True)
"""

WRITER = """
import sys, time
path, count, interval = sys.argv[1], int(sys.argv[2]), float(sys.argv[3])
with open(path, "a", buffering=1) as out:
    for _ in range(count):
        time.sleep(interval)
        out.write(f"{time.monotonic():.6f}\\n")
"""

CLOCK_TICKS = os.sysconf("SC_CLK_TCK")


def cpu_seconds(pid: int) -> float:
    """utime + stime of a process, in seconds."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / CLOCK_TICKS


def summary(delays: list[float]) -> str:
    ms = sorted(d * 1000 for d in delays)
    p95 = ms[min(len(ms) - 1, int(len(ms) * 0.95))]
    return f"n={len(ms)} median={statistics.median(ms):.1f} ms p95={p95:.1f} ms max={ms[-1]:.1f} ms"


def library_delay(folder: Path, inotify: bool, lines: int, interval: float) -> list[float]:
    path, stop = folder / f"delay-{inotify}.out", folder / f"stop-{inotify}"
    follower = subprocess.Popen(
        [sys.executable, "-c", FOLLOWER, str(path), str(stop), "1" if inotify else "0"],
        stdout=subprocess.PIPE,
        text=True,
    )
    time.sleep(1.0)  # the follower is waiting for a file that does not exist yet
    subprocess.run([sys.executable, "-c", WRITER, str(path), str(lines), str(interval)], check=True)
    stop.touch()
    out, _ = follower.communicate(timeout=60)
    return [float(x) for x in out.split()]


def library_idle_cpu(folder: Path, inotify: bool, idle: float) -> float:
    path, stop = folder / f"idle-{inotify}.out", folder / f"idle-stop-{inotify}"
    path.write_text("")
    follower = subprocess.Popen(
        [sys.executable, "-c", FOLLOWER, str(path), str(stop), "1" if inotify else "0"],
        stdout=subprocess.DEVNULL,
    )
    time.sleep(2.0)
    before, start = cpu_seconds(follower.pid), time.monotonic()
    time.sleep(idle)
    used = cpu_seconds(follower.pid) - before
    elapsed = time.monotonic() - start
    stop.touch()
    follower.wait(timeout=30)
    return 100.0 * used / elapsed


def start_local_job(folder: Path, script: str) -> tuple[str, dict[str, str]]:
    """A local job recorded in a registry under folder; returns its id and the CLI's env."""
    from jobkit.backends.local import LocalBackend
    from jobkit.manager.submit import request_for
    from jobkit.registry.store import Store

    env = dict(os.environ, JOBKIT_HOME=str(folder / "home"))
    os.environ["JOBKIT_HOME"] = env["JOBKIT_HOME"]
    spec = {"name": "bench", "backend": "local", "run": {"command": ["x"]}}
    with Store() as store:
        rec = store.create_intent(
            backend="local", name="bench", spec=spec, script=script, workdir=folder
        )
        (rec.job_dir / "job.sh").write_text(script)
        sub = LocalBackend().submit(request_for(rec))
        store.mark_submitted(
            rec.jobkit_id,
            scheduler_id=sub.scheduler_id,
            argv=sub.argv,
            log_paths=sub.log_paths,
            extra=sub.extra,
        )
    return rec.jobkit_id, env


def cli_delay(folder: Path, lines: int, interval: float) -> list[float]:
    run_dir = '"logs/bench-$JOBKIT_JOB_ID"'
    script = (
        f"{sys.executable} -c '{WRITER}' /dev/stdout {lines} {interval}; rc=$?\n"
        f"mkdir -p {run_dir}; echo $rc > {run_dir}/exit_code\n"
    )
    job_id, env = start_local_job(folder / "cli-delay", script)
    cli = subprocess.Popen(
        [sys.executable, "-m", "jobkit", "logs", job_id, "-f"],
        stdout=subprocess.PIPE,
        text=True,
        env=env,
    )
    assert cli.stdout is not None
    delays = [time.monotonic() - float(line) for line in cli.stdout if line.strip()]
    cli.wait(timeout=60)
    return delays


def cli_idle_cpu(folder: Path, idle: float) -> float:
    job_id, env = start_local_job(folder / "cli-idle", f"sleep {idle + 10}\n")
    cli = subprocess.Popen(
        [sys.executable, "-m", "jobkit", "logs", job_id, "-f"],
        stdout=subprocess.DEVNULL,
        env=env,
    )
    time.sleep(2.0)
    before, start = cpu_seconds(cli.pid), time.monotonic()
    time.sleep(idle)
    used = cpu_seconds(cli.pid) - before
    elapsed = time.monotonic() - start
    cli.terminate()
    cli.wait(timeout=30)
    subprocess.run([sys.executable, "-m", "jobkit", "cancel", job_id], env=env, check=False)
    return 100.0 * used / elapsed


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--lines", type=int, default=100)
    parser.add_argument("--interval", type=float, default=0.2)
    parser.add_argument("--idle", type=float, default=30.0)
    args = parser.parse_args()
    uname = os.uname()
    print(
        f"# {uname.sysname} {uname.release}, {os.cpu_count()} CPUs, Python {sys.version.split()[0]}"
    )
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        for inotify in (True, False):
            mode = "inotify" if inotify else "poll   "
            delays = library_delay(folder, inotify, args.lines, args.interval)
            print(f"library {mode} delay ({args.interval:g} s between lines): {summary(delays)}")
        delays = cli_delay(folder, args.lines, args.interval)
        print(f"jobkit logs -f  delay ({args.interval:g} s between lines): {summary(delays)}")
        for inotify in (True, False):
            mode = "inotify" if inotify else "poll   "
            cpu = library_idle_cpu(folder, inotify, args.idle)
            print(f"library {mode} idle CPU over {args.idle:g} s: {cpu:.3f} %")
        cpu = cli_idle_cpu(folder, args.idle)
        print(f"jobkit logs -f  idle CPU over {args.idle:g} s: {cpu:.3f} %")


if __name__ == "__main__":
    main()
