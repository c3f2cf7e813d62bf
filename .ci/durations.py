"""Write the table of test seconds that balances .ci/run's shards (tests/plugins/groups.py)
from pytest JUnit XML reports: one run's, or several runs' (a test in several reports gets
the mean of its seconds: a cluster test's time moves by minutes from run to run, with what
the other lanes' jobs hold in the shared queue, so one run balances the lanes badly).

Usage: python .ci/durations.py OUT.json REPORT.xml [REPORT.xml ...]
A test's seconds are setup + call + teardown, as pytest writes them in the report; tests
under MIN_SECONDS (their mean) are left out (groups.py counts those as its default). .ci/run
writes one into its log folder at the end; when the suite's times have moved, write
tests/plugins/durations.json from the reports of the last few runs:
`python .ci/durations.py tests/plugins/durations.json /tmp/jobkit-ci.*/[co]*.xml`.
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
    """Test id -> mean seconds over REPORTS (rounded to 0.1) of every case at or over
    MIN_SECONDS."""
    found: dict[str, list[float]] = {}
    for report in reports:
        for case in ElementTree.parse(report).getroot().iter("testcase"):
            key = test_id(case.get("classname", ""), case.get("name", ""), repo)
            found.setdefault(key, []).append(float(case.get("time") or 0))
    means = {key: sum(times) / len(times) for key, times in found.items()}
    return {key: round(mean, 1) for key, mean in sorted(means.items()) if mean >= MIN_SECONDS}


def main(argv: list[str]) -> int:
    if len(argv) < 2:
        print(__doc__.strip().splitlines()[3], file=sys.stderr)
        return 2
    table = {
        "about": "mean seconds per test of .ci/run reports (.ci/durations.py); balances shards",
        "tests": seconds_by_test([Path(name) for name in argv[1:]]),
    }
    Path(argv[0]).write_text(json.dumps(table, indent=0) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
