"""Case 3, submit to training: a 2-node tiny training job on the local Slurm.

Contenders, interleaved, all training the bundled tiny-lm model with the same trainer,
config and steps on 2 nodes (1 process each):
  handwritten      `sbatch bench/baselines/handwritten.sbatch` (srun, one task per node);
  jobkit srun      `jobkit submit` of examples/slurm-2node.yaml with launch.launcher srun
                   (the same launch as the hand-written script);
  jobkit torchrun  `jobkit submit` of examples/slurm-2node.yaml as shipped (one torchrun
                   per node, c10d rendezvous).
Each is timed by the same observer from just before the submit command: `started` when
the job's .out file appears (Slurm creates it as the batch step starts), `first step` when
rank 0's log shows its first step line, `done` when squeue/sacct say the job ended
(polled every 0.1 s, only after the trainer's `final loss` line). `started -> first step`
leaves out the time the job waited in the queue behind other users' jobs; so do the
`queue wait left out` figures (the total minus started + the submit command's own time).
"""

from __future__ import annotations

import json
import re
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import yaml

from bench import slurm
from bench.case import CaseResult, Context, target
from bench.measure import interleave, paired_median, ratio, stats
from bench.procs import BenchError, run_timed

NAME = "submit_train"
TITLE = "Submit to training (2-node tiny-lm job on the local Slurm)"
SPEC = "examples/slurm-2node.yaml"
BASELINE = "bench/baselines/handwritten.sbatch"
TARGET_RATIO = 1.2
_STEP = re.compile(rb"rank 0: step \d+/\d+ ")
_FINAL = re.compile(rb"rank 0: (final loss|stopped after step)")
JOB_TIMEOUT_S = 900.0


@dataclass(frozen=True)
class Submitted:
    """What a submit command gave back: the Slurm id and the files to watch."""

    job_id: str
    out_file: Path
    rank0_log: Path


def write_spec(ctx: Context, folder: Path, steps: int, launcher: str) -> Path:
    """examples/slurm-2node.yaml with the steps, launcher and absolute venv set."""
    data = yaml.safe_load((ctx.repo / SPEC).read_text())
    data["name"] = f"bench-{launcher}"
    data["launch"]["launcher"] = launcher
    data.setdefault("env", {})["venv"] = str(ctx.python.parent.parent)
    data["run"]["train"]["overrides"]["train.steps"] = steps
    if ctx.partition:
        data["resources"]["partition"] = ctx.partition
    path = folder / f"slurm-2node-{launcher}.yaml"
    path.write_text(yaml.safe_dump(data, sort_keys=False))
    return path


def submit_jobkit(ctx: Context, folder: Path, home: Path, spec: Path) -> Submitted:
    """`jobkit submit SPEC --json` from `folder`."""
    done = run_timed(
        [ctx.jobkit, "submit", str(spec), "--json"],
        env=ctx.env(JOBKIT_HOME=str(home)),
        cwd=folder,
        timeout=120,
    )
    record = json.loads(done.stdout)
    paths = record["log_paths"]
    return Submitted(
        str(record["scheduler_id"]).split(";")[0],
        Path(paths["out"]),
        Path(paths["run_dir"]) / "rank-0.log",
    )


def submit_handwritten(ctx: Context, folder: Path, steps: int) -> Submitted:
    """`sbatch --parsable handwritten.sbatch` from `folder`."""
    argv = ["sbatch", "--parsable", str(ctx.repo / BASELINE)]
    if ctx.partition:
        argv.insert(2, f"--partition={ctx.partition}")
    done = run_timed(
        argv,
        env=ctx.env(VENV=str(ctx.python.parent.parent), STEPS=str(steps)),
        cwd=folder,
        timeout=120,
    )
    job_id = done.stdout.strip().split(";")[0]
    return Submitted(
        job_id,
        folder / f"handwritten-{job_id}.out",
        folder / "runs" / f"handwritten-{job_id}" / "rank-0.log",
    )


def _grows_to(path: Path, pattern: re.Pattern[bytes], deadline: float, offset: int = 0) -> int:
    """Poll `path` every 20 ms until `pattern` appears at or after `offset`; returns the end."""
    while time.monotonic() < deadline:
        try:
            data = path.read_bytes()
        except FileNotFoundError:
            data = b""
        match = pattern.search(data, offset)
        if match:
            return match.end()
        time.sleep(0.02)
    raise BenchError(f"timed out waiting for {pattern.pattern!r} in {path}")


def _exists(path: Path, deadline: float) -> None:
    while not path.exists():
        if time.monotonic() > deadline:
            raise BenchError(f"timed out waiting for {path}")
        time.sleep(0.02)


def observe(submit: Callable[[], Submitted]) -> dict[str, float]:
    """Submit, then time started / first step / done from just before the submit command."""
    t0 = time.monotonic()
    job = submit()
    submitted = time.monotonic() - t0
    deadline = t0 + JOB_TIMEOUT_S
    try:
        _exists(job.out_file, deadline)
        started = time.monotonic() - t0
        end = _grows_to(job.rank0_log, _STEP, deadline)
        first = time.monotonic() - t0
        _grows_to(job.rank0_log, _FINAL, deadline, end)
        state, seen = slurm.wait_final(job.job_id, deadline - time.monotonic())
    except BaseException:
        slurm.cancel([job.job_id])
        raise
    if state is None or not state.startswith("COMPLETED"):
        raise BenchError(f"job {job.job_id} ended {state} (cancelled by someone else?)")
    queued = started - submitted  # waiting for free nodes: other users' jobs, not the tool
    return {
        "submit_cmd_s": submitted,
        "started_s": started,
        "first_step_s": first,
        "started_to_first_step_s": first - started,
        "done_s": seen - t0,
        "first_step_unqueued_s": first - queued,
        "done_unqueued_s": seen - t0 - queued,
    }


def _retrying(ctx: Context, name: str, once: Callable[[], dict[str, float]]):  # type: ignore[no-untyped-def]
    """A runner that tries a run up to 3 times (a job cancelled by another user's cleanup)."""

    def run_once() -> dict[str, float]:
        for attempt in range(3):
            try:
                result = once()
                ctx.say(
                    f"   {name}: first step {result['first_step_s']:.2f} s,"
                    f" done {result['done_s']:.2f} s"
                )
                return result
            except BenchError as err:
                if attempt == 2:
                    raise
                ctx.say(f"   {name}: {err}; trying again")
        raise AssertionError("unreachable")

    return run_once


def run(ctx: Context) -> CaseResult:
    """Measure the case; see the module docstring."""
    result = CaseResult(NAME, TITLE)
    if ctx.partition is None:
        result.status, result.reason = "skipped", "no Slurm answers (start tests/cluster/up.sh)"
        return result
    steps = 4 if ctx.smoke else 20 if ctx.quick else 200
    folder = ctx.scratch("submit")
    home = ctx.scratch("submit-home")
    specs = {
        launcher: write_spec(ctx, folder, steps, launcher) for launcher in ("srun", "torchrun")
    }
    contenders = {
        "handwritten sbatch+srun": _retrying(
            ctx, "handwritten", lambda: observe(lambda: submit_handwritten(ctx, folder, steps))
        ),
        "jobkit srun": _retrying(
            ctx,
            "jobkit srun",
            lambda: observe(lambda: submit_jobkit(ctx, folder, home, specs["srun"])),
        ),
        "jobkit torchrun": _retrying(
            ctx,
            "jobkit torchrun",
            lambda: observe(lambda: submit_jobkit(ctx, folder, home, specs["torchrun"])),
        ),
    }
    data = interleave(contenders, ctx.rounds, warmup=ctx.warmup)
    measures = {
        "submit_cmd_s": "submit command",
        "started_s": "submit -> started",
        "first_step_s": "submit -> first step",
        "done_s": "submit -> done (COMPLETED)",
        "started_to_first_step_s": "started -> first step",
        "first_step_unqueued_s": "submit -> first step, queue wait left out",
        "done_unqueued_s": "submit -> done, queue wait left out",
    }
    for key, label in measures.items():
        for name in contenders:
            result.stats.append(stats(f"{name}: {label}", "s", data.get(name, key)))
    base = "handwritten sbatch+srun"
    for name in ("jobkit srun", "jobkit torchrun"):
        for key in ("first_step_s", "done_s", "first_step_unqueued_s", "done_unqueued_s"):
            mine, theirs = data.get(name, key), data.get(base, key)
            result.ratios[f"{name} / handwritten: {measures[key]}"] = ratio(
                stats("", "", mine).median, stats("", "", theirs).median
            )
            result.ratios[f"{name} / handwritten: {measures[key]} (paired median)"] = paired_median(
                mine, theirs
            )
    result.facts.update({"steps": steps, "nodes": 2, "processes_per_node": 1})
    for name in ("jobkit srun", "jobkit torchrun"):
        for key in ("first_step_s", "done_s", "first_step_unqueued_s", "done_unqueued_s"):
            value = result.ratios[f"{name} / handwritten: {measures[key]}"]
            result.targets.append(
                target(
                    f"{name}: {measures[key]}",
                    f"<= {TARGET_RATIO}x handwritten",
                    value,
                    "x",
                    None if value is None else value <= TARGET_RATIO,
                )
            )
    return result
