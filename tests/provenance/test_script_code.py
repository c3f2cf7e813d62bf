"""The frozen code's line in a qsub job script (jobkit/provenance/script_code.py)."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from jobkit.core.errors import JobkitError
from jobkit.provenance.script_code import CODE_PLACEHOLDER, fill_code_line

SCRIPT = f'#!/bin/bash\n{CODE_PLACEHOLDER}\necho "$JOBKIT_CODE_DIR|$JOBKIT_PROVENANCE"\n'


def test_the_paths_are_filled_in_quoted_and_bash_reads_them_back(tmp_path: Path) -> None:
    hostile = tmp_path / "a'; touch pwned; echo '$(x) b"
    filled = fill_code_line(SCRIPT, hostile, tmp_path / "p.json")
    assert CODE_PLACEHOLDER not in filled
    done = subprocess.run(
        ["bash", "-c", filled], capture_output=True, text=True, check=True, cwd=tmp_path
    )
    assert done.stdout == f"{hostile}|{tmp_path / 'p.json'}\n"
    assert not (tmp_path / "pwned").exists()


def test_no_snapshot_leaves_it_empty_and_a_script_without_the_line_is_refused() -> None:
    assert fill_code_line(SCRIPT, None, None) == SCRIPT.replace(
        CODE_PLACEHOLDER, "JOBKIT_CODE_DIR='' JOBKIT_PROVENANCE=''"
    )
    assert fill_code_line("#!/bin/bash\necho hi\n", None, Path("/p.json")) == (
        "#!/bin/bash\necho hi\n"
    )
    with pytest.raises(JobkitError, match=r"no line `JOBKIT_CODE_DIR='' .*m.code_in_script_line"):
        fill_code_line("#!/bin/bash\necho hi\n", Path("/snap/sub"), None)
    with pytest.raises(JobkitError, match="newline, CR or NUL"):
        fill_code_line(SCRIPT, Path("/snap/a\nb"), None)
