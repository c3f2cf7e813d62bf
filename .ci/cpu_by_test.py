"""Which tests a CI run's CPU went to (issue 25): each test's own figure (its `cpu_s`
property: its pytest process and the processes it waited for, tests/plugins/cpu.py) plus the
processes that ran outside pytest's tree, from process accounting (.ci/cpu.py): those of
Slurm, ssh, Grid Engine and Podman jobs, and local jobs (detached from pytest).

Those are placed by time: each JUnit report's tests ran one after another, so a test's span
is known from the report's start (its timestamp; the time before the first test, collection,
is taken from the gap between the report's end and its file's time). A process counts for
the test that was running when it ended, in the reports that could have started it (a Slurm
job: the cluster's lanes and the tests that need the cluster alone; an ssh or Grid Engine
job: the lanes; a local or Podman job: any), shared evenly when two ran then.
Approximate where two lanes' tests overlap; processes of pytest's own tree are left to their
test's own figure.

Usage: python .ci/cpu_by_test.py LOGDIR [ROWS]   (LOGDIR: .ci/run's log folder)
"""

from __future__ import annotations

import bisect
import sys
import xml.etree.ElementTree as ElementTree
from collections import Counter
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from cpu import ancestors, read, where
from slowest import test_cpu

SLACK_S = 2.0
"""A process that ended this long after a test's end still counts for it (clean-up)."""


@dataclass(frozen=True)
class Span:
    """One test of one report: when it ran."""

    began: float
    ended: float
    test: str


def _root(report: Path) -> ElementTree.Element:
    """The report's root element; an empty one when it is unreadable (a run cut short)."""
    try:
        return ElementTree.parse(report).getroot()
    except (OSError, ElementTree.ParseError):
        return ElementTree.Element("testsuites")


def spans(report: Path) -> list[Span]:
    """The report's tests laid end to end, ending when the report was written."""
    root = _root(report)
    suite = root if root.tag == "testsuite" else root.find("testsuite")
    if suite is None:
        return []
    cases = [
        (f"{case.get('classname', '?')}::{case.get('name', '?')}", float(case.get("time") or 0))
        for case in suite.iter("testcase")
    ]
    total = sum(seconds for _, seconds in cases)
    stamp = suite.get("timestamp")
    began = datetime.fromisoformat(stamp).timestamp() if stamp else 0.0
    began = max(began, report.stat().st_mtime - total)  # collection came first
    laid = []
    for test, seconds in cases:
        laid.append(Span(began, began + seconds, test))
        began += seconds
    return laid


def own_figures(reports: list[Path]) -> Counter[str]:
    """Test -> its `cpu_s` property (.ci/slowest.py reads it)."""
    found: Counter[str] = Counter()
    for report in reports:
        for seconds, test in test_cpu(report):
            found[test] += seconds
    return found


def candidates(place: str, lanes: list[str]) -> list[str]:
    """The reports whose tests could have started a process of PLACE."""
    if place == "Slurm job":
        return [lane for lane in lanes if lane.startswith("cluster-")]
    if place in ("ssh", "Grid Engine job"):
        return [lane for lane in lanes if lane.startswith("cluster-") and lane != "cluster-alone"]
    return lanes


def running(laid: list[Span], starts: list[float], moment: float) -> str | None:
    """The test of one report running at MOMENT (or just ended), if any."""
    index = bisect.bisect_right(starts, moment) - 1
    if index >= 0 and laid[index].began <= moment <= laid[index].ended + SLACK_S:
        return laid[index].test
    return None


def placed(logdir: Path) -> tuple[Counter[str], float]:
    """Test -> CPU of the processes outside pytest's tree placed to it; and the unplaced."""
    reports = {path.stem: spans(path) for path in sorted(logdir.glob("*.xml"))}
    starts = {lane: [span.began for span in laid] for lane, laid in reports.items()}
    records = read(logdir / "pacct")
    found: Counter[str] = Counter()
    unplaced = 0.0
    for process, chain in zip(records, ancestors(records), strict=True):
        place = where(chain)
        if place == "host":
            if any(name.startswith("python") for name in chain) or not chain:
                continue  # pytest's own tree: in its test's own figure
            place = "local job"
        hits = [
            test
            for lane in candidates(place, list(reports))
            if (test := running(reports[lane], starts[lane], process.ended))
        ]
        if not hits:
            unplaced += process.cpu_s
        for test in hits:
            found[test] += process.cpu_s / len(hits)
    return found, unplaced


def table(logdir: Path, rows: int = 15) -> str:
    """The report: by test file, then by test, largest first."""
    reports = sorted(logdir.glob("*.xml"))
    own = own_figures(reports)
    jobs, unplaced = placed(logdir) if (logdir / "pacct").is_file() else (Counter(), 0.0)
    total: Counter[str] = Counter(own)
    total.update(jobs)
    files: Counter[str] = Counter()
    for test, seconds in total.items():
        files[test.split("::")[0]] += seconds
    lines = [
        f"{sum(total.values()):,.0f} CPU-s placed: {sum(own.values()):,.0f} in the tests' own"
        f" processes, {sum(jobs.values()):,.0f} in jobs placed by time ({unplaced:,.0f} not"
        " placed)",
        f"{'CPU-s':>8}  test file",
    ]
    lines += [f"{seconds:8,.0f}  {name}" for name, seconds in files.most_common(rows)]
    lines.append(f"{'CPU-s':>8} {'own':>6}  test")
    lines += [
        f"{seconds:8,.0f} {own[test]:6,.0f}  {test}" for test, seconds in total.most_common(rows)
    ]
    return "\n".join(lines)


def main(argv: list[str]) -> int:
    """Print the table of ARGV[1] (ARGV[2]: rows, default 15)."""
    if len(argv) < 2 or not Path(argv[1]).is_dir():
        print(__doc__.strip().splitlines()[-1], file=sys.stderr)
        return 2
    print(table(Path(argv[1]), int(argv[2]) if len(argv) > 2 else 15))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
