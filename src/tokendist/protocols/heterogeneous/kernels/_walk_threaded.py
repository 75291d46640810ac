"""Opt-in multi-threaded steps of ``random-walk`` (Elsässer, Monien, Schamberger 2006, Sec. 3).

``threads=k`` (k > 1) runs these kernels instead of the serial ones of
:mod:`._heterogeneous_random_walk_kernels`: :func:`fos_pair_regular_par` / :func:`fos_pair_par`
for phase 1 (``fos_pair_regular`` / ``fos_pair_step``; :func:`fos_pair_cube_par` for
``fos_pair_cube`` on a hypercube, whose blocks are its own) and :func:`mrws_step_par` for phase 2
(``mrws_step``). Every kernel cuts the nodes into fixed blocks of ``block`` rows, which
``numba.prange`` hands to the threads (a few blocks at a time, see
``_diffusion_parallel.run_parallel``); helpers are called once per block, never per row (a numba
call passes every array as an exploded struct: per row, that made a walk loop 2.7x slower).

Phase 1. Each block runs the *serial* row loop (``_pair_rows_regular`` or ``_pair_rows``), which
writes only its own rows' ``out``, ``outflow`` and ``dst`` and reads only the step's inputs (every
edge is computed from both ends), so the rows run in any order without races and each row's
arithmetic, its summation order included, is the serial kernel's. The step's totals:

* ``moved`` is an integer sum, ``max |est - ideal|`` and ``max est / sbar`` are maxima: exact in
  any order (per-block values, combined serially);
* the squared error ``sum (est - ideal)^2`` (its square root is the ``estimate_l2_error`` trace)
  is a float sum whose bits depend on the order: it is summed after the blocks, serially in node
  order from the new estimate, which repeats the serial kernel's additions one for one.

Phase 2. A token's move adds to another node's counts and to an edge's net flow, so the step is
split by edge direction (``dm``, ``dn``: the marked and negative tokens that crossed each edge
in each direction, written only by the sending node): pass 1, every node draws its own tokens'
counter coins (the serial draws, which depend on the node, kind, token number and step only)
and counts its moves; pass 2, every node reads its edges' two directions and computes its
counts, what it must send, its real flows, load, outflow and annihilation. Integers throughout:
every output equals the serial kernel's.

So loads, outflows, estimate, the switch step, the walking counts and the trace are those of
``threads=1``, bit for bit. Each kernel is its own function with ``parallel=True`` and
``cache=True`` (compiling one function with and without ``parallel=True`` under ``cache=True``
shares one cache entry, docs/design/kernels.md).
"""

from __future__ import annotations

import numba
import numpy as np

from ....kernels._coins import _step_base, _uniform
from ._walk_cube import CUBE_BLOCK_BITS, _cube_block
from ._walk_serial import _estimate_error, _pair_rows, _pair_rows_regular, _row_bounds

__all__ = ["fos_pair_par", "fos_pair_regular_par", "fos_pair_cube_par", "mrws_step_par", "ROW_BLOCK"]

#: Rows per block (the threads take blocks a few at a time, see ``_diffusion_parallel.run_parallel``).
ROW_BLOCK = 1024


@numba.njit(cache=True, nogil=True)
def _pair_totals(moved_b, err_b, wmax_b, s, ssum, total, dst):
    # The step's totals from the per-block values (exact: an integer sum and maxima) and the
    # squared error in node order, as the serial kernel adds it (dst[i] is its e, stored).
    n = dst.shape[0]
    moved = 0
    max_err = 0.0
    wmax = -np.inf
    for b in range(moved_b.shape[0]):
        moved += moved_b[b]
        max_err = max(max_err, err_b[b])
        wmax = max(wmax, wmax_b[b])
    ideal1 = total * 1.0 / ssum
    sq = 0.0
    for i in range(n):
        err, _ = _estimate_error(dst[i], i, s, ssum, total, ideal1, n / ssum)
        sq += err * err
    if s is None:
        wmax = wmax / (n / ssum)
    return moved, max_err, sq, wmax


@numba.njit(parallel=True, cache=True, nogil=True)
def fos_pair_par(indptr, indices, csr_edges, a0, inv, deg, caps, c, s, ssum, total, loads, xw, est, xe, dst, out,
                 outflow, block=ROW_BLOCK):
    """:func:`._heterogeneous_random_walk_kernels.fos_pair_step` over blocks of rows in parallel.

    Same arguments, outputs and returned values as the serial kernel, bit for bit (module
    docstring); ``block`` (rows per block, >= 1) is an argument so that tests can cut small graphs
    into many blocks.
    """
    n = loads.shape[0]
    nb = (n + block - 1) // block
    moved_b = np.zeros(nb, dtype=np.int64)
    err_b = np.zeros(nb)
    wmax_b = np.full(nb, -np.inf)
    for b in numba.prange(nb):
        i0 = b * block
        r = _pair_rows(indptr, indices, csr_edges, a0, inv, deg, caps, c, s, ssum, total, loads, xw, est, xe, dst, out,
                       outflow, i0, min(i0 + block, n))
        moved_b[b] = r[0]
        err_b[b] = r[1]
        wmax_b[b] = r[3]
    return _pair_totals(moved_b, err_b, wmax_b, s, ssum, total, dst)


@numba.njit(parallel=True, cache=True, nogil=True)
def fos_pair_regular_par(indices, D, a0, s, ssum, total, loads, xw, est, xe, dst, out, outflow, block=ROW_BLOCK):
    """:func:`._heterogeneous_random_walk_kernels.fos_pair_regular` over blocks of rows in parallel.

    Same arguments (plus ``block``), outputs and returned values as the serial kernel, bit for bit.
    A separate function from :func:`fos_pair_par` so that each compiles only its own row loop.
    """
    n = loads.shape[0]
    nb = (n + block - 1) // block
    moved_b = np.zeros(nb, dtype=np.int64)
    err_b = np.zeros(nb)
    wmax_b = np.full(nb, -np.inf)
    for b in numba.prange(nb):
        i0 = b * block
        i1 = min(i0 + block, n)
        if D == 4:
            r = _pair_rows_regular(indices, 4, a0, s, ssum, total, loads, xw, est, xe, dst, out, outflow, i0, i1)
        else:
            r = _pair_rows_regular(indices, D, a0, s, ssum, total, loads, xw, est, xe, dst, out, outflow, i0, i1)
        moved_b[b] = r[0]
        err_b[b] = r[1]
        wmax_b[b] = r[3]
    return _pair_totals(moved_b, err_b, wmax_b, s, ssum, total, dst)


@numba.njit(parallel=True, cache=True, nogil=True, error_model="numpy")
def fos_pair_cube_par(d, a0, s, ssum, total, loads, xw, est, xe, dst, out, outflow):
    """:func:`._heterogeneous_random_walk_cube.fos_pair_cube` over its blocks in parallel, bit for bit.

    Each block of ``2^b`` nodes (``b = min(d, CUBE_BLOCK_BITS)``, as in the serial kernel) runs the
    serial kernel's block with scratch of its own; it writes only its own rows and reads the
    step's inputs (with speeds the estimate is updated in place, but a block reads ``est`` only
    at its own rows: the neighbours' values come from the snapshot ``xe``).
    """
    n = loads.shape[0]
    b = min(d, CUBE_BLOCK_BITS)
    B = 1 << b
    nb = n // B
    moved_b = np.zeros(nb, dtype=np.int64)
    err_b = np.zeros(nb)
    wmax_b = np.full(nb, -np.inf)
    for c in numba.prange(nb):
        fw = np.empty(B)
        fe = np.empty(B)
        delta = np.empty(B, np.int64)
        sabs = np.empty(B, np.int64)
        inn = np.empty(B)
        q = np.empty(B)
        r = _cube_block(d, b, c * B, a0, s, ssum, total, loads, xw, est, xe, dst, out, outflow, fw, fe, delta, sabs,
                        inn, q, 0.0)
        moved_b[c] = r[0]
        err_b[c] = r[1]
        wmax_b[c] = r[3]
    return _pair_totals(moved_b, err_b, wmax_b, s, ssum, total, dst)


@numba.njit(cache=True, nogil=True)
def _walk_block(indptr, indices, csr_edges, a0, inv, deg, caps, c, s, base, marked, negative, new_m, new_n, need,
                dm, dn, g, i0, i1):
    # Pass 1 on rows i0..i1-1: every token of node i steps by M exactly as in the serial ``_walk``
    # (the same boundaries, built by the same additions, and the same counter coins); a move
    # along slot k adds 1 to ``moves[2 e + (j < i)]``, the direction i -> j that only row i
    # writes (zeroed here first). Called once per block: a numba call per row costs (arrays are
    # passed as exploded structs). Returns the marked and the negative tokens that moved.
    has_caps = caps.shape[0] > 0
    has_inv = inv.shape[0] > 0
    mm = 0
    nm = 0
    for i in range(i0, i1):
        a = indptr[i]
        b = indptr[i + 1]
        for k in range(a, b):
            d = 2 * csr_edges[k] + (indices[k] < i)
            dm[d] = 0
            dn[d] = 0
        cm = marked[i]
        cn = negative[i]
        new_m[i] = cm
        new_n[i] = cn
        need[i] = 0
        if cm + cn == 0:
            continue
        stay = _row_bounds(i, a, b, indices, csr_edges, a0, inv, deg, caps, c, s[i], has_caps, has_inv, g)
        last = b - a - 1
        for kind in range(2):
            ci = cm if kind == 0 else cn
            node_bits = (np.uint64(i) << np.uint64(32)) | (np.uint64(kind) << np.uint64(31))
            stays = 0
            for t in range(ci):
                u = _uniform(base, node_bits | np.uint64(t))
                if u < stay:
                    stays += 1
                    continue
                k = a
                for q in range(last):
                    k += g[q] <= u
                d = 2 * csr_edges[k] + (indices[k] < i)
                if kind == 0:
                    dm[d] += 1
                else:
                    dn[d] += 1
            if kind == 0:
                new_m[i] = stays
                need[i] = cm - stays  # a marked token leaving i takes one of i's real tokens along
                mm += cm - stays
            else:
                new_n[i] = stays
                nm += cn - stays
    return mm, nm


@numba.njit(cache=True, nogil=True)
def _settle_block(indptr, indices, csr_edges, marked, negative, new_m, new_n, loads, out, outflow, need, dm, dn, i0,
                  i1):
    # Pass 2 on rows j = i0..i1-1: what arrived along each edge direction, the real flows seen
    # from j, overdraw check and annihilation. Returns (moved, overdraws, gone, marked, negative).
    moved = 0
    over = 0
    gone = 0
    lm = 0
    ln = 0
    for j in range(i0, i1):
        cm = np.int64(new_m[j])
        cn = np.int64(new_n[j])
        nd = np.int64(need[j])
        delta = 0
        sent = 0
        for k in range(indptr[j], indptr[j + 1]):
            i = indices[k]
            e2 = 2 * csr_edges[k]
            din = e2 + (j < i)  # i -> j
            dout = e2 + (i < j)  # j -> i
            im = np.int64(dm[din])
            inn = np.int64(dn[din])
            cm += im
            cn += inn
            nd += inn  # a negative token arriving at j: j sends one real token back
            # Real tokens j sends along the edge: marked j -> i, plus one per negative i -> j,
            # minus the same the other way (the serial net[e], seen from j).
            f = np.int64(dm[dout]) - im + inn - np.int64(dn[dout])
            delta -= f
            sent += max(f, 0)
        out[j] = loads[j] + delta
        outflow[j] = sent
        need[j] = nd
        moved += sent
        if nd > loads[j]:
            over += 1
        x = min(cm, cn)
        gone += x
        marked[j] = cm - x
        negative[j] = cn - x
        lm += cm - x
        ln += cn - x
    return moved, over, gone, lm, ln


@numba.njit(parallel=True, cache=True, nogil=True)
def mrws_step_par(indptr, indices, csr_edges, a0, inv, deg, caps, c, s, key, step, marked, negative, new_m, new_n,
                  loads, out, outflow, need, dm, dn, maxdeg, block=ROW_BLOCK):
    """:func:`._heterogeneous_random_walk_kernels.mrws_step` in two parallel passes over blocks of rows.

    The walk writes into other nodes' counts and into edges, so it is split by edge direction:
    ``dm[2 e + d]`` and ``dn[2 e + d]`` (2m values each, ``d = 0`` from ``u[e]`` to ``v[e]``, 1
    back) count the marked and negative tokens that crossed edge e in direction d this step. Pass
    1: every node draws its own tokens' coins (counter-based: the serial kernel's draws, in any
    order) and writes only the directions leaving it. Pass 2: every node reads the directions
    of its edges and computes its walking counts, what it must send (overdraw check), its real
    flows (the serial ``net[e]`` seen from its end), load, outflow and annihilation. Same
    arguments as the serial kernel but ``dm``, ``dn`` (scratch, no zeroing needed) in place of
    ``net`` and ``g``, and ``maxdeg`` (the largest degree); the same outputs and returned values
    (integers: exact in any order).
    """
    n = marked.shape[0]
    nb = (n + block - 1) // block
    base = _step_base(np.uint64(key), np.uint64(step))
    mm_b = np.zeros(nb, dtype=np.int64)
    nm_b = np.zeros(nb, dtype=np.int64)
    for bk in numba.prange(nb):
        g = np.empty(max(maxdeg, 1))
        r = _walk_block(indptr, indices, csr_edges, a0, inv, deg, caps, c, s, base, marked, negative, new_m, new_n,
                        need, dm, dn, g, bk * block, min(bk * block + block, n))
        mm_b[bk] = r[0]
        nm_b[bk] = r[1]
    res = np.zeros((nb, 5), dtype=np.int64)
    for bk in numba.prange(nb):
        r = _settle_block(indptr, indices, csr_edges, marked, negative, new_m, new_n, loads, out, outflow, need, dm,
                          dn, bk * block, min(bk * block + block, n))
        for q in range(5):
            res[bk, q] = r[q]
    moved, over, gone, lm, ln = res[:, 0].sum(), res[:, 1].sum(), res[:, 2].sum(), res[:, 3].sum(), res[:, 4].sum()
    return moved, mm_b.sum() + 2 * nm_b.sum(), over, gone, lm, ln
