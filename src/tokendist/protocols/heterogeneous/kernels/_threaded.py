"""Opt-in multi-threaded steps of fos, fos-floor, sos and sos-iou (Elsässer, Monien, Schamberger 2006, eq. (3), (4)).

``threads=k`` (k > 1) runs these kernels instead of the serial ones in :mod:`._heterogeneous_kernels`.
The row loop is the serial kernel's, line for line; only the outer loop over nodes is a
``numba.prange``. Each row writes only its own ``out[i]`` and ``outflow[i]`` (the FOS kernels
compute every edge from both ends), so the rows run in any order without races and the per-row
sums are added in the same order as before:

* ``fos-floor``: loads, outflows and ``moved`` are the serial kernel's bit for bit (integers);
* ``fos``: loads and outflows are the serial kernel's bit for bit; only ``moved`` (a float sum of
  the rows, split between threads) may differ in the last bits.

Each variant is its own function (a separate cache entry): compiling one function with and
without ``parallel=True``, both cached, makes the parallel build run the serial code
(docs/design/kernels.md). Numba's thread count is set per call by :func:`use_threads`; the
rows are handed out in chunks by :func:`run_rows`.

SOS (``sos``, ``sos-iou``) keeps one state per edge, computed from the edge's lower endpoint and
read back by the upper one, so a row cannot be done alone. The rows are cut into blocks of
``block`` rows (:data:`SOS_BLOCK`); block ``b`` starts at edge ``eblock[b]`` (the edges whose
lower endpoint is below its first row: :func:`block_edge_starts`, once per graph). Two
``prange`` passes over the blocks:

1. the upper slots of every row: each edge's state is computed and stored (``flow``; ``yhat`` and
   the amount owed for sos-iou) exactly as the serial kernel computes it, and the row's part of
   the sums is kept in its own ``out`` / ``outflow`` entry;
2. the lower slots of every row (reading what pass 1 stored), added to the row's sums.

Each row's float sums are split as in the serial kernel (lower-slot sums and upper-slot sums kept
apart, joined by the same operation), so loads, flows and outflows are the serial kernel's bit for
bit; the real scheme's ``moved`` is summed per block, then over blocks (last bits may differ).
sos-iou's sums are of integer-valued floats (exact in any order). A node that owes more than it
holds pays in pass 2, at the end of its row as the serial kernel does, when its neighbours all lie
in its block and its edges in bitmap bytes of its block alone (no other thread touches them);
the others pay afterwards, serially (each edge has one sender, and the payments' integer
corrections commute). So everything, ``moved`` included, is bit for bit.
"""

from __future__ import annotations

import numba
import numpy as np

from ._common import _U
from ....kernels._choice import AUTO, auto_threads_param
from ....kernels._threads import CHUNK_ROWS, THREADS_PARAM, check_threads, run_rows, use_threads

from ....engine import Param
from ....errors import TokendistError

__all__ = ["AUTO_THREADS_PARAM", "SOS_BLOCK", "run_blocks",
           "block_edge_starts", "fos_real_step_par", "fos_floor_step_par", "sos_real_step_par", "sos_iou_step_par"]



#: ``threads`` of sos-iou, whose threaded kernels give the serial kernels' bits.
AUTO_THREADS_PARAM = auto_threads_param(
    "on a graph of at least 2^18 nodes, time the serial and the threaded kernels on the run's own steps and run the "
    "faster: on tori and rings the stencil kernels, on hypercubes none (the serial cube kernel stays), elsewhere "
    "the CSR kernels")


@numba.njit(parallel=True, cache=True, nogil=True)
def fos_real_step_par(indptr, indices, csr_edges, mode, a0, inv, alpha, x, loads, out, outflow):
    """:func:`._heterogeneous_kernels.fos_real_step` with the rows spread over threads."""
    n = loads.shape[0]
    moved = 0.0
    for i in numba.prange(n):
        xi = x[i]
        ai = inv[i] if mode == 1 else a0
        inn = 0.0
        outs = 0.0
        sent_in = 0.0
        sent_out = 0.0
        for k in range(indptr[i], indptr[i + 1]):
            j = indices[k]
            a = a0 if mode == 0 else (min(ai, inv[j]) if mode == 1 else alpha[csr_edges[k]])
            # The serial kernel's two branches as selects: numba's parfor pass fails ("unexpected
            # cycle in lookup()") on an if/else with float accumulators inside a prange. Same bits:
            # a (x_j - x_i) is exactly -(a (x_i - x_j)), and adding +0.0 to an accumulator that
            # starts at +0.0 changes nothing.
            z = a * (xi - x[j])  # flow out of i on this edge
            pos = max(z, 0.0)
            lo = j < i  # edge (j, i): the serial kernel adds y = -z to inn and max(-y, 0) to sent_in
            inn += -z if lo else 0.0
            sent_in += pos if lo else 0.0
            outs += 0.0 if lo else z
            sent_out += 0.0 if lo else pos
        out[i] = loads[i] + (inn - outs)
        sent = sent_out + sent_in
        outflow[i] = sent
        moved += sent  # prange reduction
    return moved


@numba.njit(parallel=True, cache=True, nogil=True)
def fos_floor_step_par(indptr, indices, csr_edges, mode, a0, inv, alpha, x, loads, out, outflow):
    """:func:`._heterogeneous_kernels.fos_floor_step` with the rows spread over threads."""
    n = loads.shape[0]
    moved = 0
    for i in numba.prange(n):
        xi = np.float64(x[i])
        ai = inv[i] if mode == 1 else a0
        delta = 0
        sent = 0
        for k in range(indptr[i], indptr[i + 1]):
            j = indices[k]
            a = a0 if mode == 0 else (min(ai, inv[j]) if mode == 1 else alpha[csr_edges[k]])
            z = np.int64(a * (xi - np.float64(x[j])))  # float -> int truncates towards zero
            delta -= z
            sent += max(z, 0)
        out[i] = loads[i] + delta
        outflow[i] = sent
        moved += sent  # prange reduction
    return moved


#: Rows per block of the parallel SOS kernels; each thread takes one block at a time. Large, so that
#: most short sos-iou rows have all their neighbours in their block and pay in pass 2 (torus:1000x1000,
#: threads=2, both cores free: about 10-11 ns per edge-step against 20 with 2,048-row blocks).
SOS_BLOCK = 16384


def run_blocks(kernel, *args):
    """``kernel(*args)`` (prange loops over row blocks) with blocks handed out one at a time."""
    old = numba.set_parallel_chunksize(1)
    try:
        return kernel(*args)
    finally:
        numba.set_parallel_chunksize(old)


def block_edge_starts(u: np.ndarray, n: int, block: int) -> np.ndarray:
    """First edge index of each block of ``block`` rows: the edges are sorted by their lower endpoint ``u``."""
    return np.searchsorted(u, np.arange(0, n, block, dtype=np.int64)).astype(np.int64)


@numba.njit(cache=True, nogil=True)
def _sos_upper_rows(indptr, indices, csr_edges, mode, a0, inv, alpha, beta, first, x, flow, out, outflow, i0, i1, e):
    # Pass 1 of sos_real_step_par: the upper slots of rows i0..i1-1, as in the serial kernel.
    bm1 = beta - 1.0
    for i in range(i0, i1):
        ui = _U(i)
        xi = x[ui]
        ai = inv[ui] if mode == 1 else a0
        k = indptr[ui]
        end = indptr[ui + _U(1)]
        while k < end and csr_edges[_U(k)] < e:
            k += 1
        outs = 0.0
        sent_out = 0.0
        for kk in range(k, end):
            j = _U(indices[_U(kk)])
            ue = _U(e)
            f = (a0 if mode == 0 else (min(ai, inv[j]) if mode == 1 else alpha[ue])) * (xi - x[j])
            y = f if first else beta * f + bm1 * flow[ue]
            flow[ue] = y
            e += 1
            outs += y
            sent_out += max(y, 0.0)
        out[ui] = outs
        outflow[ui] = sent_out


@numba.njit(cache=True, nogil=True)
def _sos_lower_rows(indptr, indices, csr_edges, flow, loads, out, outflow, i0, i1):
    # Pass 2: the lower slots of rows i0..i1-1 and the rows' results; returns the block's load moved.
    moved = 0.0
    for i in range(i0, i1):
        ui = _U(i)
        k = indptr[ui]
        end = indptr[ui + _U(1)]
        inn = 0.0
        sent_in = 0.0
        while k < end and indices[_U(k)] < i:
            y = flow[_U(csr_edges[_U(k)])]
            inn += y
            sent_in += max(-y, 0.0)
            k += 1
        out[ui] = loads[ui] + (inn - out[ui])
        sent = outflow[ui] + sent_in  # the serial kernel's sent_out + sent_in (commutative: same bits)
        outflow[ui] = sent
        moved += sent
    return moved


@numba.njit(parallel=True, cache=True, nogil=True)
def sos_real_step_par(indptr, indices, csr_edges, mode, a0, inv, alpha, beta, first, x, loads, flow, out, outflow,
                      block, eblock):
    """:func:`._heterogeneous_kernels.sos_real_step` in two parallel passes over blocks of ``block`` rows.

    ``eblock[b]``: the first edge of block ``b`` (:func:`block_edge_starts`). Same loads, flows and
    outflows bit for bit; the returned load moved is summed per block (last bits may differ).
    """
    n = loads.shape[0]
    nb = (n + block - 1) // block
    for b in numba.prange(nb):
        _sos_upper_rows(indptr, indices, csr_edges, mode, a0, inv, alpha, beta, first, x, flow, out, outflow,
                        b * block, min(n, (b + 1) * block), eblock[b])
    part = np.empty(nb)
    for b in numba.prange(nb):
        part[b] = _sos_lower_rows(indptr, indices, csr_edges, flow, loads, out, outflow, b * block,
                                  min(n, (b + 1) * block))
    moved = 0.0
    for b in range(nb):
        moved += part[b]
    return moved


@numba.njit(cache=True, nogil=True)
def _iou_upper_rows(indptr, indices, csr_edges, mode, a0, inv, alpha, beta, first, owed_stored, has_exc, exc_bits,
                    x, yhat, iou, out, owe, i0, i1, e):
    # Pass 1 of sos_iou_step_par: yhat, the amount owed o (kept in iou) and t = trunc(o) of the
    # upper slots of rows i0..i1-1, as in the serial kernel; out / owe get the rows' upper parts.
    # exc_bits is only read here (cleared between the passes). Returns the block's largest |o - t|.
    bm1 = beta - 1.0
    biggest = 0.0
    for i in range(i0, i1):
        ui = _U(i)
        xi = np.float64(x[ui])
        ai = inv[ui] if mode == 1 else a0
        k = indptr[ui]
        end = indptr[ui + _U(1)]
        while k < end and csr_edges[_U(k)] < e:
            k += 1
        owed = 0.0
        delta = 0
        for kk in range(k, end):
            j = _U(indices[_U(kk)])
            ue = _U(e)
            f = (a0 if mode == 0 else (min(ai, inv[j]) if mode == 1 else alpha[ue])) * (xi - np.float64(x[j]))
            y = f if first else beta * f + bm1 * yhat[ue]
            yhat[ue] = y
            p = iou[ue]
            if has_exc and (exc_bits[_U(e >> 3)] >> (e & 7)) & 1:
                pass  # an IOU itself (a node could not pay it in full last step)
            elif owed_stored:
                p = p - np.trunc(p)
            o = y + p
            iou[ue] = o
            t = np.trunc(o)
            owed += max(t, 0.0)
            delta -= np.int64(t)
            r = abs(o - t)
            if r > biggest:
                biggest = r
            e += 1
        out[ui] = delta
        owe[ui] = owed
    return biggest


@numba.njit(cache=True, nogil=True)
def _iou_lower_rows(indptr, indices, csr_edges, iou, loads, out, owe, i0, i1, shortbuf, pay_iou, exc_bits, s0, s1):
    # Pass 2: the lower slots of rows i0..i1-1; each row's load and amount owed are then complete.
    # A short row whose neighbours all lie in this block and whose edges lie in [s0, s1) (this
    # block's edges, minus any bitmap byte shared with another block) pays at once, as the serial
    # kernel does (no other thread touches these edges, loads or bitmap bytes); the other short
    # rows are listed in shortbuf[i0:] for the serial phase. Returns (tokens moved, short rows,
    # listed rows, owed units, largest IOU).
    moved = 0
    short = 0
    listed = 0
    units = 0.0
    exc_big = 0.0
    for i in range(i0, i1):
        ui = _U(i)
        k0 = indptr[ui]
        end = indptr[ui + _U(1)]
        owed = 0.0
        delta = 0
        k = k0
        while k < end and indices[_U(k)] < i:
            t = np.trunc(iou[_U(csr_edges[_U(k)])])
            owed += max(-t, 0.0)
            delta += np.int64(t)
            k += 1
        mid = k
        owed += owe[ui]  # integer-valued floats: exact in any order
        held = loads[ui]
        moved += np.int64(owed)
        if owed > held:
            short += 1
            local = pay_iou
            for kk in range(k0, end):
                j = indices[_U(kk)]
                le = csr_edges[_U(kk)]
                if j < i0 or j >= i1 or le < s0 or le >= s1:
                    local = False
            if local:
                heldf = np.float64(held)
                paid_sum = 0.0
                for kk in range(k0, end):
                    lower = kk < mid
                    le = np.int64(csr_edges[_U(kk)])
                    o = iou[_U(le)]
                    t = np.trunc(o)
                    if (t >= 0.0) if lower else (t <= 0.0):
                        continue  # i does not send on this edge
                    paid = np.sign(t) * np.floor((np.abs(t) * heldf) / owed)
                    paid_sum += np.abs(paid)
                    back = np.int64(t) - np.int64(paid)
                    moved -= abs(back)
                    r = o - paid
                    iou[_U(le)] = r
                    exc_bits[_U(le >> 3)] |= np.uint8(1 << (le & 7))
                    units += np.floor(np.abs(r))
                    exc_big = max(exc_big, np.abs(r))
                    jn = indices[_U(kk)]
                    if lower:
                        delta -= back
                        out[_U(jn)] += back  # row j < i is done
                    else:
                        delta += back
                        # Row j > i (pass 2 to come) reads trunc(r) where it should add paid; out[j]
                        # holds its pass-1 part, to which its pass 2 adds the rest.
                        out[_U(jn)] += np.int64(paid) - np.int64(np.trunc(r))
                owed = paid_sum
            else:
                shortbuf[_U(i0 + listed)] = i
                listed += 1
        out[ui] = held + (delta + out[ui])
        owe[ui] = owed
    return moved, short, listed, units, exc_big


@numba.njit(cache=True, nogil=True)
def _iou_pay(indptr, indices, csr_edges, exc_bits, loads, iou, out, owe, short_rows):
    # The payments of the short rows, in increasing order, as in the serial kernel: floor(|t| w / T)
    # on each edge the row sends on; the IOU o - paid is stored and its bit set.
    moved = 0
    units = 0.0
    biggest = 0.0
    for q in range(short_rows.shape[0]):
        i = short_rows[q]
        ui = _U(i)
        total = owe[ui]
        heldf = np.float64(loads[ui])
        paid_sum = 0.0
        for k in range(indptr[ui], indptr[ui + _U(1)]):
            le = np.int64(csr_edges[_U(k)])
            jn = indices[_U(k)]
            lower = jn < i
            o = iou[_U(le)]
            t = np.trunc(o)
            if (t >= 0.0) if lower else (t <= 0.0):
                continue  # i does not send on this edge
            paid = np.sign(t) * np.floor((np.abs(t) * heldf) / total)
            paid_sum += np.abs(paid)
            back = np.int64(t) - np.int64(paid)
            if lower:  # edge (j, i): out[v] -= back, out[u] += back
                out[ui] -= back
                out[_U(jn)] += back
            else:
                out[ui] += back
                out[_U(jn)] -= back
            moved -= abs(back)
            r = o - paid
            iou[_U(le)] = r
            exc_bits[_U(le >> 3)] |= np.uint8(1 << (le & 7))
            units += np.floor(np.abs(r))
            biggest = max(biggest, np.abs(r))
        owe[ui] = paid_sum
    return moved, units, biggest


@numba.njit(parallel=True, cache=True, nogil=True)
def sos_iou_step_par(indptr, indices, csr_edges, mode, a0, inv, alpha, beta, first, owed_stored, has_exc, exc_bits,
                     pay_iou, x, loads, yhat, iou, out, owe, block, eblock):
    """:func:`._heterogeneous_kernels.sos_iou_step` in two parallel passes over blocks of ``block`` rows.

    Then, if some node owes more than it holds and ``pay_iou``, the payments, serially in increasing
    node order. Same loads, outflows, ``yhat``, IOUs, bits and returned tuple as the serial kernel,
    bit for bit (every sum is of integers or integer-valued floats).
    """
    n = loads.shape[0]
    nb = (n + block - 1) // block
    # Only the two pranges run in parallel: array expressions (np.zeros, a[:] = 0, slice copies)
    # would each become a parallel region of their own (a fork and a join: costly when the
    # machine's other core is busy), so this function has none.
    big = np.empty(nb)
    for b in numba.prange(nb):
        big[b] = _iou_upper_rows(indptr, indices, csr_edges, mode, a0, inv, alpha, beta, first, owed_stored, has_exc,
                                 exc_bits, x, yhat, iou, out, owe, b * block, min(n, (b + 1) * block), eblock[b])
    if has_exc:
        for q in range(exc_bits.shape[0]):
            exc_bits[q] = 0
    shortbuf = np.empty(n, indices.dtype)  # the short rows of block b left to the serial phase, from b * block on
    mv = np.empty(nb, np.int64)
    cnt = np.empty(nb, np.int64)
    lst = np.empty(nb, np.int64)
    un = np.empty(nb)
    eb = np.empty(nb)
    m = yhat.shape[0]
    for b in numba.prange(nb):
        # Edges this block may mark in the bitmap alone: its own, minus a byte shared with a neighbour block.
        s0 = ((eblock[b] + 7) >> 3) << 3
        s1 = ((eblock[b + 1] >> 3) << 3) if b + 1 < nb else m
        mv[b], cnt[b], lst[b], un[b], eb[b] = _iou_lower_rows(indptr, indices, csr_edges, iou, loads, out, owe,
                                                              b * block, min(n, (b + 1) * block), shortbuf, pay_iou,
                                                              exc_bits, s0, s1)
    moved = 0
    short = 0
    listed = 0
    biggest = 0.0
    units = 0.0
    exc_big = 0.0
    for b in range(nb):
        moved += mv[b]
        short += cnt[b]
        listed += lst[b]
        biggest = max(biggest, big[b])
        units += un[b]
        exc_big = max(exc_big, eb[b])
    if not (pay_iou and short > 0):
        return moved, short, 0.0, biggest, False
    rows = np.empty(listed, indices.dtype)
    q = 0
    for b in range(nb):
        for c in range(lst[b]):
            rows[q] = shortbuf[b * block + c]
            q += 1
    paid_moved, units2, biggest2 = _iou_pay(indptr, indices, csr_edges, exc_bits, loads, iou, out, owe, rows)
    return moved + paid_moved, short, units + units2, max(exc_big, biggest2), True
