"""Metrics: pure functions of the loads (and graph, speeds), registered as named reporters.

The ideal load of node i in a heterogeneous network is ``W * s_i / sum(s)`` (Elsässer, Monien,
Schamberger 2006, Sec. 2); with no speeds it is ``W / n``. The errors are taken against it; the
weighted load of node i is ``w_i / s_i`` with speeds normalised to sum to n (so that a homogeneous
network has weighted load equal to load).
"""

from __future__ import annotations

import math
import numbers

import numba
import numpy as np
from numba import types
from numba.extending import overload

from ..graphs._model import unsigned_view
from ..registry import Registry

__all__ = ["METRICS", "SUMMARY_METRICS", "ideal_loads", "discrepancy", "local_discrepancy", "l1_error",
           "l2_error", "linf_error", "max_weighted_load", "potential", "measure", "summary", "normalised_speeds",
           "sum_min", "target_reached", "exact_total", "errors", "at_most"]

_INT64_MAX = 2**63 - 1
_INT64_MIN = -2**63
_EXACT_FLOAT = 2**53  # float64 holds every integer up to here


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



def at_most(values, level):
    """``values <= level``, exact for integer values against a real ``level``.

    numpy compares an int64 with a float by rounding the int64 to float64 first: a discrepancy of
    2**53 + 1 was "at most" 2.0**53, and 10**16 + 1 at most 1e16. An integer is at most a real L
    exactly when it is at most floor(L), an integer comparison. ``values``: a number or an array.
    """
    kind = np.asarray(values).dtype.kind
    if kind not in "iu" or isinstance(level, numbers.Integral) or not isinstance(level, numbers.Real):
        return values <= level
    level = float(level)
    if math.isnan(level) or math.isinf(level):
        return values <= level
    level = min(max(math.floor(level), _INT64_MIN), _INT64_MAX)  # (beyond int64: every or no value)
    if np.ndim(values) == 0:
        return int(values) <= level
    return values <= np.int64(level)


def target_reached(graph, loads, until_discrepancy=None, until_local_discrepancy=None) -> bool:
    """Whether ``loads`` meet a run's stopping target: discrepancy, or local discrepancy, at most
    the given level (None: no such target). The one test of every single-process step loop."""
    if until_discrepancy is not None and at_most(discrepancy(graph, loads), until_discrepancy):
        return True
    return until_local_discrepancy is not None and bool(at_most(local_discrepancy(graph, loads),
                                                                until_local_discrepancy))

def exact_total(loads: np.ndarray) -> int:
    """The sum of int64 ``loads`` as a Python int (numpy's sum wraps around past 2**63)."""
    if loads.size == 0:
        return 0
    lo, hi = int(loads.min()), int(loads.max())
    if max(hi, -lo) * loads.size <= _INT64_MAX:
        return int(loads.sum())
    # High and low 32-bit halves summed apart: each sum fits int64 for fewer than 2**31 nodes.
    return (int(np.sum(loads >> 32)) << 32) + int(np.sum(loads & 0xFFFFFFFF))


def _exact_speed_sum(speeds) -> tuple[float, float]:
    # sum(s) as an unevaluated pair hi + lo, hi correctly rounded (math.fsum adds exactly, then rounds
    # once), lo the correctly rounded rest: the ideal W s_i / sum(s) of a total near 2**63 needs more
    # than float64's 53 bits of the sum to be right to a token.
    values = speeds.tolist()
    hi = math.fsum(values)
    values.append(-hi)
    return hi, math.fsum(values)


_NO_RATIOS = np.empty(0)


def _speed_ratios(speeds) -> tuple[np.ndarray, np.ndarray]:
    """``s_i / sum(s)`` of every node as an unevaluated pair ``rh + rl`` (about 100 bits; the sum exact).

    None (no speeds): two empty arrays. Computed once per graph by the engine's pass.
    """
    if speeds is None:
        return _NO_RATIOS, _NO_RATIOS
    if _RATIOS[0] is speeds:  # (a graph's speeds never change: the last graph's, kept)
        return _RATIOS[1]
    sh, sl = _exact_speed_sum(speeds)
    s = np.asarray(speeds, dtype=np.float64)
    q1 = s / sh
    t, te = _two_prod_numpy(q1, sh)
    q2 = (((s - t) - te) - q1 * sl) / sh  # (s - t: exact, t is within an ulp of s)
    _RATIOS[:] = [speeds, _two_sum_numpy(q1, q2)]  # (about 60 ms on 10**6 nodes: a run asks 3 times)
    return _RATIOS[1]


_RATIOS: list = [None, None]


def _share_parts(graph, loads, total):
    """The arguments of the error terms (see :func:`_summary_kernel`): ``(base, frac, wa, wb, rh, rl)``."""
    if loads.dtype.kind == "f":
        w = float(total)
        base, frac, wa, wb = 0, w / graph.n, w, 0.0
    else:
        total = int(total)
        base, rest = divmod(total, graph.n)  # floor(W / n): fits int64 for every int64 load vector
        frac, (wa, wb) = rest / graph.n, _total_halves(total)
    return (base, frac, wa, wb, *_speed_ratios(graph.speeds))


def _total_halves(total: int) -> tuple[float, float]:
    """An integer total as two float64 whose exact sum it is: ``(W, 0.0)`` up to 2**53 (the error
    terms then take the shorter form), else its high and low 32 bits."""
    if -_EXACT_FLOAT <= total <= _EXACT_FLOAT:
        return float(total), 0.0
    a = (total >> 32) << 32  # (at most 32 significant bits)
    return float(a), float(total - a)


def errors(graph, loads, total=None) -> np.ndarray:
    """``loads - ideal_loads(graph, W)`` without losing the digits of a total beyond 2**53.

    Subtracting the float64 ideal from a load near 2**62 loses up to 2**9 of its last tokens (every
    error of ``[2**62 + 1, 2**62 - 1]`` came out 0). Integer loads here take ``W = q n + r``: the
    error of node i is ``(w_i - q) - r / n``, an exact integer difference then one rounding; with
    speeds, the ideal is evaluated in double-double arithmetic (about 100 bits) against the exactly
    summed speeds. Real loads: the plain difference. ``total``: the sum of the loads, if known.
    """
    if total is None:
        total = loads.sum() if loads.dtype.kind == "f" else exact_total(loads)
    base, frac, wa, wb, rh, rl = _share_parts(graph, loads, total)
    if graph.speeds is None:
        return loads - frac if loads.dtype.kind == "f" else _homogeneous_errors_numpy(loads, base, frac)
    return _hetero_errors_numpy(loads, wa, wb, rh, rl)


def _homogeneous_errors_numpy(loads, base, frac):
    # _homogeneous_error below for int64 loads, elementwise (the same floats).
    d = loads - np.int64(base)
    e = d.astype(np.float64) - frac
    wrapped = ((loads ^ np.int64(base)) & (loads ^ d)) < 0
    if wrapped.any():  # (only negative loads of an infeasible run reach here: |error| > 2**62)
        e[wrapped] = (loads[wrapped].astype(np.float64) - float(base)) - frac
    return e


def _split_numpy(x):
    c = 134217729.0 * x  # Dekker's split: 2**27 + 1
    hi = c - (c - x)
    return hi, x - hi


def _two_prod_numpy(a, b):
    p = a * b
    ah, al = _split_numpy(a)
    bh, bl = _split_numpy(b)
    return p, ((ah * bh - p) + ah * bl + al * bh) + al * bl


def _two_sum_numpy(a, b):
    s = a + b
    bb = s - a
    return s, (a - (s - bb)) + (b - bb)


def _hetero_errors_numpy(loads, wa, wb, rh, rl):
    # The elementwise operations of _hetero_error below, in the same order (the same floats).
    wah, wal = _split_numpy(wa)
    wbh, wbl = _split_numpy(wb)
    rhh, rhl = _split_numpy(rh)
    p1 = wa * rh
    e1 = ((wah * rhh - p1) + wah * rhl + wal * rhh) + wal * rhl
    p2 = wb * rh
    e2 = ((wbh * rhh - p2) + wbh * rhl + wbl * rhh) + wbl * rhl
    ph, pl = _two_sum_numpy(p1, p2)
    pl = pl + (e1 + e2) + (wa + wb) * rl
    if loads.dtype.kind == "f":
        la, lb = loads, np.zeros_like(loads)
    else:
        a = (loads >> 32) << 32
        la, lb = a.astype(np.float64), (loads - a).astype(np.float64)
    d, de = _two_sum_numpy(la, -ph)
    d, de2 = _two_sum_numpy(d, lb)  # (la - ph is near -lb: adding lb apart kept only 2**-20 of a token)
    e = d + ((de + de2) - pl)
    if wb == 0.0:  # the short form where the total and the load are exact floats (_hetero_error)
        short = (loads >= -_EXACT_FLOAT) & (loads <= _EXACT_FLOAT)
        e[short] = (loads[short].astype(np.float64) - ph[short]) - pl[short]
    return e


def _error(graph, loads):
    return errors(graph, loads)


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


def _halves(w):
    """``w`` as two float64 whose exact sum it is (an int64: its high and low 32 bits; a float: itself, 0)."""


@overload(_halves, inline="always")
def _halves_impl(w):
    if isinstance(w, types.Integer):
        def impl(w):
            a = (w >> 32) << 32
            return float(a), float(w - a)
    else:
        def impl(w):
            return float(w), 0.0
    return impl


def _share_args(total, n):
    """``(base, frac, wa, wb)`` of :func:`_share_parts` from a total inside a compiled function."""


@overload(_share_args, inline="always")
def _share_args_impl(total, n):
    if isinstance(total, types.Integer):
        def impl(total, n):
            base = total // n  # floor division, as Python's
            if -_EXACT_FLOAT <= total <= _EXACT_FLOAT:  # (as _total_halves)
                wa, wb = float(total), 0.0
            else:
                wa, wb = _halves(total)
            return base, (total - base * n) / n, wa, wb
    else:
        def impl(total, n):
            return 0, total / n, float(total), 0.0
    return impl


@numba.njit(cache=True, nogil=True, inline="always")
def _two_sum(a, b):
    s = a + b
    bb = s - a
    return s, (a - (s - bb)) + (b - bb)


@numba.njit(cache=True, nogil=True, inline="always")
def _split(x):
    c = 134217729.0 * x  # Dekker's split: 2**27 + 1
    hi = c - (c - x)
    return hi, x - hi


@numba.njit(cache=True, nogil=True, inline="always")
def _hetero_error_short(w, rh, rl, wa, wah, wal):
    # _hetero_error where the total (wb = 0) and the load are exact floats: the same ideal ph + pl;
    # w - ph is exact where it is small (Sterbenz) and rounded once where it is large (3.9 against
    # 8.4 ms a pass over 10**6 nodes).
    rhh, rhl = _split(rh)
    p1 = wa * rh
    e1 = ((wah * rhh - p1) + wah * rhl + wal * rhh) + wal * rhl
    pl = e1 + wa * rl
    return (float(w) - p1) - pl


@numba.njit(cache=True, nogil=True, inline="always")
def _hetero_error(w, rh, rl, wa, wah, wal, wb, wbh, wbl):
    # w - W (rh + rl) in double-double, W = wa + wb exactly (wah + wal, wbh + wbl: their splits),
    # rh + rl = s_i / sum(s) (:func:`_speed_ratios`): :func:`errors`. No division in the loop.
    rhh, rhl = _split(rh)
    p1 = wa * rh
    e1 = ((wah * rhh - p1) + wah * rhl + wal * rhh) + wal * rhl
    p2 = wb * rh
    e2 = ((wbh * rhh - p2) + wbh * rhl + wbl * rhh) + wbl * rhl
    ph, pl = _two_sum(p1, p2)
    pl = pl + (e1 + e2) + (wa + wb) * rl
    la, lb = _halves(w)
    d, de = _two_sum(la, -ph)
    d, de2 = _two_sum(d, lb)  # (la - ph is near -lb: adding lb apart kept only 2**-20 of a token)
    return d + ((de + de2) - pl)


def _homogeneous_error(w, base, frac):
    """w - W / n with W = base n + frac n: an exact integer difference, then one rounding (errors())."""


@overload(_homogeneous_error, inline="always")
def _homogeneous_error_impl(w, base, frac):
    if isinstance(w, types.Integer):
        def impl(w, base, frac):
            d = w - base
            if ((w ^ base) & (w ^ d)) < 0:  # (wrapped: an infeasible run's load beyond -2**62)
                return float(w) - float(base) - frac
            return float(d) - frac
    else:
        def impl(w, base, frac):  # real loads: base is 0, frac the share W / n
            return w - frac
    return impl


@numba.njit(cache=True, nogil=True)
def _summary_kernel(loads, u, v, base, frac, wa, wb, speeds, speed_sum, rh, rl):
    """All of :data:`SUMMARY_METRICS` in one pass over the nodes and one over the edges.

    The error of node i is :func:`errors`'s, by the same operations (the same floats): with no
    ``speeds``, ``(w_i - base) - frac`` where ``W / n = base + frac`` (``base`` 0 for real loads);
    with speeds, ``w_i - W s_i / S`` in double-double, ``W = wa + wb`` and ``s_i / S = rh_i + rl_i``. The
    weighted load is :func:`max_weighted_load`'s (speeds scaled by ``n / speed_sum``); only the sums
    are accumulated in a different order than numpy's pairwise sums.
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
    wah, wal = _split(wa)
    wbh, wbl = _split(wb)
    if hetero:  # (two loops, not a test per node)
        short = wb == 0.0
        for i in range(n):
            w = loads[i]
            hi = max(hi, w)
            lo = min(lo, w)
            if short and -_EXACT_FLOAT <= w <= _EXACT_FLOAT:
                e = _hetero_error_short(w, rh[i], rl[i], wa, wah, wal)
            else:
                e = _hetero_error(w, rh[i], rl[i], wa, wah, wal, wb, wbh, wbl)
            a = abs(e)
            l1 += a
            sq += e * e
            linf = max(linf, a)
            wmax = max(wmax, w / (speeds[i] * scale))
    else:
        for i in range(n):
            w = loads[i]
            hi = max(hi, w)
            lo = min(lo, w)
            e = _homogeneous_error(w, base, frac)
            a = abs(e)
            l1 += a
            sq += e * e
            linf = max(linf, a)
            wmax = max(wmax, float(w))
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
    if loads.dtype.kind == "f":  # real loads: numpy's own (pairwise) sum, as always
        total = loads.sum()
    elif total is None:
        total = exact_total(loads)
    base, frac, wa, wb, rh, rl = _share_parts(graph, loads, total)
    if graph.speeds is None:
        speeds, speed_sum = np.empty(0), 1.0
    else:
        speeds, speed_sum = graph.speeds, float(graph.speeds.sum())
    stencil = graph.stencil  # O(1) to rule out on most irregular graphs (dynamic runs' graphs)
    u, v = (graph.u, graph.v) if stencil is None else (_NO_EDGES, _NO_EDGES)
    hi, lo, local, l1, sq, linf, wmax = _summary_kernel(loads, u, v, np.int64(base), frac, wa, wb, speeds, speed_sum,
                                                        rh, rl)
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
