"""Does a change to the spec code keep validation the same? `load_spec`'s outcome for a corpus
of specs, from this checkout and from a base one, compared line by line.

    git worktree add /tmp/jobkit-base main
    .venv/bin/python -m bench.spec_corpus --base /tmp/jobkit-base

The corpus: every YAML file under examples/ and tests/; each with every section absent, empty,
null or holding an unknown key, and with each of a few `--set`s; every field slot of
tests/reliability/fieldmap.py with 15 values on each backend it names (~11,000 specs, ~2.5 min
per checkout on the 2-core machine). An outcome is the validated spec (its dump, the keys given,
its sections, the fields set, notes and origins) or the error lines and exit code. Exit status
1 when the two checkouts differ (the first differences are printed). Each checkout runs as
itself: its own jobkit and tests/ on PYTHONPATH, this venv's Python.
"""

from __future__ import annotations

import argparse
import copy
import json
import os
import re
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

SECTIONS = [
    "resources",
    "scheduler",
    "env",
    "launch",
    "ssh",
    "sge",
    "pbs",
    "monitor",
    "logs",
    "code",
    "container",
    "notify",
    "sweep",
]
SETS = [
    "resources.nodes=3",
    "resources.nodes=2:4",
    "env.nccl=ethernet",
    "env.nccl.nsocks_perthread=9",
    "env.nccl.socket_nthreads=9",
    "resources.gpus_per_node=1",
    "launch.launcher=spawn",
    "scheduler.pbs_flavor=pro",
    "backend=ssh",
    "backend=pbs",
    "backend=sge",
    "backend=local",
    "ssh.hosts=[a,b,c]",
    "resources.max_nodes=1",
    "name=a b",
]
VALUES: list[Any] = ["x", "", "1", "a b", "$(id)", "a\nb", "12:00:00", 3, None, True, [], {}]
VALUES += ["-1", "1e3", "ok.name"]
TEMP_PATH = re.compile(r"/tmp/[A-Za-z0-9_.-]+/")


def outcome(path: Path, sets: list[str]) -> dict[str, Any]:
    """What load_spec makes of the spec at `path` (imported from the checkout on sys.path)."""
    from jobkit.core.errors import JobkitError
    from jobkit.spec.load import load_spec
    from jobkit.spec.remembered import section_paths

    try:
        loaded = load_spec(path, sets=sets, profile_dirs=[])
    except JobkitError as err:
        return {"err": list(err.lines()), "code": err.exit_code}
    except Exception as err:  # a traceback is an outcome too
        return {"exception": f"{type(err).__name__}: {err}"}
    spec: Any = loaded.spec
    return {
        "spec": spec.model_dump(mode="json"),
        "given": spec.model_dump(mode="json", exclude_unset=True),
        "sections": [list(where) for where in section_paths(spec)],
        "fields_set": sorted(spec.model_fields_set),
        "resources_set": sorted(spec.resources.model_fields_set),
        "notes": list(loaded.notes),
        "origins": sorted(f"{key}={where}" for key, where in loaded.origins.items()),
    }


def corpus() -> Iterator[tuple[str, dict[str, Any] | Path, list[str]]]:
    """(label, spec data or file, --set words) of every case."""
    import yaml

    from tests.reliability import fieldmap

    files = sorted({*Path().glob("examples/**/*.yaml"), *Path().glob("tests/**/*.yaml")})
    for file in files:
        yield str(file), file, []
        try:
            data = yaml.safe_load(file.read_text(encoding="utf-8"))
        except (yaml.YAMLError, UnicodeDecodeError):
            continue
        if not isinstance(data, dict):
            continue
        for key in SECTIONS:
            for variant, value in (("empty", {}), ("null", None), ("bad", {"no_such_key": 1})):
                changed = copy.deepcopy(data)
                changed[key] = value
                yield f"{file}:{key}:{variant}", changed, []
            changed = copy.deepcopy(data)
            changed.pop(key, None)
            yield f"{file}:{key}:absent", changed, []
        for word in SETS:
            yield f"{file}:--set {word}", data, [word]
    for backend in fieldmap.BACKENDS:
        for slot in fieldmap.slots():
            for value in VALUES:
                try:
                    data = fieldmap.spec_with(backend, slot, value)
                except (TypeError, ValueError):
                    continue  # a slot that takes text only (env.python prefixes a "/")
                yield f"{backend}:{slot.key}:{value!r}", data, []


def emit() -> None:
    """Print one JSON line per case: run inside the checkout (cwd and PYTHONPATH)."""
    import yaml

    import jobkit

    here = Path.cwd().resolve()
    if not Path(jobkit.__file__).resolve().is_relative_to(here):
        raise SystemExit(f"jobkit comes from {jobkit.__file__}, not from {here}")
    os.environ["JOBKIT_TEMPLATE_CACHE"] = "off"
    with tempfile.TemporaryDirectory() as temp:
        folder = Path(temp)
        for label, spec, sets in corpus():
            if isinstance(spec, Path):
                path = spec
            else:
                path = folder / "spec.yaml"
                path.write_text(yaml.safe_dump(spec), encoding="utf-8")
            line = json.dumps({"case": label, "out": outcome(path, sets)}, sort_keys=True)
            print(TEMP_PATH.sub("TMP/", line))


def outcomes(tree: Path) -> list[str]:
    """The corpus's outcome lines from the checkout at `tree`."""
    env = dict(os.environ, PYTHONPATH=str(tree), JOBKIT_HOME=tempfile.mkdtemp())
    done = subprocess.run(
        [sys.executable, str(Path(__file__).resolve()), "--emit"],
        cwd=tree,
        env=env,
        capture_output=True,
        text=True,
        check=False,
    )
    if done.returncode != 0:
        raise SystemExit(f"{tree}: exit {done.returncode}: {done.stderr[-2000:]}")
    return done.stdout.splitlines()


def main() -> int:
    """Compare this checkout's outcomes with --base's."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--base", type=Path, help="the checkout to compare against")
    parser.add_argument("--emit", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.emit:
        emit()
        return 0
    if args.base is None:
        parser.error("give --base DIR")
    head = outcomes(Path(__file__).resolve().parents[1])
    base = outcomes(args.base.resolve())
    differ = [(old, new) for old, new in zip(base, head, strict=False) if old != new]
    print(f"{len(head)} specs here, {len(base)} in base; {len(differ)} outcomes differ")
    for old, new in differ[:5]:
        print(f"- {old[:400]}\n+ {new[:400]}")
    return 1 if differ or len(head) != len(base) else 0


if __name__ == "__main__":
    sys.exit(main())
