"""The public API is typed for its users: mypy --strict accepts the example and the API
tests as a user's code (jobkit ships py.typed), and a wrong use is caught, so the names are
not Any."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]

MISUSE = """\
import jobkit
state: int = jobkit.job("jk1").state
result: str = jobkit.submit_function(print).result()
sweep: jobkit.Job = jobkit.map_array(str, [1])
"""


def _mypy(*paths: Path) -> subprocess.CompletedProcess[str]:
    argv = [sys.executable, "-m", "mypy", "--strict", *map(str, paths)]
    return subprocess.run(argv, capture_output=True, text=True, cwd=REPO, check=False)


def test_mypy_strict_on_code_using_the_api(tmp_path: Path) -> None:
    assert (REPO / "jobkit" / "py.typed").is_file()
    misuse = tmp_path / "misuse.py"
    misuse.write_text(MISUSE, encoding="utf-8")
    good = _mypy(REPO / "examples" / "api_sweep.py", REPO / "tests" / "api" / "test_local.py")
    assert good.returncode == 0, good.stdout + good.stderr
    bad = _mypy(misuse)
    errors = [line.split(": error: ")[1] for line in bad.stdout.splitlines() if ": error: " in line]
    assert errors == [
        'Incompatible types in assignment (expression has type "str", variable has type'
        ' "int")  [assignment]',
        'Incompatible types in assignment (expression has type "Sweep", variable has type'
        ' "Job")  [assignment]',
    ]
