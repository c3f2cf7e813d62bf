"""The frozen code's folder and the provenance file written into a job script, for the
backends whose jobs do not get jobkit's environment (Backend.code_in_script: PBS and Grid
Engine, where qsub passes none on). Their template leaves CODE_PLACEHOLDER (templates/common/
macros.sh.j2, `code_in_script_line`); `jobkit submit` fills it in, quoted, once the snapshot
and the job's folder are known. `jobkit render` prints the placeholder (docs/provenance.md).
"""

from __future__ import annotations

import shlex
from pathlib import Path

from jobkit.core.errors import JobkitError

CODE_PLACEHOLDER = "JOBKIT_CODE_DIR='' JOBKIT_PROVENANCE=''"
"""The line the templates leave, alone on its line."""
_UNSAFE = ("\n", "\r", "\0")


def fill_code_line(script: str, code_dir: Path | None, provenance: Path | None) -> str:
    """`script` with CODE_PLACEHOLDER's line set to these paths (None: empty, the job runs
    the submit folder). A script without the line (a site template that dropped it) is
    refused when there is a snapshot: the job would run the code as it is when it starts,
    in silence."""
    values = [str(code_dir or ""), str(provenance or "")]
    for value in values:
        if any(c in value for c in _UNSAFE):
            raise JobkitError(
                f"the path {value!r} holds a newline, CR or NUL: it cannot be written into"
                " the job script (move JOBKIT_HOME, or set code.snapshot: false)"
            )
    lines = script.split("\n")
    try:
        at = lines.index(CODE_PLACEHOLDER)
    except ValueError:
        if code_dir is None:
            return script  # nothing frozen to run from: the job runs the submit folder
        raise JobkitError(
            "the job script has no line `JOBKIT_CODE_DIR='' JOBKIT_PROVENANCE=''` for the"
            " frozen code (a site template without `m.code_in_script_line()`?): add it, or"
            " set code.snapshot: false (docs/provenance.md)"
        ) from None
    code, provenance_text = (shlex.quote(value) for value in values)
    lines[at] = f"JOBKIT_CODE_DIR={code} JOBKIT_PROVENANCE={provenance_text}"
    return "\n".join(lines)
