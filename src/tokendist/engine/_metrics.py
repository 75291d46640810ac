"""Metrics: pure functions of the loads (and graph, speeds), registered as named reporters.

The ideal load of node i in a heterogeneous network is ``W * s_i / sum(s)`` (Elsässer, Monien,
Schamberger 2006, Sec. 2); with no speeds it is ``W / n``. The errors are taken against it; the
weighted load of node i is ``w_i / s_i`` with speeds normalised to sum to n (so that a homogeneous
network has weighted load equal to load).
"""

from __future__ import annotations

import numba
import numpy as np

from ..graphs._model import unsigned_view
from ..registry import Registry

__all__ = ["METRICS", "SUMMARY_METRICS", "ideal_loads", "discrepancy", "local_discrepancy", "l1_error",
           "l2_error", "linf_error", "max_weighted_load", "potential", "measure", "summary", "normalised_speeds",
           "sum_min", "target_reached"]


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



def target_reached(graph, loads, until_discrepancy=None, until_local_discrepancy=None) -> bool:
    """Whether ``loads`` meet a run's stopping target: discrepancy, or local discrepancy, at most
    the given level (None: no such target). The one test of every single-process step loop."""
    if until_discrepancy is not None and discrepancy(graph, loads) <= until_discrepancy:
        return True
    return until_local_discrepancy is not None and local_discrepancy(graph, loads) <= until_local_discrepancy

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


@numba.njit(cache=True, nogil=True)
def _summary_kernel(loads, u, v, ideal_share, speeds, speed_sum):
    """All of :data:`SUMMARY_METRICS` in one pass over the nodes and one over the edges.

    ``ideal_share`` is ``W / n`` when ``speeds`` is empty, else ``W``: the ideal load of node i is
    then ``W * s_i / sum(s)``, evaluated in the same order of operations as :func:`ideal_loads`
    (and the weighted load as :func:`max_weighted_load` does), so the per-node values are the same
    floats; only the sums are accumulated in a different order than numpy's pairwise sums.
    """
    n = loads.shape[0]
    hetero = speeds.shape[0] > 0
    scale = n / speed_sum if hetero else 1.0
    hi = loads[0]
    lo = loads[0]
    l1 = 0.0
    sq = 0.0
    linf = 0.0
    wmax = -np.inf
    for i in range(n):
        w = loads[i]
        hi = max(hi, w)
        lo = min(lo, w)
        ideal = ideal_share * speeds[i] / speed_sum if hetero else ideal_share
        e = w - ideal
        a = abs(e)
        l1 += a
        sq += e * e
        linf = max(linf, a)
        wmax = max(wmax, w / (speeds[i] * scale) if hetero else float(w))
    local = loads[0] - loads[0]
    for k in range(u.shape[0]):  # empty when the caller takes the stencil path below
        local = max(local, abs(loads[u[k]] - loads[v[k]]))
    return hi, lo, local, l1, sq, linf, wmax


@numba.njit(cache=True, nogil=True, inline="always")
def _upper_rows_local(indptr, indices, loads, i0, i1, local):
    # Rows i0..i1-1: each edge (i, j > i) from its lower end, over the CSR row.
    for i in range(i0, i1):
        li = loads[i]
        for p in range(indptr[i], indptr[i + 1]):
            j = indices[p]
            if j > i:
                local = max(local, abs(li - loads[j]))
    return local


@numba.njit(cache=True, nogil=True)
def _local_discrepancy_stencil(loads, indptr, indices, starts, ends, upper):
    """The local discrepancy on a graph with an offset stencil (:mod:`tokendist.graphs._stencil`).

    Every edge once, from its lower end: ``i + upper[k]`` for the nodes of the stencil's runs (no
    index reads; the integer case vectorises), the upper slots of the CSR row for the others. A
    maximum does not depend on the order, so the value is the edge loop's exactly. On
    torus:1000x1000, 0.6 against 1.7 ns per edge for integer loads, 2.1 against 2.7 for real ones.
    """
    local = loads[0] - loads[0]
    prev = 0
    for r in range(starts.shape[0]):
        local = _upper_rows_local(indptr, indices, loads, prev, starts[r], local)
        for i in range(starts[r], ends[r]):
            li = loads[np.uint64(i)]
            for k in range(len(upper)):
                local = max(local, abs(li - loads[np.uint64(i + upper[k])]))
        prev = ends[r]
    return _upper_rows_local(indptr, indices, loads, prev, loads.shape[0], local)


@numba.njit(cache=True, nogil=True)
def _sum_min_kernel(loads):
    total = loads[0] - loads[0]
    lo = loads[0]
    for i in range(loads.shape[0]):
        w = loads[i]
        total += w
        lo = min(lo, w)
    return total, lo


def sum_min(loads):
    """``(loads.sum(), loads.min())`` in one pass over the loads (the engine's per-step checks).

    Exact for integer loads; for real loads the sum is accumulated in index order, not numpy's
    pairwise order (the engine compares it with a tolerance).
    """
    if loads.shape[0] == 0:
        return loads.dtype.type(0), None
    return _sum_min_kernel(loads)


_NO_EDGES = np.zeros(0, dtype=np.int32)


def summary(graph, loads, total=None) -> dict:
    """Every metric of :data:`SUMMARY_METRICS` at once (one fused pass; the run's per-step record).

    Agrees with the individual metric functions (tested): the extremes and the local discrepancy
    exactly, the error norms up to the order of floating-point summation. ``total``: the sum of
    integer loads when the caller has it (the engine does), saving a pass.
    """
    if graph.n == 0 or loads.ndim != 1:
        return {name: _plain(METRICS.get(name)(graph, loads)) for name in SUMMARY_METRICS}
    if total is None or loads.dtype.kind == "f":  # real loads: numpy's own (pairwise) sum, as always
        total = loads.sum()
    if graph.speeds is None:
        share, speeds, speed_sum = total / graph.n, np.empty(0), 1.0
    else:
        share, speeds, speed_sum = float(total), graph.speeds, float(graph.speeds.sum())
    stencil = graph.stencil  # O(1) to rule out on most irregular graphs (dynamic runs' graphs)
    u, v = (graph.u, graph.v) if stencil is None else (_NO_EDGES, _NO_EDGES)
    hi, lo, local, l1, sq, linf, wmax = _summary_kernel(loads, u, v, float(share), speeds, speed_sum)
    if stencil is not None:
        local = _local_discrepancy_stencil(loads, graph.indptr, unsigned_view(graph.indices), stencil.starts,
                                           stencil.ends, stencil.upper)
    return {"discrepancy": _plain(hi - lo), "max": _plain(hi), "min": _plain(lo), "local_discrepancy": _plain(local),
            "l1_error": float(l1), "l2_error": float(np.sqrt(sq)), "linf_error": float(linf),
            "max_weighted_load": float(wmax), "potential": float(sq)}


def measure(graph, loads, names=SUMMARY_METRICS, total=None) -> dict:
    """Evaluate the named metrics, as plain Python numbers.

    The summary metrics come from :func:`summary`'s fused kernel (at 10^6 nodes, evaluating them
    one by one cost several times a protocol step, every recorded step).
    """
    if set(names) <= set(SUMMARY_METRICS) and len(names) > 1:
        values = summary(graph, loads, total)
        return {name: values[name] for name in names}
    return {name: _plain(METRICS.get(name)(graph, loads)) for name in names}
