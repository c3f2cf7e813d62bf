"""Several scheduler commands in ONE ssh round trip: each command's stdout, stderr and exit
code come back in sections of one output, as proc.Completed answers a ClusterRoute serves
(remote status: squeue and sacct for all of a cluster's jobs at once).

The remote side is a POSIX sh snippet (no jobkit there): it runs each command with its
output in a temporary folder, then prints them between lines `<marker> <index> <part> <rc>`
where the marker is random for each call, so no output can fake a section.
"""

from __future__ import annotations

import secrets
import shlex
from collections.abc import Sequence

from jobkit.core import proc
from jobkit.core.errors import SchedulerError
from jobkit.remote.transport import Transport

_RUNNER = r"""
marker=$1; shift
tmp=$(mktemp -d "${TMPDIR:-/tmp}/jobkit-query.XXXXXX") || exit 97
trap 'rm -rf -- "$tmp"' EXIT
i=0
for cmd in "$@"; do
  sh -c "$cmd" </dev/null >"$tmp/out" 2>"$tmp/err"
  rc=$?
  printf '\n%s %s out %s\n' "$marker" "$i" "$rc"
  cat -- "$tmp/out"
  printf '\n%s %s err %s\n' "$marker" "$i" "$rc"
  cat -- "$tmp/err"
  i=$((i + 1))
done
printf '\n%s end\n' "$marker"
"""


def run_batched(transport: Transport, commands: Sequence[Sequence[str]]) -> list[proc.Completed]:
    """Run each argv on the login node in one round trip; their outputs, in order."""
    marker = f"@@jobkit-{secrets.token_hex(8)}"
    words = [shlex.join(argv) for argv in commands]
    done = transport.run_script(_RUNNER, marker, *words)
    return _split(done, marker, [list(argv) for argv in commands])


def _split(done: proc.Completed, marker: str, commands: list[list[str]]) -> list[proc.Completed]:
    """The sections of the output, one Completed per command."""
    parts: dict[tuple[int, str], tuple[int, list[str]]] = {}
    current: tuple[int, str] | None = None
    ended = False
    for line in done.stdout.split("\n"):
        if line.startswith(marker + " "):
            words = line.split()
            if words[1:] == ["end"]:
                ended = True
                current = None
                continue
            current = (int(words[1]), words[2])
            parts[current] = (int(words[3]), [])
        elif current is not None:
            parts[current][1].append(line)
    if not ended:
        raise SchedulerError(
            done.argv, done.returncode, done.stdout, done.stderr, reason="output cut short"
        )
    answers = []
    for index, argv in enumerate(commands):
        rc, out = parts.get((index, "out"), (1, []))
        err = parts.get((index, "err"), (rc, []))[1]
        answers.append(proc.Completed(argv, rc, _text(out), _text(err), done.seconds))
    return answers


def _text(lines: list[str]) -> str:
    """A section's text as the command wrote it: the next marker's printf begins with a
    newline, so the last line (complete or not) ends where the section does."""
    return "\n".join(lines)
