"""The one rule for `launch.master_port: auto` (docs/design.md, "Ports"). Stdlib only: the
trainer (train/env/launch.py) and the submitit job side import it too, and the templates get its
numbers and implement the same steps in bash (templates/common/macros.sh.j2).

    port = PORT_BASE + (N + array index) % PORT_SPAN

N is the job id's number: the part before any `_`, `.` or `[` ('1234.server' -> 1234,
'1234_7' -> 1234) with everything but letters and digits dropped; for `local-EPOCH-PID` ids,
PID. All digits: its last 18 digits as a decimal number. Otherwise (jobkit's own `jk...` ids
of the local and ssh backends) its last 12 characters as a base-36 number (bash arithmetic
is 64-bit), so two such ids differ too. Two jobs sharing a node rarely collide, and the port
stays below Linux's ephemeral range (32768+).
Slurm jobs pass $SLURM_JOB_ID, which differs for every array task; PBS passes the array
index, since all tasks of a PBS array share the number of their id.
"""

from __future__ import annotations

import re

PORT_BASE = 15000
PORT_SPAN = 15000
DECIMAL_DIGITS = 18
BASE36_CHARS = 12

_LOCAL_ID = re.compile(r"^local-\d+-(?P<pid>\d+)$")
_NOT_ALNUM = re.compile(r"[^0-9A-Za-z]")


def id_number(job_id: str) -> int:
    """N for a job id (see the module docstring); 0 when it has no letter or digit."""
    local = _LOCAL_ID.match(job_id)
    head = local["pid"] if local else re.split(r"[_.\[]", job_id, maxsplit=1)[0]
    head = _NOT_ALNUM.sub("", head)
    if not head:
        return 0
    if head.isdigit():
        return int(head[-DECIMAL_DIGITS:])
    return int(head[-BASE36_CHARS:], 36)


def auto_port(job_id: str | None, array_index: int = 0) -> int | None:
    """The rendezvous port for a job id (and PBS array index); None without a job id."""
    if not job_id:
        return None
    return PORT_BASE + (id_number(job_id) + array_index) % PORT_SPAN
