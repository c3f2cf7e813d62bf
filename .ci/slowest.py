"""Print the slowest tests of one or more pytest JUnit XML reports, merged (.ci/run runs the
cluster tests and the others as two pytest processes at once; this is their one listing),
then the tests that used the most CPU (their `cpu_s` property: tests/plugins/cpu.py).

Usage: python .ci/slowest.py COUNT REPORT.xml [REPORT.xml ...]
A test's time is setup + call + teardown, as pytest writes it in the report.
"""

from __future__ import annotations

import sys
import xml.etree.ElementTree as ElementTree
from pathlib import Path


def _cases(report: Path) -> list[ElementTree.Element]:
    """The test cases of REPORT; [] when it is missing or unreadable."""
    try:
        root = ElementTree.parse(report).getroot()
    except (OSError, ElementTree.ParseError):
        return []
    return list(root.iter("testcase"))


def _name(case: ElementTree.Element) -> str:
    return f"{case.get('classname', '?')}::{case.get('name', '?')}"


def test_times(report: Path) -> list[tuple[float, str]]:
    """(seconds, test id) of every test case in REPORT; [] when it is missing or unreadable."""
    return [(float(case.get("time") or 0), _name(case)) for case in _cases(report)]


def test_cpu(report: Path) -> list[tuple[float, str]]:
    """(CPU seconds, test id) of every test case in REPORT that has its `cpu_s` property."""
    found = []
    for case in _cases(report):
        for prop in case.iter("property"):
            if prop.get("name") == "cpu_s":
                found.append((float(prop.get("value") or 0), _name(case)))
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
    cpu = sorted((t for report in argv[1:] for t in test_cpu(Path(report))), reverse=True)
    if cpu:
        total = sum(seconds for seconds, _ in cpu)
        print(
            f"\n{'CPU-s':>9}  test: the {count} that used the most CPU, of {total:,.0f} CPU-s in"
            " all (pytest's own and its waited-for processes: tests/plugins/cpu.py)"
        )
        for seconds, test in cpu[:count]:
            print(f"{seconds:9.1f}  {test}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
