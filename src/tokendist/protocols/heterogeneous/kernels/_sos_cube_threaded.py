"""Threaded sos-iou step on a hypercube (Elsässer, Monien, Schamberger 2006, Sec. 3), by chunks of nodes.

``threads=k`` (k > 1), or ``threads=auto`` when it times faster, on ``hypercube:d`` runs
:func:`sos_iou_cube_par` instead of the serial :func:`._heterogeneous_sos_cube.sos_iou_cube`: the
same loads, outflows, ``yhat``, IOUs, exception bits and returned tuple, bit for bit, with the
state by dimension of that module.

Why the step can be cut up. Every sum of the step is of integers or integer-valued floats (exact
in any order), the largest IOU is a max, and a short node pays ``floor(|t| w / T)`` on each edge
it sends on, from its load ``w`` and its total ``T``: what it pays on one edge does not depend on
the others. Only the correction to a receiver depends on the order: ``paid - t`` to one that has
already read the edge's transfer ``t``, ``paid - trunc(o - paid)`` to one that reads it later.

The ``n = 2^d`` nodes are cut into ``2^q`` chunks of ``2^dl`` consecutive nodes (``dl = d - q``):
dimensions below ``dl`` join nodes of one chunk, the top ``q`` dimensions join chunks. Phases,
each a ``prange``:

1. every chunk computes ``yhat`` and the amount owed ``o`` of the top-dimension edges it is the
   lower end of (the serial kernel computes each edge at its lower end too, with the same
   operations), consuming their old exception bits;
2. every chunk walks its blocks as the serial kernel does (the same function, with ``dl < d``):
   the dimensions below ``dl`` as there, the top ones only read at both ends. Its short nodes
   pay on the dimensions below ``dl`` (all in the chunk) and are listed with what they owe;
3. for each top dimension ``k``, one task per pair of chunks that ``k`` joins: the listed nodes
   of the pair pay on their edge of dimension ``k``. Every receiver has read ``t`` by then, so
   every correction is ``paid - t``. Within one dimension the edges are disjoint pairs of nodes,
   and a pair of chunks holds all the exception bits of its edges (``2^dl`` of them, whole
   bytes), so no two tasks write one value or one byte.

Phase 1 and the reads of phase 2 stream the top dimensions' IOUs twice; ``q`` is small (3 for
four chunks per thread on two threads), so that is ``q / d`` of the edges read once more.
"""

from __future__ import annotations

import numba
import numpy as np

from ._iou import _iou_pay
from ._walk_cube import CUBE_BLOCK_BITS
from ._sos_cube import _U, _owed, _sos_iou_cube_pass, cube_flow_slot

__all__ = ["CUBE_CHUNKS_PER_THREAD", "cube_chunk_bits", "sos_iou_cube_par"]

#: Chunks per thread of :func:`sos_iou_cube_par`, rounded up to a power of two (handed out one at a
#: time: a thread the OS deschedules then holds back one chunk, not half of the step).
CUBE_CHUNKS_PER_THREAD = 4


def cube_chunk_bits(d: int, threads: int) -> int:
    """``q``: :func:`sos_iou_cube_par` cuts ``hypercube:d`` into ``2^q`` chunks, or 0 if it cannot.

    At least :data:`CUBE_CHUNKS_PER_THREAD` chunks per thread, as a power of two, but chunks of at
    least one block of the serial kernel (``2^12`` nodes, so that its dimensions across blocks are
    inside a chunk) and of at least 16 nodes (each chunk's exception bits of a dimension in whole
    bytes).

    >>> cube_chunk_bits(20, 2), cube_chunk_bits(13, 2), cube_chunk_bits(12, 2)
    (3, 1, 0)
    """
    want = max(1, int(np.ceil(np.log2(CUBE_CHUNKS_PER_THREAD * max(1, threads)))))
    return max(0, min(want, d - max(CUBE_BLOCK_BITS, 4)))


@numba.njit(cache=True, nogil=True, error_model="numpy")
def _cube_top_edges(c, d, dl, a0, beta, first, owed_stored, exc_read, x, yhat, iou):
    """Phase 1 for chunk ``c``: ``yhat`` and ``o`` of the top-dimension edges it is the lower end of.

    The operations of :func:`._heterogeneous_sos_cube._iou_across_lower` for each edge. Returns the
    largest ``|o - trunc(o)|`` among them.
    """
    S = 1 << dl
    c0 = c << dl
    half = _U(x.shape[0] >> 1)
    bm1 = beta - 1.0
    biggest = 0.0
    for k in range(dl, d):
        h = 1 << k
        if c0 & h:
            continue  # the upper end: the chunk c0 - h computes these
        yh = yhat[k]
        io = iou[k]
        cs = _U(cube_flow_slot(c0, k))
        base = _U(k) * half
        for r in range(S):
            ur = _U(r)
            ue = cs + ur
            f = a0 * (np.float64(x[_U(c0) + ur]) - np.float64(x[_U(c0 + h) + ur]))
            y = f if first else beta * f + bm1 * yh[ue]
            yh[ue] = y
            o = _owed(y, ue, base + ue, io, exc_read, owed_stored)
            biggest = max(biggest, abs(o - np.trunc(o)))
    return biggest


@numba.njit(cache=True, nogil=True, error_model="numpy")
def _cube_pay_top(k, lo_chunk, dl, listed, listed_owed, count, loads, iou_flat, exc_bits, out, owe):
    """Phase 3 for dimension ``k`` and the chunks ``lo_chunk`` and ``lo_chunk + 2^(k - dl)``.

    Each listed node of the two chunks pays on its edge of dimension ``k`` if it sends on it, as
    :func:`._heterogeneous_sos_cube._iou_pay` does (both ends have read ``t``). ``iou_flat`` is the
    ``(d, n / 2)`` IOUs as one row: the value of an edge sits at its bit's index. Returns ``(moved,
    units, exc_big)``: the tokens not paid (negative) and the exceptions' tally.
    """
    h = np.int64(1) << k
    half = np.int64(loads.shape[0] >> 1)
    moved = 0
    units = 0.0
    exc_big = 0.0
    for c in (lo_chunk, lo_chunk + (h >> dl)):
        c0 = c << dl
        for q in range(count[c]):
            i = np.int64(listed[_U(c0 + q)])
            lower = (i & h) != 0  # bit k set: i is the edge's upper end
            j = i - h if lower else i + h
            le = np.int64(k) * half + cube_flow_slot(j if lower else i, k)
            o = iou_flat[_U(le)]
            t = np.trunc(o)
            if (t >= 0.0) if lower else (t <= 0.0):
                continue  # i does not send on this edge
            paid, rest, units, exc_big = _iou_pay(o, t, loads[_U(i)], listed_owed[_U(c0 + q)], le, iou_flat,
                                                  exc_bits, units, exc_big)
            back = np.int64(t) - np.int64(paid)
            moved -= abs(back)
            owe[_U(i)] += np.abs(paid)
            if lower:  # j, the lower end, read t and gains -t: it gains -paid
                out[_U(i)] -= back
                out[_U(j)] += back
            else:
                out[_U(i)] += back
                out[_U(j)] -= back
    return moved, units, exc_big


@numba.njit(parallel=True, cache=True, nogil=True)
def sos_iou_cube_par(d, q, a0, beta, first, owed_stored, has_exc, exc_bits, pay_iou, x, loads, yhat, iou, out, owe):
    """:func:`._heterogeneous_sos_cube.sos_iou_cube` in three parallel phases over ``2^q`` chunks; the same results.

    The arguments are the serial kernel's, with ``q`` from :func:`cube_chunk_bits` (at least 1);
    ``out`` holds zeros on entry. Returns ``(moved, short, units, largest, any_exception)``.
    """
    n = loads.shape[0]
    nc = 1 << q
    dl = d - q
    # Only the pranges run in parallel; no array expression here (each would be a parallel region).
    listed = np.empty(n, np.int64)  # chunk c's short nodes from c << dl on, and what each owes
    listed_owed = np.empty(n)
    mv = np.empty(nc, np.int64)
    sh = np.empty(nc, np.int64)
    count = np.empty(nc, np.int64)
    bg = np.empty(nc)
    un = np.empty(nc)
    eb = np.empty(nc)
    ex = np.empty(nc, np.bool_)
    for c in numba.prange(nc):
        if has_exc:
            bg[c] = _cube_top_edges(c, d, dl, a0, beta, first, owed_stored, exc_bits, x, yhat, iou)
        else:
            bg[c] = _cube_top_edges(c, d, dl, a0, beta, first, owed_stored, None, x, yhat, iou)
    biggest = 0.0
    for c in range(nc):
        biggest = max(biggest, bg[c])
    for c in numba.prange(nc):
        c0 = c << dl
        if has_exc:
            res = _sos_iou_cube_pass(d, dl, c0, c0 + (1 << dl), a0, beta, first, owed_stored, exc_bits, exc_bits,
                                     pay_iou, x, loads, yhat, iou, out, owe, listed, listed_owed)
        else:
            res = _sos_iou_cube_pass(d, dl, c0, c0 + (1 << dl), a0, beta, first, owed_stored, None, exc_bits,
                                     pay_iou, x, loads, yhat, iou, out, owe, listed, listed_owed)
        mv[c], sh[c], bg[c], un[c], eb[c], ex[c], count[c] = res
    moved = 0
    short = 0
    units = 0.0
    exc_big = 0.0
    any_exc = False
    listed_total = 0
    for c in range(nc):
        moved += mv[c]
        short += sh[c]
        biggest = max(biggest, bg[c])
        units += un[c]
        exc_big = max(exc_big, eb[c])
        any_exc = any_exc or ex[c]
        listed_total += count[c]
    if listed_total:
        iou_flat = iou.reshape(d * (n >> 1))
        pairs = np.empty(nc >> 1, np.int64)
        for k in range(dl, d):
            step = 1 << (k - dl)
            p = 0
            for c in range(nc):
                if not (c & step):
                    pairs[p] = c
                    p += 1
            for t in numba.prange(nc >> 1):
                mv[t], un[t], eb[t] = _cube_pay_top(k, pairs[t], dl, listed, listed_owed, count, loads, iou_flat,
                                                    exc_bits, out, owe)
            for t in range(nc >> 1):
                moved += mv[t]
                units += un[t]
                exc_big = max(exc_big, eb[t])
    if not any_exc:
        # Every IOU is o - trunc(o), of size below 1: no owed unit.
        return moved, short, 0.0, biggest, False
    return moved, short, units, exc_big, True
