"""A Chart drawn to an image file with matplotlib (the Agg backend: no display needed).

matplotlib is imported here only, when a file is written; without it a one-line error
says how to install it.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from jobkit.core.errors import JobkitError
from jobkit.plot.chart import Chart

WIDTH_IN = 10.0
PANEL_IN = 3.0
HEADER_IN = 1.0
DPI = 100
LEGEND_COLUMNS = 3
FORMATS = (".png", ".svg", ".pdf")
INSTALL_HINT = "pip install 'jobkit[plot]'"


def image_size(panels: int) -> tuple[int, int]:
    """Width and height in pixels of a PNG of `panels` panels."""
    return int(WIDTH_IN * DPI), int((HEADER_IN + PANEL_IN * panels) * DPI)


def _pyplot() -> Any:
    try:
        import matplotlib
    except ImportError:
        raise JobkitError(f"jobkit plot needs matplotlib: {INSTALL_HINT}") from None
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def write_image(chart: Chart, path: Path) -> None:
    """Draw `chart` into `path` (.png, .svg or .pdf); JobkitError when it cannot be written."""
    plt = _pyplot()
    from matplotlib.lines import Line2D

    width, height = image_size(len(chart.panels))
    fig, axes = plt.subplots(
        len(chart.panels),
        1,
        figsize=(width / DPI, height / DPI),
        dpi=DPI,
        sharex=True,
        squeeze=False,
        layout="constrained",
    )
    try:
        fig.suptitle(chart.title, fontsize=13)
        for ax, panel in zip(axes[:, 0], chart.panels, strict=True):
            for series in panel.series:
                color = f"C{series.color % 10}"
                for n, (xs, ys) in enumerate(series.segments):
                    label = series.label if n == 0 else None
                    ax.plot(xs, ys, color=color, linewidth=1.6, label=label)
                for at in series.restarts:
                    ax.axvline(at, color=color, linestyle="--", linewidth=1.1, alpha=0.7)
            ax.set_ylabel(panel.ylabel)
            if panel.logy:
                ax.set_yscale("log")
            ax.grid(True, alpha=0.3)
            if not panel.series:
                ax.text(
                    0.5,
                    0.5,
                    f"no run logs {panel.metric}",
                    ha="center",
                    va="center",
                    transform=ax.transAxes,
                    color="gray",
                )
        axes[-1, 0].set_xlabel(chart.xlabel)
        handles, labels = axes[0, 0].get_legend_handles_labels()
        if chart.has_restarts:
            handles.append(Line2D([], [], color="gray", linestyle="--", linewidth=1.1))
            labels.append(chart.restart_note)
        if handles:  # below the panels: it never hides a curve
            columns = min(len(handles), LEGEND_COLUMNS)
            fig.legend(handles, labels, loc="outside lower center", ncols=columns, fontsize=9)
        try:
            fig.savefig(path, dpi=DPI)
        except OSError as err:
            raise JobkitError(f"cannot write {path}: {err.strerror or err}") from None
    finally:
        plt.close(fig)
