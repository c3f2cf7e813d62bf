"""Print the slowest tests of one or more pytest JUnit XML reports, merged (.ci/run runs the
cluster tests and the others as two pytest processes at once; this is their one listing).

Usage: python .ci/slowest.py COUNT REPORT.xml [REPORT.xml ...]
A test's time is setup + call + teardown, as pytest writes it in the report.
"""

from __future__ import annotations

import sys
import xml.etree.ElementTree as ElementTree
from pathlib import Path


def test_times(report: Path) -> list[tuple[float, str]]:
    """(seconds, test id) of every test case in REPORT; [] when it is missing or unreadable."""
    try:
        root = ElementTree.parse(report).getroot()
    except (OSError, ElementTree.ParseError):
        return []
    found = []
    for case in root.iter("testcase"):
        name = f"{case.get('classname', '?')}::{case.get('name', '?')}"
        found.append((float(case.get("time") or 0), name))
    return found


def main(argv: list[str]) -> int:
    if len(argv) < 2 or not argv[0].isdigit():
        print(__doc__.strip().splitlines()[2], file=sys.stderr)
        return 2
    count = int(argv[0])
    times = sorted((t for report in argv[1:] for t in test_times(Path(report))), reverse=True)
    print(f"{'seconds':>9}  test (setup + call + teardown)")
    for seconds, test in times[:count]:
        print(f"{seconds:9.1f}  {test}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
