"""Numba steps of the randomized algorithm of Elsässer, Monien and Schamberger (2006), Sec. 3.

Two hot loops, each the exact counterpart of the numpy reference in
:mod:`._heterogeneous_random_walk` (``kernel=numpy``):

* :func:`fos_pair_step` -- phase 1: integer FOS (flows rounded towards zero) on the tokens *and*
  real FOS on the estimate, in one pass over the CSR rows. The coefficient
  ``c_ij = cap_ij / (c max(d_i, d_j))`` of Sec. 2 is a scalar on regular graphs and
  ``min(1/(c d_i), 1/(c d_j))`` otherwise (no per-edge array without capacities); the estimate
  ping-pongs between two arrays (unit speeds) or is updated in place from a snapshot
  ``estimate / s``, so a step allocates nothing. Loads and estimate are the reference's values
  (the same bits up to the sign of a zero): edges are stored ``u < v``
  sorted, so row i's slots with ``j < i`` / ``j > i`` are ``bincount(v, y)`` / ``bincount(u, y)``
  in edge order, and summing them into two accumulators repeats the reference operation for
  operation. The estimate's squared error is summed serially (numpy sums pairwise), so the
  reported l2 error may differ from the reference in the last bits; its max error (the ``error``
  switch rule) is exact.
* :func:`fos_pair_regular` -- the same step on a D-regular graph with one coefficient (torus,
  hypercube, random-regular: the protocol picks it), the same bits: rows of D slots (no
  ``indptr``, ``csr_edges`` or coefficient reads), a constant trip count (D = 4 compiled as a
  constant, unrolled) and no data-dependent branch (the two real sums take each slot by a
  select). With the CSR indices viewed as ``uint32`` (no negative-index wrap per slot) and what
  a node sends summed as ``(sum |y| - sum y) / 2``, about 40% less CPU time than
  :func:`fos_pair_step` with signed indices on torus:1000x1000 and hypercube:20 (docs, Performance).
  Tried and not kept: two rows per iteration (four float chains; no gain, register spills), a
  precomputed per-row count of the ``j < i`` slots with two loops (no gain), loads and estimate
  interleaved in one (n, 2) array (slower: the extra writes), slot-major blocks for SIMD gathers
  (LLVM does not emit gathers for this CPU model; slower than the row loop).
* :func:`fos_pair_stencil` -- :func:`fos_pair_regular` over the graph's offset stencil
  (:class:`~tokendist.graphs._stencil.Stencil`: runs of consecutive nodes whose neighbours are
  ``i + lower[k]`` then ``i + upper[k]``, in CSR order; a torus away from its seams, a ring), the
  same bits: a node in a run reads no ``indices`` and its neighbours' values in a few contiguous
  streams, so LLVM vectorises the run loop (4 nodes per AVX2/AVX-512 instruction); the seam rows
  run :func:`fos_pair_regular`'s row. What makes it fast (measured on torus:1000x1000):
  the offsets are two numba tuples (their lengths are compile-time constants: the slot loops are
  unrolled and the offsets are immediates; an offsets array or a runtime split point was 2-3x
  slower in the lead's prototype), every index is cast to ``uint64`` (no negative-index wrap), and
  the float reductions (the squared error, a sequential sum that LLVM may not reassociate, and the
  two maxima) are in a second, serial loop over each chunk of 256 run rows, in node order, from
  scratch arrays in L1: inline they stopped the run loop's vectorisation (7.5 ns per edge instead
  of 3.4). With speeds the estimate is updated in place (``dst is est``): the run loop writes the
  new estimate to scratch, never to ``dst``, and the divisions by ``s_i`` get a loop of their own
  (``error_model="numpy"``: no zero-divisor branch), else LLVM keeps its scalar loop (the speeds
  path was 1.1x faster than :func:`fos_pair_regular` instead of 2-3x). The serial loop is a
  latency chain of one addition per node, about a third of the step; a 4-node unrolled body with
  the sums inline and touch-ahead loads in that loop (to overlap it with the next rows' memory
  traffic) were tried and not kept (slower). The protocol runs it (serial numba path) from the
  second phase-1 step on a graph with a stencil; ``threads > 1`` keeps
  :mod:`._heterogeneous_random_walk_parallel`.
* :func:`mrws_step` -- phase 2: one main random walk step (MRWS) of every marked and every
  negative token, then the real-token flows, the overdraw count and annihilation. Coins are
  counter-based: token k of kind ``kind`` (0 marked, 1 negative) on node i draws
  ``u = counter_uniform(key, t, token_index(i, kind, k))``, so the numpy reference, this kernel
  and the per-node rule (:mod:`._heterogeneous_random_walk_node`) draw the same coins in any
  order, and a node needs nothing but its own counts to draw them. The token stays when
  ``u < M_ii = 1 - out_i`` and otherwise takes the first slot whose boundary
  ``M_ii + cum_k`` exceeds u (``cum_k``: row i's slot probabilities ``c_ij / s_i`` summed from 0
  in slot order, ``out_i`` their total; the last boundary pinned to 1): every quantity is local
  to node i, and the three implementations do the same additions in the same order.

The phase-1 row loops (``_pair_rows``, ``_pair_rows_regular``) are shared with the opt-in
``threads=k`` kernels of :mod:`._heterogeneous_random_walk_parallel`, which call them once per
block of rows: a numba call per row costs (arrays are passed as exploded structs), and moving the
walk's boundary loop into a helper called per node made :func:`mrws_step` 2.7x slower.
"""

from __future__ import annotations

import numba
import numpy as np

from ....kernels._coins import _step_base, _uniform

__all__ = ["fos_pair_step", "fos_pair_regular", "fos_pair_stencil", "STENCIL_CHUNK", "edge_gap", "mrws_step",
           "token_index"]

_U = np.uint64  # index casts: no negative-index wrap per access


def token_index(node, kind, k):
    """The counter index of token ``k`` (0-based, in the node's count) of ``kind`` (0 marked,
    1 negative) on ``node``: ``node * 2**32 + kind * 2**31 + k``.

    Collision-free while a node holds fewer than ``2**31`` walking tokens of a kind and
    ``n < 2**32``; vectorised over numpy arrays (uint64) and exact for Python ints.
    """
    if isinstance(node, np.ndarray):
        return (node.astype(np.uint64) << np.uint64(32)) | (np.uint64(kind) << np.uint64(31)) | np.asarray(
            k, dtype=np.uint64)
    return (int(node) << 32) | (int(kind) << 31) | int(k)


@numba.njit(inline="always")
def _estimate_error(e, i, s, ssum, total, ideal1, nfac):
    # Node i's new estimate e against its ideal load: (|e - ideal_i|, e / sbar_i). With unit speeds
    # (s None) the second is e itself: the callers divide their maximum by n / sum s once.
    if s is None:
        return abs(e - ideal1), e
    return abs(e - total * s[i] / ssum), e / (s[i] * nfac)


@numba.njit(inline="always")
def _finish_row(i, delta, sent, flow_in, loads, est, out, outflow, dst, s, ssum, total, ideal1, nfac):
    # Row i's end in every phase-1 row loop: the new load and outflow, the new estimate
    # est_i + (inn + q) (flow_in: that sum), and (err, e / sbar_i) of _estimate_error.
    out[i] = loads[i] + delta
    outflow[i] = sent
    e = est[i] + flow_in
    dst[i] = e
    return _estimate_error(e, i, s, ssum, total, ideal1, nfac)


@numba.njit(cache=True, nogil=True)
def _pair_rows(indptr, indices, csr_edges, a0, inv, deg, caps, c, s, ssum, total, loads, xw, est, xe, dst, out,
               outflow, i0, i1):
    # Rows i0..i1-1 of fos_pair_step on any graph; returns (moved, max_err, sq_err, max est/s) of
    # these rows (the last unscaled: the caller divides by n / sum s when s is None).
    n = loads.shape[0]
    nfac = n / ssum
    ideal1 = total * 1.0 / ssum  # the ideal load when every speed is 1
    moved = 0
    max_err = 0.0
    sq = 0.0
    wmax = -np.inf
    for i in range(i0, i1):
        xwi = np.float64(xw[i])
        xei = xe[i]
        delta = 0
        sent = 0
        # Row i lists its neighbours in increasing order: first the edges (j, i) with j < i, whose
        # flows form the reference's bincount(v, y), then the edges (i, j), its bincount(u, y).
        # Every slot computes f = c_ij (x_j - x_i), the flow into i (the exact negation of the
        # edge's flow when j > i), so the integer part is one expression; the real part keeps
        # the reference's two sums, inn - outs = inn + q with q = -outs, in two loops.
        inn = 0.0
        q = 0.0
        k = indptr[i]
        end = indptr[i + 1]
        while k < end:  # j < i (the same body as the loop below, the real flow into inn)
            j = indices[k]
            if j > i:
                break
            if caps is not None:
                a = caps[csr_edges[k]] / (c * max(deg[i], deg[j]))
            elif inv is not None:
                a = min(inv[i], inv[j])
            else:
                a = a0
            y = np.int64(np.trunc(a * (np.float64(xw[j]) - xwi)))
            delta += y
            sent += max(-y, 0)
            inn += a * (xe[j] - xei)
            k += 1
        while k < end:  # j > i
            j = indices[k]
            if caps is not None:
                a = caps[csr_edges[k]] / (c * max(deg[i], deg[j]))
            elif inv is not None:
                a = min(inv[i], inv[j])
            else:
                a = a0
            y = np.int64(np.trunc(a * (np.float64(xw[j]) - xwi)))
            delta += y
            sent += max(-y, 0)
            q += a * (xe[j] - xei)
            k += 1
        moved += sent
        err, we = _finish_row(i, delta, sent, inn + q, loads, est, out, outflow, dst, s, ssum, total, ideal1, nfac)
        wmax = max(wmax, we)
        max_err = max(max_err, err)
        sq += err * err
    return moved, max_err, sq, wmax


@numba.njit(cache=True, nogil=True)
def _pair_rows_regular(indices, D, a0, s, ssum, total, loads, xw, est, xe, dst, out, outflow, i0, i1):
    # Rows i0..i1-1 of fos_pair_regular: row i is slots D*i .. D*i + D - 1 (no indptr reads), one
    # coefficient a0, and one loop of D slots with no data-dependent branch: a slot's real flow
    # goes to ``inn`` (j < i) or ``q`` (j > i) by a select, the other sum getting +0.0. That adds
    # the same terms in the same order as the general loop's two loops (and x + 0.0 == x: the sums
    # start at +0.0 and a round-to-nearest sum is never -0.0 unless both terms are), so every
    # value is the same bits. The float -> int64 cast truncates towards zero, as np.trunc does
    # (|a (x_j - x_i)| < 2^63 for int64 loads).
    n = loads.shape[0]
    nfac = n / ssum
    ideal1 = total * 1.0 / ssum
    moved = 0
    max_err = 0.0
    sq = 0.0
    wmax = -np.inf
    for i in range(i0, i1):
        xwi = np.float64(xw[i])
        xei = xe[i]
        delta = 0
        sabs = 0
        inn = 0.0
        q = 0.0
        base = D * i
        for kk in range(D):
            j = indices[base + kk]
            y = np.int64(a0 * (np.float64(xw[j]) - xwi))
            delta += y
            sabs += abs(y)
            f = a0 * (xe[j] - xei)
            lo = j < i
            inn += f if lo else 0.0
            q += 0.0 if lo else f
        # What i sends, sum max(-y, 0), is (sum |y| - sum y) / 2: one instruction less per slot.
        sent = (sabs - delta) >> 1
        moved += sent
        err, we = _finish_row(i, delta, sent, inn + q, loads, est, out, outflow, dst, s, ssum, total, ideal1, nfac)
        wmax = max(wmax, we)
        max_err = max(max_err, err)
        sq += err * err
    return moved, max_err, sq, wmax


@numba.njit(cache=True, nogil=True)
def fos_pair_step(indptr, indices, csr_edges, a0, inv, deg, caps, c, s, ssum, total, loads, xw, est, xe, dst, out,
                  outflow):
    """Phase 1 (Sec. 3): integer FOS on ``loads`` into ``out`` and real FOS from ``est`` into ``dst``.

    Unused inputs are passed as ``None``: numba compiles one version per combination and removes
    the ``is None`` branches, so the inner loop has no branch on the coefficient kind or on the
    speeds (a runtime flag there cost 15-25% on torus:1000x1000). ``indices`` may be the CSR
    indices viewed as unsigned (``uint32``): numba then emits no negative-index wrap per slot.

    Parameters
    ----------
    a0, inv, deg, caps
        The coefficients (see :func:`_row_cumsum`): the scalar ``a0`` (``inv`` and ``caps`` None),
        per-node ``inv = 1 / (c d_i)`` (``caps`` None), or degrees ``deg`` with capacities ``caps``.
    s : float64 (n,) or None
        The speeds; None when every speed is 1 (the ideal load is then one number).
    ssum : float
        ``sum s`` as numpy computes it (pairwise), so that the ideal loads are the reference's bits.
    total : float
        ``W``, the number of tokens: the ideal loads are ``W s_i / sum s`` (eq. (2)).
    xw, xe : (n,)
        ``loads / s`` and ``est / s``. With unit speeds the caller passes ``loads`` itself (int64,
        the same values as a float division by 1) and ``xe = est`` with a second array ``dst``
        (ping-pong); with speeds, buffers holding the quotients and ``dst = est`` (the estimate
        is updated in place from the snapshot ``xe``).

    Returns
    -------
    moved, max_err, sq_err, max_weighted
        Tokens moved; ``max |est - ideal|``, ``sum (est - ideal)^2`` (summed in node order) and
        ``max est / sbar`` of the updated estimate (``sbar_i = n s_i / sum s``).
    """
    n = loads.shape[0]
    moved, max_err, sq, wmax = _pair_rows(indptr, indices, csr_edges, a0, inv, deg, caps, c, s, ssum, total, loads,
                                          xw, est, xe, dst, out, outflow, 0, n)
    if s is None:
        # sbar_i = n / sum s for every i, and x -> x / nfac is monotone: max(e / nfac) = max(e) / nfac.
        wmax = wmax / (n / ssum)
    return moved, max_err, sq, wmax


@numba.njit(cache=True, nogil=True)
def fos_pair_regular(indices, D, a0, s, ssum, total, loads, xw, est, xe, dst, out, outflow):
    """:func:`fos_pair_step` on a D-regular graph with one coefficient ``a0`` (same results, bit for bit).

    Every row has ``D`` slots (row i is ``indices[D*i : D*i + D]``), so ``indptr``, ``csr_edges``
    and the per-edge coefficient are not read, and the row loop has a constant trip count and no
    data-dependent branch (``D == 4``, the 2-dimensional torus, is compiled with the constant so
    that LLVM unrolls it). The other arguments and the returned values are those of
    :func:`fos_pair_step`.
    """
    n = loads.shape[0]
    if D == 4:
        moved, max_err, sq, wmax = _pair_rows_regular(indices, 4, a0, s, ssum, total, loads, xw, est, xe, dst, out,
                                                      outflow, 0, n)
    else:
        moved, max_err, sq, wmax = _pair_rows_regular(indices, D, a0, s, ssum, total, loads, xw, est, xe, dst, out,
                                                      outflow, 0, n)
    if s is None:
        wmax = wmax / (n / ssum)
    return moved, max_err, sq, wmax


#: Rows per chunk of a stencil run in :func:`fos_pair_stencil`: the chunk's estimate and errors
#: wait in three scratch arrays of this length (L1) between the vectorised and the serial loop.
STENCIL_CHUNK = 256


@numba.njit(cache=True, nogil=True, error_model="numpy")
def fos_pair_stencil(indices, starts, ends, lower, upper, a0, s, ssum, total, loads, xw, est, xe, dst, out, outflow):
    """:func:`fos_pair_regular` over an offset stencil (a torus, a ring): same results, bit for bit.

    ``starts``, ``ends``, ``lower``, ``upper`` are those of the graph's
    :class:`~tokendist.graphs._stencil.Stencil` (``lower`` and ``upper`` as tuples, both
    non-empty): node ``i`` of a run ``[starts[r], ends[r])`` has the neighbours ``i + lower[k]``
    (the row's ``j < i`` slots) then ``i + upper[k]`` (``j > i``), in its CSR order, so its row is
    computed without reading ``indices``; the other nodes (the seams) run the row of
    :func:`fos_pair_regular`, whose degree ``D = len(lower) + len(upper)`` is a compile-time
    constant here. The other arguments and the returned values are those of :func:`fos_pair_step`.

    A run is cut into chunks of :data:`STENCIL_CHUNK` rows, each done in two loops (three with
    speeds): the first (vectorised) writes ``out`` and ``outflow`` and puts each row's new
    estimate (and, with unit speeds, its error) in scratch; with speeds a second vectorised loop
    computes the errors and weighted estimates (the divisions by ``s_i``); the last, serial,
    stores the estimate into ``dst`` and does the float reductions in node order. The vectorised
    loops never write ``dst``, which is ``est`` itself with speeds (in-place update): a store to
    an array they read would make LLVM's runtime alias check fall back to its scalar loop.
    ``error_model="numpy"`` only drops numba's zero-divisor checks (speeds are positive, the Graph
    model checks it), which kept the divisions scalar.
    """
    n = loads.shape[0]
    D = len(lower) + len(upper)
    nfac = n / ssum
    ideal1 = total * 1.0 / ssum
    moved = 0
    max_err = 0.0
    sq = 0.0
    wmax = -np.inf
    eb = np.empty(STENCIL_CHUNK)  # the chunk's new estimate,
    errb = np.empty(STENCIL_CHUNK)  # |estimate - ideal|
    wb = np.empty(STENCIL_CHUNK if s is not None else 0)  # and estimate / sbar (speeds only)
    nruns = starts.shape[0]
    prev = 0
    for r in range(nruns + 1):
        a = starts[r] if r < nruns else n
        b = ends[r] if r < nruns else n
        # Seam rows prev..a-1: the row of _pair_rows_regular (the slot's side of i by a select).
        for i in range(prev, a):
            ui = _U(i)
            xwi = np.float64(xw[ui])
            xei = xe[ui]
            delta = 0
            sabs = 0
            inn = 0.0
            q = 0.0
            base = D * i
            for kk in range(D):
                j = indices[_U(base + kk)]
                y = np.int64(a0 * (np.float64(xw[_U(j)]) - xwi))
                delta += y
                sabs += abs(y)
                f = a0 * (xe[_U(j)] - xei)
                lo = j < i
                inn += f if lo else 0.0
                q += 0.0 if lo else f
            sent = (sabs - delta) >> 1
            moved += sent
            err, we = _finish_row(ui, delta, sent, inn + q, loads, est, out, outflow, dst, s, ssum, total, ideal1,
                                  nfac)
            wmax = max(wmax, we)
            max_err = max(max_err, err)
            sq += err * err
        for c0 in range(a, b, STENCIL_CHUNK):
            c1 = min(c0 + STENCIL_CHUNK, b)
            # Run rows c0..c1-1: the same terms in the same order, the neighbours at fixed offsets.
            # The select's +0.0 terms are left out (x + 0.0 == x: a sum from +0.0 is never -0.0
            # unless every term is). No float reduction here, so this loop vectorises.
            for i in range(c0, c1):
                ui = _U(i)
                xwi = np.float64(xw[ui])
                xei = xe[ui]
                delta = 0
                sabs = 0
                inn = 0.0
                for k in range(len(lower)):
                    j = _U(i + lower[k])
                    y = np.int64(a0 * (np.float64(xw[j]) - xwi))
                    delta += y
                    sabs += abs(y)
                    inn += a0 * (xe[j] - xei)
                q = 0.0
                for k in range(len(upper)):
                    j = _U(i + upper[k])
                    y = np.int64(a0 * (np.float64(xw[j]) - xwi))
                    delta += y
                    sabs += abs(y)
                    q += a0 * (xe[j] - xei)
                sent = (sabs - delta) >> 1
                out[ui] = loads[ui] + delta
                outflow[ui] = sent
                moved += sent
                e = est[ui] + (inn + q)
                c = _U(i - c0)
                eb[c] = e
                if s is None:
                    errb[c] = abs(e - ideal1)
            if s is not None:
                # With speeds, a loop of its own: the first loop with these two stores and the
                # read of s needs more runtime alias checks than LLVM allows (it stays scalar).
                # error_model="numpy": no zero-divisor check (a branch) on s_i, which
                # the Graph model checks positive, so that the divisions vectorise.
                for i in range(c0, c1):
                    c = _U(i - c0)
                    e = eb[c]
                    si = s[_U(i)]
                    errb[c] = abs(e - total * si / ssum)
                    wb[c] = e / (si * nfac)
            # The chunk's estimate and reductions in node order (the regular kernel's sequence of
            # additions and maxima; a sequential float sum does not vectorise).
            for i in range(c0, c1):
                c = _U(i - c0)
                e = eb[c]
                dst[_U(i)] = e
                err = errb[c]
                wmax = max(wmax, e if s is None else wb[c])
                max_err = max(max_err, err)
                sq += err * err
        prev = b
    if s is None:
        wmax = wmax / (n / ssum)
    return moved, max_err, sq, wmax


@numba.njit(cache=True, nogil=True)
def edge_gap(indptr, indices, est, s, x):
    """``max |est_i/s_i - est_j/s_j|`` over the edges (the ``local`` switch rule); ``x`` is scratch."""
    n = est.shape[0]
    for i in range(n):
        x[i] = est[i] / s[i]
    gap = 0.0
    for i in range(n):
        for k in range(indptr[i], indptr[i + 1]):
            j = indices[k]
            if j > i:
                gap = max(gap, abs(x[i] - x[j]))
    return gap


@numba.njit(cache=True, nogil=True, inline="always")
def _row_bounds(i, a, b, indices, csr_edges, a0, inv, deg, caps, c, si, has_caps, has_inv, g):
    """Row i's walk boundaries in ``g[0:b-a-1]``; returns ``M_ii``, the probability to stay.

    The slot probabilities ``c_ij / s_i`` are summed from 0 in slot order (local to i), then
    ``b_k = M_ii + cum_k``; the last boundary is pinned to 1 (only the first deg - 1 are compared).
    Non-decreasing, so the first slot with ``b_k > u`` is ``a + #(b_k <= u)``, no branch. Shared by
    the serial, threaded and partitioned walks, which must draw alike.
    """
    cs = 0.0
    if has_caps:
        for k in range(a, b):
            cs = cs + caps[csr_edges[k]] / (c * max(deg[i], deg[indices[k]])) / si
            g[k - a] = cs
    elif has_inv:
        for k in range(a, b):
            cs = cs + min(inv[i], inv[indices[k]]) / si
            g[k - a] = cs
    else:
        pk = a0 / si
        for k in range(a, b):
            cs = cs + pk
            g[k - a] = cs
    stay = 1.0 - cs
    for q in range(b - a - 1):
        g[q] = stay + g[q]
    return stay


@numba.njit(cache=True, nogil=True)
def _walk(indptr, indices, csr_edges, a0, inv, deg, caps, c, s, base, kind, counts, new, real, net, need,
          need_at_target, g):
    """Every token in ``counts`` takes one step by M; arrivals are added to ``new`` (zeroed by the caller).

    Token k of node i (``kind`` 0 marked, 1 negative) draws ``counter_uniform(key, t, index)`` with
    ``index = token_index(i, kind, k)`` (``base`` is the step's part of the hash): a pure function
    of the node's own state, so a node computes its tokens' coins alone. A token moving i -> j
    moves ``real`` (+1 marked, -1 negative) real tokens i -> j: ``net[e]`` (positive from ``u`` to
    ``v``) changes, and ``need`` counts the tokens the sender of the real move must give (at i for
    marked, at j for negative tokens). Returns the number of moves.
    """
    n = counts.shape[0]
    moves = 0
    has_caps = caps.shape[0] > 0
    has_inv = inv.shape[0] > 0
    hi = np.uint64(kind) << np.uint64(31)
    for i in range(n):
        ci = counts[i]
        if ci == 0:
            continue
        a = indptr[i]
        b = indptr[i + 1]
        stay = _row_bounds(i, a, b, indices, csr_edges, a0, inv, deg, caps, c, s[i], has_caps, has_inv, g)
        last = b - a - 1
        stays = 0
        node_bits = (np.uint64(i) << np.uint64(32)) | hi
        for t in range(ci):
            u = _uniform(base, node_bits | np.uint64(t))
            if u < stay:
                stays += 1
                continue
            k = a
            for q in range(last):
                k += g[q] <= u
            j = indices[k]
            new[j] += 1
            e = csr_edges[k]
            if i < j:
                net[e] += real
            else:
                net[e] -= real
            moves += 1
            if need_at_target:
                need[j] += 1
            else:
                need[i] += 1
        new[i] += stays
    return moves


@numba.njit(cache=True, nogil=True)
def mrws_step(indptr, indices, csr_edges, u, v, a0, inv, deg, caps, c, s, key, step, marked, negative, new_m, new_n,
              loads, out, outflow, need, net, g):
    """One main random walk step (Sec. 3): walks, real-token flows, overdraw count, annihilation.

    ``marked`` and ``negative`` are replaced in place by the counts after the step (``new_m``,
    ``new_n`` are scratch); ``out`` gets the real loads, ``outflow`` what each node sent. ``net``
    (int per edge) must be all zero on entry and is left zero; ``g`` holds at least the maximum
    degree. The flows are settled in one pass over the edges: phase 2 always has Omega(n) walking
    negative tokens (their excess over the marked ones is ``sum(what) - W``), so the walk costs
    more than the pass anyway.

    Returns
    -------
    moved, messages, overdraws, annihilated, marked_left, negative_left
    """
    n = marked.shape[0]
    for i in range(n):
        new_m[i] = 0
        new_n[i] = 0
        need[i] = 0
        outflow[i] = 0
        out[i] = loads[i]
    base = _step_base(np.uint64(key), np.uint64(step))
    mm = _walk(indptr, indices, csr_edges, a0, inv, deg, caps, c, s, base, 0, marked, new_m, 1, net, need, False, g)
    nm = _walk(indptr, indices, csr_edges, a0, inv, deg, caps, c, s, base, 1, negative, new_n, -1, net, need, True, g)
    moved = 0
    for e in range(u.shape[0]):
        f = np.int64(net[e])
        if f == 0:
            continue
        net[e] = 0
        a = u[e]
        b = v[e]
        out[a] -= f
        out[b] += f
        if f > 0:
            outflow[a] += f
            moved += f
        else:
            outflow[b] -= f
            moved -= f
    overdraws = 0
    gone = 0
    left_m = 0
    left_n = 0
    for i in range(n):
        if need[i] > loads[i]:
            overdraws += 1
        x = min(new_m[i], new_n[i])
        gone += x
        marked[i] = new_m[i] - x
        negative[i] = new_n[i] - x
        left_m += marked[i]
        left_n += negative[i]
    return moved, mm + 2 * nm, overdraws, gone, left_m, left_n
