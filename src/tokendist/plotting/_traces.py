"""Trace plots: discrepancy and l2 error over the steps of one run, or of several overlaid."""

from __future__ import annotations

from pathlib import Path

import numpy as np

__all__ = ["plot_run", "plot_compare", "new_figure"]


def new_figure(ncols: int = 2, width: float = 11.0, height: float = 4.2):
    import matplotlib

    matplotlib.use("Agg", force=False)
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, ncols, figsize=(width, height), constrained_layout=True)
    return fig, np.atleast_1d(axes)


def _positive(y):
    y = np.asarray(y, dtype=float)
    return np.where(y > 0, y, np.nan)


def plot_compare(results, path, *, title: str | None = None, metrics=("discrepancy", "l2_error")) -> Path:
    """Overlay the traces of several runs (one line each), one panel per metric, log scale."""
    import matplotlib.pyplot as plt

    fig, axes = new_figure(len(metrics))
    for r in results:
        for ax, m in zip(axes, metrics):
            ax.plot(r.trace["step"], _positive(r.trace[m]), label=r.algorithm, lw=1.4)
    for ax, m in zip(axes, metrics):
        ax.set_xlabel("step")
        ax.set_ylabel(m.replace("_", " "))
        ax.set_yscale("log")
        ax.grid(alpha=0.3)
    axes[0].legend(fontsize=8)
    if title:
        fig.suptitle(title)
    path = Path(path)
    fig.savefig(path, dpi=120)
    plt.close(fig)
    return path


def plot_run(result, path) -> Path:
    """Discrepancy and l2 error of one run over the steps."""
    g = result.graph
    return plot_compare([result], path, title=f"{result.algorithm} on {g.spec} (n={g.n})")
