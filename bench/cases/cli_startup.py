"""Case 1, CLI start-up: `jobkit render` as a cold process against the floor and torchx.

Contenders, interleaved: the floor (`python -c "import jinja2, yaml"`: the interpreter plus
the two libraries any renderer needs), `jobkit render examples/slurm-2node.yaml`, and the
same 2-node job as torchx 0.7.0 renders it (`torchx run -s slurm --dryrun dist.ddp`), from
its own venv (bench/setup-torchx.sh) when it is there. Also: `python -X importtime` shows
which modules each jobkit verb loads; torch must never be one of them.
"""

from __future__ import annotations

import os
from collections import defaultdict
from pathlib import Path

from bench.case import CaseResult, Context, target
from bench.measure import Runner, interleave, paired_median, ratio, stats
from bench.procs import run_timed

NAME = "cli_startup"
TITLE = "CLI start-up (cold process)"
SPEC = "examples/slurm-2node.yaml"
TARGET_S = 0.150
TORCHX_VENV = Path(__file__).resolve().parents[1] / ".venv-torchx"


def torchx_argv() -> list[str] | None:
    """The torchx dry run of the same 2-node job, or None when torchx is not installed."""
    exe = TORCHX_VENV / "bin" / "torchx"
    if not exe.exists():
        return None
    return [
        str(exe),
        "run",
        "-s",
        "slurm",
        "-cfg",
        "partition=debug,time=15",
        "--dryrun",
        "dist.ddp",
        "-j",
        "2x1",
        "--cpu",
        "1",
        "-m",
        "train",
        "--",
        "--config",
        "tiny-lm",
        "--set",
        "train.steps=200",
    ]


def install_torchx(ctx: Context) -> str | None:
    """Run bench/setup-torchx.sh; None when it worked, else why not (one line)."""
    done = run_timed(["bash", str(ctx.repo / "bench" / "setup-torchx.sh")], check=False)
    if done.returncode == 0 and torchx_argv() is not None:
        return None
    lines = (done.stdout + done.stderr).strip().splitlines()
    return lines[-1] if lines else f"exit {done.returncode}"


def torchx_version() -> str | None:
    """torchx's version in its bench venv, or None."""
    python = TORCHX_VENV / "bin" / "python"
    if not python.exists():
        return None
    done = run_timed(
        [python, "-c", "import torchx; print(torchx.__version__)"], check=False, timeout=60
    )
    return done.stdout.strip() or None


def imported_modules(importtime_stderr: str) -> dict[str, tuple[int, int]]:
    """`-X importtime` lines -> module name: (self us, cumulative us)."""
    found: dict[str, tuple[int, int]] = {}
    for line in importtime_stderr.splitlines():
        if not line.startswith("import time:") or "self [us]" in line:
            continue
        parts = line[len("import time:") :].split("|")
        if len(parts) != 3:
            continue
        try:
            found[parts[2].strip()] = (int(parts[0]), int(parts[1]))
        except ValueError:
            continue
    return found


def top_packages(modules: dict[str, tuple[int, int]], count: int = 6) -> list[list[object]]:
    """The top-level packages that took the most import time (their modules' self times)."""
    by_package: dict[str, int] = defaultdict(int)
    for name, (self_us, _) in modules.items():
        by_package[name.split(".")[0]] += self_us
    ranked = sorted(by_package.items(), key=lambda item: item[1], reverse=True)[:count]
    return [[name, round(us / 1000, 1)] for name, us in ranked]


def import_check(ctx: Context, home: Path) -> dict[str, object]:
    """Which modules three jobkit verbs import, and whether torch is among them."""
    env = ctx.env(JOBKIT_HOME=str(home), PYTHONDONTWRITEBYTECODE="")
    verbs = {
        "render": ["render", SPEC],
        "submit --dry-run": ["submit", "--dry-run", SPEC],
        "status": ["status", "--all"],
    }
    report: dict[str, object] = {}
    for label, args in verbs.items():
        done = run_timed(
            [ctx.python, "-X", "importtime", "-m", "jobkit", *args],
            env=env,
            cwd=ctx.repo,
            check=False,
        )
        modules = imported_modules(done.stderr)
        torch_mods = sorted(m for m in modules if m == "torch" or m.startswith("torch."))
        report[label] = {
            "exit": done.returncode,
            "modules": len(modules),
            "torch_imported": bool(torch_mods),
            "torch_modules": torch_mods[:5],
            "slowest_packages_ms": top_packages(modules),
            "slowest_jobkit_modules_ms": [
                [name, round(self_us / 1000, 1)]
                for name, (self_us, _) in sorted(
                    ((n, t) for n, t in modules.items() if n.startswith("jobkit")),
                    key=lambda item: item[1][0],
                    reverse=True,
                )[:4]
            ],
        }
    return report


def run(ctx: Context) -> CaseResult:
    """Measure the case; see the module docstring."""
    result = CaseResult(NAME, TITLE)
    home = ctx.scratch("cli-home")
    env = ctx.env(JOBKIT_HOME=str(home))
    contenders: dict[str, list[str]] = {
        "floor: python -c 'import jinja2, yaml'": [str(ctx.python), "-c", "import jinja2, yaml"],
        "jobkit render": [str(ctx.jobkit), "render", SPEC],
    }
    tx = torchx_argv()
    why = "not installed (--quick never installs it; see bench/setup-torchx.sh)"
    if tx is None and not ctx.quick and ctx.options.get("torchx_install", True):
        ctx.say("   installing torchx 0.7.0 into bench/.venv-torchx")
        why = install_torchx(ctx) or why
        tx = torchx_argv()
    if tx is not None:
        contenders["torchx --dryrun dist.ddp"] = tx
    else:
        result.facts["torchx"] = f"not available: {why}"
        result.notes.append(f"torchx: not available: {why}")

    def runner(argv: list[str]) -> Runner:
        def once() -> dict[str, float]:
            done = run_timed(argv, env=env, cwd=ctx.repo, capture=False)
            return {"wall_s": done.wall_s, "cpu_s": done.cpu_s}

        return once

    rounds = 3 if ctx.quick else max(ctx.rounds, 20)
    data = interleave(
        {name: runner(argv) for name, argv in contenders.items()},
        rounds,
        warmup=1 if ctx.quick else 2,
    )
    for name in contenders:
        result.stats.append(data.stats(name, "wall_s", "s"))
    for name in contenders:
        result.stats.append(data.stats(name, "cpu_s", "s"))

    jk = data.get("jobkit render", "wall_s")
    floor = data.get("floor: python -c 'import jinja2, yaml'", "wall_s")
    jk_median = stats("", "s", jk).median
    result.ratios["jobkit / floor"] = ratio(jk_median, stats("", "s", floor).median)
    result.ratios["jobkit / floor (paired median)"] = paired_median(jk, floor)
    result.targets.append(
        target(
            "jobkit render median",
            f"<= {TARGET_S * 1000:.0f} ms",
            round(jk_median * 1000, 1),
            "ms",
            jk_median <= TARGET_S,
        )
    )
    if tx is not None:
        tx_values = data.get("torchx --dryrun dist.ddp", "wall_s")
        tx_median = stats("", "s", tx_values).median
        result.ratios["jobkit / torchx"] = ratio(jk_median, tx_median)
        result.ratios["jobkit / torchx (paired median)"] = paired_median(jk, tx_values)
        result.targets.append(
            target(
                "jobkit render vs torchx dry run",
                "median below torchx's",
                ratio(jk_median, tx_median),
                "x torchx",
                jk_median < tx_median,
            )
        )
    else:
        result.targets.append(
            target(
                "jobkit render vs torchx dry run", "below torchx's (not available)", None, "", None
            )
        )

    imports = import_check(ctx, home)
    result.facts["imports"] = imports
    never = not any(v["torch_imported"] for v in imports.values())  # type: ignore[index]
    result.facts["torch_imported"] = not never
    result.targets.append(
        target("torch never imported by the CLI", "no torch module", None, "", never)
    )
    result.facts["cpu_count"] = os.cpu_count()
    return result
