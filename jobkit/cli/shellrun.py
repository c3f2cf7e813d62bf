"""What `jobkit shell` runs on a terminal, here or on a cluster (cli/shell.py, cli/onshell.py):
the inner command that reads the job's environment, the line saying what is asked for, and
running it in the foreground."""

from __future__ import annotations

import shlex
import signal
import subprocess

from jobkit.core.errors import JobkitError

RC_VARIABLE = "JOBKIT_SHELL_RC"
"""The rc file's text travels in the environment (srun passes it to the node), so no file has
to be shared between this machine and the node."""
INNER = [
    "bash",
    "-c",
    f'exec bash --rcfile <(printf "%s\\n" "${RC_VARIABLE}") -i',
]
"""What runs with a terminal in the allocation: bash reading the job's environment as its rc
file (constant words: the spec's values are inside the rc text, quoted by the templates)."""


def what_line(argv: list[str], inner_words: int, name: str) -> str:
    """The one line saying what is asked for and how to leave."""
    request = argv[: len(argv) - inner_words]
    if not request:
        return (
            f"a shell on this machine with the environment of the job {name}; `exit` or"
            " Ctrl-D leaves"
        )
    if "srun" in request:
        request = request[: request.index("srun")]
    return (
        f"asking for the allocation of the job {name}: {shlex.join(request)}; the shell opens"
        " on its first node with the job's environment; `exit` or Ctrl-D leaves and gives the"
        " allocation back"
    )


def run_foreground(argv: list[str], env: dict[str, str]) -> int:
    """Run argv on this terminal; Ctrl-C belongs to it (jobkit ignores SIGINT meanwhile)."""
    previous = signal.signal(signal.SIGINT, signal.SIG_IGN)
    try:
        done = subprocess.run(argv, env=env, check=False)
    except OSError as err:
        raise JobkitError(f"cannot run {argv[0]}: {err.strerror or err}") from None
    finally:
        signal.signal(signal.SIGINT, previous)
    return done.returncode if done.returncode >= 0 else 128 - done.returncode
