"""Plots people put in reports: run traces, comparison overlays (matplotlib, Agg backend)."""

from ._traces import plot_run, plot_compare

__all__ = ["plot_run", "plot_compare"]
