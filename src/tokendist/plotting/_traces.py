"""Trace plots: discrepancy and l2 error over the steps of one run, or of several overlaid."""

from __future__ import annotations

from pathlib import Path

import numpy as np
from ..engine import PROTOCOLS

__all__ = ["plot_run", "plot_compare", "new_figure", "family_style"]

# One line style per paper family, so that a comparison of many protocols stays readable.
_FAMILY_STYLES = {"Houle": "-", "Margara": (0, (6, 2)), "Subramanian": (0, (1, 1.5)),
                  "Elsässer": (0, (5, 1.5, 1, 1.5)), "Ghosh": (0, (3, 1, 1, 1, 1, 1))}


def family_style(algorithm: str) -> object:
    """The line style of the paper family that ``algorithm`` belongs to."""

    if algorithm in PROTOCOLS:
        paper = PROTOCOLS.get(algorithm).paper
        for key, style in _FAMILY_STYLES.items():
            if paper.startswith(key):
                return style
    return "-"


#: What each plotted metric is (the y-axis label says it, not only its name).
_METRIC_LABELS = {"discrepancy": "discrepancy: max load - min load", "l2_error": "l2 error: ||load - average||_2",
                  "local_discrepancy": "local discrepancy: largest difference across an edge"}


def run_label(result) -> str:
    """A run's legend entry: its name, marked when it is not comparable, and the perfect tree's rise explained."""
    from ..engine import PROTOCOLS

    label = result.algorithm
    if result.algorithm in PROTOCOLS and PROTOCOLS.get(result.algorithm).divisible:
        label += " (real-valued)"
    if result.infeasible_steps:
        label += f" ({result.infeasible_steps:,} infeasible steps)"
    if result.algorithm == "perfect-tree":
        # Margara, Pistocchi, Vassura, Theorem 2: after phase 2 the root holds Avg + (T mod N).
        label += "\n  (rises: phase 2 gathers the T mod N\n   extra tokens at the root, Thm 2)"
    return label


def new_figure(ncols: int = 2, width: float = 11.0, height: float = 4.2, *, constrained: bool = True):
    """A figure of ``ncols`` panels in a row (Agg: files only), laid out by matplotlib unless told not to."""
    from matplotlib.figure import Figure  # no pyplot: no GUI backend to look for, no global figure list

    fig = Figure(figsize=(width, height), layout="constrained" if constrained else None)
    axes = fig.subplots(1, ncols)
    return fig, np.atleast_1d(axes)


def _thinned(x: np.ndarray, y: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The points of the line through ``(x, y)`` that are not inside a run of equal values.

    A point whose neighbours both have its value lies on a horizontal segment between them: the
    drawn line is the same without it. A discrepancy trace is mostly such runs (10,000 steps of a
    settled run: two points).
    """
    if y.size <= 2:
        return x, y
    keep = np.ones(y.size, dtype=bool)
    keep[1:-1] = (y[1:-1] != y[:-2]) | (y[1:-1] != y[2:])
    return x[keep], y[keep]


# Fixed margins (inches) instead of a layout engine or a tight bounding box: those measure every
# tick label of the log axes once or twice per save, most of the time of a 26-run comparison.
_LEFT, _GAP, _RIGHT, _BOTTOM, _TOP, _LEGEND = 1.0, 1.0, 0.15, 0.55, 0.45, 2.55


def _plain(value, _pos) -> str:
    return f"{value:g}"


def plot_compare(results, path, *, title: str | None = None, metrics=("discrepancy", "l2_error"),
                 floor: float = 0.5) -> Path:
    """Overlay the traces of several runs, one panel per metric.

    Both axes are logarithmic (the step axis symmetric-log so that step 0 shows). Values below
    ``floor`` are drawn at the floor: an integer protocol that reaches discrepancy 0 ends on the
    bottom edge, and the real-valued schemes' descent below half a token is cut where it no longer
    matters for indivisible tokens.
    """
    from matplotlib import colormaps
    from matplotlib.ticker import FuncFormatter, NullFormatter

    legend = len(results) > 1
    panel = 4.3
    width = _LEFT + len(metrics) * panel + (len(metrics) - 1) * _GAP + (_LEGEND if legend else _RIGHT)
    # The legend sits beside the last panel: tall enough for one line per run (26 protocols).
    height = max(4.6, 0.2 * len(results) + 1.4)
    fig, axes = new_figure(len(metrics), width=width, height=height, constrained=False)
    fig.subplots_adjust(left=_LEFT / width, right=1 - (_LEGEND if legend else _RIGHT) / width,
                        bottom=_BOTTOM / height, top=1 - _TOP / height, wspace=_GAP / panel)
    colours = colormaps["tab20" if len(results) > 10 else "tab10"]
    for k, r in enumerate(results):
        style = family_style(r.algorithm)
        steps = np.asarray(r.trace["step"])
        for ax, m in zip(axes, metrics):
            x, y = _thinned(steps, np.maximum(np.asarray(r.trace[m], dtype=float), floor))
            ax.plot(x, y, label=run_label(r), lw=1.4, ls=style, color=colours(k % colours.N))
    for ax, m in zip(axes, metrics):
        ax.set_xlabel("step")
        ax.set_ylabel(_METRIC_LABELS.get(m, m.replace("_", " ")) + f"\n(log scale; below {floor:g} drawn at {floor:g})")
        ax.set_xscale("symlog", linthresh=10)
        ax.set_yscale("log")
        # Plain tick labels (1000, not 10^3 in mathtext): the same numbers, a fraction of the time.
        for axis in (ax.xaxis, ax.yaxis):
            axis.set_major_formatter(FuncFormatter(_plain))
            axis.set_minor_formatter(NullFormatter())
        ax.grid(alpha=0.3, which="both", lw=0.4)
    if legend:
        axes[-1].legend(fontsize=7.5, loc="upper left", bbox_to_anchor=(1.01, 1.0), frameon=False,
                        title="line style: paper family", title_fontsize=7.5)
    if title:
        fig.suptitle(title)
    path = Path(path)
    # zlib level 1, not PIL's 6: the same pixels, a tenth more bytes, a third of the encoding time.
    fig.savefig(path, dpi=120, pil_kwargs={"compress_level": 1})
    return path


def plot_run(result, path) -> Path:
    """Discrepancy and l2 error of one run over the steps."""
    g = result.graph
    return plot_compare([result], path, title=f"{result.algorithm} on {g.spec} (n={g.n})")
