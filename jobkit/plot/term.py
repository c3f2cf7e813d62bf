"""A Chart drawn as text for the terminal with plotext (imported here only).

The title, then one panel per metric, then the legend as lines of text (a legend drawn on
the small canvas would hide the curves). Colours only when the output is a terminal.
"""

from __future__ import annotations

from typing import Any

from jobkit.core.errors import JobkitError
from jobkit.plot.chart import Chart
from jobkit.plot.png import INSTALL_HINT

PANEL_ROWS = 16
"""Rows of one panel (title, canvas, ticks and axis label)."""
MIN_WIDTH = 60
COLORS = (12, 9, 10, 13, 11, 14, 208, 6)
"""256-colour codes of the runs' lines (blue, red, green, magenta, yellow, cyan...)."""
MARKER_COLOR = 8
"""Grey: the restart markers."""
LINE_SYMBOL = "━━"
MARKER_SYMBOL = "┊"


def _plotext() -> Any:
    try:
        import plotext
    except ImportError:
        raise JobkitError(f"jobkit plot --term needs plotext: {INSTALL_HINT}") from None
    return plotext


def render_text(chart: Chart, width: int, color: bool) -> str:
    """The chart as lines of text `width` columns wide (ANSI colours when `color`)."""
    plt = _plotext()
    width = max(width, MIN_WIDTH)
    plt.terminal.limit(False, False)  # the size asked for, whatever the terminal's
    fig = plt.figure
    fig.clear()
    fig.plot_size(width, PANEL_ROWS * len(chart.panels))
    single = len(chart.panels) == 1
    if not single:
        fig.subplots(len(chart.panels), 1)  # plotext 6 has no 1x1 grid: one panel is the figure
    for row, panel in enumerate(chart.panels, start=1):
        ax = fig if single else fig.subplot(row, 1)
        ax.plot_size(width, PANEL_ROWS)
        ax.title(panel.ylabel + (" (log scale)" if panel.logy else ""))
        for series in panel.series:
            pixel = COLORS[series.color % len(COLORS)]
            for xs, ys in series.segments:
                signal = ax.signal(xs, ys, marker=plt.marker("hd", pixel=pixel))
                signal.lines()
                ax.draw(signal)
            for at in series.restarts:
                ax.line(at, orientation="vertical", pixel=MARKER_COLOR, style="dotted")
        if panel.logy:
            ax.ruler("y").scale("log")
        ax.label(chart.xlabel, axis="x")
        ax.legend(False)
    body = str(fig.build())
    fig.clear()
    lines = [chart.title.center(width).rstrip(), body.rstrip("\n")]
    labels = {s.label: s.color for p in chart.panels for s in p.series}
    for label, index in labels.items():
        lines.append(f"  {_paint(plt, LINE_SYMBOL, COLORS[index % len(COLORS)])} {label}")
    if chart.has_restarts:
        lines.append(f"  {_paint(plt, MARKER_SYMBOL, MARKER_COLOR)}  {chart.restart_note}")
    text = "\n".join(lines)
    return text if color else plt.uncolorize(text)


def _paint(plt: Any, text: str, color: int) -> str:
    return str(plt.colorize(text, color))
