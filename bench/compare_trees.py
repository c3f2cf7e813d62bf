"""Before/after: the same measurements on two checkouts of jobkit, interleaved in one run.

    git worktree add /tmp/jobkit-base <old commit>
    .venv/bin/python -m bench.compare_trees --base /tmp/jobkit-base [--jobs 10000] [--rounds 5]

Each checkout runs as itself (PYTHONPATH and working directory set to it, this venv's Python):
  render   `python -m jobkit render examples/slurm-2node.yaml` (cold process: start-up)
  status   `python -m jobkit status` on a registry of N finished Slurm jobs (bench's pool),
           built by that checkout's own store API: `first` polls all N (one squeue, one
           sacct), `steady` has nothing left to poll
  trainer  the bundled trainer, 2 processes under torchrun, its own steps/s figure
  trainer start (`--only trainer-start`, alone: no Slurm pool) one `python -m train --config
           tiny-lm` process of 20 steps, whole: wall and CPU (start-up, steps, exit)
Rounds alternate base, head, base, head...; ratios are head / base per round, then the median
(below 1 is faster for render and status; above 1 is faster for the trainer).

`--recorded` needs no Slurm pool (10,000 jobs on a shared test cluster is too many): each
checkout's store API writes N Slurm rows with made-up ids and records their final states as
sacct would give them (80 % COMPLETED, 10 % FAILED without logs, 10 % CANCELLED), and only the
steady status is timed (wall and CPU), nothing left to poll. `--only status` skips render and
the trainer.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Callable
from pathlib import Path

from bench.measure import paired_median, stats
from bench.procs import run_timed
from bench.slurm_pool import cache_path, ensure_pool

HEAD = Path(__file__).resolve().parents[1]
PYTHON = HEAD / ".venv" / "bin" / "python"
SPEC = "examples/slurm-2node.yaml"
_STEPS_PER_S = re.compile(r"trained \d+ steps in [0-9.]+ s \((?P<rate>[0-9.]+) steps/s\)")

BUILD = """
import sys
from pathlib import Path
from bench.slurm_pool import load_pool
from bench.cases.status_scale import build_registry
pool = load_pool()[: int(sys.argv[2])]
build_registry(Path(sys.argv[1]), pool, Path.cwd())
"""

BUILD_RECORDED = """
import sqlite3
import sys
from pathlib import Path
from bench.slurm_pool import PoolJob
from bench.cases.status_scale import build_registry
from jobkit.backends.base import Observation
from jobkit.core.states import State
from jobkit.registry.store import Store
home, n = Path(sys.argv[1]), int(sys.argv[2])
jobs = [PoolJob(str(9_000_000 + i), "COMPLETED") for i in range(n)]
build_registry(home, jobs, Path.cwd())
final = [
    (State.SUCCEEDED, "COMPLETED", 0),
    (State.FAILED, "FAILED", 1),
    (State.CANCELLED, "CANCELLED", 0),
]
with Store(home) as store:
    ids = [r.jobkit_id for r in store.list_jobs()]
    obs = {}
    for i, jobkit_id in enumerate(sorted(ids)):
        state, raw, rc = final[0] if i % 10 < 8 else final[1 + i % 2]
        obs[jobkit_id] = Observation(state, raw, "sacct", exit_code=rc, elapsed_s=5.0)
    store.record_observations(obs)
with sqlite3.connect(home / "jobkit.db") as conn:
    conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
"""


def tree_env(tree: Path, scratch: Path, **extra: str) -> dict[str, str]:
    """This process's environment with `tree` first on the import path."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("SLURM_", "PBS_"))}
    env.update(
        PYTHONPATH=str(tree),
        PYTHONDONTWRITEBYTECODE="",  # bytecode as a user has it (.pyc written once)
        JOBKIT_TEMPLATE_CACHE=str(scratch / "template-cache"),
        JOBKIT_BENCH_POOL=str(cache_path()),
        **extra,
    )
    return env


def fresh(template: Path, home: Path) -> None:
    shutil.rmtree(home, ignore_errors=True)
    home.mkdir(parents=True)
    shutil.copyfile(template / "jobkit.db", home / "jobkit.db")


def trainer_rate(tree: Path, scratch: Path, steps: int) -> float:
    """steps/s the trainer reports for `steps` steps with 2 gloo processes."""
    run_dir = scratch / "train-run"
    shutil.rmtree(run_dir, ignore_errors=True)
    argv = [
        str(PYTHON),
        "-m",
        "torch.distributed.run",
        "--standalone",
        "--nproc_per_node=2",
        "-m",
        "train",
        "--config",
        "tiny-lm",
        "--set",
        f"train.steps={steps}",
    ]
    env = tree_env(tree, scratch, JOBKIT_RUN_DIR=str(run_dir), OMP_NUM_THREADS="1")
    done = subprocess.run(
        argv, cwd=tree, env=env, capture_output=True, text=True, timeout=900, check=False
    )
    match = _STEPS_PER_S.search(done.stdout + done.stderr)
    if done.returncode != 0 or match is None:
        raise SystemExit(f"trainer in {tree} failed:\n{done.stdout[-2000:]}\n{done.stderr[-2000:]}")
    return float(match["rate"])


def trainer_start(tree: Path, scratch: Path) -> dict[str, float]:
    """Wall and CPU seconds of one whole `python -m train` process (20 tiny-lm steps)."""
    run_dir = scratch / "train-start"
    shutil.rmtree(run_dir, ignore_errors=True)
    argv = [str(PYTHON), "-m", "train", "--config", "tiny-lm", "--set", "train.steps=20"]
    env = tree_env(tree, scratch, JOBKIT_RUN_DIR=str(run_dir), OMP_NUM_THREADS="1")
    done = run_timed(argv, env=env, cwd=tree, timeout=300)
    return {"trainer_start_s": done.wall_s, "trainer_start_cpu_s": done.cpu_s}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--base", type=Path, required=True, help="checkout to compare against")
    parser.add_argument("--jobs", type=int, default=10_000, help="registry size for status")
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--steps", type=int, default=300, help="trainer steps per run")
    parser.add_argument("--partition", default="debug")
    parser.add_argument("--out", type=Path, help="write the figures as JSON here")
    parser.add_argument(
        "--recorded", action="store_true", help="no Slurm pool: final states recorded (above)"
    )
    parser.add_argument(
        "--only",
        choices=("status", "trainer-start"),
        help="time only the status, or only the trainer's whole process",
    )
    args = parser.parse_args()
    trees = {"base": args.base.resolve(), "head": HEAD}
    scratch = Path(tempfile.mkdtemp(prefix="jobkit-compare-"))
    if args.only == "trainer-start":
        return _compare_trainer_start(trees, scratch, args.rounds, args.out)
    if not args.recorded:
        ensure_pool(args.jobs, 100, args.partition, lambda line: print(line, file=sys.stderr))
    templates: dict[str, Path] = {}
    for name, tree in trees.items():
        templates[name] = scratch / name / "registry"
        templates[name].mkdir(parents=True)
        subprocess.run(
            [
                str(PYTHON),
                "-c",
                BUILD_RECORDED if args.recorded else BUILD,
                str(templates[name]),
                str(args.jobs),
            ],
            cwd=tree,
            env=tree_env(tree, scratch / name),
            check=True,
            timeout=1800,
        )

    def measure(name: str, tree: Path) -> dict[str, float]:
        env = tree_env(tree, scratch / name)
        home = scratch / name / "home"
        timed: dict[str, float] = {}
        if args.only is None:
            timed["render_s"] = run_timed(
                [str(PYTHON), "-m", "jobkit", "render", SPEC], env=env, cwd=tree, timeout=120
            ).wall_s
        fresh(templates[name], home)
        status = [str(PYTHON), "-m", "jobkit", "status"]
        env_home = {**env, "JOBKIT_HOME": str(home)}
        first = run_timed(status, env=env_home, cwd=tree, timeout=600, check=False)
        if not args.recorded:  # recorded: nothing to poll, the first run is a warm-up
            timed["status_first_s"] = first.wall_s
        steady = run_timed(status, env=env_home, cwd=tree, timeout=600, check=False)
        timed["status_steady_s"] = steady.wall_s
        timed["status_steady_cpu_s"] = steady.cpu_s
        if args.only is None:
            timed["trainer_steps_per_s"] = trainer_rate(tree, scratch / name, args.steps)
        return timed

    figures = _interleaved(trees, args.rounds, measure)
    _report(trees, figures, {"jobs": args.jobs}, args.out)
    shutil.rmtree(scratch, ignore_errors=True)
    return 0


def _compare_trainer_start(
    trees: dict[str, Path], scratch: Path, rounds: int, out: Path | None
) -> int:
    """`--only trainer-start`: whole trainer processes, interleaved."""
    figures = _interleaved(trees, rounds, lambda name, tree: trainer_start(tree, scratch / name))
    _report(trees, figures, {}, out)
    shutil.rmtree(scratch, ignore_errors=True)
    return 0


def _interleaved(
    trees: dict[str, Path], rounds: int, measure: Callable[[str, Path], dict[str, float]]
) -> dict[str, dict[str, list[float]]]:
    """`measure(name, tree)` for each tree in turn, rounds + 1 times; each tree's figures by
    key, round 0 (caches warming up) dropped."""
    figures: dict[str, dict[str, list[float]]] = {name: {} for name in trees}
    for round_no in range(rounds + 1):
        for name, tree in trees.items():
            timed = measure(name, tree)
            if round_no:
                for key, value in timed.items():
                    figures[name].setdefault(key, []).append(value)
            print(f"round {round_no} {name}: {json.dumps(timed)}", file=sys.stderr)
    return figures


def _report(
    trees: dict[str, Path],
    figures: dict[str, dict[str, list[float]]],
    extra: dict[str, object],
    out: Path | None,
) -> None:
    """Print each measure's medians and paired head/base ratio; write them as JSON to `out`."""
    report: dict[str, object] = {"base": str(trees["base"]), **extra, "figures": {}}
    print(f"{'measure':24} {'base (median)':>14} {'head (median)':>14} {'head/base':>10}")
    for key in figures["head"]:
        base, head = figures["base"][key], figures["head"][key]
        ratio = paired_median(head, base)
        b, h = stats(key, "", base).median, stats(key, "", head).median
        print(f"{key:24} {b:14.4f} {h:14.4f} {ratio or 0:10.3f}")
        report["figures"][key] = {"base": base, "head": head, "ratio": ratio}  # type: ignore[index]
    if out:
        out.write_text(json.dumps(report, indent=2))


if __name__ == "__main__":
    raise SystemExit(main())
