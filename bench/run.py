"""`python -m bench`: run the cases, print a table, write the results as JSON.

    .venv/bin/python -m bench                          # every case, full size
    .venv/bin/python -m bench --quick                  # reduced sizes (a minute or two)
    .venv/bin/python -m bench --smoke                  # every path once, figures meaningless
    .venv/bin/python -m bench --cases cli,trainer      # some cases
    .venv/bin/python -m bench --out bench/results/x.json --markdown bench/results/x.md

Cases (names or short names): cli_startup (cli), status_scale (status), submit_train
(submit), sweep_submit (sweep), trainer, log_follow (logs), gpu. Exit status: 0, or 1 when
a case failed to run (a missed target is reported, not an error).
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
import traceback
from collections.abc import Sequence
from datetime import datetime
from pathlib import Path
from types import ModuleType

from bench import slurm
from bench.case import REPO, CaseResult, Context, default_python, remove_tree
from bench.cases import CASES, resolve_cases
from bench.cases.cli_startup import torchx_version
from bench.machine import machine, versions
from bench.procs import load_average
from bench.report import markdown, table

RESULTS = REPO / "bench" / "results"
SCHEMA = 1


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="python -m bench",
        description="jobkit against the tools people use instead, interleaved in one run.",
    )
    parser.add_argument("--quick", action="store_true", help="Reduced sizes and rounds.")
    parser.add_argument(
        "--smoke",
        action="store_true",
        help="--quick with the fewest rounds and steps that go through every path of a case"
        " (the test suite's smoke tests): its figures mean nothing.",
    )
    parser.add_argument(
        "--cases",
        default="all",
        help=f"Comma-separated cases (default all): {', '.join(m.NAME for m in CASES)}.",
    )
    parser.add_argument("--out", type=Path, help="JSON file (default bench/results/DATE.json).")
    parser.add_argument("--markdown", type=Path, help="Also write the tables as Markdown here.")
    parser.add_argument(
        "--rounds", type=int, default=5, help="Kept rounds per measurement (default 5, min 5)."
    )
    parser.add_argument(
        "--sizes",
        default=None,
        help="Registry sizes for status_scale (default 10,100,1000,10000; --quick 10,100).",
    )
    parser.add_argument(
        "--pool-ran",
        type=int,
        default=100,
        help="Slurm jobs of the status pool that really run (the rest are cancelled while"
        " held; see bench/slurm_pool.py). Default 100.",
    )
    parser.add_argument(
        "--no-torchx-install",
        action="store_true",
        help="Do not install torchx into bench/.venv-torchx when it is missing.",
    )
    parser.add_argument(
        "--base",
        type=Path,
        help="A jobkit checkout to compare against (cli_startup): each jobkit command also"
        " runs from it, in the same rounds.",
    )
    parser.add_argument(
        "--budget-s",
        type=float,
        default=None,
        help="Seconds from the start within which the GPU case must end: it starts no round"
        " that would end later (judged by its slowest round) and notes the rounds it kept.",
    )
    parser.add_argument("--keep", action="store_true", help="Keep the scratch folder.")
    parser.add_argument("--python", type=Path, help="The project's venv python.")
    return parser


def _say(line: str) -> None:
    print(line, file=sys.stderr, flush=True)


def _run_case(module: ModuleType, ctx: Context) -> CaseResult:
    start = time.monotonic()
    _say(f"== {module.NAME}: {module.TITLE}")
    try:
        result: CaseResult = module.run(ctx)
    except Exception as err:  # one case failing must not lose the others' figures
        result = CaseResult(module.NAME, module.TITLE, status="failed", reason=str(err))
        result.notes.append(traceback.format_exc(limit=6))
        _say(f"   failed: {err}")
    result.seconds = time.monotonic() - start
    _say(f"   {result.status} in {result.seconds:.0f} s")
    return result


def main(argv: Sequence[str] | None = None) -> int:
    """Run the bench; returns the exit status."""
    args = _parser().parse_args(argv)
    args.quick = args.quick or args.smoke
    if args.rounds < 5 and not args.quick:
        _say("python -m bench: --rounds must be at least 5 (medians of at least 5 runs)")
        return 2
    try:
        modules = resolve_cases(args.cases)
    except ValueError as err:
        _say(f"python -m bench: {err}")
        return 2
    python = args.python or default_python()
    stamp = datetime.now().astimezone()
    out = args.out or RESULTS / f"{stamp.strftime('%Y-%m-%dT%H%M%S')}.json"
    work = Path(tempfile.mkdtemp(prefix="jobkit-bench-"))
    partition = slurm.default_partition()
    ctx = Context(
        repo=REPO,
        python=python,
        quick=args.quick,
        rounds=1 if args.quick else args.rounds,
        warmup=0 if args.quick else 1,
        work=work,
        partition=partition,
        say=_say,
        options={
            "sizes": args.sizes,
            "pool_ran": args.pool_ran,
            "torchx_install": not args.no_torchx_install,
            "base": args.base.resolve() if args.base else None,
        },
        smoke=args.smoke,
        deadline=None if args.budget_s is None else time.monotonic() + args.budget_s,
    )
    info = machine()
    _say(f"bench: {info['cpu_model']}, {info['cores']} cores, load {info['load_start']}")
    results: list[CaseResult] = []
    try:
        for module in modules:
            results.append(_run_case(module, ctx))
    finally:
        if not args.keep:
            remove_tree(work)
        else:
            _say(f"scratch kept: {work}")
    info["load_end"] = load_average()
    document = {
        "schema": SCHEMA,
        "date": stamp.isoformat(timespec="seconds"),
        "command": ["python", "-m", "bench", *(argv if argv is not None else sys.argv[1:])],
        "quick": args.quick,
        "rounds": ctx.rounds,
        "machine": info,
        "versions": versions(python, torchx_version()),
        "slurm_partition": partition,
        "cases": {r.name: r.to_dict() for r in results},
    }
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(document, indent=2) + "\n")
    print(table(document))
    if args.markdown:
        args.markdown.parent.mkdir(parents=True, exist_ok=True)
        args.markdown.write_text(markdown(document))
    _say(f"results: {out}")
    return 1 if any(r.status == "failed" for r in results) else 0
