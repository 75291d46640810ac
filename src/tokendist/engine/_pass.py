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
order with ``np.add.accumulate``), with nothing to compile, but about 24 against 3.5 us a recorded
step of int64 loads on ``torus:16x16`` (``benchmarks/probes/pass_cost.py``; float64 loads: about 19
against 5.4). So a process compiles the pass after all once
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

__all__ = ["StepPass", "SIGN", "OUTFLOW", "FLOWS", "small_run", "summary_row", "outflow_of", "block_pass"]

#: Feasibility modes: from the sign of the new loads, from the per-node outflow, from per-edge flows;
#: RECORD_ONLY checks nothing (a record of loads already checked).
SIGN, OUTFLOW, FLOWS, RECORD_ONLY = 0, 1, 2, 3
#: The numpy passes a process makes before it compiles the pass after all: a recorded step costs
#: about 24 us on the numpy pass against 3.5 compiled (torus:16x16), and compiling one signature
#: about 2.5 s (``benchmarks/probes/pass_cost.py``), so some 120,000 steps pay for a compilation in
#: one process. The limit is lower, at about half a tokendist compare's steps per worker, because
#: the compiled pass lands in numba's cache and serves every later run too (one compilation per
#: install instead of a numpy pass in every small run).
NUMPY_PASS_LIMIT = 40_000
_numpy_passes = [0]


@numba.njit(cache=True, nogil=True)
def _step_pass(new, old, sent, mode, tol, share, k, fu, fv, scratch, ratios, speed_sum, indptr, indices, runs, upper,
               ext, met):
    """Sum, minimum and first infeasible node of a step; with ``k >= 0``, its metrics in column ``k``.

    ``sent`` is the outflow per node (``mode`` OUTFLOW) or the signed flow per edge ``(fu, fv)``
    (FLOWS; ``scratch`` holds two rows of n sums, integers for integer flows); ``tol`` 0 compares
    exactly. ``share`` is the ideal share of real loads (numpy's pairwise sum over n, or that sum
    with speeds); for integer loads (NaN) the error terms are taken from the exact sum, as
    :func:`tokendist.engine._metrics.summary` does. ``ratios`` holds the speeds and ``s_i / sum(s)``
    as ``rh + rl`` (three rows; none on a homogeneous graph), ``runs`` the offset stencil's runs
    (``starts``, ``ends``; :mod:`tokendist.graphs._stencil`). The per-step arguments come first and
    the fixed ones are packed in a few arrays: each argument costs the call about 60-85 ns to unbox,
    a microsecond a step at the 24 this call took. Returns ``(sum, min, bad)``: ``bad`` the lowest
    node that sent more than it held (-1: none).
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
        pos = scratch[0]
        neg = scratch[1]
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
    if k < 0:
        return total, lo, bad
    if np.isnan(share):  # integer loads: the error terms from the exact sum, as summary() takes them
        base, frac, wa, wb = _share_args(total, n)
    else:
        base, frac, wa, wb = 0, share, share, 0.0
    speeds, rh, rl = ratios[0], ratios[1], ratios[2]
    hi, lo2, local, l1, sq, linf, wmax = _summary_kernel(new, fu[:0], fv[:0], base, frac, wa, wb, speeds, speed_sum,
                                                         rh, rl)
    local = _local_discrepancy_stencil(new, indptr, indices, runs[0], runs[1], upper)
    ext[0, k] = hi
    ext[1, k] = lo2
    ext[2, k] = local
    met[0, k] = l1
    met[1, k] = sq
    met[2, k] = linf
    met[3, k] = wmax
    return total, lo, bad


@numba.njit(cache=True, nogil=True)
def block_pass(block, done, old, tol, first, record_every, last_step, count, fu, fv, scratch, ratios, speed_sum, indptr,
               indices, runs, upper, ext, met, sums, bads):  # pragma: no cover - compiled
    """:func:`_step_pass` (SIGN mode) on each of ``done`` consecutive steps of integer loads.

    Row ``b`` of ``block`` holds the loads after step ``first + b + 1`` (``old``: before the first);
    each row gets the checks of :func:`_step_pass` from the row before it, and a step recorded
    (``step % record_every == 0`` or the run's ``last_step``) its metrics in column ``count``,
    ``count + 1``, ... of ``ext`` and ``met``. Writes each step's sum to ``sums`` and its first
    node below zero to ``bads`` (-1: none); returns the next free column. One call for a block of
    steps (:mod:`tokendist.engine._batch`) instead of one a step: the same function, so the same values.
    """
    prev = old
    for b in range(done):
        row = block[b]
        step_no = first + b + 1
        k = -1
        if step_no % record_every == 0 or step_no == last_step:
            k = count
            count += 1
        total, lo, bad = _step_pass(row, prev, prev, 0, tol, np.nan, k, fu, fv, scratch, ratios, speed_sum, indptr,
                                    indices, runs, upper, ext, met)
        sums[b] = total
        bads[b] = bad
        prev = row
    return count


def _step_pass_numpy(new, old, sent, mode, tol, share, k, fu, fv, scratch, ratios, speed_sum, indptr, indices, runs,
                     upper, ext, met):
    """:func:`_step_pass` in numpy calls, the same values (for small runs on a cold cache).

    Every numpy call costs about a microsecond on a small graph, more than its arithmetic: a record
    of real loads takes the three sums in index order (the loads, ``|e|`` and ``e**2``, as the
    compiled loop adds them) from one ``np.add.accumulate`` over their rows, the reductions are the
    ufuncs' own (not the methods' Python wrappers), and the maximum load is taken once.
    """
    n = new.shape[0]
    homogeneous = ratios.shape[1] == 0
    sums = None
    if new.dtype.kind != "f":
        total = np.add.reduce(new)  # (integers: exact in any order)
    elif k >= 0 and not np.isnan(share):
        e = new - share if homogeneous else _hetero_errors_numpy(new, share, 0.0, ratios[1], ratios[2])
        rows = np.empty((3, n))
        rows[0] = new
        a = np.abs(e, out=rows[1])
        np.multiply(e, e, out=rows[2])
        sums = np.add.accumulate(rows, axis=1)[:, -1]  # (each row in index order, as np.cumsum)
        total = sums[0]
    else:
        total = np.add.accumulate(new)[-1]  # (index order, as the loop)
    lo = np.minimum.reduce(new)
    bad = -1
    if mode == OUTFLOW:
        over = sent > (old + tol if tol != 0 else old)
    elif mode == FLOWS:
        over = outflow_of(fu, fv, n, sent) > (old + tol if tol != 0 else old)
    else:
        over = new < -tol if mode == SIGN and lo < -tol else None
    if over is not None:
        first = int(over.argmax())  # (the first True, or 0 when there is none)
        bad = first if over[first] else -1
    if k < 0:
        return total, lo, bad
    if sums is None:
        if np.isnan(share):  # (total: the int64 sum, exact when the total fits int64, as the engine checks)
            base, rest = divmod(int(total), n)
            frac, (wa, wb) = rest / n, _total_halves(int(total))
        else:
            base, frac, wa, wb = 0, share, share, 0.0
        if homogeneous:
            e = new - frac if new.dtype.kind == "f" else _homogeneous_errors_numpy(new, base, frac)
        else:
            e = _hetero_errors_numpy(new, wa, wb, ratios[1], ratios[2])
        rows = np.empty((2, n))
        a = np.abs(e, out=rows[0])
        np.multiply(e, e, out=rows[1])
        sums = (None, *np.add.accumulate(rows, axis=1)[:, -1])  # (index order, as np.cumsum)
    hi = np.maximum.reduce(new)
    wmax = float(hi) if homogeneous else float((new / (ratios[0] * (n / speed_sum))).max())
    ext[0, k], ext[1, k] = hi, lo
    if fu.size:
        d = new.take(fu)
        d -= new.take(fv)
        ext[2, k] = np.maximum.reduce(np.abs(d, out=d))
    else:
        ext[2, k] = new[0] - new[0]
    met[0, k] = sums[1]
    met[1, k] = sums[2]
    met[2, k] = np.maximum.reduce(a)
    met[3, k] = wmax
    return total, lo, bad


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
        speed_sum = 1.0 if self.homogeneous else float(graph.speeds.sum())
        rh, rl = _speed_ratios(graph.speeds)  # (once per run: the error terms' s_i / sum(s))
        # speeds, rh, rl as the rows of one array (none on a homogeneous graph): one argument, not three.
        ratios = np.zeros((3, 0)) if self.homogeneous else np.stack([np.asarray(graph.speeds, np.float64), rh, rl])
        stencil = graph.stencil
        self.graph = graph
        self.u, self.v = unsigned_view(graph.u), unsigned_view(graph.v)
        indptr, indices = graph.indptr, unsigned_view(graph.indices)
        if stencil is None:  # the CSR rows' upper halves: every edge once
            runs, upper = np.zeros((2, 0), dtype=np.int64), (0,)
        else:
            runs, upper = np.stack([stencil.starts, stencil.ends]).astype(np.int64), stencil.upper
        cap = max(2, min(max_records, 1024))
        self.ext = np.zeros((3, cap), dtype=self.dtype)
        self.met = np.zeros((4, cap), dtype=np.float64)
        self.count = 0
        # Per-node sums of a step's per-edge flows: float64, or int64 (exact) for integer flows of
        # an integer run.
        scratch = np.zeros((2, graph.n))
        int_scratch = None if self.kind == "f" else np.zeros((2, graph.n), dtype=np.int64)
        # A small run on a cold cache: numpy calls rather than compiling the pass (per signature).
        self.small = small
        self._ready: dict = {}
        # What stays the same from step to step, packed once and passed after a step's own
        # arguments (a step's Python is most of what the engine costs on a small graph); keyed by
        # whether the flows are integers (their own scratch).
        tail = (ratios, speed_sum, indptr, indices, runs, upper)
        self._fixed = {False: (self.u, self.v, scratch, *tail, self.ext, self.met),
                       True: (self.u, self.v, scratch if int_scratch is None else int_scratch, *tail,
                              self.ext, self.met)}
        # The last (loads type, sent type) seen, with its pass, fixed arguments and conversion.
        self._last = (None, None, None, None, False)

    def _grow(self):
        cap = 2 * self.ext.shape[1]
        for name in ("ext", "met"):
            old = getattr(self, name)
            new = np.zeros((old.shape[0], cap), dtype=old.dtype)
            new[:, :old.shape[1]] = old
            setattr(self, name, new)
        self._fixed = {key: (*fixed[:-2], self.ext, self.met) for key, fixed in self._fixed.items()}
        self._last = (None, None, None, None, False)

    def _share(self, loads):
        if self.kind == "f":  # real loads: numpy's own (pairwise) sum, as summary() takes it
            s = loads.sum()
            return float(s / self.n if self.homogeneous else float(s))
        return np.nan  # the pass takes the error terms from the integer sum it computes (exact)

    def _setup(self, new, old, sent):
        # The pass for these argument types (compiled, or its numpy form for a small run while the
        # pass would compile), its fixed arguments, and whether sent is widened to int64 first.
        to_int64 = self.small and sent.dtype.kind in "ib" and sent.dtype != np.int64
        # (to_int64: a small copy, one compiled signature fewer, the same numbers)
        widened = np.dtype(np.int64) if to_int64 else sent.dtype
        fixed = self._fixed[widened.kind in "iub"]
        key = (new.dtype.num, widened.num)
        fn = self._ready.get(key)
        if fn is None or (fn is _step_pass_numpy and _numpy_passes[0] >= NUMPY_PASS_LIMIT):
            fn = _step_pass
            if self.small and _numpy_passes[0] < NUMPY_PASS_LIMIT:
                probe = sent.astype(np.int64) if to_int64 else sent
                if not kernel_ready(_step_pass, (new, old, probe, 0, 0.0, 0.0, 0, *fixed)):
                    fn = _step_pass_numpy
            self._ready[key] = fn
        self._last = (new.dtype, sent.dtype, fn, fixed, to_int64)
        return fn, fixed, to_int64

    def check(self, new, old, mode, sent, tol, record):
        """A step's checks (and, with ``record``, its metrics); returns ``(sum, min, bad)``."""
        if sent is None:
            sent = old
        if record:
            k = self.count
            if k == self.ext.shape[1]:
                self._grow()
            share = self._share(new) if self.kind == "f" else np.nan  # (integers: the pass's sum)
        else:
            k, share = -1, np.nan
        new_type, sent_type, fn, fixed, to_int64 = self._last
        # (the numpy form gives way to the compiled pass once the process has made NUMPY_PASS_LIMIT)
        if (new.dtype is not new_type or sent.dtype is not sent_type
                or fn is _step_pass_numpy and _numpy_passes[0] >= NUMPY_PASS_LIMIT):
            fn, fixed, to_int64 = self._setup(new, old, sent)
        if to_int64:
            sent = sent.astype(np.int64)
        if fn is _step_pass_numpy:
            _numpy_passes[0] += 1
        result = fn(new, old, sent, mode, float(tol), share, k, *fixed)
        if record:
            self.count = k + 1
        return result

    def block_ready(self, loads) -> bool:
        """Whether :meth:`check_block` may run: the pass of integer loads compiled or, outside a small
        run, allowed to compile (a small run on a cold cache steps one at a time, numpy pass included)."""
        if self.kind != "i" or loads.dtype != np.int64:
            return False
        if not self.small:
            return True
        one = np.zeros(1, dtype=np.int64)
        return kernel_ready(block_pass, (loads[None, :], 0, loads, 0.0, 0, 1, 1, 0, *self._fixed[True], one, one))

    def check_block(self, block, done, old, tol, first, record_every, last_step, sums, bads) -> int:
        """The checks (SIGN mode) and records of ``done`` steps at once (:func:`block_pass`);
        returns how many steps were recorded."""
        while self.count + done > self.ext.shape[1]:
            self._grow()
        count = block_pass(block, done, old, float(tol), first, record_every, last_step, self.count,
                           *self._fixed[True], sums, bads)
        recorded, self.count = count - self.count, count
        return recorded

    def add(self, loads, total=None):
        """Record the metrics of ``loads`` (``total``: their sum, ignored: the pass computes it)."""
        self.check(loads, loads, RECORD_ONLY, None, 0, True)

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
