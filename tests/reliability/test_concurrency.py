"""Concurrency: many processes on one registry, and many real `jobkit submit` at once.

Nothing may be lost (every row, every history line, every key merged into a shared row),
and "database is locked" must never reach a user: every process's stderr is checked.
"""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
import time
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from jobkit.registry.store import Store
from tests.reliability.helpers import JOBKIT, jobs_with_comment, scancel, write_spec

PROCESSES = 8
UPDATES = 200
SUBMITS = 64

# One writer: 200 registry updates of every kind, mixed with reads. Each update is one
# transaction; the shared rows are read-modify-written by every process at once.
WORKER = textwrap.dedent(
    """
    import sys, time
    from pathlib import Path
    from jobkit.backends.base import Observation
    from jobkit.core.states import State
    from jobkit.registry.store import Store

    worker, shared, go = int(sys.argv[1]), sys.argv[2].split(","), Path(sys.argv[3])
    while not go.exists():
        time.sleep(0.005)
    done = 0
    with Store() as store:
        mine = []
        while done < 200:
            k = done
            kind = k % 5
            if kind == 0:
                rec = store.create_intent(backend="slurm", name=f"w{worker}-{k}", spec={},
                                          script="", workdir=Path("/tmp"))
                mine.append(rec.jobkit_id)
            elif kind == 1:
                store.mark_submitted(mine[-1], scheduler_id=f"{worker}{k:04d}", argv=[],
                                     log_paths={})
            elif kind == 2:
                obs = Observation(State.RUNNING, f"w{worker}-{k}", "squeue")
                store.record_observations({shared[k % len(shared)]: obs, mine[-1]: obs})
            elif kind == 3:
                store.update_extra(shared[k % len(shared)], {f"w{worker}-{k}": k})
            else:
                store.update_extra(mine[-1], {"k": k})
            done += 1
            store.list_jobs(recent_final_s=None, limit=5)
            store.find(f"{worker}")
    print(done)
    """
)


def test_eight_processes_two_hundred_mixed_updates_each(
    tmp_path: Path, jobkit_home: Path, tally: Callable[[str, int], None]
) -> None:
    with Store() as store:
        shared = [
            store.create_intent(
                backend="slurm", name=f"shared{i}", spec={}, script="", workdir=tmp_path
            ).jobkit_id
            for i in range(3)
        ]
        for i, jobkit_id in enumerate(shared):
            store.mark_submitted(jobkit_id, scheduler_id=f"9{i}", argv=[], log_paths={})
    go = tmp_path / "go"
    procs = [
        subprocess.Popen(
            [sys.executable, "-c", WORKER, str(w), ",".join(shared), str(go)],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for w in range(PROCESSES)
    ]
    time.sleep(1.0)  # every worker imported and waiting at the start line
    go.touch()
    outputs = [p.communicate(timeout=300) for p in procs]
    for proc, (out, err) in zip(procs, outputs, strict=True):
        assert proc.returncode == 0, err
        assert err == "", err  # nothing at all on stderr: no "database is locked"
        assert out.strip() == str(UPDATES)
    with Store() as store:
        rows = store.list_jobs(recent_final_s=None)
        assert len(rows) == 3 + PROCESSES * UPDATES // 5
        merged = {}
        for jobkit_id in shared:
            merged.update(store.get(jobkit_id).extra)
        expected_keys = {
            f"w{w}-{k}" for w in range(PROCESSES) for k in range(UPDATES) if k % 5 == 3
        }
        assert set(merged) - {"submitter"} == expected_keys  # no lost read-modify-write
        history_lines = sum(len(store.history(j)) for j in shared)
        # intent + submitted each, then one line per observation (raw state always new)
        assert history_lines == 3 * 2 + PROCESSES * (UPDATES // 5)
        for row in rows:
            if row.name.startswith("w"):
                assert row.scheduler_id is not None and row.extra == {
                    "k": int(row.name.split("-")[1]) + 4
                }
                assert [h.state for h in store.history(row.jobkit_id)] == [
                    "SUBMITTING",
                    "QUEUED",
                    "RUNNING",
                ]
    tally("concurrency: registry updates from 8 processes", PROCESSES * UPDATES)


@pytest.fixture
def slurm_jobs() -> Iterator[list[str]]:
    ids: list[str] = []
    yield ids
    scancel(ids)


@pytest.mark.slurm
@pytest.mark.timeout(900)
def test_sixty_four_concurrent_submits_with_status_readers(
    workdir: Path,
    slurm_jobs: list[str],
    tally: Callable[[str, int], None],
    figure: Callable[[str, float], None],
    slurm_cluster: object,
) -> None:
    """64 `jobkit submit` processes (held Slurm jobs) at once, while 4 `jobkit status`
    processes refresh the same registry in a loop: every submit gets its own row and its own
    single Slurm job; no process prints anything about the registry."""
    spec = write_spec(
        workdir / "crowd.yaml",
        {
            "name": "crowd",
            "backend": "slurm",
            "launch": {"launcher": "srun"},
            "run": {"command": ["true"]},
            "scheduler": {"extra": ["--hold"]},
        },
    )
    stop = workdir / "stop"

    def submit(_: int) -> tuple[int, str, str]:
        done = subprocess.run(
            [*JOBKIT, "submit", str(spec), "--json"],
            cwd=workdir,
            capture_output=True,
            text=True,
            timeout=600,
            check=False,
        )
        return done.returncode, done.stdout, done.stderr

    def reader(_: int) -> list[tuple[int, str]]:
        seen = []
        while not stop.exists():
            done = subprocess.run(
                [*JOBKIT, "status", "--all"],
                cwd=workdir,
                capture_output=True,
                text=True,
                timeout=600,
                check=False,
            )
            seen.append((done.returncode, done.stderr))
        return seen

    started = time.monotonic()
    with ThreadPoolExecutor(SUBMITS + 4) as pool:
        readers = [pool.submit(reader, i) for i in range(4)]
        results = list(pool.map(submit, range(SUBMITS)))
        stop.touch()
        statuses = [r for f in readers for r in f.result()]
    figure("concurrency: seconds for 64 concurrent submits", time.monotonic() - started)
    for code, out, _err in results:
        if code == 0:
            slurm_jobs.append(json.loads(out)["scheduler_id"])
    for code, _out, err in results:
        assert code == 0 and err == "", err
    for code, err in statuses:
        assert code == 0, err
        assert "locked" not in err.lower() and "Traceback" not in err, err
    with Store() as store:
        rows = store.list_jobs(recent_final_s=None)
        assert len(rows) == SUBMITS
        assert {r.state for r in rows} <= {"QUEUED", "HELD"}
        assert len({r.scheduler_id for r in rows}) == SUBMITS
        for row in rows:
            assert jobs_with_comment(f"jobkit:{row.token}") == [row.scheduler_id]
    assert sorted(slurm_jobs) == sorted(r.scheduler_id for r in rows)
    tally("concurrency: concurrent real jobkit submit processes", SUBMITS)
    tally("concurrency: jobkit status runs alongside them", len(statuses))
