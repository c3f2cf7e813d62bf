"""Put the GPU case's tables into docs/benchmarks.md (bench/gpu.sh calls it after the run).

    python -m bench.gpu_table RESULTS.md [DOC]      (DOC: docs/benchmarks.md)

The GPU section is the text between BEGIN and END; a new run replaces it, and the first run
appends it (with both markers) at the end of the document. Pure text in, text out
(`splice`), so it is tested without a GPU.
"""

from __future__ import annotations

import sys
from pathlib import Path

BEGIN = "<!-- gpu-table: begin (bench/gpu.sh writes this section) -->"
END = "<!-- gpu-table: end -->"
HEADING = "## GPU run (bench/gpu.sh)"


def gpu_section(results_markdown: str) -> str:
    """The GPU case's part of `python -m bench --markdown` output: the run line, the versions
    and the case's tables (from its `### GPU` heading to the next `### ` heading)."""
    lines = results_markdown.splitlines()
    header = [line for line in lines[:3] if line.startswith(("Run of ", "Versions:"))]
    start = next((i for i, line in enumerate(lines) if line.startswith("### GPU")), None)
    if start is None:
        raise ValueError("no '### GPU' section in the results (did the GPU case run?)")
    end = next((i for i in range(start + 1, len(lines)) if lines[i].startswith("### ")), len(lines))
    # One level down: the section sits under HEADING (##) in the document.
    body = [f"#{line}" if line.startswith("### ") else line for line in lines[start:end]]
    return "\n".join([*header, "", *body]).strip() + "\n"


def splice(document: str, section: str) -> str:
    """DOCUMENT with the text between BEGIN and END replaced by SECTION (or BEGIN, heading,
    SECTION and END appended when the markers are not there yet)."""
    block = f"{BEGIN}\n{HEADING}\n\n{section.strip()}\n{END}"
    begin, end = document.find(BEGIN), document.find(END)
    if begin == -1 and end == -1:
        return document.rstrip("\n") + "\n\n" + block + "\n"
    if begin == -1 or end < begin:
        raise ValueError(f"the document has only one of the markers {BEGIN!r} / {END!r}")
    return document[:begin] + block + document[end + len(END) :]


def main(argv: list[str]) -> int:
    if not 1 <= len(argv) <= 2:
        print(__doc__.strip().splitlines()[2].strip(), file=sys.stderr)
        return 2
    results = Path(argv[0])
    doc = Path(argv[1]) if len(argv) == 2 else Path("docs/benchmarks.md")
    try:
        section = gpu_section(results.read_text(encoding="utf-8"))
        doc.write_text(splice(doc.read_text(encoding="utf-8"), section), encoding="utf-8")
    except (OSError, ValueError) as err:
        print(f"bench.gpu_table: {err}", file=sys.stderr)
        return 1
    print(f"bench.gpu_table: {doc} has the GPU section of {results}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
