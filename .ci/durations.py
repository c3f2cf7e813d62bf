"""Write the table of test seconds that balances .ci/run's shards (tests/plugins/groups.py)
from one run's pytest JUnit XML reports.

Usage: python .ci/durations.py OUT.json REPORT.xml [REPORT.xml ...]
A test's seconds are setup + call + teardown, as pytest writes them in the report; tests
under MIN_SECONDS are left out (groups.py counts those as its default). .ci/run writes one
into its log folder at the end: copy it over tests/plugins/durations.json when the suite's
times have moved.
"""

from __future__ import annotations

import json
import sys
import xml.etree.ElementTree as ElementTree
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
MIN_SECONDS = 0.5


def test_id(classname: str, name: str, repo: Path = REPO) -> str:
    """pytest's id of a report's test case: `tests.e2e.test_x.TestY` + `test_z[a]` ->
    `tests/e2e/test_x.py::TestY::test_z[a]` (the module is the longest prefix that is a file)."""
    parts = classname.split(".")
    for cut in range(len(parts), 0, -1):
        module = "/".join(parts[:cut]) + ".py"
        if (repo / module).is_file():
            return "::".join([module, *parts[cut:], name])
    return "::".join(["/".join(parts) + ".py", name])


def seconds_by_test(reports: list[Path], repo: Path = REPO) -> dict[str, float]:
    """Test id -> seconds (rounded to 0.1) of every case of REPORTS at or over MIN_SECONDS."""
    found: dict[str, float] = {}
    for report in reports:
        for case in ElementTree.parse(report).getroot().iter("testcase"):
            seconds = float(case.get("time") or 0)
            if seconds >= MIN_SECONDS:
                key = test_id(case.get("classname", ""), case.get("name", ""), repo)
                found[key] = round(seconds, 1)
    return dict(sorted(found.items()))


def main(argv: list[str]) -> int:
    if len(argv) < 2:
        print(__doc__.strip().splitlines()[3], file=sys.stderr)
        return 2
    table = {
        "about": "seconds per test of one .ci/run (.ci/durations.py); balances its shards",
        "tests": seconds_by_test([Path(name) for name in argv[1:]]),
    }
    Path(argv[0]).write_text(json.dumps(table, indent=0) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
