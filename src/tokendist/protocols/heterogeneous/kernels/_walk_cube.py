"""Phase 1 of the random-walk algorithm (Elsässer et al. 2006, Sec. 3) on a hypercube, a dimension at a time.

:func:`fos_pair_cube` is :func:`._heterogeneous_random_walk_kernels.fos_pair_regular` on the graph
``hypercube:d`` (:attr:`Graph.cube_dimension <tokendist.graphs.Graph.cube_dimension>`), with the
same results bit for bit, in a different loop order. The row loop gathers the ``d`` neighbours of one
node after another; here the nodes are taken in blocks of ``B = 2^b`` and, inside a block, one
dimension after another, each dimension a loop over the whole block:

* a dimension ``k >= b`` joins the block to the ``B`` consecutive nodes of the partner block
  ``i0 xor 2^k``: one loop of two contiguous streams, which LLVM vectorises;
* a dimension ``3 <= k < b`` joins the two halves of every group of ``2^(k+1)`` nodes inside the
  block, read from the block's scratch copies (L2);
* the dimensions 0, 1, 2 join the nodes of every aligned group of 8: a loop whose constant trip
  counts LLVM unrolls.

Why the order of the dimensions is fixed. The integer flows are summed as integers, in any order.
The real flows keep the row loop's two float sums: ``inn``, over the neighbours ``j < i`` in
increasing ``j``, and ``q``, over ``j > i`` in increasing ``j``. On the cube ``j < i`` means
``j = i - 2^k`` for a bit ``k`` set in ``i``, increasing ``j`` means decreasing ``k``; ``j > i`` is
``i + 2^k`` for an unset bit, in increasing ``k``. So the block adds its set dimensions from
``d - 1`` down to 0 into ``inn``, then its unset dimensions from 0 up to ``d - 1`` into ``q`` (both
start at +0.0, as in the row loop), and every node sees the same additions in the same order.

Measured on hypercube:20 (docs/design/kernels.md): about 5 ns per edge
against 9-11 for the row loop, in the same process. The reason is not memory: the row loop costs
about the same per edge on ``hypercube:12``, whose arrays sit in L2, as on ``hypercube:20``.
"""

from __future__ import annotations

import numba
import numpy as np

from ._walk_serial import _finish_row

__all__ = ["fos_pair_cube", "CUBE_BLOCK_BITS"]

#: ``b`` of the blocks of ``2^b`` nodes (clamped to ``d``): six scratch arrays of 32 KB, in L2.
#: The kernel alone on hypercube:20, medians of 7 calls in two runs (the row loop 9.5 and 11.5 in
#: them): b = 6 .. 11: 8.7, 7.2, 6.3, 5.5, 5.2, 4.8; b = 10 .. 14: 5.4, 5.2, 5.0, 5.0, 5.0 ns per edge.
CUBE_BLOCK_BITS = 12

_U = np.uint64  # index casts: no negative-index wrap per access


@numba.njit(inline="always")
def _across(p0, B, a0, xw, xe, fw, fe, delta, sabs, acc):
    # A dimension k >= b: node r of the block and node r of the partner block starting at p0.
    for r in range(B):
        ur = _U(r)
        y = np.int64(a0 * (np.float64(xw[p0 + ur]) - fw[ur]))
        delta[ur] += y
        sabs[ur] += abs(y)
        acc[ur] += a0 * (xe[p0 + ur] - fe[ur])


@numba.njit(inline="always")
def _inside(h, upper, B, a0, fw, fe, delta, sabs, acc):
    # A dimension 2^k = h < B: the nodes whose bit k is set (upper: partner r - h) or unset (r + h).
    uh = _U(h)
    off = uh if upper else _U(0)
    for g in range(0, B, 2 * h):
        for t in range(h):
            r = _U(g) + off + _U(t)
            p = r - uh if upper else r + uh
            y = np.int64(a0 * (fw[p] - fw[r]))
            delta[r] += y
            sabs[r] += abs(y)
            acc[r] += a0 * (fe[p] - fe[r])


@numba.njit(inline="always")
def _low_three(B, a0, fw, fe, delta, sabs, inn, q):
    # The 3-cube of every aligned group of 8 nodes: inn over the set bits 2, 1, 0 (decreasing), q
    # over the unset bits 0, 1, 2 (increasing). The trip counts are constants: LLVM unrolls them.
    for g in range(0, B, 8):
        for t in range(8):
            r = _U(g + t)
            fwr = fw[r]
            fer = fe[r]
            dl = delta[r]
            sa = sabs[r]
            nn = inn[r]
            qq = q[r]
            for kk in range(3):
                k = 2 - kk
                if (t >> k) & 1:
                    p = r - _U(1 << k)
                    y = np.int64(a0 * (fw[p] - fwr))
                    dl += y
                    sa += abs(y)
                    nn += a0 * (fe[p] - fer)
            for k in range(3):
                if not ((t >> k) & 1):
                    p = r + _U(1 << k)
                    y = np.int64(a0 * (fw[p] - fwr))
                    dl += y
                    sa += abs(y)
                    qq += a0 * (fe[p] - fer)
            delta[r] = dl
            sabs[r] = sa
            inn[r] = nn
            q[r] = qq


@numba.njit(inline="always")
def _cube_block(d, b, i0, a0, s, ssum, total, loads, xw, est, xe, dst, out, outflow, fw, fe, delta, sabs, inn, q,
                sq):
    # The block of nodes i0 .. i0 + 2^b - 1 in the scratch arrays fw .. q (2^b each); writes the
    # block's rows of dst, out and outflow and reads nothing else it writes, so blocks may run in
    # any order, on any thread. Returns (moved, max error, sq, max estimate): ``sq`` continues the
    # caller's running squared error, in node order (the serial kernel's float sum).
    B = 1 << b
    nfac = loads.shape[0] / ssum
    ideal1 = total * 1.0 / ssum
    for r in range(B):
        fw[r] = np.float64(xw[_U(i0 + r)])
        fe[r] = xe[_U(i0 + r)]
        delta[r] = 0
        sabs[r] = 0
        inn[r] = 0.0
        q[r] = 0.0
    for k in range(d - 1, 2, -1):  # set bits, decreasing: into inn
        h = 1 << k
        if k >= b:
            if i0 & h:
                _across(_U(i0 - h), B, a0, xw, xe, fw, fe, delta, sabs, inn)
        else:
            _inside(h, True, B, a0, fw, fe, delta, sabs, inn)
    _low_three(B, a0, fw, fe, delta, sabs, inn, q)  # inn's last three, q's first three
    for k in range(3, d):  # unset bits, increasing: into q
        h = 1 << k
        if k >= b:
            if not (i0 & h):
                _across(_U(i0 + h), B, a0, xw, xe, fw, fe, delta, sabs, q)
        else:
            _inside(h, False, B, a0, fw, fe, delta, sabs, q)
    # As the row loop's row end, in node order.
    moved = 0
    max_err = 0.0
    wmax = -np.inf
    for r in range(B):
        i = i0 + r
        sent = (sabs[r] - delta[r]) >> 1  # sum max(-y, 0) = (sum |y| - sum y) / 2
        moved += sent
        err, we = _finish_row(i, delta[r], sent, inn[r] + q[r], loads, est, out, outflow, dst, s, ssum, total, ideal1,
                              nfac)
        wmax = max(wmax, we)
        max_err = max(max_err, err)
        sq += err * err
    return moved, max_err, sq, wmax


@numba.njit(cache=True, nogil=True, error_model="numpy")
def fos_pair_cube(d, a0, s, ssum, total, loads, xw, est, xe, dst, out, outflow):
    """:func:`~._heterogeneous_random_walk_kernels.fos_pair_regular` on ``hypercube:d``, by dimensions.

    Same arguments (but ``d``, at least 3, for ``indices, D``) and the same results, bit for bit:
    ``(tokens moved, max estimate error, squared estimate error, max weighted estimate)``; the
    module docstring explains the loop order. ``d`` must be the graph's
    :attr:`~tokendist.graphs.Graph.cube_dimension`: the neighbours are computed, not read.
    """
    n = loads.shape[0]
    b = min(d, CUBE_BLOCK_BITS)
    B = 1 << b
    fw = np.empty(B)  # the block's x = w / s as float64 (the row loop converts each slot's)
    fe = np.empty(B)  # the block's estimate / s
    delta = np.empty(B, np.int64)
    sabs = np.empty(B, np.int64)
    inn = np.empty(B)
    q = np.empty(B)
    moved = 0
    max_err = 0.0
    sq = 0.0
    wmax = -np.inf
    for i0 in range(0, n, B):
        mv, err, sq, wm = _cube_block(d, b, i0, a0, s, ssum, total, loads, xw, est, xe, dst, out, outflow, fw, fe,
                                      delta, sabs, inn, q, sq)
        moved += mv
        max_err = max(max_err, err)
        wmax = max(wmax, wm)
    if s is None:
        wmax = wmax / (n / ssum)
    return moved, max_err, sq, wmax
