"""Case 7, frozen code: what the code snapshot and the provenance add to `jobkit submit`.

A scratch git work tree holding this project's tracked files (its size: ~570 files, ~4 MB),
committed, then one tracked file edited before every submit, so that every submission with a
snapshot takes a new one (the worst case: a reused snapshot costs less). Contenders,
interleaved, each a cold `jobkit submit` of a local job running `true` from that work tree
(--no-check: the same for both): with the snapshot (the default) and with
`--set code.snapshot=false` (which still records the commit and the patch). The added time
is the round-by-round difference of their wall times (and of their CPU times, user +
system of jobkit and the git and tar it runs: steadier on a loaded machine). Target
(issue 26): under 0.5 s.
The CLI's start-up is case 1: the new verbs and modules are imported only when used.
"""

from __future__ import annotations

import statistics
import subprocess
from pathlib import Path

import yaml

from bench.case import CaseResult, Context, target
from bench.measure import interleave, paired_median, stats
from bench.procs import run_timed

NAME = "frozen_code"
TITLE = "Frozen code: submit with vs without the code snapshot"
WITH, WITHOUT = "submit (snapshot)", "submit (code.snapshot false)"
TARGET_ADDED_S = 0.5


def work_tree(ctx: Context) -> Path:
    """A git work tree with this project's tracked files, committed; the submit folder."""
    folder = ctx.scratch("frozen-tree")
    archive = subprocess.run(
        ["git", "archive", "--format=tar", "HEAD"], cwd=ctx.repo, capture_output=True, check=True
    )
    subprocess.run(["tar", "-x", "-C", str(folder)], input=archive.stdout, check=True)
    for argv in (
        ["git", "init", "-q"],
        ["git", "add", "-A"],
        ["git", "-c", "user.name=b", "-c", "user.email=b@b", "commit", "-q", "-m", "bench"],
    ):
        subprocess.run(argv, cwd=folder, capture_output=True, check=True)
    spec = {
        "name": "bench-frozen",
        "backend": "local",
        "launch": {"nproc_per_node": 1, "launcher": "none"},
        "env": {"venv": str(ctx.python.parent.parent)},
        "logs": {"dir": str(ctx.scratch("frozen-logs"))},
        "run": {"command": ["true"]},
    }
    (folder / "bench-frozen.yaml").write_text(yaml.safe_dump(spec))
    return folder


def run(ctx: Context) -> CaseResult:
    """Measure the case; see the module docstring."""
    result = CaseResult(NAME, TITLE)
    folder = work_tree(ctx)
    env = ctx.env(JOBKIT_HOME=str(ctx.scratch("frozen-home")))
    edited = folder / "README.md"
    counter = iter(range(1_000_000))

    def submit(*sets: str) -> dict[str, float]:
        with edited.open("a") as handle:  # a new tree each time: a new snapshot
            handle.write(f"\nedit {next(counter)}\n")
        argv: list[str | Path] = [ctx.jobkit, "submit", "bench-frozen.yaml", "--no-check", *sets]
        done = run_timed(argv, env=env, cwd=folder, timeout=120)
        return {"wall_s": done.wall_s, "cpu_s": done.cpu_s}

    rounds = interleave(
        {WITH: lambda: submit(), WITHOUT: lambda: submit("--set", "code.snapshot=false")},
        rounds=ctx.rounds,
        warmup=ctx.warmup,
    )
    with_s, without_s = rounds.get(WITH, "wall_s"), rounds.get(WITHOUT, "wall_s")
    added = [a - b for a, b in zip(with_s, without_s, strict=False)]
    result.stats += [stats(WITH, "s", with_s), stats(WITHOUT, "s", without_s)]
    result.stats.append(stats("added by the snapshot", "s", added))
    result.ratios["snapshot / no snapshot"] = paired_median(with_s, without_s)
    cpu_with, cpu_without = rounds.get(WITH, "cpu_s"), rounds.get(WITHOUT, "cpu_s")
    cpu_added = [a - b for a, b in zip(cpu_with, cpu_without, strict=False)]
    result.stats.append(stats("CPU added by the snapshot", "s", cpu_added))
    result.ratios["CPU: snapshot / no snapshot"] = paired_median(cpu_with, cpu_without)
    median_added = statistics.median(added) if added else None
    result.targets.append(
        target(
            "time the snapshot adds to a submit",
            f"< {TARGET_ADDED_S} s",
            median_added,
            "s",
            None if median_added is None else median_added < TARGET_ADDED_S,
        )
    )
    median_cpu = statistics.median(cpu_added) if cpu_added else None
    result.targets.append(
        target(
            "CPU time the snapshot adds to a submit (jobkit, git, tar)",
            f"< {TARGET_ADDED_S} s",
            median_cpu,
            "s",
            None if median_cpu is None else median_cpu < TARGET_ADDED_S,
        )
    )
    result.facts["tracked_files"] = len(
        subprocess.run(
            ["git", "ls-files"], cwd=folder, capture_output=True, text=True
        ).stdout.split()
    )
    return result
