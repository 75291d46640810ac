"""The figures of a sweep's report (``scaling-L``, ``final-discrepancy``, ``wins``), each as PNG and SVG.

:func:`write_report <tokendist.experiments.sweep.write_report>` imports this module only when it
draws, so reading the statistics does not import matplotlib.

Where the time goes, and what this module does about it (``tokendist sweep report DIR``):

* a layout engine re-measures every tick label of every axes on each draw, and ``savefig`` with
  an engine draws twice; :func:`save` lays a figure out once, at the PNG's dpi, and saves both
  files with the positions it found;
* matplotlib's log-axis labels are mathtext (10^3), expensive to lay out and draw;
  :class:`PlainLogFormatter` writes the same numbers on the same ticks as plain text ("1000");
* an axis makes a tick object for every location its locator gives, in view or not;
  :class:`InViewLogLocator` gives matplotlib's log ticks less those outside the view (the same
  pixels, half the minor tick objects);
* a title placed automatically measures the axes on every draw; the titles here are at y=1,
  where that measurement would put them (no top tick labels or offset text are in their way);
* :class:`matplotlib.figure.Figure`, not pyplot: no GUI backend to choose, no global figure list.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import numpy as np
from matplotlib import rc_context, rcParams
from matplotlib.figure import Figure
from matplotlib.ticker import Formatter, LogFormatter, LogLocator

__all__ = ["DPI", "PlainLogFormatter", "InViewLogLocator", "figures", "lay_out", "save", "plot_all"]

DPI = 120


class PlainLogFormatter(Formatter):
    """Log-axis tick labels as plain numbers ("1000", "0.2", "1e+06"), on the ticks matplotlib labels.

    Which ticks get a label is decided by :class:`matplotlib.ticker.LogFormatter` with its defaults,
    the rule of the default log formatters (decades; the minor ticks too when the axis spans too few
    decades for the decades alone): only how the number is written differs.
    """

    def __init__(self, base: float = 10.0):
        super().__init__()
        self._which = LogFormatter(base)

    def set_axis(self, axis):
        super().set_axis(axis)
        self._which.set_axis(axis)

    def set_locs(self, locs):
        super().set_locs(locs)
        self._which.set_locs(locs)

    def __call__(self, x, pos=None) -> str:
        return f"{x:g}" if self._which(x, pos) else ""


class InViewLogLocator(LogLocator):
    """matplotlib's log ticks (:class:`matplotlib.ticker.LogLocator`), less those outside the view.

    The axis draws only the ticks in its view, but makes a tick object (five artists) for every
    location its locator returns, and updates each on every draw: the minor ticks of whole decades
    are about twice those in view.
    """

    def tick_values(self, vmin, vmax):
        locs = super().tick_values(vmin, vmax)
        lo, hi = sorted((vmin, vmax))
        if lo <= 0:
            return locs
        # A little wider than the view: the axis itself decides, with its own tolerance.
        keep = (np.log10(locs) >= np.log10(lo) - 1e-6) & (np.log10(locs) <= np.log10(hi) + 1e-6)
        return locs[keep]


def _plain_log_ticks(ax) -> None:
    for axis in (ax.xaxis, ax.yaxis):
        axis.set_major_locator(InViewLogLocator(10))
        axis.set_minor_locator(InViewLogLocator(10, subs="auto"))
        axis.set_major_formatter(PlainLogFormatter())
        axis.set_minor_formatter(PlainLogFormatter())


def _new_figure(ncols: int, figsize: tuple[float, float]):
    """A figure of ``ncols`` panels in a row, to be laid out by :func:`lay_out`."""
    # At the dpi of the PNG: text extents do not scale exactly with the dpi (hinting), and the
    # one layout serves both files.
    fig = Figure(figsize=figsize, dpi=DPI, layout="constrained")
    return fig, fig.subplots(1, ncols, squeeze=False)


def lay_out(fig: Figure) -> None:
    """Run the figure's constrained layout once, then remove the engine; the axes keep their places.

    With an engine (even the "none" placeholder) each ``savefig`` draws twice, a layout draw and
    the real one, and the constrained engine measures every tick label in each: four layouts for
    the two files of a figure. Without one, each file is one plain draw.
    """
    engine = fig.get_layout_engine()
    if engine is not None:
        engine.execute(fig)
    # None means "no engine" only while the rc settings do not ask for one.
    with rc_context({"figure.autolayout": False, "figure.constrained_layout.use": False}):
        fig.set_layout_engine(None)


def save(fig: Figure, folder: Path, stem: str) -> list[str]:
    """Lay ``fig`` out once and write ``folder/stem.png`` and ``.svg``; the paths written."""
    lay_out(fig)
    paths = []
    for ext in ("png", "svg"):
        p = Path(folder) / f"{stem}.{ext}"
        fig.savefig(p, dpi=DPI)
        paths.append(str(p))
    return paths


def plot_all(folder, rows, summary, table, levels) -> list[str]:
    """Draw and save every figure of the report (see :func:`figures`); the paths written."""
    files = []
    for stem, fig in figures(rows, summary, table, levels):
        files += save(fig, folder, stem)
    return files


def _family(spec: str) -> str:
    return spec.split(":", 1)[0]


def _fit_slope(ns, ys) -> float | None:
    pts = [(n, y) for n, y in zip(ns, ys) if n and y and n > 0 and y > 0]
    if len({n for n, _ in pts}) < 2:
        return None
    x, y = np.log([p[0] for p in pts]), np.log([p[1] for p in pts])
    return float(np.polyfit(x, y, 1)[0])


def _ok_runs(groups, n) -> int:
    """The number of successful runs of the group of size ``n`` among ``groups``."""
    return next(g["ok"] for g in groups if g["n"] == n)


def figures(rows, summary, table, levels) -> Iterator[tuple[str, Figure]]:
    """The report's figures, not yet laid out, as (file stem, figure), one at a time.

    ``rows`` are the runs, ``summary`` and ``table`` what :func:`summarize` and :func:`wins` give
    for them, ``levels`` the discrepancy levels (as in the ``steps_to_L`` column names).
    """
    inits = list(dict.fromkeys(g["init"] for g in summary))
    families = {_family(g["graph"]) for g in summary}
    for lv in levels:
        fig, axes = _new_figure(len(inits), (5.2 * len(inits), 4.2))
        for ax, init in zip(axes[0], inits):
            lines: dict[tuple, list] = {}
            for g in summary:
                if g["init"] == init:
                    lines.setdefault((g["variant"], _family(g["graph"])), []).append(g)
            for (variant, fam), gs in lines.items():
                pts = sorted((g["n"], g["metrics"][f"steps_to_{lv}"]) for g in gs
                             if g["n"] and g["metrics"][f"steps_to_{lv}"]["mean"])
                pts = [(n, d) for n, d in pts if d["mean"] > 0]
                if not pts:
                    continue
                ns = [n for n, _ in pts]
                mean = [d["mean"] for _, d in pts]
                slope = _fit_slope(ns, mean)
                label = variant if len(families) == 1 else f"{variant} ({fam})"
                if slope is not None:
                    label += f", slope {slope:.2f}"
                (line,) = ax.plot(ns, mean, marker="o", label=label)
                # A hollow marker: not every run reached the level, the mean is over those that did.
                partial = [(n, m) for (n, d), m in zip(pts, mean) if d["count"] < _ok_runs(gs, n)]
                if partial:
                    ax.plot(*zip(*partial), "o", mfc="white", mec=line.get_color(), zorder=3)
                lo = [max(d["ci_low"], 0.5) if d["ci_low"] is not None else m for (_, d), m in zip(pts, mean)]
                hi = [d["ci_high"] if d["ci_high"] is not None else m for (_, d), m in zip(pts, mean)]
                ax.fill_between(ns, lo, hi, color=line.get_color(), alpha=0.2, linewidth=0)
            ax.set_xscale("log")
            ax.set_yscale("log")
            _plain_log_ticks(ax)
            ax.set_xlabel("n (nodes)")
            ax.set_ylabel(f"steps to discrepancy <= {lv} (mean, 95% CI)")
            # y=1: where matplotlib puts a title when no top tick labels or offset text are in its
            # way (none are here), without measuring the axes on every draw to check.
            ax.set_title(f"init {init}", fontsize=10, y=1.0)
            if ax.get_legend_handles_labels()[0]:
                ax.legend(fontsize=8)
        yield f"scaling-{lv}", fig

    graphs = list(dict.fromkeys(g["graph"] for g in summary))
    variants = list(dict.fromkeys(g["variant"] for g in summary))
    fig, axes = _new_figure(len(inits), (max(5.2, 0.5 * len(graphs) * len(variants) + 2) * len(inits), 4.2))
    colours = rcParams["axes.prop_cycle"].by_key()["color"]
    width = 0.8 / max(1, len(variants))
    for ax, init in zip(axes[0], inits):
        for j, variant in enumerate(variants):
            data, pos = [], []
            for i, graph in enumerate(graphs):
                vals = [r["final_discrepancy"] for r in rows if r["graph"] == graph and r["init"] == init
                        and r["variant"] == variant and r["status"] == "ok" and r["final_discrepancy"] is not None]
                if vals:
                    data.append(vals)
                    pos.append(i - 0.4 + width * (j + 0.5))
            if data:
                c = colours[j % len(colours)]
                ax.boxplot(data, positions=pos, widths=width * 0.9, patch_artist=True,
                           boxprops={"facecolor": c, "alpha": 0.5}, medianprops={"color": "black"},
                           flierprops={"markersize": 3})
                ax.plot([], [], color=c, linewidth=6, alpha=0.5, label=variant)
        ax.set_xticks(range(len(graphs)), graphs, rotation=20, fontsize=8)
        ax.set_ylabel("final discrepancy")
        ax.set_title(f"init {init}", fontsize=10)
        if ax.get_legend_handles_labels()[0]:
            ax.legend(fontsize=8)
    yield "final-discrepancy", fig

    if table:
        cells = list(dict.fromkeys((w["graph"], w["init"]) for w in table))
        fig, axes = _new_figure(len(levels), (1.0 + 1.3 * len(variants) * len(levels) + 2.5, 1.2 + 0.45 * len(cells)))
        for ax, lv in zip(axes[0], levels):
            share = np.full((len(cells), len(variants)), np.nan)
            for w in table:
                if w["level"] != lv or not w["seeds"]:
                    continue
                i = cells.index((w["graph"], w["init"]))
                for v, k in w["wins"].items():
                    share[i, variants.index(v)] = k / w["seeds"]
                    ax.text(variants.index(v), i, f"{k}/{w['seeds']}", ha="center", va="center", fontsize=7,
                            color="white" if k > 0.6 * w["seeds"] else "black")
            ax.imshow(share, vmin=0, vmax=1, cmap="Greens", aspect="auto")
            ax.set_xticks(range(len(variants)), variants, rotation=30, ha="right", fontsize=8)
            ax.set_yticks(range(len(cells)), [f"{g} | {i}" for g, i in cells], fontsize=7)
            ax.set_title(f"first to discrepancy <= {lv}", fontsize=10, y=1.0)  # as in scaling-L
        yield "wins", fig
