"""Case 4, trainer overhead: steps/s of train/ against a hand-written DDP loop.

Both run under `torchrun --standalone` on this machine with 2 gloo ranks, the same model
(the tiny-lm transformer), data, batch size, optimizer, schedule, clipping and precision
(bench/baselines/plain_ddp.py). Contenders per round, interleaved:
  plain fp32, trainer fp32, plain bf16, trainer bf16 (autocast),
  trainer fp32 on 1 rank (scaling 1 -> 2 ranks), trainer fp32 checkpointing every K steps.
Throughput is what each prints: `trained N steps in X s` over the same span (first to last
step; set-up and the final checkpoint excluded). OMP_NUM_THREADS=1 for every run, so a rank
is one core whatever the number of ranks.

--smoke (tests/bench) runs 2 steps (a checkpoint after the first), 1 round, no warm-up, and
3 torchruns instead of 6 (SMOKE_SHARED): contenders that differ only in an argument's value
share one run. plain fp32 and plain bf16 are one plain bf16 run; trainer fp32, trainer bf16 and
trainer fp32 ckpt/1 are one trainer bf16 run that checkpoints every step (2 ranks each);
trainer fp32 on 1 rank runs as itself. So every kind of run (plain loop, trainer, autocast,
1 rank, 2 ranks, checkpointing) and all the figures' code still run; the smoke's figures mean
nothing (a ratio of two contenders that share a run is 1).
"""

from __future__ import annotations

import re
from functools import partial
from pathlib import Path
from typing import Any

from bench.case import CaseResult, Context, target
from bench.measure import Runner, clean, interleave, paired_ratios, ratio, stats
from bench.procs import BenchError, run_timed

NAME = "trainer"
TITLE = "Trainer overhead (2 gloo ranks under torchrun, CPU)"
TARGET_RATIO = 0.97
TARGET_CKPT_PCT = 3.0
CKPT_EVERY = 50
_TRAINED = re.compile(r"trained (?P<n>\d+) steps in (?P<s>[\d.]+) s")

# The tiny-lm config's values, given to both explicitly so they cannot drift apart.
MODEL = {"d_model": 64, "n_layers": 2, "n_heads": 4, "dropout": 0.1}
DATA = {"context": 64, "batch": 16, "stride": None}
OPTIM = {
    "lr": 3e-3,
    "weight_decay": 0.01,
    "warmup_steps": 10,
    "min_lr_ratio": 0.1,
    "grad_clip": 1.0,
}


def trainer_args(
    steps: int,
    amp: str,
    ckpt_every: int,
    device: str = "cpu",
    model: dict[str, Any] | None = None,
    data: dict[str, Any] | None = None,
) -> list[str]:
    """`-m train --config tiny-lm` with the shared settings as --set overrides."""
    model = model or MODEL
    data = data or DATA
    sets: dict[str, Any] = {
        "train.steps": steps,
        "train.device": device,
        "amp.dtype": amp,
        "checkpoint.every_steps": ckpt_every,
        "checkpoint.save_final": "false",
        "checkpoint.resume": "never",
        "data.batch_size_per_rank": data["batch"],
        "data.args.context": data["context"],
        "logging.every_steps": 10,
        **{f"optim.{k}": v for k, v in OPTIM.items()},
        **{f"model.args.{k}": v for k, v in model.items()},
    }
    if data.get("stride"):
        sets["data.args.stride"] = data["stride"]
    args = ["-m", "train", "--config", "tiny-lm"]
    for key, value in sets.items():
        args += ["--set", f"{key}={value}"]
    return args


def plain_args(
    repo: Path,
    steps: int,
    amp: str,
    device: str = "cpu",
    model: dict[str, Any] | None = None,
    data: dict[str, Any] | None = None,
) -> list[str]:
    """bench/baselines/plain_ddp.py with the shared settings."""
    model = model or MODEL
    data = data or DATA
    args = [
        str(repo / "bench" / "baselines" / "plain_ddp.py"),
        "--steps",
        str(steps),
        "--amp",
        amp,
        "--device",
        device,
        "--batch-size",
        str(data["batch"]),
        "--context",
        str(data["context"]),
        "--log-every",
        "10",
    ]
    if data.get("stride"):
        args += ["--stride", str(data["stride"])]
    for key, value in {**model, **OPTIM}.items():
        args += [f"--{key.replace('_', '-')}", str(value)]
    return args


def parse_trained(output: str) -> tuple[int, float]:
    """(steps, seconds) from the `trained N steps in X s` line."""
    match = _TRAINED.search(output)
    if not match:
        tail = " | ".join(output.strip().splitlines()[-3:])
        raise BenchError(f"no 'trained N steps' line in the output: {tail}")
    return int(match["n"]), float(match["s"])


_EXCEPTION_LINE = re.compile(r"^\s*(?:\[rank\d+\]:\s*)?([A-Za-z_][\w.]*(?:Error|Exception)\b.*)$")


def rank_error(output: str) -> str:
    """A failed torchrun's cause: the ranks' last exception line, else the output's last lines.

    torchrun ends with its own ChildFailedError summary, which hides the rank's traceback
    (the first GPU bench run, 2026-11-27, failed with nothing else to read).
    """
    lines = output.strip().splitlines()
    causes = [
        match[1]
        for match in map(_EXCEPTION_LINE.match, lines)
        if match and "ChildFailedError" not in match[1]
    ]
    if causes:
        return causes[-1]
    return " | ".join(lines[-4:])


def torchrun(ctx: Context, nproc: int, args: list[str], timeout: float = 600.0) -> float:
    """Run one training under torchrun in a fresh folder; its steps/s."""
    folder = ctx.scratch("train")
    env = ctx.env(OMP_NUM_THREADS="1", PYTHONPATH=str(ctx.repo), PYTHONUNBUFFERED="1")
    argv = [
        str(ctx.bin_dir / "torchrun"),
        "--standalone",
        "--nnodes",
        "1",
        "--nproc-per-node",
        str(nproc),
        *args,
    ]
    done = run_timed(argv, env=env, cwd=folder, timeout=timeout, check=False)
    if done.returncode != 0:
        why = rank_error(done.stdout + done.stderr)
        raise BenchError(f"torchrun {' '.join(args[:3])}: exit {done.returncode}: {why}")
    steps, seconds = parse_trained(done.stdout)
    return steps / seconds


Run = tuple[int, list[str]]
"""One torchrun: its number of ranks (--nproc-per-node) and the program's arguments."""

SMOKE_SHARED = {
    "plain fp32": "plain bf16",
    "trainer fp32": "trainer bf16 ckpt",
    "trainer bf16": "trainer bf16 ckpt",
    "trainer fp32 ckpt": "trainer bf16 ckpt",
}
"""--smoke: contender (its name, less `/K`) -> the run it shares (see the module docstring)."""


def smoke_runs(runs: dict[str, Run], repo: Path, steps: int, ckpt_every: int) -> dict[str, Run]:
    """The contenders' runs under --smoke: each named in SMOKE_SHARED gets its shared run."""
    shared: dict[str, Run] = {
        "plain bf16": (2, plain_args(repo, steps, "bf16")),
        "trainer bf16 ckpt": (2, trainer_args(steps, "bf16", ckpt_every)),
    }
    found: dict[str, Run] = {}
    for name, run in runs.items():
        key = name.split("/")[0]  # "trainer fp32 ckpt/K" -> "trainer fp32 ckpt"
        found[name] = shared[SMOKE_SHARED[key]] if key in SMOKE_SHARED else run
    return found


def runners(ctx: Context, runs: dict[str, Run]) -> dict[str, Runner]:
    """A runner per contender. Contenders with the same run share it: in each round the first
    of them (interleave runs the contenders in order) runs it, the others take its result."""
    latest: dict[tuple[str, ...], dict[str, float]] = {}

    def first(key: tuple[str, ...], nproc: int, args: list[str]) -> dict[str, float]:
        latest[key] = {"steps_per_s": torchrun(ctx, nproc, args)}
        return latest[key]

    def again(key: tuple[str, ...]) -> dict[str, float]:
        return latest[key]

    found: dict[str, Runner] = {}
    keys: set[tuple[str, ...]] = set()
    for name, (nproc, args) in runs.items():
        key = (str(nproc), *args)
        found[name] = partial(again, key) if key in keys else partial(first, key, nproc, args)
        keys.add(key)
    return found


def run(ctx: Context) -> CaseResult:
    """Measure the case; see the module docstring."""
    result = CaseResult(NAME, TITLE)
    steps = 2 if ctx.smoke else 20 if ctx.quick else 150
    ckpt_every = 1 if ctx.smoke else 10 if ctx.quick else CKPT_EVERY
    repo = ctx.repo
    runs: dict[str, Run] = {
        "plain fp32": (2, plain_args(repo, steps, "off")),
        "trainer fp32": (2, trainer_args(steps, "off", 0)),
        "plain bf16": (2, plain_args(repo, steps, "bf16")),
        "trainer bf16": (2, trainer_args(steps, "bf16", 0)),
        "trainer fp32 1 rank": (1, trainer_args(steps, "off", 0)),
        f"trainer fp32 ckpt/{ckpt_every}": (2, trainer_args(steps, "off", ckpt_every)),
    }
    if ctx.smoke:
        runs = smoke_runs(runs, repo, steps, ckpt_every)
        result.notes.append(
            "smoke: 3 runs for the 6 contenders: plain fp32 = plain bf16; trainer fp32 ="
            f" trainer bf16 = trainer fp32 ckpt/{ckpt_every} (bf16, checkpointing every"
            f" {ckpt_every} step(s))"
        )
    contenders = runners(ctx, runs)
    data = interleave(
        contenders,
        ctx.rounds,
        warmup=ctx.warmup,
        on_run=lambda i, name, r: ctx.say(
            f"   round {i + 1} {name}: {r['steps_per_s']:.2f} steps/s"
        ),
    )
    for name in contenders:
        result.stats.append(data.stats(name, "steps_per_s", "steps/s"))

    def med(name: str) -> float:
        return stats("", "", data.get(name, "steps_per_s")).median

    def paired(a: str, b: str) -> float:
        values = paired_ratios(data.get(a, "steps_per_s"), data.get(b, "steps_per_s"))
        return stats("", "", values).median

    fp32 = ratio(med("trainer fp32"), med("plain fp32"))
    result.ratios["trainer / plain, fp32"] = fp32
    result.ratios["trainer / plain, fp32 (paired median)"] = clean(
        paired("trainer fp32", "plain fp32")
    )
    result.ratios["trainer / plain, bf16"] = ratio(med("trainer bf16"), med("plain bf16"))
    result.ratios["trainer bf16 / trainer fp32"] = ratio(med("trainer bf16"), med("trainer fp32"))
    result.ratios["plain bf16 / plain fp32"] = ratio(med("plain bf16"), med("plain fp32"))
    # Samples/s: 2 ranks process twice the samples per step.
    result.ratios["samples/s, 2 ranks / 1 rank (ideal 2)"] = ratio(
        2 * med("trainer fp32"), med("trainer fp32 1 rank")
    )
    ckpt_name = f"trainer fp32 ckpt/{ckpt_every}"
    slow = paired("trainer fp32", ckpt_name)  # above 1 when checkpointing slows it down
    ckpt_pct = clean((slow - 1.0) * 100)
    n_ckpt = (steps - 1) // ckpt_every
    extra_s = (1 / med(ckpt_name) - 1 / med("trainer fp32")) * steps
    result.facts.update(
        {
            "steps_per_run": steps,
            "batch_per_rank": DATA["batch"],
            "checkpoint_every": ckpt_every,
            "checkpoints_per_run": n_ckpt,
            "checkpoint_extra_time_pct_paired_median": ckpt_pct,
            "seconds_per_checkpoint_estimate": clean(extra_s / max(n_ckpt, 1)),
            "omp_num_threads": 1,
        }
    )
    result.targets.append(
        target(
            "trainer / plain DDP loop, fp32",
            f">= {TARGET_RATIO}x",
            fp32,
            "x",
            None if fp32 is None else fp32 >= TARGET_RATIO,
        )
    )
    result.targets.append(
        target(
            f"checkpoint every {ckpt_every} steps",
            f"<= {TARGET_CKPT_PCT:g} % of step time",
            ckpt_pct,
            "%",
            None if ckpt_pct is None else ckpt_pct <= TARGET_CKPT_PCT,
        )
    )
    return result
