"""Stand-ins for the programs a rendered script calls, for running scripts without a cluster.

Each records the argv it got (NUL-separated, so any byte survives) into a fresh folder under
$FAKE_DIR, then does the least its real counterpart would: `ssh` runs the command words the
way sshd does (joined by spaces, through `sh -c`, with a clean environment), `pbsdsh`,
`mpiexec` and `srun` run their command here. `torchrun` stands for the program only: it
records argv, environment and working directory and exits 0.

The real programs are exercised by the cluster tests (tests/render/test_cluster.py).
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

from jobkit.render.interpreter import Interpreter

FROM_PATH = Interpreter(None, "the fakes on PATH stand for python and torchrun")
"""Render with this: env.python must put no folder on PATH before the fakes."""

_RECORD = (
    'jobkit_rec=$(mktemp -d "$FAKE_DIR/{name}.XXXXXX"); printf "%s\\0" "$@" >"$jobkit_rec/argv"'
)

FAKES = {
    "torchrun": f"""{_RECORD.format(name="torchrun")}
env -0 >"$jobkit_rec/env"
pwd -P >"$jobkit_rec/cwd"
""",
    "module": _RECORD.format(name="module") + "\n",
    "conda": """if [[ "$1 $2" == "shell.bash hook" ]]; then
  printf '%s\\n' 'conda() {' \
    '  local rec; rec=$(mktemp -d "$FAKE_DIR/conda.XXXXXX"); printf "%s\\0" "$@" >"$rec/argv"' '}'
  exit 0
fi
exit 3
""",
    "ssh": f"""{_RECORD.format(name="ssh")}
while (( $# )); do
  case "$1" in
    -o|-p|-i|-l) shift 2 ;;
    --) shift; break ;;
    -*) shift ;;
    *) break ;;
  esac
done
shift  # the host
exec env -i PATH="$PATH" HOME="$HOME" FAKE_DIR="$FAKE_DIR" sh -c "$*"
""",
    "pbsdsh": f"""{_RECORD.format(name="pbsdsh")}
while [[ "$1" != -- ]]; do shift; done
shift
exec "$@"
""",
    "mpiexec": f"""{_RECORD.format(name="mpiexec")}
shift 4  # -n 1 -host HOST
exec "$@"
""",
    "srun": f"""{_RECORD.format(name="srun")}
while [[ "$1" == -* ]]; do shift; done
exec "$@"
""",
    "scontrol": f"""{_RECORD.format(name="scontrol")}
if [[ "$1 $2" == "show hostnames" ]]; then
  printf '%s\\n' hostA hostB
fi
""",
    "scancel": _RECORD.format(name="scancel") + "\n",
}


def install_fakes(bin_dir: Path) -> Path:
    """Write the fake programs into bin_dir; return it."""
    bin_dir.mkdir(parents=True, exist_ok=True)
    for name, body in FAKES.items():
        path = bin_dir / name
        path.write_text("#!/bin/bash\n" + body)
        path.chmod(0o755)
    return bin_dir


@dataclass(frozen=True)
class Record:
    """One recorded call of a fake program."""

    argv: list[str]
    env: dict[str, str]
    cwd: str | None


def records(fake_dir: Path, name: str) -> list[Record]:
    """Every recorded call of `name`, in no particular order."""
    found = []
    for folder in sorted(fake_dir.glob(f"{name}.*")):
        argv = _split0((folder / "argv").read_bytes())
        env_file, cwd_file = folder / "env", folder / "cwd"
        env = {}
        if env_file.exists():
            for item in _split0(env_file.read_bytes()):
                key, _, value = item.partition("=")
                env[key] = value
        cwd = cwd_file.read_text().rstrip("\n") if cwd_file.exists() else None
        found.append(Record(argv, env, cwd))
    return found


def _split0(data: bytes) -> list[str]:
    return [os.fsdecode(part) for part in data.split(b"\0")[:-1]]


WORKER_PREFIX_LEN = 4
"""torchrun starts `sh -c NOTE jobkit-worker PROGRAM...` (templates/common/macros.sh.j2)."""


def torchrun_program(argv: list[str]) -> list[str]:
    """The program torchrun was told to start, past --no-python and the worker note."""
    words = argv[argv.index("--no-python") + 1 :]
    assert words[0] == "sh" and words[1] == "-c" and words[3] == "jobkit-worker", words
    assert '>"$JOBKIT_RUN_DIR/ranks/$RANK"; exec "$@"' in words[2], words[2]
    return words[WORKER_PREFIX_LEN:]
