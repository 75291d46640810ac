"""Metrics: pure functions of the loads (and graph, speeds), registered as named reporters.

The ideal load of node i in a heterogeneous network is ``W * s_i / sum(s)`` (Elsässer, Monien,
Schamberger 2006, Sec. 2); with no speeds it is ``W / n``. The errors are taken against it; the
weighted load of node i is ``w_i / s_i`` with speeds normalised to sum to n (so that a homogeneous
network has weighted load equal to load).
"""

from __future__ import annotations

import numpy as np

from ..registry import Registry

__all__ = ["METRICS", "SUMMARY_METRICS", "ideal_loads", "discrepancy", "local_discrepancy", "l1_error",
           "l2_error", "linf_error", "max_weighted_load", "potential", "measure", "normalised_speeds"]


def normalised_speeds(graph) -> np.ndarray | None:
    if graph.speeds is None:
        return None
    return graph.speeds * (graph.n / graph.speeds.sum())


def ideal_loads(graph, total) -> np.ndarray:
    """The balanced (real-valued) loads ``W s_i / sum(s)``."""
    if graph.speeds is None:
        return np.full(graph.n, total / graph.n)
    return total * graph.speeds / graph.speeds.sum()


def discrepancy(graph, loads):
    """max - min load."""
    return loads.max() - loads.min()


def local_discrepancy(graph, loads):
    """The largest load difference across an edge (0 on an edgeless graph)."""
    if graph.m == 0:
        return loads.dtype.type(0)
    return np.abs(loads[graph.u] - loads[graph.v]).max()


def _error(graph, loads):
    return loads - ideal_loads(graph, loads.sum())


def l1_error(graph, loads) -> float:
    return float(np.abs(_error(graph, loads)).sum())


def l2_error(graph, loads) -> float:
    return float(np.sqrt(np.square(_error(graph, loads)).sum()))


def linf_error(graph, loads) -> float:
    return float(np.abs(_error(graph, loads)).max())


def potential(graph, loads) -> float:
    """Sum of squared errors to the ideal loads (the potential of Ghosh et al. and Houle et al.)."""
    return float(np.square(_error(graph, loads)).sum())


def max_weighted_load(graph, loads) -> float:
    """max_i w_i / s_i, speeds normalised to sum to n (equals the max load when homogeneous)."""
    s = normalised_speeds(graph)
    return float(loads.max()) if s is None else float((loads / s).max())


METRICS: Registry = Registry("metric")
for _name, _fn in [("discrepancy", discrepancy), ("max", lambda g, w: w.max()), ("min", lambda g, w: w.min()),
                   ("local_discrepancy", local_discrepancy), ("l1_error", l1_error), ("l2_error", l2_error),
                   ("linf_error", linf_error), ("max_weighted_load", max_weighted_load), ("potential", potential)]:
    METRICS.add(_name, _fn)

#: The metrics every run reports initially and finally (the keys of the run JSON's metric objects).
SUMMARY_METRICS = ("discrepancy", "max", "min", "local_discrepancy", "l1_error", "l2_error", "linf_error",
                   "max_weighted_load", "potential")


def _plain(x):
    if isinstance(x, (np.integer,)):
        return int(x)
    if isinstance(x, (np.floating,)):
        return float(x)
    return x


def measure(graph, loads, names=SUMMARY_METRICS) -> dict:
    """Evaluate the named metrics, as plain Python numbers."""
    return {name: _plain(METRICS.get(name)(graph, loads)) for name in names}
