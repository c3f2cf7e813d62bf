"""Case 5, log following: `jobkit logs ID -f` against `tail -F` on a running job's log.

A real job is submitted with `jobkit submit` (Slurm, 1 node, `srun sleep`; the local
backend when no Slurm answers) and tracked in a scratch registry. The bench appends lines to
that job's .out file (O_APPEND, as the job's own writes would be), each stamped with the
time of its write, and reads what the follower prints from a pipe, so
delay = when the follower printed the line - when it was written (one clock).
Rounds alternate the followers (tail -F, jobkit, tail -F, ...); each round writes a burst
of lines at random 50-150 ms gaps, then leaves the follower idle for 10 s and reads its CPU
time (user + system, its reaped children such as squeue included) from /proc.
While following a Slurm job, jobkit asks squeue about it every 3 s: that is in its CPU.
"""

from __future__ import annotations

import json
import os
import random
import signal
import statistics
import subprocess
import threading
import time
from pathlib import Path

import yaml

from bench import slurm
from bench.case import CaseResult, Context, target
from bench.measure import interleave, stats
from bench.procs import BenchError, cpu_seconds, run_timed

NAME = "log_follow"
TITLE = "Log following: delay and idle CPU (jobkit logs -f vs tail -F)"
TARGET_DELAY_S = 0.100
TARGET_CPU_PCT = 1.0
MARK = "bench-line"


def job_spec(ctx: Context, folder: Path) -> Path:
    """A job that just sleeps: Slurm (srun) when there, else local."""
    if ctx.partition:
        data = {
            "name": "bench-follow",
            "backend": "slurm",
            "resources": {"nodes": 1, "partition": ctx.partition, "time": "00:15:00"},
            "launch": {"launcher": "srun", "nproc_per_node": 1},
            "run": {"command": ["sleep", "900"]},
        }
    else:
        data = {
            "name": "bench-follow",
            "backend": "local",
            "launch": {"nproc_per_node": 1},
            "env": {"venv": str(ctx.python.parent.parent)},
            "run": {"command": ["sleep", "900"]},
        }
    path = folder / "follow.yaml"
    path.write_text(yaml.safe_dump(data, sort_keys=False))
    return path


class Follower:
    """A follower process whose printed lines are timestamped as they arrive."""

    def __init__(self, argv: list[str], env: dict[str, str], cwd: Path) -> None:
        self.proc = subprocess.Popen(
            argv,
            env=env,
            cwd=cwd,
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            stdin=subprocess.DEVNULL,
            bufsize=0,
        )
        self.seen: dict[str, float] = {}
        self._lock = threading.Lock()
        self._thread = threading.Thread(target=self._read, daemon=True)
        self._thread.start()

    def _read(self) -> None:
        assert self.proc.stdout is not None
        for raw in self.proc.stdout:
            now = time.monotonic()
            text = raw.decode(errors="replace").strip()
            if text.startswith(MARK):
                with self._lock:
                    self.seen.setdefault(text.split()[1], now)

    def printed(self, key: str) -> float | None:
        """When the line with this key was printed, or None."""
        with self._lock:
            return self.seen.get(key)

    def wait_for(self, key: str, timeout: float) -> bool:
        """Wait until the line with this key is printed."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.printed(key) is not None:
                return True
            if self.proc.poll() is not None:
                return False
            time.sleep(0.01)
        return False

    def stop(self) -> None:
        """Interrupt (Ctrl-C) the follower and reap it."""
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGINT)
            try:
                self.proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        self._thread.join(timeout=5)


def write_line(path: Path, key: str) -> float:
    """Append one stamped line to the job's log; returns when the write happened."""
    fd = os.open(path, os.O_WRONLY | os.O_APPEND)
    try:
        stamp = time.monotonic()
        os.write(fd, f"{MARK} {key} written by the bench\n".encode())
    finally:
        os.close(fd)
    return stamp


def one_round(
    follower_argv: list[str],
    env: dict[str, str],
    ctx: Context,
    out_file: Path,
    tag: str,
    lines: int,
    idle_s: float,
    rng: random.Random,
) -> tuple[list[float], float]:
    """Start a follower, write `lines` lines, idle; (delays in s, CPU % while idle)."""
    follower = Follower(follower_argv, env, ctx.work)
    try:
        ready = f"{tag}-ready"
        deadline = time.monotonic() + 20
        while not follower.printed(ready):
            write_line(out_file, ready)
            if follower.wait_for(ready, 2.0) or time.monotonic() > deadline:
                break
        if not follower.printed(ready):
            raise BenchError(f"{follower_argv[0]} printed nothing of {out_file} in 20 s")
        written: dict[str, float] = {}
        for i in range(lines):
            time.sleep(rng.uniform(0.05, 0.15))
            key = f"{tag}-{i}"
            written[key] = write_line(out_file, key)
        for key in written:
            follower.wait_for(key, 5.0)
        missing = [k for k in written if follower.printed(k) is None]
        if missing:
            raise BenchError(f"{follower_argv[0]} did not print {len(missing)} of {lines} lines")
        delays = [follower.printed(k) - t for k, t in written.items()]  # type: ignore[operator]
        time.sleep(0.5)
        before = cpu_seconds(follower.proc.pid)
        start = time.monotonic()
        time.sleep(idle_s)
        used = cpu_seconds(follower.proc.pid) - before
        cpu_pct = 100.0 * used / (time.monotonic() - start)
        return delays, cpu_pct
    finally:
        follower.stop()


def run(ctx: Context) -> CaseResult:
    """Measure the case; see the module docstring."""
    result = CaseResult(NAME, TITLE)
    folder = ctx.scratch("follow")
    home = ctx.scratch("follow-home")
    env = ctx.env(JOBKIT_HOME=str(home))
    done = run_timed(
        [ctx.jobkit, "submit", str(job_spec(ctx, folder)), "--json"], env=env, cwd=folder
    )
    record = json.loads(done.stdout)
    jobkit_id = record["jobkit_id"]
    out_file = Path(record["log_paths"]["out"])
    backend = record["backend"]
    result.facts["backend"] = backend
    try:
        if backend == "slurm":
            job_id = str(record["scheduler_id"]).split(";")[0]
            deadline = time.monotonic() + 600
            while slurm.job_state(job_id) != "RUNNING":
                if time.monotonic() > deadline:
                    raise BenchError(f"job {job_id} did not start within 600 s")
                time.sleep(0.5)
        deadline = time.monotonic() + 60
        while not out_file.exists():
            if time.monotonic() > deadline:
                raise BenchError(f"{out_file} did not appear")
            time.sleep(0.1)
        time.sleep(1.0)
        lines = 3 if ctx.smoke else 10 if ctx.quick else 30
        idle_s = 0.5 if ctx.smoke else 2.0 if ctx.quick else 10.0
        rng = random.Random(7)
        counter = iter(range(1_000_000))
        delays: dict[str, list[float]] = {"tail -F": [], "jobkit logs -f": []}
        followers = {
            "tail -F": ["tail", "-F", str(out_file)],
            "jobkit logs -f": [str(ctx.jobkit), "logs", jobkit_id, "-f"],
        }

        def runner(name: str):  # type: ignore[no-untyped-def]
            def once() -> dict[str, float]:
                tag = f"r{next(counter)}"
                got, cpu = one_round(followers[name], env, ctx, out_file, tag, lines, idle_s, rng)
                delays[name].extend(got)
                ctx.say(
                    f"   {name}: median delay {statistics.median(got) * 1000:.1f} ms,"
                    f" idle CPU {cpu:.2f} %"
                )
                return {"median_delay_s": statistics.median(got), "idle_cpu_pct": cpu}

            return once

        warm = {name: runner(name) for name in followers}
        interleave(warm, 0, warmup=ctx.warmup)
        for values in delays.values():
            values.clear()
        data = interleave(warm, ctx.rounds, warmup=0)
        for name in followers:
            result.stats.append(stats(f"{name}: delay, every line", "s", delays[name]))
        for name in followers:
            result.stats.append(
                stats(f"{name}: CPU over {idle_s:g} s idle", "%", data.get(name, "idle_cpu_pct"))
            )
        jk = stats("", "s", delays["jobkit logs -f"])
        tail = stats("", "s", delays["tail -F"])
        result.ratios["jobkit / tail -F: median delay"] = (
            round(jk.median / tail.median, 3) if tail.median else None
        )
        for name, values in delays.items():
            ordered = sorted(values)
            if ordered:
                result.facts[f"{name} p95 delay ms"] = round(
                    ordered[int(0.95 * (len(ordered) - 1))] * 1000, 2
                )
        result.facts.update({"lines_per_round": lines, "idle_seconds": idle_s})
        result.targets.append(
            target(
                "jobkit logs -f median delay",
                f"<= {TARGET_DELAY_S * 1000:.0f} ms",
                round(jk.median * 1000, 2),
                "ms",
                jk.median <= TARGET_DELAY_S,
            )
        )
        cpu = stats("", "%", data.get("jobkit logs -f", "idle_cpu_pct")).median
        result.targets.append(
            target(
                f"jobkit logs -f CPU over {idle_s:g} idle seconds",
                f"<= {TARGET_CPU_PCT:g} %",
                round(cpu, 3),
                "%",
                cpu <= TARGET_CPU_PCT,
            )
        )
    finally:
        run_timed([ctx.jobkit, "cancel", jobkit_id], env=env, cwd=folder, check=False)
    return result
