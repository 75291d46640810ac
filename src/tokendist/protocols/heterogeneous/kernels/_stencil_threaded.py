"""Opt-in multi-threaded sos-iou step on an offset stencil (tori, rings; Elsässer, Monien, Schamberger 2006, Sec. 3).

``threads=k`` (k > 1) on a graph with a :attr:`Graph.stencil` runs :func:`sos_iou_stencil_par`
instead of the serial :func:`._heterogeneous_kernels.sos_iou_stencil`; same loads, outflows,
``yhat``, IOUs, exception bits and returned tuple, bit for bit.

Why the step can be cut up at all. Every sum of sos-iou's step is of integers or integer-valued
floats (exact in any order), the largest IOU is a max, and each edge has one sender, so which
nodes are short and what each pays do not depend on the order in which rows are taken. What does
depend on the order is one correction: a payer adds ``paid - t`` to a receiver that has already
read the edge's transfer ``t``, and ``paid - trunc(r)`` to one that reads it later (see
:func:`._heterogeneous_kernels._iou_settle_run`). So a row pays early only where it knows which
of its receivers have read.

The nodes are cut into ``chunks`` ranges (:func:`stencil_chunks` splits the stencil's runs at
their bounds, once per graph); each chunk walks its rows in node order as the serial kernel does.
Phases, each a ``prange`` over the chunks:

1. every row's upper edges: ``yhat`` and the amount owed ``o`` (stored in ``iou``); then, for the
   rows whose lower neighbours all lie in the chunk (computed just before, in this chunk's
   order), the transfers, what the row owes (``owe``), its load before payments and whether it
   is short, while the run is in cache. A short run row pays there and then, with the serial
   kernel's corrections, when none of its receivers reads in phase 2, all it touches lies in
   the chunk and its edges' exception bits are in bytes no other chunk shares (see
   :func:`_chunk_rows`). Each run's old bits are cleared on the chunk's own bytes; the bytes two
   chunks share are cleared after the phase, serially (no row sets a bit there before phase 3);
2. the rows left out (a lower neighbour in another chunk: about one torus row per chunk, and the
   torus's wrap-around row), once every chunk has done phase 1;
3. the short rows not paid yet: each in its own chunk when all its neighbours are in the chunk
   and all its edges in bytes of the bit array no other chunk touches, the others then
   serially. Every row has read its transfers by now, so every correction is ``paid - t``.

Paying every short row in phase 3 (a first version) cost about 200 ns per short node on
torus:1000x1000: its IOUs and its neighbours' loads were cold by then (docs/design/kernels.md).

``chunks`` is more than the thread count (blocks are handed out one at a time, see
:func:`._heterogeneous_parallel.run_blocks`): a thread that the OS deschedules (this machine's
second core is often busy) then holds back one chunk, not half of the step.
"""

from __future__ import annotations

import numba
import numpy as np

from ._common import _U
from ._iou import (_DENSE_SHORT, _clear_bits, _iou_pay, _iou_settle_run, _largest, _pay_run_scratch, _run_transfers,
                   _run_upper)

__all__ = ["STENCIL_CHUNKS_PER_THREAD", "stencil_chunks", "sos_iou_stencil_par"]

#: Chunks per thread of :func:`sos_iou_stencil_par` (node ranges handed out one at a time).
STENCIL_CHUNKS_PER_THREAD = 4


def stencil_chunks(starts, ends, lower, upper, edge_delta, indptr, indices, u, chunks: int):
    """The arguments of :func:`sos_iou_stencil_par` that describe the graph cut into ``chunks`` node ranges.

    Parameters
    ----------
    starts, ends, lower, upper, edge_delta
        The runs of :func:`tokendist.graphs._stencil.lower_edge_runs` and the stencil's offsets.
    indptr, indices, u : ndarray
        The graph's CSR rows and the lower endpoint of every edge (sorted, as :attr:`Graph.u`).
    chunks : int
        Node ranges wanted (at least 1).

    Returns
    -------
    tuple
        ``(starts, ends, run_edges, lower, upper, edge_delta, reach, up_reach, edge_low, bounds,
        chunk_runs, chunk_edges, far)``: the runs split at the chunk bounds (a run split in two is two
        runs of the same offsets: the kernels need nothing else), each run's first upper edge,
        the offsets, ``reach = -min(lower)`` (a run row below ``bounds[c] + reach`` has a lower
        neighbour before chunk ``c``), ``up_reach = max(upper)``, ``edge_low = min(edge_delta)``
        (a run row's edges lie in ``eb + edge_low .. eb + len(upper) - 1``), the ``chunks + 1``
        node bounds, each chunk's first run and first edge (the edges whose lower endpoint is
        below the chunk), and ``far[c]``: the first row of chunk ``c`` from ``bounds[c] + reach``
        on that has a neighbour before the chunk (a CSR row: the torus's wrap-around row), or
        ``bounds[c + 1]``.

    Examples
    --------
    ``ring:8``: one run, rows 2 .. 6 (row 1's lower edge ids differ), cut at node 4; the wrap-around
    row 7 has its neighbour 0 before chunk 1.

    >>> from tokendist.graphs import make_graph
    >>> from tokendist.graphs._stencil import lower_edge_runs
    >>> g = make_graph("ring:8")
    >>> s, e, d = lower_edge_runs(g.stencil, g.csr_edges)
    >>> c = stencil_chunks(s, e, g.stencil.lower, g.stencil.upper, d, g.indptr, g.indices, g.u, 2)
    >>> [x.tolist() for x in c[:3]], c[9].tolist(), c[12].tolist()
    ([[2, 4], [4, 7], [3, 5]], [0, 4, 8], [4, 7])
    """
    n = indptr.shape[0] - 1
    chunks = max(1, int(chunks))
    bounds = (np.arange(chunks + 1, dtype=np.int64) * n) // chunks
    cuts = bounds[1:-1]
    new_starts, new_ends = [], []
    for s, e in zip(np.asarray(starts).tolist(), np.asarray(ends).tolist()):
        inner = np.unique(cuts[(cuts > s) & (cuts < e)]).tolist()  # a bound twice: an empty chunk
        points = [s, *inner, e]
        new_starts.extend(points[:-1])
        new_ends.extend(points[1:])
    starts = np.asarray(new_starts, np.int64)
    ends = np.asarray(new_ends, np.int64)
    u = np.asarray(u)
    run_edges = np.searchsorted(u, starts, side="left").astype(np.int64)
    chunk_runs = np.searchsorted(starts, bounds, side="left").astype(np.int64)
    chunk_edges = np.searchsorted(u, bounds, side="left").astype(np.int64)
    reach = -min(lower) if len(lower) else 0
    up_reach = max(upper) if len(upper) else 0
    edge_low = min(edge_delta) if len(edge_delta) else 0
    # far: rows outside the runs, at or above their chunk's bound + reach, whose smallest
    # neighbour (the first of the sorted CSR row) lies before the chunk.
    in_run = np.zeros(n + 1, np.int64)
    np.add.at(in_run, starts, 1)
    np.add.at(in_run, ends, -1)
    in_run = np.cumsum(in_run[:n]) > 0
    nodes = np.arange(n)
    chunk_of = np.searchsorted(bounds, nodes, side="right") - 1
    has_nb = indptr[1:] > indptr[:-1]
    smallest = np.where(has_nb, np.asarray(indices)[np.minimum(indptr[:-1], max(len(indices) - 1, 0))], n)
    wraps = ~in_run & has_nb & (nodes >= bounds[chunk_of] + reach) & (smallest < bounds[chunk_of])
    far = bounds[1:].copy()
    np.minimum.at(far, chunk_of[wraps], nodes[wraps])
    return (starts, ends, run_edges, lower, upper, edge_delta, int(reach), int(up_reach), int(edge_low), bounds,
            chunk_runs, chunk_edges, far)


@numba.njit(cache=True, nogil=True, inline="always")
def _csr_transfers(i, indptr, indices, csr_edges, iou, loads, out, owe, shortbuf, found):
    """A CSR row's transfers ``trunc(o)``: what it owes (into ``owe``), its load before payments (into ``out``).

    A short row (it owes more than it holds) is listed at ``shortbuf[found]``; it pays in phase 3.
    Returns ``(moved, found)``: the tokens the row sends if it pays in full, and the list's new
    length. The sums are those of :func:`._heterogeneous_kernels._sos_iou_pass`'s row
    (integer-valued: exact in any order).
    """
    ui = _U(i)
    owed = 0.0
    delta = 0
    for kk in range(indptr[ui], indptr[ui + _U(1)]):
        t = np.trunc(iou[_U(csr_edges[_U(kk)])])
        if indices[_U(kk)] < i:
            owed += max(-t, 0.0)
            delta += np.int64(t)
        else:
            owed += max(t, 0.0)
            delta -= np.int64(t)
    held = loads[ui]
    owe[ui] = owed
    out[ui] += held + delta
    if owed > held:
        shortbuf[_U(found)] = i
        found += 1
    return np.int64(owed), found


@numba.njit(cache=True, nogil=True, inline="always")
def _own_edges(c, chunk_edges, m):
    """``(s0, s1)``: chunk ``c``'s edges whose exception bits are in bytes no other chunk's edges share."""
    nc = chunk_edges.shape[0] - 1
    s0 = 0 if c == 0 else ((chunk_edges[c] + 7) >> 3) << 3
    s1 = m if c == nc - 1 else (chunk_edges[c + 1] >> 3) << 3
    return s0, s1


@numba.njit(cache=True, nogil=True)
def _chunk_rows(c, indptr, indices, csr_edges, starts, ends, run_edges, lower, upper, edge_delta, reach, up_reach,
                edge_low, bounds, chunk_runs, chunk_edges, far, a0, beta, first, owed_stored, has_exc, exc_bits,
                pay_iou, x, loads, yhat, iou, out, owe, shortbuf):
    """Phase 1 of :func:`sos_iou_stencil_par` for chunk ``c``.

    Returns ``(moved, short, left, biggest, units, exc_big)``: ``left`` short rows are listed
    from ``shortbuf[bounds[c]]`` on for phase 3 (the others paid here).
    """
    c0 = bounds[c]
    c1 = bounds[c + 1]
    s0, s1 = _own_edges(c, chunk_edges, yhat.shape[0])
    r0 = chunk_runs[c]
    r1 = chunk_runs[c + 1]
    nu = len(upper)
    bm1 = beta - 1.0
    longest = 0
    for r in range(r0, r1):
        longest = max(longest, ends[r] - starts[r])
    nl = len(lower)
    exc_idx = np.empty(longest * nu, np.int64)  # a run's old exceptions: edge ids and IOUs
    exc_val = np.empty(longest * (nu + 2 * nl))  # (and _pay_run's scratch)
    moved = 0
    short = 0
    found = c0  # short rows left to phase 3 go to shortbuf[c0 ...]
    biggest = 0.0
    units = 0.0
    exc_big = 0.0
    e = chunk_edges[c]
    prev = c0
    for r in range(r0, r1 + 1):
        stop = starts[r] if r < r1 else c1
        for i in range(prev, stop):  # CSR rows: the upper slots of _sos_iou_pass
            ui = _U(i)
            xi = np.float64(x[ui])
            k0 = indptr[ui]
            end = indptr[ui + _U(1)]
            k = k0
            while k < end and csr_edges[_U(k)] < e:
                k += 1
            for kk in range(k, end):
                ue = _U(e)
                f = a0 * (xi - np.float64(x[_U(indices[_U(kk)])]))
                y = f if first else beta * f + bm1 * yhat[ue]
                yhat[ue] = y
                p = iou[ue]
                if has_exc and (exc_bits[_U(e >> 3)] >> (e & 7)) & 1:
                    # An exception keeps its IOU; its bit is consumed (in a byte another chunk
                    # shares, after phase 1: see sos_iou_stencil_par).
                    if s0 <= e < s1:
                        exc_bits[_U(e >> 3)] &= np.uint8(255 - (1 << (e & 7)))
                elif owed_stored:
                    p = p - np.trunc(p)
                o = y + p
                iou[ue] = o
                rr = abs(o - np.trunc(o))
                if rr > biggest:
                    biggest = rr
                e += 1
            if k0 < end and indices[_U(k0)] < c0:
                continue  # a lower neighbour in an earlier chunk: phase 2
            mv, listed = _csr_transfers(i, indptr, indices, csr_edges, iou, loads, out, owe, shortbuf, found)
            moved += mv
            short += listed - found
            found = listed
        if r == r1:
            break
        s = starts[r]
        en = ends[r]
        e = run_edges[r]
        hi = e + nu * (en - s)
        # (1) upper edges, as the serial kernel.
        _run_upper(s, en, e, upper, a0, beta, first, owed_stored, has_exc, exc_bits, x, yhat, iou, exc_idx, exc_val)
        if has_exc:  # the run's old bits, consumed; those in bytes another chunk shares after phase 1
            _clear_bits(exc_bits, max(e, s0), min(hi, s1))
        # (2a) the rows whose lower neighbours are all in this chunk (rows below c0 + reach are not).
        cut = min(en, max(s, c0 + reach))
        mv, listed, run_big = _run_transfers(s, cut, en, e, nu, lower, edge_delta, iou, loads, out, owe, shortbuf,
                                             found)
        moved += mv
        short += listed - found
        biggest = _largest(run_big, iou, e + nu * (cut - s), hi, biggest)
        # (2b) Short rows pay now, while the run is in cache (corrections as in the serial kernel:
        # every row of the run has read its transfers, rows after it read them later), if no row
        # they pay reads in phase 2 (all lower neighbours at or above c0 + reach and below
        # far[c], the first row from c0 + reach on with a neighbour before the chunk), nothing
        # they touch is in another chunk, and their edges' bits are in bytes of this chunk alone.
        # The others are kept for phase 3. Where many rows are short and every row of the run
        # meets those conditions, all at once (_pay_run, as the serial kernel).
        if (pay_iou and _DENSE_SHORT * (listed - found) > en - s and s - 2 * reach >= c0 and en - 1 < far[c]
                and en - 1 + up_reach < c1 and e + edge_low >= s0 and hi <= s1):
            dm, units, exc_big = _pay_run_scratch(s, en, e, lower, upper, edge_delta, loads, owe, iou, exc_bits, out,
                                                  units, exc_big, exc_idx, exc_val)
            moved += dm
            listed = found  # all paid
        for q in range(found, listed):
            i = np.int64(shortbuf[_U(q)])
            eb = e + nu * (i - s)
            if (pay_iou and i - 2 * reach >= c0 and i < far[c] and i + up_reach < c1 and eb + edge_low >= s0
                    and eb + nu <= s1):
                paid, dd, dm, units, exc_big = _iou_settle_run(i, eb, lower, upper, edge_delta, loads[_U(i)],
                                                               owe[_U(i)], iou, exc_bits, out, units, exc_big, en)
                owe[_U(i)] = paid
                out[_U(i)] += dd
                moved += dm
            else:
                shortbuf[_U(found)] = i
                found += 1
        e = hi
        prev = en
    return moved, short, found - c0, biggest, units, exc_big


@numba.njit(cache=True, nogil=True)
def _chunk_left_rows(c, indptr, indices, csr_edges, starts, ends, run_edges, lower, upper, edge_delta, reach, bounds,
                     chunk_runs, iou, loads, out, owe, shortbuf, found):
    """Phase 2 of :func:`sos_iou_stencil_par` for chunk ``c``: the rows phase 1 left.

    Their short rows are listed after the ``found`` that phase 1 left. Returns ``(moved, found,
    biggest)``.
    """
    c0 = bounds[c]
    c1 = bounds[c + 1]
    r0 = chunk_runs[c]
    r1 = chunk_runs[c + 1]
    nu = len(upper)
    moved = 0
    found += c0
    biggest = 0.0
    prev = c0
    for r in range(r0, r1 + 1):
        stop = starts[r] if r < r1 else c1
        for i in range(prev, stop):
            k0 = indptr[_U(i)]
            if k0 < indptr[_U(i + 1)] and indices[_U(k0)] < c0:
                mv, found = _csr_transfers(i, indptr, indices, csr_edges, iou, loads, out, owe, shortbuf, found)
                moved += mv
        if r == r1:
            break
        s = starts[r]
        en = ends[r]
        cut = min(en, max(s, c0 + reach))
        if cut > s:
            e = run_edges[r]
            mv, found, run_big = _run_transfers(s, s, cut, e, nu, lower, edge_delta, iou, loads, out, owe, shortbuf,
                                                found)
            moved += mv
            biggest = _largest(run_big, iou, e, e + nu * (cut - s), biggest)
        prev = en
    return moved, found - c0, biggest


@numba.njit(cache=True, nogil=True, inline="always")
def _iou_settle_read(i, k0, end, indices, csr_edges, held, owed, iou, exc_bits, out, units, exc_big):
    """A short CSR row's payments when every receiver has read its transfer ``t`` already.

    :func:`._heterogeneous_kernels._iou_settle`, line for line, but an upper receiver is
    corrected by ``paid - t`` (it read ``t``), not ``paid - trunc(r)``. Returns ``(paid_sum,
    delta, moved, units, exc_big)``.
    """
    paid_sum = 0.0
    delta = 0
    moved = 0
    for kk in range(k0, end):
        jn = indices[_U(kk)]
        lower = jn < i
        le = np.int64(csr_edges[_U(kk)])
        o = iou[_U(le)]
        t = np.trunc(o)
        if (t >= 0.0) if lower else (t <= 0.0):
            continue  # i does not send on this edge
        paid, r, units, exc_big = _iou_pay(o, t, held, owed, le, iou, exc_bits, units, exc_big)
        paid_sum += np.abs(paid)
        back = np.int64(t) - np.int64(paid)
        moved -= abs(back)
        if lower:
            delta -= back
            out[_U(jn)] += back
        else:
            delta += back
            out[_U(jn)] += np.int64(paid) - np.int64(t)
    return paid_sum, delta, moved, units, exc_big


@numba.njit(cache=True, nogil=True, inline="always")
def _first_upper_edge(i, starts, ends, run_edges, nu):
    """Row ``i``'s first upper edge if it is a run row, else -1 (a CSR row): the run found by bisection."""
    r = np.searchsorted(starts, i, side="right") - 1
    if r >= 0 and i < ends[r]:
        return run_edges[r] + nu * (i - starts[r])
    return -1


@numba.njit(cache=True, nogil=True, inline="always")
def _pay(i, eb, indptr, indices, csr_edges, lower, upper, edge_delta, loads, owe, iou, exc_bits, out, units,
         exc_big):
    """Short row ``i`` pays (a run row when ``eb >= 0``, its first upper edge). Returns ``(moved, units, exc_big)``."""
    ui = _U(i)
    n = loads.shape[0]
    if eb >= 0:
        paid, dd, dm, units, exc_big = _iou_settle_run(i, eb, lower, upper, edge_delta, loads[ui], owe[ui], iou,
                                                       exc_bits, out, units, exc_big, n)
    else:
        paid, dd, dm, units, exc_big = _iou_settle_read(i, indptr[ui], indptr[ui + _U(1)], indices, csr_edges,
                                                        loads[ui], owe[ui], iou, exc_bits, out, units, exc_big)
    owe[ui] = paid
    out[ui] += dd
    return dm, units, exc_big


@numba.njit(cache=True, nogil=True)
def _chunk_pay(c, indptr, indices, csr_edges, starts, ends, run_edges, lower, upper, edge_delta, reach, up_reach,
               edge_low, bounds, chunk_edges, m, loads, owe, iou, exc_bits, out, shortbuf, found):
    """Phase 3 of :func:`sos_iou_stencil_par` for chunk ``c``: the short rows that touch nothing outside it pay.

    The others are moved to the front of the chunk's part of ``shortbuf``. Returns ``(moved,
    units, exc_big, left)``.
    """
    c0 = bounds[c]
    c1 = bounds[c + 1]
    s0, s1 = _own_edges(c, chunk_edges, m)
    nu = len(upper)
    moved = 0
    units = 0.0
    exc_big = 0.0
    left = 0
    for q in range(found):
        i = np.int64(shortbuf[_U(c0 + q)])
        eb = _first_upper_edge(i, starts, ends, run_edges, nu)
        if eb >= 0:
            inside = (i - reach >= c0 and i + up_reach < c1 and eb + edge_low >= s0 and eb + nu <= s1)
        else:
            k0 = indptr[_U(i)]
            k1 = indptr[_U(i + 1)] - 1
            inside = (indices[_U(k0)] >= c0 and indices[_U(k1)] < c1 and csr_edges[_U(k0)] >= s0
                      and csr_edges[_U(k1)] < s1)
        if inside:
            dm, units, exc_big = _pay(i, eb, indptr, indices, csr_edges, lower, upper, edge_delta, loads, owe, iou,
                                      exc_bits, out, units, exc_big)
            moved += dm
        else:
            shortbuf[_U(c0 + left)] = i
            left += 1
    return moved, units, exc_big, left


@numba.njit(parallel=True, cache=True, nogil=True)
def sos_iou_stencil_par(indptr, indices, csr_edges, starts, ends, run_edges, lower, upper, edge_delta, reach,
                        up_reach, edge_low, bounds, chunk_runs, chunk_edges, far, a0, beta, first, owed_stored,
                        has_exc, exc_bits, pay_iou, x, loads, yhat, iou, out, owe):
    """:func:`._heterogeneous_kernels.sos_iou_stencil` in three parallel phases over node ranges; the same results.

    The graph arguments come from :func:`stencil_chunks`; the others are the serial kernel's
    (``out`` holds zeros: the kernel adds into it). Returns ``(moved, short, units, largest,
    any_exception)`` as the serial kernel.
    """
    n = loads.shape[0]
    m = yhat.shape[0]
    nc = bounds.shape[0] - 1
    # Only the pranges run in parallel: array expressions would each become a parallel region of
    # their own (see _heterogeneous_parallel.sos_iou_step_par), so this function has none.
    # Chunk c's short rows left to phase 3, from bounds[c] on (node ids: the graph's index type,
    # int32 up to 2^31 nodes; 2 bytes per edge on a torus, allocated per step as the serial
    # kernel's scratch, which is one run long).
    shortbuf = np.empty(n, indices.dtype)
    mv = np.empty(nc, np.int64)
    sh = np.empty(nc, np.int64)
    fd = np.empty(nc, np.int64)
    bg = np.empty(nc)
    un = np.empty(nc)
    eb = np.empty(nc)
    for c in numba.prange(nc):
        mv[c], sh[c], fd[c], bg[c], un[c], eb[c] = _chunk_rows(
            c, indptr, indices, csr_edges, starts, ends, run_edges, lower, upper, edge_delta, reach, up_reach,
            edge_low, bounds, chunk_runs, chunk_edges, far, a0, beta, first, owed_stored, has_exc, exc_bits, pay_iou,
            x, loads, yhat, iou, out, owe, shortbuf)
    if has_exc:
        # The old bits in bytes two chunks share (phase 1 left them: a read-modify-write of one
        # byte from two threads loses one); no new bit is set there before phase 3.
        for c in range(1, nc):
            ce = chunk_edges[c]
            _clear_bits(exc_bits, (ce >> 3) << 3, min(m, ((ce + 7) >> 3) << 3))
    moved = 0
    short = 0
    biggest = 0.0
    units = 0.0
    exc_big = 0.0
    for c in range(nc):
        moved += mv[c]
        short += sh[c]
        if bg[c] > biggest:
            biggest = bg[c]
        units += un[c]
        exc_big = max(exc_big, eb[c])
    fd2 = np.empty(nc, np.int64)
    for c in numba.prange(nc):
        mv[c], fd2[c], bg[c] = _chunk_left_rows(c, indptr, indices, csr_edges, starts, ends, run_edges, lower,
                                                upper, edge_delta, reach, bounds, chunk_runs, iou, loads, out, owe,
                                                shortbuf, fd[c])
    for c in range(nc):
        moved += mv[c]
        short += fd2[c] - fd[c]
        if bg[c] > biggest:
            biggest = bg[c]
    if not (pay_iou and short > 0):
        return moved, short, 0.0, biggest, False
    for c in numba.prange(nc):
        mv[c], un[c], eb[c], fd[c] = _chunk_pay(c, indptr, indices, csr_edges, starts, ends, run_edges, lower,
                                                upper, edge_delta, reach, up_reach, edge_low, bounds, chunk_edges, m,
                                                loads, owe, iou, exc_bits, out, shortbuf, fd2[c])
    for c in range(nc):
        moved += mv[c]
        units += un[c]
        exc_big = max(exc_big, eb[c])
    for c in range(nc):  # the rows that touch another chunk, serially
        for q in range(fd[c]):
            i = np.int64(shortbuf[bounds[c] + q])
            dm, units, exc_big = _pay(i, _first_upper_edge(i, starts, ends, run_edges, len(upper)), indptr, indices,
                                      csr_edges, lower, upper, edge_delta, loads, owe, iou, exc_bits, out, units,
                                      exc_big)
            moved += dm
    return moved, short, units, exc_big, True
