"""The engine's own work on a step of a static run, in one compiled call.

After each protocol step :func:`tokendist.simulate` checks feasibility (no node sent more than it
held), conservation (the sum of the new loads) and, on a recorded step, evaluates the trace
metrics (:data:`tokendist.engine._metrics.SUMMARY_METRICS`). On a small graph the protocol's kernel
takes a few microseconds; the engine's checks done as separate numpy and numba calls from Python
took several times that. :class:`StepPass` does them in one call of :func:`_step_pass`, which
writes the metrics of the step straight into the trace's column buffers.

Every value is the one the separate calls gave: the sum and the minimum come from one pass in
index order (:func:`tokendist.engine._metrics.sum_min`), the feasibility check compares the same
numbers in the same types (a protocol's per-edge flows are summed per node in float64, as
``np.bincount`` with weights does), and the metrics come from the very kernels
:func:`tokendist.engine._metrics.summary` calls (the local discrepancy walks the CSR rows where
the graph has no stencil: a maximum does not depend on the order of the edges).

A run whose pass is neither compiled nor in numba's on-disk cache, and that is small
(:func:`tokendist.kernels._choice.reference_seconds` under the cost of one compilation), runs
:func:`_step_pass_numpy` instead: numpy calls giving the same values (sums accumulated in index
order with ``np.cumsum``), with nothing to compile, but about 32 against 4.6 us a recorded step on
``torus:16x16`` (``benchmarks/probes/pass_cost.py``). So a process compiles the pass after all once
its numpy passes have cost about as much as compiling (:data:`NUMPY_PASS_LIMIT`): the first
``tokendist compare`` after an install compiles it part way, and every later one finds it in the cache.
"""

from __future__ import annotations

import os

import numba
import numpy as np

from ..graphs._model import unsigned_view
from ..kernels._choice import COMPILE_SECONDS, SMALL_RUN_ENV, reference_seconds
from ..kernels._report import kernel_ready
from ._metrics import (_hetero_errors_numpy, _homogeneous_errors_numpy, _local_discrepancy_stencil, _share_args,
                       _speed_ratios, _summary_kernel, _total_halves)

__all__ = ["StepPass", "SIGN", "OUTFLOW", "FLOWS", "small_run", "summary_row", "outflow_of"]

#: Feasibility modes: from the sign of the new loads, from the per-node outflow, from per-edge flows;
#: RECORD_ONLY checks nothing (a record of loads already checked).
SIGN, OUTFLOW, FLOWS, RECORD_ONLY = 0, 1, 2, 3
_NO_RUNS = np.zeros(0, dtype=np.int64)
#: The numpy passes a process makes before it compiles the pass after all: a recorded step costs
#: about 32 us on the numpy pass against 4.6 compiled (torus:16x16), and compiling one signature
#: about 2.5 s (``benchmarks/probes/pass_cost.py``), so some 90,000 steps pay for a compilation in
#: one process. The limit is lower, at about half a tokendist compare's steps per worker, because
#: the compiled pass lands in numba's cache and serves every later run too (one compilation per
#: install instead of a numpy pass in every small run).
NUMPY_PASS_LIMIT = 40_000
_numpy_passes = [0]


@numba.njit(cache=True, nogil=True)
def _step_pass(new, old, sent, fu, fv, mode, tol, pos, neg, record, homogeneous, share, speeds, speed_sum, rh, rl,
               indptr, indices, starts, ends, upper, ext, met, k):
    """Sum, minimum and first infeasible node of a step; with ``record``, its metrics in column ``k``.

    ``sent`` is the outflow per node (``mode`` OUTFLOW) or the signed flow per edge ``(fu, fv)``
    (FLOWS; ``pos`` and ``neg`` are scratch of n float64); ``tol`` 0 compares exactly. ``share``
    is the ideal share of real loads (numpy's pairwise sum over n, or that sum with ``speeds``); for
    integer loads (NaN) the error terms are taken from the exact sum, as
    :func:`tokendist.engine._metrics.summary` does (``rh + rl``: each speed over their exact sum).
    Returns ``(sum, min, bad, recorded)``: ``bad`` the lowest node that sent more than it held (-1:
    none); ``recorded`` whether the metrics were written.
    """
    n = new.shape[0]
    total = new[0] - new[0]
    lo = new[0]
    for i in range(n):
        w = new[i]
        total += w
        lo = min(lo, w)
    bad = -1
    if mode == 1:
        if tol != 0:
            for i in range(n):
                if sent[i] > old[i] + tol:
                    bad = i
                    break
        else:
            for i in range(n):
                if sent[i] > old[i]:
                    bad = i
                    break
    elif mode == 2:
        pos[:] = 0
        neg[:] = 0
        for e in range(sent.shape[0]):
            f = sent[e]
            # (integer flows into int64 scratch: float64 sums lost the last tokens past 2**53; a sum
            # that would wrap past 2**63 is more than any node holds and saturates)
            if f > 0:
                a = pos[fu[e]]
                s = a + f
                pos[fu[e]] = s if s >= a else _INT64_MAX
            elif f < 0:
                a = neg[fv[e]]
                s = a - f
                neg[fv[e]] = s if s >= a else _INT64_MAX
        for i in range(n):
            out = pos[i] + neg[i]
            if out < pos[i]:  # (integers: a sum past 2**63 is more than any node holds)
                bad = i
                break
            if tol != 0:
                if out > old[i] + tol:
                    bad = i
                    break
            elif out > old[i]:  # (not unified with the float branch: an exact integer comparison)
                bad = i
                break
    elif mode == 0 and lo < -tol:
        for i in range(n):
            if new[i] < -tol:
                bad = i
                break
    if not record:
        return total, lo, bad, False
    if np.isnan(share):  # integer loads: the error terms from the exact sum, as summary() takes them
        base, frac, wa, wb = _share_args(total, n)
    else:
        base, frac, wa, wb = 0, share, share, 0.0
    hi, lo2, local, l1, sq, linf, wmax = _summary_kernel(new, fu[:0], fv[:0], base, frac, wa, wb, speeds, speed_sum,
                                                         rh, rl)
    local = _local_discrepancy_stencil(new, indptr, indices, starts, ends, upper)
    ext[0, k] = hi
    ext[1, k] = lo2
    ext[2, k] = local
    met[0, k] = l1
    met[1, k] = sq
    met[2, k] = linf
    met[3, k] = wmax
    return total, lo, bad, True


def _step_pass_numpy(new, old, sent, fu, fv, mode, tol, pos, neg, record, homogeneous, share, speeds, speed_sum, rh,
                     rl, indptr, indices, starts, ends, upper, ext, met, k, *, u=None, v=None):
    """:func:`_step_pass` in numpy calls, the same values (for small runs on a cold cache)."""
    n = new.shape[0]
    total = new.sum() if new.dtype.kind != "f" else np.cumsum(new)[-1]  # (index order, as the loop)
    lo = new.min()
    bad = -1
    if mode == OUTFLOW:
        over = sent > (old + tol if tol != 0 else old)
    elif mode == FLOWS:
        over = outflow_of(fu, fv, n, sent) > (old + tol if tol != 0 else old)
    else:
        over = new < -tol if mode == SIGN and lo < -tol else None
    if over is not None and over.any():
        bad = int(np.argmax(over))
    if not record:
        return total, lo, bad, False
    if np.isnan(share):  # (total: the int64 sum, exact when the total fits int64, as the engine checks)
        base, rest = divmod(int(total), n)
        frac, (wa, wb) = rest / n, _total_halves(int(total))
    else:
        base, frac, wa, wb = 0, share, share, 0.0
    if homogeneous:
        e = new - frac if new.dtype.kind == "f" else _homogeneous_errors_numpy(new, base, frac)
        wmax = float(new.max())
    else:
        e = _hetero_errors_numpy(new, wa, wb, rh, rl)
        wmax = float((new / (speeds * (n / speed_sum))).max())
    a = np.abs(e)
    ext[0, k], ext[1, k] = new.max(), lo
    ext[2, k] = np.abs(new[u] - new[v]).max() if u.size else new[0] - new[0]
    met[0, k] = np.cumsum(a)[-1]
    met[1, k] = np.cumsum(e * e)[-1]
    met[2, k] = a.max()
    met[3, k] = wmax
    return total, lo, bad, True


_INT64_MAX = 2**63 - 1


def _node_sums(index, values, n):
    # Per-node sums of per-edge values: bincount (float64) where that is exact, int64 beyond 2**53.
    if values.dtype.kind == "f":
        return np.bincount(index, weights=values, minlength=n)
    top = int(values.max()) if values.size else 0  # (values >= 0 here)
    if top * values.size < 2**53:
        return np.bincount(index, weights=values, minlength=n).astype(np.int64)
    out = np.zeros(n, dtype=object if top * values.size > _INT64_MAX else np.int64)  # (no wrap past 2**63)
    np.add.at(out, index, values.astype(out.dtype))
    return out


def outflow_of(u, v, n, flows) -> np.ndarray:
    """What each node sends for signed per-edge ``flows`` (``u -> v`` positive): exact for integer flows."""
    nz = np.flatnonzero(flows)
    f = flows[nz]
    if f.dtype.kind != "f":
        f = f.astype(np.int64)
    return _node_sums(u[nz], np.maximum(f, 0), n) + _node_sums(v[nz], np.maximum(-f, 0), n)


class StepPass:
    """The trace of a static run and the engine's per-step checks, one call a step.

    ``add(loads, total)`` records a step's metrics (the values :func:`tokendist.engine._metrics.summary`
    gives); ``check(new, old, mode, sent, tol, record)`` does a step's checks and, with
    ``record``, records it (see :func:`_step_pass`), returning ``(sum, min, bad)``; ``columns()``
    gives each metric as an array over the recorded steps.
    """

    def __init__(self, graph, dtype, max_records: int, small: bool):
        self.n = graph.n
        self.kind = np.dtype(dtype).kind
        self.dtype = np.dtype(np.float64 if self.kind == "f" else np.int64)
        self.homogeneous = graph.speeds is None
        self.speeds, self.speed_sum = ((np.empty(0), 1.0) if self.homogeneous
                                       else (graph.speeds, float(graph.speeds.sum())))
        self.rh, self.rl = _speed_ratios(graph.speeds)  # (once per run: the error terms' s_i / sum(s))
        stencil = graph.stencil
        self.graph = graph
        self.u, self.v = unsigned_view(graph.u), unsigned_view(graph.v)
        self.indptr, self.indices = graph.indptr, unsigned_view(graph.indices)
        if stencil is None:  # the CSR rows' upper halves: every edge once
            self.starts, self.ends, self.upper = _NO_RUNS, _NO_RUNS, (0,)
        else:
            self.starts, self.ends, self.upper = stencil.starts, stencil.ends, stencil.upper
        cap = max(2, min(max_records, 1024))
        self.ext = np.zeros((3, cap), dtype=self.dtype)
        self.met = np.zeros((4, cap), dtype=np.float64)
        self.count = 0
        self.pos = np.zeros(graph.n)
        self.neg = np.zeros(graph.n)
        # Integer flows of an integer run are summed per node in int64 (exact): their own scratch.
        self._int_scratch = None if self.kind == "f" else (np.zeros(graph.n, dtype=np.int64),
                                                          np.zeros(graph.n, dtype=np.int64))
        # A small run on a cold cache: numpy calls rather than compiling the pass (per signature).
        self.small = small
        self._ready: dict = {}
        # The arguments that stay the same from step to step, packed once (a step's Python is
        # most of what the engine costs on a small graph).
        self._edges, self._scratch = (self.u, self.v), (self.pos, self.neg)
        self._graph_args = (self.speeds, self.speed_sum, self.rh, self.rl, self.indptr, self.indices, self.starts,
                            self.ends, self.upper)
        self._columns = (self.ext, self.met)
        self._fn, self._fn_types = None, (None, None)

    def _grow(self):
        cap = 2 * self.ext.shape[1]
        for name in ("ext", "met"):
            old = getattr(self, name)
            new = np.zeros((old.shape[0], cap), dtype=old.dtype)
            new[:, :old.shape[1]] = old
            setattr(self, name, new)
        self._columns = (self.ext, self.met)

    def _share(self, loads, total):
        if self.kind == "f":  # real loads: numpy's own (pairwise) sum, as summary() takes it
            s = loads.sum()
            return float(s / self.n if self.homogeneous else float(s))
        return np.nan  # the pass takes the error terms from the integer sum it computes (exact)

    def _run(self, new, old, mode, sent, tol, record, share):
        k = self.count
        if record and k == self.ext.shape[1]:
            self._grow()
        if sent is None:
            sent = old
        elif self.small and sent.dtype.kind in "ib" and sent.dtype != np.int64:
            sent = sent.astype(np.int64)  # (a small copy: one compiled signature fewer, the same numbers)
        scratch = (self._int_scratch if self._int_scratch is not None and sent.dtype.kind in "iub"
                   else self._scratch)
        args = (new, old, sent, *self._edges, mode, float(tol), *scratch, record, self.homogeneous, share,
                *self._graph_args, *self._columns, k)
        fn = self._fn
        types = (new.dtype, sent.dtype)
        if fn is not _step_pass or types[0] is not self._fn_types[0] or types[1] is not self._fn_types[1]:
            fn = self._choose(args, types)
        if fn is _step_pass:
            total, lo, bad, recorded = fn(*args)
        else:
            _numpy_passes[0] += 1
            total, lo, bad, recorded = fn(*args, u=self.u, v=self.v)
        if recorded:
            self.count = k + 1
        return total, lo, bad, recorded

    def _choose(self, args, types):
        # The compiled pass, or its numpy form for a small run while the pass would compile.
        key = (types[0].num, types[1].num)
        fn = self._ready.get(key)
        if fn is None or (fn is _step_pass_numpy and _numpy_passes[0] >= NUMPY_PASS_LIMIT):
            fn = _step_pass
            if self.small and _numpy_passes[0] < NUMPY_PASS_LIMIT and not kernel_ready(_step_pass, args):
                fn = _step_pass_numpy
            self._ready[key] = fn
        self._fn, self._fn_types = fn, types
        return fn

    def check(self, new, old, mode, sent, tol, record):
        """A step's checks (and, with ``record``, its metrics); returns ``(sum, min, bad)``."""
        share = self._share(new, None) if record and self.kind == "f" else np.nan  # (integers: the pass's sum)
        total, lo, bad, recorded = self._run(new, old, mode, sent, tol, record, share)
        if record and not recorded:
            self.add(new, total)
        return total, lo, bad

    def add(self, loads, total=None):
        """Record the metrics of ``loads`` (``total``: their sum, for integer loads)."""
        if total is None and self.kind != "f":
            total = loads.sum()
        self._run(loads, loads, RECORD_ONLY, None, 0, True, self._share(loads, total))

    def columns(self) -> dict:
        """Each metric of the trace as an array (integer loads: int64 extremes, as summary's ints)."""
        k = self.count
        hi, lo, local = (self.ext[i, :k].copy() for i in range(3))
        l1, sq, linf, wmax = (self.met[i, :k].copy() for i in range(4))
        return {"discrepancy": hi - lo, "max": hi, "min": lo, "local_discrepancy": local,
                "l1_error": l1, "l2_error": np.sqrt(sq), "linf_error": linf, "max_weighted_load": wmax,
                "potential": sq}


def small_run(graph, max_steps: int) -> bool:
    """Whether a run is small enough to take the numpy pass rather than compile (see the module)."""
    return os.environ.get(SMALL_RUN_ENV, "1") != "0" and reference_seconds(graph.n, max_steps) <= COMPILE_SECONDS


def summary_row(graph, loads, small: bool) -> dict:
    """:func:`tokendist.engine._metrics.summary` of one-dimensional ``loads`` on a non-empty graph,
    through the pass (its numpy form on a small run while the pass is not compiled)."""
    rec = StepPass(graph, loads.dtype, 2, small)
    rec.add(loads)
    return {name: column[0].item() for name, column in rec.columns().items()}
