"""Case 2, status at scale: `jobkit status` with 10 to 10,000 tracked Slurm jobs.

Registries are written through jobkit's own store API (`Store.create_intent` then
`Store.mark_submitted`, as `jobkit submit` does) with rows for examples/slurm-2node.yaml
(its real rendered script and spec); their scheduler ids are real finished jobs of the
local Slurm (bench/slurm_pool.py), just submitted as far as the registry knows.
Measured per size N, interleaved:
  first   `jobkit status` on a fresh copy of the registry: all N jobs are polled
          (one squeue, then one sacct for those squeue no longer shows) and recorded;
  steady  `jobkit status` once their final states are recorded (nothing left to poll);
  squeue / sacct   the very argv jobkit ran (logged by PATH wrappers), run directly:
          the scheduler's own time. jobkit's overhead = first - squeue - sacct, per round.
Scheduler calls per status are counted by the PATH wrappers (bench/sched_wrap.py).
"""

from __future__ import annotations

import json
import shutil
import sqlite3
from pathlib import Path
from typing import Any

from bench import slurm
from bench.case import CaseResult, Context, Target, target
from bench.measure import interleave, stats
from bench.procs import Timed, run_timed
from bench.sched_wrap import Call, count, make_wrappers, read_calls
from bench.slurm_pool import PoolJob, ensure_pool

NAME = "status_scale"
TITLE = "Status at scale (real Slurm jobs in the registry)"
SPEC = "examples/slurm-2node.yaml"
SIZES = (10, 100, 1000, 10_000)
QUICK_SIZES = (10, 100)
TARGET_OVERHEAD_S = 1.0


def build_registry(home: Path, jobs: list[PoolJob], workdir: Path) -> None:
    """A registry at `home` tracking `jobs` as slurm-2node jobs just submitted."""
    from jobkit.backends.slurm.backend import SlurmBackend
    from jobkit.manager.submit import plan_submission, request_for, submitter_identity
    from jobkit.registry.store import Store, new_token
    from jobkit.spec.load import load_spec

    spec = load_spec(workdir / SPEC).spec
    plan = plan_submission(spec, workdir=workdir)
    backend = SlurmBackend()
    spec_dict = plan.spec.model_dump(mode="json")
    with Store(home) as store:
        for job in jobs:
            record = store.create_intent(
                backend="slurm",
                name=plan.spec.name,
                spec=spec_dict,
                script=plan.script,
                workdir=plan.workdir,
                token=new_token(),
                extra={"submitter": submitter_identity()},
            )
            request = request_for(record)
            store.mark_submitted(
                record.jobkit_id,
                scheduler_id=job.job_id,
                argv=backend.submit_argv(request),
                log_paths=backend.log_paths(request, job.job_id),
                extra=backend.submit_extra(request, job.job_id),
            )
    # Fold the write-ahead log into the file, so that one file is a whole registry.
    with sqlite3.connect(home / "jobkit.db") as conn:
        conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")


def fresh_copy(template: Path, home: Path) -> None:
    """Replace `home` by a copy of the template registry file."""
    shutil.rmtree(home, ignore_errors=True)
    home.mkdir(parents=True)
    shutil.copyfile(template / "jobkit.db", home / "jobkit.db")


def _status(ctx: Context, home: Path, wrappers: Path | None = None, as_json: bool = False) -> Timed:
    """`jobkit status` (the table, or --json) on the registry at `home`."""
    env = ctx.env(JOBKIT_HOME=str(home))
    if wrappers is not None:
        env["PATH"] = f"{wrappers}:{env['PATH']}"
    argv = [str(ctx.jobkit), "status", *(["--json"] if as_json else [])]
    return run_timed(argv, env=env, cwd=ctx.work, timeout=600, check=False)


def _state_counts(done: Timed) -> dict[str, int]:
    try:
        rows = json.loads(done.stdout or "[]")
    except ValueError:
        return {}
    counts: dict[str, int] = {}
    for row in rows:
        counts[row["state"]] = counts.get(row["state"], 0) + 1
    return counts


def _replay(call: Call) -> float:
    done = run_timed(call.argv, timeout=600, check=False)
    return done.wall_s


def measure_size(ctx: Context, n: int, pool: list[PoolJob], result: CaseResult) -> dict[str, Any]:
    """All measurements for one registry size; returns the facts for it."""
    template = ctx.scratch(f"registry-{n}")
    build_registry(template, pool[:n], ctx.repo)
    log = ctx.work / f"calls-{n}.log"
    wrappers = make_wrappers(ctx.scratch("wrap") / "bin", log)

    # Count: a first status (everything to poll) and a steady one, through the wrappers.
    counted = ctx.work / f"counted-{n}"
    fresh_copy(template, counted)
    first = _status(ctx, counted, wrappers, as_json=True)
    first_calls = read_calls(log)
    log.unlink(missing_ok=True)
    steady = _status(ctx, counted, wrappers, as_json=True)
    steady_calls = read_calls(log)
    facts: dict[str, Any] = {
        "jobs": n,
        "pool_ran": sum(j.ran for j in pool[:n]),
        "pool_cancelled_before_running": sum(not j.ran for j in pool[:n]),
        "first_exit": first.returncode,
        "first_stderr": first.stderr.strip()[-300:],
        "first_calls": count(first_calls),
        "steady_calls": count(steady_calls),
        "states_after_first": _state_counts(first),
        "states_after_steady": _state_counts(steady),
        "sacct_argv_bytes": sum(
            len(w) + 1 for c in first_calls if c.command == "sacct" for w in c.argv
        ),
    }
    ctx.say(f"   N={n}: first status calls {facts['first_calls']}, steady {facts['steady_calls']}")

    squeue = next((c for c in first_calls if c.command == "squeue"), None)
    sacct = next((c for c in first_calls if c.command == "sacct"), None)
    first_home = ctx.work / f"first-{n}"

    def first_run() -> dict[str, float]:
        fresh_copy(template, first_home)
        return {"wall_s": _status(ctx, first_home).wall_s}

    runners = {
        "first": first_run,
        "steady": lambda: {"wall_s": _status(ctx, counted).wall_s},
    }
    if squeue is not None:
        runners["squeue"] = lambda: {"wall_s": _replay(squeue)}
    if sacct is not None:
        runners["sacct"] = lambda: {"wall_s": _replay(sacct)}
    rounds = ctx.rounds
    data = interleave(runners, rounds, warmup=ctx.warmup)
    for name in runners:
        label = {
            "first": f"N={n} jobkit status, first (polls {n})",
            "steady": f"N={n} jobkit status, steady (0 to poll)",
            "squeue": f"N={n} squeue (same argv)",
            "sacct": f"N={n} sacct (same argv)",
        }[name]
        result.stats.append(stats(label, "s", data.get(name, "wall_s")))
    firsts = data.get("first", "wall_s")
    scheduler = [
        (data.get("squeue", "wall_s")[i] if squeue else 0.0)
        + (data.get("sacct", "wall_s")[i] if sacct else 0.0)
        for i in range(len(firsts))
    ]
    overhead = [f - s for f, s in zip(firsts, scheduler, strict=True)]
    result.stats.append(
        stats(f"N={n} jobkit overhead, first (first - squeue - sacct)", "s", overhead)
    )
    med_first = stats("", "", firsts).median
    med_sched = stats("", "", scheduler).median
    result.ratios[f"N={n} first status / (squeue + sacct)"] = (
        round(med_first / med_sched, 3) if med_sched else None
    )
    facts["overhead_median_s"] = round(stats("", "", overhead).median, 4)
    facts["steady_median_s"] = round(stats("", "", data.get("steady", "wall_s")).median, 4)
    return facts


def run(ctx: Context) -> CaseResult:
    """Measure the case; see the module docstring."""
    result = CaseResult(NAME, TITLE)
    if ctx.partition is None:
        result.status, result.reason = "skipped", "no Slurm answers (start tests/cluster/up.sh)"
        return result
    if not slurm.accounting_works():
        result.status, result.reason = "skipped", "sacct does not answer (slurmdbd down)"
        return result
    sizes_opt = ctx.options.get("sizes")
    if sizes_opt:
        sizes = tuple(int(s) for s in str(sizes_opt).split(","))
    else:
        sizes = QUICK_SIZES if ctx.quick else SIZES
    pool = ensure_pool(max(sizes), int(ctx.options.get("pool_ran", 100)), ctx.partition, ctx.say)
    if len(pool) < max(sizes):
        result.notes.append(f"only {len(pool)} finished jobs in the pool; sizes cut to it")
        sizes = tuple(s for s in sizes if s <= len(pool))
    per_size = {}
    for n in sizes:
        per_size[str(n)] = measure_size(ctx, n, pool, result)
    result.facts["sizes"] = per_size
    for n in sizes:
        facts = per_size[str(n)]
        calls = facts["first_calls"]
        ok = calls.get("squeue", 0) == 1 and calls.get("sacct", 0) <= 1 and len(calls) <= 2
        text = ", ".join(f"{k} {v}" for k, v in sorted(calls.items())) or "none"
        steady_text = ", ".join(f"{k} {v}" for k, v in sorted(facts["steady_calls"].items()))
        result.targets.append(
            Target(
                f"N={n} scheduler calls per status",
                "1 squeue + at most 1 sacct",
                None,
                "",
                ok,
                note=f"first: {text}; steady: {steady_text or 'none'}",
            )
        )
    biggest = str(max(sizes))
    over = per_size[biggest]["overhead_median_s"]
    result.targets.append(
        target(
            f"N={biggest} listed: jobkit overhead beyond the scheduler's time",
            f"<= {TARGET_OVERHEAD_S:g} s",
            over,
            "s",
            over <= TARGET_OVERHEAD_S,
        )
    )
    steady = per_size[biggest]["steady_median_s"]
    result.targets.append(
        target(
            f"N={biggest} listed, states already final (no poll)",
            f"<= {TARGET_OVERHEAD_S:g} s",
            steady,
            "s",
            steady <= TARGET_OVERHEAD_S,
        )
    )
    return result
