"""Offset-stencil kernels of FOS, FOS-floor, SOS and SOS with IOUs (Elsässer, Monien, Schamberger 2006).

The same steps as :mod:`._serial`'s CSR kernels on a regular graph without capacities
(``COEF_SCALAR``), walking the stencil's runs (:mod:`tokendist.graphs._stencil`) with the offsets
instead of CSR indices: no index reads, loops LLVM vectorises. Every result is the CSR kernel's,
bit for bit (tested).
"""

from __future__ import annotations

import numba
import numpy as np

from ....engine._cycles import PERIOD, add_moved, seen_before
from .._sos_readings import shadow_step
from ._common import _U
from ._iou import _clear_bits, _iou_settle, _largest, _pay_run, _pay_short_rows, _run_transfers, _run_upper

__all__ = ["fos_real_stencil", "fos_floor_stencil", "sos_real_stencil", "sos_iou_stencil", "sos_iou_stencil_steps"]

@numba.njit(cache=True, nogil=True)
def fos_real_stencil(indptr, indices, starts, ends, lower, upper, a0, x, loads, out, outflow):
    """:func:`fos_real_step` (``COEF_SCALAR``) over a stencil's runs; the same bits.

    Rows between the runs are the CSR rows of :func:`fos_real_step`. A row in a run has the
    neighbours ``i + lower[k]`` then ``i + upper[k]`` (its CSR order), so it does the same
    operations in the same order. ``lower`` and ``upper`` are tuples (loop unrolled, offsets in
    registers); ``moved`` is added in a second loop over the run, so that the first one has no
    sequential float sum and vectorises (in the same node order as before: the same bits).
    """
    n = loads.shape[0]
    moved = 0.0
    nr = starts.shape[0]
    prev = 0
    for r in range(nr + 1):
        stop = starts[r] if r < nr else n
        for i in range(prev, stop):
            ui = _U(i)
            xi = x[ui]
            k = indptr[ui]
            end = indptr[ui + _U(1)]
            inn = 0.0
            sent_in = 0.0
            while k < end:
                j = indices[_U(k)]
                if j > i:
                    break
                y = a0 * (x[_U(j)] - xi)
                inn += y
                sent_in += max(-y, 0.0)
                k += 1
            outs = 0.0
            sent_out = 0.0
            for kk in range(k, end):
                y = a0 * (xi - x[_U(indices[_U(kk)])])
                outs += y
                sent_out += max(y, 0.0)
            out[ui] = loads[ui] + (inn - outs)
            sent = sent_out + sent_in
            outflow[ui] = sent
            moved += sent
        if r == nr:
            break
        s = starts[r]
        e = ends[r]
        for i in range(s, e):
            ui = _U(i)
            xi = x[ui]
            inn = 0.0
            sent_in = 0.0
            for k in range(len(lower)):
                y = a0 * (x[_U(i + lower[k])] - xi)
                inn += y
                sent_in += max(-y, 0.0)
            outs = 0.0
            sent_out = 0.0
            for k in range(len(upper)):
                y = a0 * (xi - x[_U(i + upper[k])])
                outs += y
                sent_out += max(y, 0.0)
            out[ui] = loads[ui] + (inn - outs)
            outflow[ui] = sent_out + sent_in
        for i in range(s, e):
            moved += outflow[_U(i)]
        prev = e
    return moved


@numba.njit(cache=True, nogil=True)
def fos_floor_stencil(indptr, indices, starts, ends, lower, upper, a0, x, loads, out, outflow):
    """:func:`fos_floor_step` (``COEF_SCALAR``) over a stencil's runs; the same results.

    Integer sums: their order does not matter, so ``moved`` stays in the run loop.
    """
    n = loads.shape[0]
    moved = 0
    nr = starts.shape[0]
    prev = 0
    for r in range(nr + 1):
        stop = starts[r] if r < nr else n
        for i in range(prev, stop):
            ui = _U(i)
            xi = np.float64(x[ui])
            delta = 0
            sent = 0
            for k in range(indptr[ui], indptr[ui + _U(1)]):
                z = np.int64(a0 * (xi - np.float64(x[_U(indices[_U(k)])])))
                delta -= z
                sent += max(z, 0)
            out[ui] = loads[ui] + delta
            outflow[ui] = sent
            moved += sent
        if r == nr:
            break
        s = starts[r]
        e = ends[r]
        for i in range(s, e):
            ui = _U(i)
            xi = np.float64(x[ui])
            delta = 0
            sent = 0
            for k in range(len(lower)):
                z = np.int64(a0 * (xi - np.float64(x[_U(i + lower[k])])))
                delta -= z
                sent += max(z, 0)
            for k in range(len(upper)):
                z = np.int64(a0 * (xi - np.float64(x[_U(i + upper[k])])))
                delta -= z
                sent += max(z, 0)
            out[ui] = loads[ui] + delta
            outflow[ui] = sent
            moved += sent
        prev = e
    return moved


@numba.njit(cache=True, nogil=True)
def sos_real_stencil(indptr, indices, csr_edges, starts, ends, lower, upper, edge_delta, a0, beta, first, x, loads,
                     flow, out, outflow):
    """:func:`sos_real_step` (``COEF_SCALAR``) over a stencil's runs; the same bits.

    Rows between the runs are the CSR rows of :func:`_sos_real_pass`. In a run every row has
    ``U = len(upper)`` upper slots, so the running edge counter is ``e_s + U (i - s)`` at row ``i``
    and the lower slot ``k`` is the edge ``e_s + U (i - s) + edge_delta[k]`` (checked by
    :func:`~tokendist.graphs._stencil.lower_edge_runs` for every row it keeps): no ``csr_edges`` read. A run takes three
    loops: (1) every row's upper flows, which are written to ``flow`` (reading the previous step's
    flows: no dependency between rows, it vectorises); (2) every row's new load and outflow from
    the flows of its lower and upper edges, in the CSR order (the upper ones read back: the same
    values and the same sums as the one-loop row); (3) ``moved``, in node order.
    """
    n = loads.shape[0]
    bm1 = beta - 1.0
    moved = 0.0
    e = 0
    nr = starts.shape[0]
    nu = len(upper)
    prev = 0
    for r in range(nr + 1):
        stop = starts[r] if r < nr else n
        for i in range(prev, stop):
            ui = _U(i)
            xi = x[ui]
            k = indptr[ui]
            end = indptr[ui + _U(1)]
            inn = 0.0
            sent_in = 0.0
            while k < end:
                le = csr_edges[_U(k)]
                if le >= e:
                    break
                y = flow[_U(le)]
                inn += y
                sent_in += max(-y, 0.0)
                k += 1
            outs = 0.0
            sent_out = 0.0
            for kk in range(k, end):
                ue = _U(e)
                f = a0 * (xi - x[_U(indices[_U(kk)])])
                y = f if first else beta * f + bm1 * flow[ue]
                flow[ue] = y
                e += 1
                outs += y
                sent_out += max(y, 0.0)
            out[ui] = loads[ui] + (inn - outs)
            sent = sent_out + sent_in
            outflow[ui] = sent
            moved += sent
        if r == nr:
            break
        s = starts[r]
        en = ends[r]
        for i in range(s, en):
            ui = _U(i)
            xi = x[ui]
            eb = e + nu * (i - s)
            for k in range(nu):
                ue = _U(eb + k)
                f = a0 * (xi - x[_U(i + upper[k])])
                flow[ue] = f if first else beta * f + bm1 * flow[ue]
        for i in range(s, en):
            ui = _U(i)
            inn = 0.0
            sent_in = 0.0
            for k in range(len(lower)):
                y = flow[_U(e + nu * (i - s) + edge_delta[k])]
                inn += y
                sent_in += max(-y, 0.0)
            eb = e + nu * (i - s)
            outs = 0.0
            sent_out = 0.0
            for k in range(nu):
                y = flow[_U(eb + k)]
                outs += y
                sent_out += max(y, 0.0)
            out[ui] = loads[ui] + (inn - outs)
            outflow[ui] = sent_out + sent_in
        for i in range(s, en):
            moved += outflow[_U(i)]
        e += nu * (en - s)
        prev = en
    return moved


@numba.njit(cache=True, nogil=True)
def sos_iou_stencil(indptr, indices, csr_edges, starts, ends, lower, upper, edge_delta, a0, beta, first, owed_stored,
                    has_exc, exc_bits, pay_iou, x, loads, yhat, iou, out, owe):
    """:func:`sos_iou_step` (``COEF_SCALAR``) over a stencil's runs; the same results.

    Rows between the runs are the CSR rows of :func:`_sos_iou_pass`; edge ids in a run are
    computed as in :func:`sos_real_stencil`. A run takes three loops:

    1. every row's upper edges: ``yhat``, the amount owed ``o`` (stored in ``iou``;
       :func:`_upper_edges`); they depend on no other row of this step. The run's old
       exceptions are saved before (:func:`_save_exceptions`) and their ``o`` recomputed after,
       and their bits are then cleared as a range (each edge is read once, here, and no row has
       set a new bit on them);
    (2a) every row's transfers ``trunc(o)`` of its lower and upper edges, what it owes (``owe``)
       and its load before payments, and the largest ``|o - trunc(o)|`` as an integer max of
       the bit patterns (for floats >= 0 the order of the float comparisons; an integer max
       vectorises, a float max does not); a NaN (an infinite ``o``) falls back to the float
       comparisons, which never pick one;
    (2b) the short rows (found by a scan), in node order, pay (:func:`_iou_settle_run`: a row
       after it in the run has read the edge already, so the correction differs, see there); in a
       run where more than one row in :data:`_DENSE_SHORT` is short, all of them at once, in
       branch-free passes by edges (:func:`_pay_run`; late in a long run most rows are short).

    ``moved``, the loads and the outflows are integer-valued sums (the same in any order); the
    IOUs, exception bits, units and largest IOU are the same bits as the one-loop pass's.
    """
    n = loads.shape[0]
    bm1 = beta - 1.0
    moved = 0
    short = 0
    biggest = 0.0
    units = 0.0
    exc_big = 0.0
    any_exc = False
    e = 0
    nr = starts.shape[0]
    nu = len(upper)
    longest = 0
    for r in range(nr):
        longest = max(longest, ends[r] - starts[r])
    shortbuf = np.empty(longest, np.int64)
    exc_idx = np.empty(longest * nu, np.int64)  # a run's old exceptions: edge ids and IOUs
    # (and _pay_run's scratch: len(upper) + 2 len(lower) values per row)
    exc_val = np.empty(longest * (nu + 2 * len(lower)))
    prev = 0
    for r in range(nr + 1):
        stop = starts[r] if r < nr else n
        for i in range(prev, stop):
            ui = _U(i)
            xi = np.float64(x[ui])
            k0 = indptr[ui]
            end = indptr[ui + _U(1)]
            owed = 0.0
            delta = 0
            k = k0
            while k < end:
                le = csr_edges[_U(k)]
                if le >= e:
                    break
                t = np.trunc(iou[_U(le)])
                owed += max(-t, 0.0)
                delta += np.int64(t)
                k += 1
            mid = k
            e0 = e
            for kk in range(mid, end):
                ue = _U(e)
                f = a0 * (xi - np.float64(x[_U(indices[_U(kk)])]))
                y = f if first else beta * f + bm1 * yhat[ue]
                yhat[ue] = y
                p = iou[ue]
                if has_exc and (exc_bits[_U(e >> 3)] >> (e & 7)) & 1:
                    exc_bits[_U(e >> 3)] &= np.uint8(255 - (1 << (e & 7)))
                elif owed_stored:
                    p = p - np.trunc(p)
                o = y + p
                iou[ue] = o
                t = np.trunc(o)
                owed += max(t, 0.0)
                delta -= np.int64(t)
                rr = abs(o - t)
                if rr > biggest:
                    biggest = rr
                e += 1
            held = loads[ui]
            moved += np.int64(owed)
            if owed > held:
                short += 1
                if pay_iou:
                    owed, dd, dm, units, exc_big = _iou_settle(indices, csr_edges, k0, mid, end, e0, held, owed, iou,
                                                               exc_bits, out, units, exc_big)
                    delta += dd
                    moved += dm
                    any_exc = True
            owe[ui] = owed
            out[ui] += held + delta
        if r == nr:
            break
        s = starts[r]
        en = ends[r]
        # (1) Upper edges: yhat, the amount owed o (kept in iou), old exception bits consumed.
        hi = e + nu * (en - s)
        _run_upper(s, en, e, upper, a0, beta, first, owed_stored, has_exc, exc_bits, x, yhat, iou, exc_idx, exc_val)
        if has_exc:
            # Every old bit of the run's upper edges is consumed (each edge is read once, above,
            # and no row has set a new bit on them yet): clear the range a byte at a time instead
            # of a read-modify-write per edge in the loop above (which then vectorises). Bits of
            # other edges in the two end bytes are kept.
            _clear_bits(exc_bits, e, hi)
        # (2a) Every row's transfers, what it owes, its load before payments (integer-valued
        # float sums: exact, as ``owed``; converting each transfer to int64 was slower). The
        # largest |o - trunc(o)| of the upper edges as an integer max of the bit patterns: for
        # floats >= 0 the same order as the float comparisons, and an integer max vectorises (a
        # float max does not; in loop (1) it made that loop 1.7x slower). Then the short rows,
        # found by a scan: a call inside the scan loop made the whole run 1.5-2x slower
        # (measured), outside it only short rows pay for it.
        mv, found, run_big = _run_transfers(s, s, en, e, nu, lower, edge_delta, iou, loads, out, owe, shortbuf, 0)
        moved += mv
        biggest = _largest(run_big, iou, e, hi, biggest)
        # (2b) Short rows pay (a call: inlined, the two ways of paying made the loops above about
        # 1 ns per edge slower, even in steps that take neither).
        short += found
        if pay_iou and found:
            dm, units, exc_big = _pay_short_rows(s, en, e, found, shortbuf, lower, upper, edge_delta, loads, owe, iou,
                                                 exc_bits, out, units, exc_big, exc_idx, exc_val)
            moved += dm
            any_exc = True
        e += nu * (en - s)
        prev = en
    if not any_exc:
        return moved, short, 0.0, biggest, False
    return moved, short, units, exc_big, True


@numba.njit(cache=True, nogil=True)
def sos_iou_stencil_steps(indptr, indices, csr_edges, starts, ends, lower, upper, edge_delta, a0, beta, first,
                          owed_stored, has_exc, exc_bits, u, v, shadow, yhat, iou, owe, state, key, t, k, stop_idle,
                          keys, visits, info, loads, block, moved, messages, msg, units,
                          shorts):  # pragma: no cover - compiled
    """Up to ``k`` steps of ``sos-iou`` (``ideal=shadow``, ``overdraw=iou``, unit speeds) on a stencil
    (``Protocol.steps``, engine/_batch.py): each step :func:`sos_iou_stencil` fed the shadow loads,
    then :func:`.._sos_readings.shadow_step`, as :meth:`~.._rules.SOSIOU.step` calls them.

    ``first``, ``owed_stored``, ``has_exc``, ``exc_bits``, ``yhat``, ``iou``, ``shadow``: the
    protocol's kernel state (updated in place); ``owe``: the per-node scratch. ``state``: the bytes
    of :meth:`~.._rules.SOSIOU.state_key` before step ``t``; ``key``: a float64 buffer of ``2 m +
    n`` where each step writes ``[y | IOUs | w']``, the state before the next. Before each step at
    a period boundary the engine's cycle check (:func:`tokendist.engine._cycles.seen_before`); a
    state seen before ends the block before its step. The loads after step ``t + b`` go to
    ``block[b]``, its tokens moved, messages, IOU units and negative-load events to ``moved[b]``,
    ``messages[b]``, ``units[b]``, ``shorts[b]``. Returns ``(steps done, has_exc, the largest
    IOU of those steps)``.
    """
    period = info[PERIOD]
    prev = loads
    top = 0.0
    for b in range(k):
        if period > 0 and (t + b) % period == 0 and seen_before(keys, visits, info, prev.view(np.uint8), state, t + b):
            return b, has_exc, top
        row = block[b]
        row[:] = 0  # (the kernel adds load corrections into it)
        m, short, unit, biggest, has_exc = sos_iou_stencil(indptr, indices, csr_edges, starts, ends, lower, upper,
                                                          edge_delta, a0, beta, first, owed_stored, has_exc,
                                                          exc_bits, True, shadow, prev, yhat, iou, row, owe)
        first = False
        owed_stored = True
        shadow_step(u, v, yhat, shadow, iou, has_exc, exc_bits, key)
        state = key.view(np.uint8)
        top = biggest if biggest > top else top
        moved[b] = m
        messages[b] = msg
        units[b] = unit
        shorts[b] = short
        prev = row
        if not add_moved(info, m) or (stop_idle and m == 0):
            return b + 1, has_exc, top
    return k, has_exc, top
