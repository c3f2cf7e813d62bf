"""Case 1, CLI start-up: `jobkit render` as a cold process against the floor and torchx.

Contenders, interleaved: the floor (`python -c "import jinja2, yaml"`: the interpreter plus
the two libraries any renderer needs), `jobkit render examples/slurm-2node.yaml`, and the
same 2-node job as torchx 0.7.0 renders it (`torchx run -s slurm --dryrun dist.ddp`), from
its own venv (bench/setup-torchx.sh) when it is there. In the same rounds, every other verb:
`submit --dry-run` of the same file, `status` of an empty registry, and `jobkit VERB --help`
for the rest (the verb's module loaded and its options parsed: what every use of it pays
first). Also: `python -X importtime` shows which modules each jobkit verb loads; torch must
never be one of them. Targets (issue 25): render <= 2x the floor and <= 0.6x torchx.

`jobkit render` of a spec it rendered before reads the validated spec back
(spec/remembered.py) instead of importing pydantic: that is the RENDER contender (the
warm-up rounds render it first). RENDER_NEW renders, each round, a copy of the same spec
under a name never rendered before: the first render of a spec, which validates it with
pydantic (the compiled templates and the trainer config's check are remembered either way).

`--base DIR` (a checkout of jobkit, e.g. `git worktree add /tmp/base COMMIT`): every jobkit
contender also runs from DIR, as "... (base)", right after its own run in each round, through
a console script like the venv's own with DIR first on sys.path (and DIR as the working
folder: its examples); the ratios "after / base" are paired medians, wall and CPU time.
"""

from __future__ import annotations

import os
import re
from collections import defaultdict
from pathlib import Path

from bench.case import CaseResult, Context, target
from bench.measure import Interleaved, Runner, interleave, paired_median, ratio, stats
from bench.procs import run_timed

NAME = "cli_startup"
TITLE = "CLI start-up (cold process)"
SPEC = "examples/slurm-2node.yaml"
FLOOR = "floor: python -c 'import jinja2, yaml'"
RENDER = "jobkit render"
RENDER_NEW = "jobkit render, spec not seen before"
TORCHX = "torchx --dryrun dist.ddp"
MAX_FLOOR_RATIO = 2.0
MAX_TORCHX_RATIO = 0.6
TORCHX_VENV = Path(__file__).resolve().parents[1] / ".venv-torchx"
BASE_SUFFIX = " (base)"
BASE_SCRIPT = """#!{python}
import sys
sys.path.insert(0, {base!r})
from jobkit.cli import main
if __name__ == "__main__":
    sys.argv[0] = "jobkit"
    sys.exit(main())
"""
"""The base checkout's `jobkit`: the venv's console script with the checkout first."""


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
    # Bytecode as a user has it (.pyc written once): with PYTHONDONTWRITEBYTECODE set (as on
    # the test machine) an editable jobkit would compile every module in every run.
    env = ctx.env(JOBKIT_HOME=str(home), PYTHONDONTWRITEBYTECODE="")
    contenders: dict[str, list[str]] = {
        FLOOR: [str(ctx.python), "-c", "import jinja2, yaml"],
        RENDER: [str(ctx.jobkit), "render", SPEC],
    }
    tx = torchx_argv()
    why = "not installed (--quick never installs it; see bench/setup-torchx.sh)"
    if tx is None and not ctx.quick and ctx.options.get("torchx_install", True):
        ctx.say("   installing torchx 0.7.0 into bench/.venv-torchx")
        why = install_torchx(ctx) or why
        tx = torchx_argv()
    if tx is not None:
        contenders[TORCHX] = tx
    else:
        result.facts["torchx"] = f"not available: {why}"
        result.notes.append(f"torchx: not available: {why}")

    fresh_specs = ctx.scratch("new-specs")
    contenders[RENDER_NEW] = [str(ctx.jobkit), "render", str(fresh_specs / "job.yaml")]
    verbs = verb_contenders(ctx)
    contenders.update(verbs)
    spec_text = (ctx.repo / SPEC).read_text(encoding="utf-8")
    serial = iter(range(1_000_000))
    base: Path | None = ctx.options.get("base")
    base_jobkit = None if base is None else base_script(ctx, base)
    fresh = {RENDER_NEW: fresh_specs / "job.yaml"}
    if base is not None:
        fresh[RENDER_NEW + BASE_SUFFIX] = ctx.scratch("new-specs-base") / "job.yaml"
        result.facts["base"] = str(base)

    def runner(argv: list[str], name: str) -> Runner:
        cwd = base if name.endswith(BASE_SUFFIX) else ctx.repo

        def once() -> dict[str, float]:
            if name in fresh:  # a name never rendered: validated afresh
                unseen = f"name: new-{os.getpid()}-{next(serial)}"
                text = re.sub(r"(?m)^name: .*$", unseen, spec_text, count=1)
                fresh[name].write_text(text, encoding="utf-8")
            done = run_timed(argv, env=env, cwd=cwd, capture=False)
            return {"wall_s": done.wall_s, "cpu_s": done.cpu_s}

        return once

    runners: dict[str, Runner] = {}
    for name, argv in contenders.items():
        runners[name] = runner(argv, name)
        if base_jobkit is not None and argv[0] == str(ctx.jobkit):
            twin = [str(base_jobkit), *argv[1:]]
            if name in fresh:
                twin[-1] = str(fresh[name + BASE_SUFFIX])
            runners[name + BASE_SUFFIX] = runner(twin, name + BASE_SUFFIX)
    rounds = 1 if ctx.smoke else 3 if ctx.quick else max(ctx.rounds, 20)
    data = interleave(runners, rounds, warmup=0 if ctx.smoke else 1 if ctx.quick else 2)
    for name in runners:
        result.stats.append(data.stats(name, "wall_s", "s"))
    for name in runners:
        result.stats.append(data.stats(name, "cpu_s", "s"))

    jk = data.get(RENDER, "wall_s")
    floor = data.get(FLOOR, "wall_s")
    jk_median = stats("", "s", jk).median
    floor_ratio = paired_median(jk, floor)
    result.ratios["jobkit / floor"] = ratio(jk_median, stats("", "s", floor).median)
    result.ratios["jobkit / floor (paired median)"] = floor_ratio
    jk_cpu, floor_cpu = data.get(RENDER, "cpu_s"), data.get(FLOOR, "cpu_s")
    result.ratios["jobkit / floor, CPU time (paired median)"] = paired_median(jk_cpu, floor_cpu)
    new_wall = data.get(RENDER_NEW, "wall_s")
    result.ratios["jobkit, spec not seen before / floor (paired median)"] = paired_median(
        new_wall, floor
    )
    result.targets.append(
        target(
            "jobkit render vs the floor (paired)",
            f"<= {MAX_FLOOR_RATIO}x",
            floor_ratio,
            "x floor",
            None if floor_ratio is None else floor_ratio <= MAX_FLOOR_RATIO,
        )
    )
    if tx is not None:
        tx_values = data.get(TORCHX, "wall_s")
        tx_ratio = paired_median(jk, tx_values)
        result.ratios["jobkit / torchx"] = ratio(jk_median, stats("", "s", tx_values).median)
        result.ratios["jobkit / torchx (paired median)"] = tx_ratio
        result.ratios["jobkit / torchx, CPU time (paired median)"] = paired_median(
            jk_cpu, data.get(TORCHX, "cpu_s")
        )
        result.ratios["jobkit, spec not seen before / torchx (paired median)"] = paired_median(
            new_wall, tx_values
        )
        result.targets.append(
            target(
                "jobkit render vs torchx dry run (paired)",
                f"<= {MAX_TORCHX_RATIO}x",
                tx_ratio,
                "x torchx",
                None if tx_ratio is None else tx_ratio <= MAX_TORCHX_RATIO,
            )
        )
    else:
        result.targets.append(
            target(
                "jobkit render vs torchx dry run (paired)",
                f"<= {MAX_TORCHX_RATIO}x (torchx not available)",
                None,
                "",
                None,
            )
        )
    for name in verbs:
        result.ratios[f"{name} / floor (paired median)"] = paired_median(
            data.get(name, "wall_s"), floor
        )
    if base is not None:
        base_ratios(result, data, [name for name in runners if name + BASE_SUFFIX in runners])

    imports = import_check(ctx, home)
    result.facts["imports"] = imports
    never = not any(v["torch_imported"] for v in imports.values())  # type: ignore[index]
    result.facts["torch_imported"] = not never
    result.targets.append(
        target("torch never imported by the CLI", "no torch module", None, "", never)
    )
    result.facts["cpu_count"] = os.cpu_count()
    return result


def base_script(ctx: Context, base: Path) -> Path:
    """A `jobkit` console script that runs the checkout `base` (BASE_SCRIPT)."""
    if not (base / "jobkit" / "cli" / "__init__.py").is_file():
        raise ValueError(f"--base {base}: not a jobkit checkout (no jobkit/cli/__init__.py)")
    script = ctx.scratch("base-bin") / "jobkit"
    script.write_text(BASE_SCRIPT.format(python=ctx.python, base=str(base)), encoding="utf-8")
    script.chmod(0o755)
    return script


def base_ratios(result: CaseResult, data: Interleaved, names: list[str]) -> None:
    """`NAME / base` for each contender run from both checkouts: paired medians of the
    round-by-round ratios, wall and CPU time (below 1: this checkout is faster)."""
    for name in names:
        for measure, label in (("wall_s", ""), ("cpu_s", ", CPU time")):
            result.ratios[f"{name} / base{label} (paired median)"] = paired_median(
                data.get(name, measure), data.get(name + BASE_SUFFIX, measure)
            )


def verb_contenders(ctx: Context) -> dict[str, list[str]]:
    """Every verb but render as a cold process: submit --dry-run of SPEC, status of the
    (empty) scratch registry, `VERB --help` for the others."""
    from jobkit.cli import VERBS

    jobkit = str(ctx.jobkit)
    found: dict[str, list[str]] = {}
    for verb in VERBS:
        if verb == "render":
            continue
        if verb == "submit":
            found["jobkit submit --dry-run"] = [jobkit, "submit", "--dry-run", SPEC]
        elif verb == "status":
            found["jobkit status (empty registry)"] = [jobkit, "status"]
        else:
            found[f"jobkit {verb} --help"] = [jobkit, verb, "--help"]
    return found
