"""A pool of real, finished Slurm jobs for the status-at-scale case, kept between bench runs.

Status is measured on registries of up to 10,000 tracked jobs. Running 10,000 jobs through a
2-node test cluster takes hours (about 1.3 s each there), so the pool holds two kinds:
  ran        `sbatch --wrap=true` jobs that ran and COMPLETED (sacct: the job and its
             .batch step), until as many as --pool-ran asks have run;
  cancelled  jobs submitted held and cancelled before they ran (sacct: one CANCELLED line),
             for the rest. Both are real jobs the scheduler and its accounting know.
Registries take the jobs that ran first. The jobs are submitted as user `nobody` when the bench
runs as root, so other users' `scancel -u root` or `squeue --me` never see them, and with
`--nice` so that every other job on the cluster goes first.
The ids are cached in bench/.cache/slurm-pool.json ($JOBKIT_BENCH_POOL) and their final
states read from sacct before each use. `python -m bench.slurm_pool SIZE RAN` builds the
pool ahead of a bench run (hours for thousands of jobs that run on a busy test cluster).
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from bench.slurm import FINAL

POOL_ENV = "JOBKIT_BENCH_POOL"
"""Where to keep the pool's job ids instead of bench/.cache/slurm-pool.json (tests)."""
DEFAULT_CACHE = Path(__file__).resolve().parent / ".cache" / "slurm-pool.json"


def cache_path() -> Path:
    """The pool cache file: $JOBKIT_BENCH_POOL, else bench/.cache/slurm-pool.json."""
    return Path(os.environ.get(POOL_ENV) or DEFAULT_CACHE)


JOB_NAME = "jobkit-bench-pool"
NICE = 100_000
IN_FLIGHT = 4
"""Ran jobs queued or running at once (keeps the queue short for everyone else)."""
CHUNK = 250
"""Held jobs submitted before each scancel."""


@dataclass(frozen=True)
class PoolJob:
    """One finished job: its id and its final state in sacct (COMPLETED, CANCELLED...)."""

    job_id: str
    state: str

    @property
    def ran(self) -> bool:
        """True for a job that ran to completion."""
        return self.state == "COMPLETED"


def _as_user() -> list[str]:
    """Prefix that submits as `nobody` when we are root (and runuser exists)."""
    if os.geteuid() == 0 and shutil.which("runuser"):
        return ["runuser", "-u", "nobody", "--"]
    return []


def _run(argv: list[str], timeout: float = 60.0, retry_s: float = 0.0) -> str:
    """stdout of argv; retried every 5 s for `retry_s` (a restarting slurmctld)."""
    deadline = time.monotonic() + retry_s
    while True:
        done = subprocess.run(argv, capture_output=True, text=True, timeout=timeout, check=False)
        if done.returncode == 0:
            return done.stdout
        if time.monotonic() >= deadline:
            raise RuntimeError(
                f"{' '.join(argv[:6])} ...: exit {done.returncode}: {done.stderr.strip()}"
            )
        time.sleep(5.0)


def _cluster_name() -> str:
    for line in _run(["scontrol", "show", "config"], retry_s=60).splitlines():
        key, _, value = line.partition("=")
        if key.strip() == "ClusterName":
            return value.strip()
    return ""


def _sbatch(partition: str, hold: bool) -> str:
    argv = [
        *_as_user(),
        "sbatch",
        "--parsable",
        f"--nice={NICE}",
        f"--partition={partition}",
        "--time=1",
        "--chdir=/tmp",
        "--output=/dev/null",
        "--error=/dev/null",
        f"--job-name={JOB_NAME}",
    ]
    if hold:
        argv.append("--hold")
    argv.append("--wrap=true")
    return _run(argv, retry_s=300).strip().split(";")[0]


def _in_queue(job_ids: set[str]) -> set[str]:
    """Which of these jobs squeue still shows (queued, running or just ended)."""
    if not job_ids:
        return set()
    out = _run(
        ["squeue", "--noheader", f"--name={JOB_NAME}", "--states=all", "--format=%i|%T"],
        retry_s=300,
    )
    shown = set()
    for line in out.splitlines():
        job, _, state = line.partition("|")
        if state.strip() not in FINAL:
            shown.add(job.strip())
    return shown & job_ids


def final_states(job_ids: list[str]) -> dict[str, str]:
    """sacct's final state word of each of these jobs (jobs not final yet left out)."""
    states: dict[str, str] = {}
    for start in range(0, len(job_ids), 2000):
        part = job_ids[start : start + 2000]
        out = _run(
            [
                "sacct",
                "--noheader",
                "--parsable2",
                "--allocations",
                f"--jobs={','.join(part)}",
                "--format=JobIDRaw,State",
            ],
            timeout=300,
            retry_s=120,
        )
        for line in out.splitlines():
            job, _, state = line.partition("|")
            word = state.split()[0] if state.strip() else ""
            if word in FINAL:
                states[job.strip()] = word
    return states


def _cached_ids() -> list[str]:
    try:
        data = json.loads(cache_path().read_text())
    except (OSError, ValueError):
        return []
    if data.get("cluster") != _cluster_name():
        return []
    return [str(j) for j in data.get("ids", [])]


def _save(ids: list[str]) -> None:
    cache = cache_path()
    cache.parent.mkdir(parents=True, exist_ok=True)
    tmp = cache.with_suffix(".tmp")
    tmp.write_text(json.dumps({"cluster": _cluster_name(), "ids": ids}))
    tmp.replace(cache)


def load_pool() -> list[PoolJob]:
    """The cached jobs that sacct knows as final, those that ran first."""
    ids = _cached_ids()
    states = final_states(ids) if ids else {}
    jobs = [PoolJob(i, states[i]) for i in ids if i in states]
    return [j for j in jobs if j.ran] + [j for j in jobs if not j.ran]


def _run_jobs(count: int, partition: str, ids: list[str], say: Callable[[str], None]) -> None:
    """Submit `count` true jobs, at most IN_FLIGHT at a time, adding their ids to `ids`."""
    submitted = 0
    flying: set[str] = set()
    last_saved = time.monotonic()
    while submitted < count or flying:
        flying = _in_queue(flying)
        while len(flying) < IN_FLIGHT and submitted < count:
            job = _sbatch(partition, hold=False)
            flying.add(job)
            ids.append(job)
            submitted += 1
        if time.monotonic() - last_saved > 30:
            _save(ids)
            say(f"  pool: {submitted - len(flying)}/{count} true jobs have run")
            last_saved = time.monotonic()
        time.sleep(0.5)
    _save(ids)


def _cancelled_jobs(count: int, partition: str, ids: list[str]) -> None:
    made = 0
    while made < count:
        chunk = [_sbatch(partition, hold=True) for _ in range(min(CHUNK, count - made))]
        _run(["scancel", *chunk], retry_s=300)
        ids += chunk
        made += len(chunk)
        _save(ids)


def _wait_accounted(job_ids: list[str], timeout: float) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if len(final_states(job_ids)) == len(job_ids):
            return
        time.sleep(2.0)


def ensure_pool(
    size: int, ran_wanted: int, partition: str, say: Callable[[str], None]
) -> list[PoolJob]:
    """At least `size` finished jobs (fewer only if Slurm failed), those that ran first.

    Runs `true` jobs until min(ran_wanted, size) of the pool ran, then tops the pool up
    with held-and-cancelled jobs.
    """
    jobs = load_pool()
    ids = _cached_ids()
    ran = sum(j.ran for j in jobs)
    more_ran = max(0, min(ran_wanted, size) - ran)
    if more_ran:
        say(f"  pool: running {more_ran} `true` jobs (1-2 s each on a 2-node test cluster)")
        before = len(ids)
        _run_jobs(more_ran, partition, ids, say)
        _wait_accounted(ids[before:], 300)
        jobs = load_pool()
    more = max(0, size - len(jobs))
    if more:
        say(f"  pool: submitting {more} held jobs and cancelling them")
        before = len(ids)
        _cancelled_jobs(more, partition, ids)
        _wait_accounted(ids[before:], 300)
        jobs = load_pool()
    return jobs[:size]


def main() -> int:
    """`python -m bench.slurm_pool SIZE RAN`: build the pool ahead of a bench run."""
    import sys

    from bench.slurm import default_partition

    size, ran_wanted = int(sys.argv[1]), int(sys.argv[2])
    partition = default_partition()
    if partition is None:
        print("no Slurm answers", file=sys.stderr)
        return 1
    jobs = ensure_pool(size, ran_wanted, partition, lambda line: print(line, flush=True))
    print(f"pool: {len(jobs)} jobs ({sum(j.ran for j in jobs)} ran)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
