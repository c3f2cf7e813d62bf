"""The results as a plain-text table (printed) and as Markdown (docs/benchmarks.md)."""

from __future__ import annotations

from typing import Any

MARK = {True: "met", False: "MISSED", None: "n/a"}


def fmt(value: float | None, unit: str) -> str:
    """A value with its unit; seconds below 1 s are shown in ms."""
    if value is None:
        return "-"
    if unit == "s":
        if abs(value) < 0.01:
            return f"{value * 1000:.2f} ms"
        return f"{value * 1000:.1f} ms" if abs(value) < 1 else f"{value:.2f} s"
    if unit in ("%",):
        return f"{value:.2f} %"
    if abs(value) >= 1000:
        return f"{value:,.0f} {unit}".rstrip()
    return f"{value:.3g} {unit}".rstrip()


def _ratio(value: float | None) -> str:
    return "-" if value is None else f"{value:.3f}x"


def _case_lines(case: dict[str, Any]) -> list[str]:
    lines = [
        f"== {case['title']} [{case['status']}]" + (f": {case['reason']}" if case["reason"] else "")
    ]
    rows = case["stats"]
    if rows:
        width = max(len(r["name"]) for r in rows)
        lines.append(f"  {'measurement'.ljust(width)}  {'median':>12} {'min':>12} {'max':>12}  n")
        for r in rows:
            lines.append(
                f"  {r['name'].ljust(width)}  {fmt(r['median'], r['unit']):>12}"
                f" {fmt(r['min'], r['unit']):>12} {fmt(r['max'], r['unit']):>12}  {r['n']}"
            )
    for name, value in case["ratios"].items():
        lines.append(f"  ratio  {name}: {_ratio(value)}")
    for t in case["targets"]:
        value = "" if t["value"] is None else f": {t['value']} {t['unit']}".rstrip()
        note = f" ({t['note']})" if t.get("note") else ""
        lines.append(f"  target [{MARK[t['met']]}] {t['name']} {t['goal']}{value}{note}")
    for note in case["notes"]:
        if "Traceback" not in note:
            lines.append(f"  note   {note}")
    return lines


def table(document: dict[str, Any]) -> str:
    """Everything a terminal user needs, case after case."""
    m = document["machine"]
    v = document["versions"]
    head = [
        f"jobkit bench {document['date']}{' (quick)' if document['quick'] else ''}",
        f"machine: {m['cpu_model']}, {m['cores']} cores, {m['mem_gib']} GiB,"
        f" load {m['load_start']} -> {m.get('load_end')}",
        "versions: " + ", ".join(f"{k} {val or 'n/a'}" for k, val in v.items()),
        "",
    ]
    body: list[str] = []
    for case in document["cases"].values():
        body += [*_case_lines(case), ""]
    return "\n".join(head + body)


def markdown(document: dict[str, Any]) -> str:
    """The same figures as Markdown tables (one per case)."""
    m = document["machine"]
    v = document["versions"]
    out = [
        f"Run of {document['date']}{' (quick)' if document['quick'] else ''};"
        f" {m['cpu_model']}, {m['cores']} cores, {m['mem_gib']} GiB; load average (1, 5, 15 min)"
        f" {m['load_start']} at the start, {m.get('load_end')} at the end.",
        "Versions: " + ", ".join(f"{k} {val or 'n/a'}" for k, val in v.items()) + ".",
        "",
    ]
    for case in document["cases"].values():
        out.append(f"### {case['title']}")
        out.append("")
        if case["status"] != "ok":
            out.append(f"**{case['status']}**{': ' + case['reason'] if case['reason'] else ''}")
            out.append("")
        if case["stats"]:
            out.append("| measurement | median | min | max | n |")
            out.append("|---|---:|---:|---:|---:|")
            for r in case["stats"]:
                out.append(
                    f"| {r['name']} | {fmt(r['median'], r['unit'])} | {fmt(r['min'], r['unit'])}"
                    f" | {fmt(r['max'], r['unit'])} | {r['n']} |"
                )
            out.append("")
        if case["ratios"]:
            out.append("| ratio | value |")
            out.append("|---|---:|")
            for name, value in case["ratios"].items():
                out.append(f"| {name} | {_ratio(value)} |")
            out.append("")
        if case["targets"]:
            out.append("| target | goal | this run | |")
            out.append("|---|---|---:|---|")
            for t in case["targets"]:
                value = "-" if t["value"] is None else f"{t['value']} {t['unit']}".strip()
                note = f" ({t['note']})" if t.get("note") else ""
                out.append(f"| {t['name']} | {t['goal']} | {value} | {MARK[t['met']]}{note} |")
            out.append("")
        for note in case["notes"]:
            if "Traceback" not in note:
                out.append(f"- {note}")
        if case["notes"]:
            out.append("")
    return "\n".join(out)
