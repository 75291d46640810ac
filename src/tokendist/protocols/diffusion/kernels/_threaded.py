"""Opt-in multi-threaded kernels of the diffusion protocols (Subramanian and Scherson 1994, Sec. 2, Sec. 4).

The protocols run these with ``threads=k`` for k > 1 (``threads=1`` runs the serial kernels of
:mod:`._diffusion_kernels` unchanged). The rounded schemes' default, ``threads=auto``, races
:func:`rounded_step_parallel` against the serial ``rounded_step`` on large graphs without an
offset stencil and runs the faster (:mod:`._measured_choice`); the two give the same bits. Every step is cut into fixed blocks of whole rows;
``numba.prange`` hands the blocks to the threads and each block runs the *same* row loop as the
serial kernel (``_regular_rows``, ``_general_rows``, ``_diffuse_regular``, ``_diffuse_general``),
which writes only its own rows' ``out`` and ``outflow`` entries: no races, and each row's
arithmetic (its summation order included) is that of the serial kernel. Hence

* rounded schemes: loads, outflows, token moves and minimum load are identical, bit for bit;
* continuous scheme: loads and outflows are bit for bit those of the serial kernel (and so of
  the reference ``P_off @ loads + diag(P) * loads``); only the step's ``moved`` total is summed
  per block, then over blocks, and may differ from the serial running sum in the last bits.

Random rounding: the coin of edge e in step t is ``counter_uniform(key, t, e)``, a function of
(key, t, e) alone, so a block draws exactly the coins the serial kernel draws for its slots,
whatever the block boundaries (coin=fraction and the general path: each block fills its own coin
buffer for its slots; coin=pij on the regular path: the HEAD byte per edge is filled in parallel
edge blocks before the row pass).

The regular rounded blocks hand the row loop views of their own rows and slots, so that its
loops start at a literal 0 as in the serial kernel; with the block's first row as a run-time
start, LLVM kept numba's negative-index wrap on every own-row access, and the blocks ran 1.2-2x
slower than the serial loop even on one thread (measured: diffusion-floor on hypercube:20, one
thread, 5.2 -> 2.9 ns per edge-step of CPU time; diffusion-oriented 8.3 -> 3.5).

Each variant is its own function: compiling one function both with and without
``parallel=True`` under ``cache=True`` shares one cache entry (docs/design/kernels.md). Per-block
results (moves, minimum, OR of differences) go into small per-block arrays reduced serially
afterwards, which keeps the reductions deterministic.
"""

from __future__ import annotations

import math

import numba
import numpy as np

from ....kernels._threads import CHUNK, ROW_BLOCK, run_parallel
from ._serial import (_INT64_MAX, CEIL, COIN_BLOCK, FLOOR, ORIENTED, RANDOM, RANDOM_FRACTION,
                                 _diffuse_general, _diffuse_regular, _fill_coins, _general_rows, _narrow, _regular_rows,
                                 _splitmix64, _step_base)

__all__ = ["diffuse_step_parallel", "rounded_step_parallel", "EDGE_BLOCK"]

#: Edges per block of the parallel HEAD-byte pass (coin=pij on the regular path).
EDGE_BLOCK = 1 << 16
_S11 = np.uint64(11)



# ---------------------------------------------------------------------- continuous diffusion
@numba.njit(cache=True, nogil=True)
def _diffuse_block(indptr, indices, coef, diag, loads, degree, i0, i1, out, outflow):
    # The serial kernel's dispatch (diffuse_step), on rows i0..i1-1.
    if degree == 4:
        return _diffuse_regular(indices, coef, diag, loads, 4, i0, i1, out, outflow)
    if degree > 0:
        return _diffuse_regular(indices, coef, diag, loads, degree, i0, i1, out, outflow)
    return _diffuse_general(indptr, indices, coef, diag, loads, i0, i1, out, outflow)


@numba.njit(parallel=True, cache=True, nogil=True)
def diffuse_step_parallel(indptr, indices, coef, diag, loads, degree, out, outflow, block=ROW_BLOCK):
    """:func:`._diffusion_kernels.diffuse_step` over blocks of ``block`` rows in parallel (Sec. 3.1, Eq. 1).

    Same arguments and loads (bit for bit); the returned load moved is summed per block and may
    differ from the serial kernel's in the last bits. ``block`` (rows per block, >= 1) is an
    argument so that tests can cut small graphs into many blocks.
    """
    n = loads.shape[0]
    nb = (n + block - 1) // block
    moved = np.zeros(nb)
    for b in numba.prange(nb):
        i0 = b * block
        moved[b] = _diffuse_block(indptr, indices, coef, diag, loads, degree, i0, min(n, i0 + block), out, outflow)
    total = 0.0
    for b in range(nb):
        total += moved[b]
    return total


# ---------------------------------------------------------------------- rounded diffusion
@numba.njit(cache=True, nogil=True)
def _fill_heads_range(base, threshold, heads, e0, e1):
    # _fill_heads of the serial kernel on edges e0..e1-1 (the HEAD flag depends on e alone).
    for e in range(e0, e1):
        heads[e] = np.int64(_splitmix64(base ^ _splitmix64(np.uint64(e))) >> _S11) < threshold


@numba.njit(cache=True, nogil=True)
def _regular_block(indices, csr_edges, D, p, q, along, heads, loads, mode, base, i0, i1, out, outflow):
    # Rows i0..i1-1 of the regular path, each rounding a constant so that its inlined copy keeps
    # only its own arithmetic (as in rounded_step). The row loop gets views of the block's rows
    # and slots, so that its loops start at a literal 0, as in the serial kernel (a run-time first
    # row cost 1.2-1.4x: numba's negative-index wrap stayed on every own-row access).
    # coin=fraction: this block's own coin buffer.
    k0 = D * i0
    k1 = D * i1
    iv = indices[k0:k1]
    own = loads[i0:i1]
    ov = out[i0:i1]
    fv = outflow[i0:i1]
    if mode == RANDOM_FRACTION:
        coins = np.empty(k1 - k0)
        _fill_coins(base, csr_edges, k0, k1, coins)
        return _regular_rows(iv, csr_edges, D, p, q, along, heads, loads, own, RANDOM_FRACTION, coins, ov, fv)
    none = np.empty(0)
    if mode == FLOOR:
        return _regular_rows(iv, csr_edges, D, p, q, along, heads, loads, own, FLOOR, none, ov, fv)
    if mode == CEIL:
        return _regular_rows(iv, csr_edges, D, p, q, along, heads, loads, own, CEIL, none, ov, fv)
    if mode == RANDOM:
        return _regular_rows(iv, csr_edges[k0:k1], D, p, q, along, heads, loads, own, RANDOM, none, ov, fv)
    return _regular_rows(iv, csr_edges, D, p, q, along[k0:k1], heads, loads, own, ORIENTED, none, ov, fv)


@numba.njit(cache=True, nogil=True)
def _general_block(indptr, indices, csr_edges, coef, ratio, along, loads, mode, base, hop_extra, relays, i0, i1, out,
                   outflow):
    # Rows i0..i1-1 of the general path; the random roundings draw this block's slots' coins.
    if mode == RANDOM or mode == RANDOM_FRACTION:
        k0 = indptr[i0]
        coins = np.empty(indptr[i1] - k0)
        _fill_coins(base, csr_edges, k0, indptr[i1], coins)
        if mode == RANDOM:
            return _general_rows(indptr, indices, coef, ratio, along, loads, RANDOM, coins, i0, i1, hop_extra,
                                 False, out, outflow)
        return _general_rows(indptr, indices, coef, ratio, along, loads, RANDOM_FRACTION, coins, i0, i1,
                             hop_extra, False, out, outflow)
    none = np.empty(0)
    if mode == FLOOR:
        return _general_rows(indptr, indices, coef, ratio, along, loads, FLOOR, none, i0, i1, hop_extra, False,
                             out, outflow)
    if mode == CEIL:
        return _general_rows(indptr, indices, coef, ratio, along, loads, CEIL, none, i0, i1, hop_extra, False,
                             out, outflow)
    if relays:
        return _general_rows(indptr, indices, coef, ratio, along, loads, ORIENTED, none, i0, i1, hop_extra, True,
                             out, outflow)
    return _general_rows(indptr, indices, coef, ratio, along, loads, ORIENTED, none, i0, i1, hop_extra, False,
                         out, outflow)


@numba.njit(parallel=True, cache=True, nogil=True)
def rounded_step_parallel(indptr, indices, csr_edges, coef, ratio, along, heads, loads, mode, key, step, hop_extra,
                          degree, q, out, outflow, block=0, edge_block=EDGE_BLOCK):
    """:func:`._diffusion_kernels.rounded_step` over blocks of rows in parallel (Sec. 4).

    Same arguments except the coin buffer (each block draws into its own); same results bit for
    bit: (token-hops, min new load), the new loads and outflows. A regular step that meets a load
    difference of 2**29 or more is redone on the general path, as in the serial kernel.
    ``block``: rows per block (0: ``COIN_BLOCK // D`` on the regular path, ROW_BLOCK on the
    general one); ``edge_block``: edges per block of the HEAD pass (arguments for the tests).
    """
    base = np.uint64(0)
    if mode == RANDOM or mode == RANDOM_FRACTION:
        base = _step_base(key, step)
    relays = hop_extra.shape[0] > 0
    n = loads.shape[0]
    if degree > 0 and q > 0 and not (relays and mode == ORIENTED):
        if mode == RANDOM:
            m = heads.shape[0]
            threshold = np.int64(math.ceil(coef[0] * 9007199254740992.0))  # head_threshold(p)
            for b in numba.prange((m + edge_block - 1) // edge_block):
                _fill_heads_range(base, threshold, heads, b * edge_block, min(m, (b + 1) * edge_block))
        rows = block if block > 0 else max(1, COIN_BLOCK // degree)
        nb = (n + rows - 1) // rows
        mv = np.zeros(nb, dtype=np.int64)
        lo = np.empty(nb, dtype=np.int64)
        lo_in = np.empty(nb, dtype=np.int64)
        hi_in = np.empty(nb, dtype=np.int64)
        for b in numba.prange(nb):
            i0 = b * rows
            r = _regular_block(indices, csr_edges, degree, coef[0], q, along, heads, loads, mode, base, i0,
                               min(n, i0 + rows), out, outflow)
            mv[b] = r[0]
            lo[b] = r[1]
            lo_in[b] = r[2]
            hi_in[b] = r[3]
        moved = 0
        low = _INT64_MAX
        least = _INT64_MAX
        most = -_INT64_MAX - 1
        for b in range(nb):
            moved += mv[b]
            low = min(low, lo[b])
            least = min(least, lo_in[b])
            most = max(most, hi_in[b])
        if _narrow(least, most):
            return moved, low
    # Any graph, or a step whose loads span 2**29 or more: the exact integer arithmetic.
    rows = block if block > 0 else ROW_BLOCK
    nb = (n + rows - 1) // rows
    mv = np.zeros(nb, dtype=np.int64)
    lo = np.empty(nb, dtype=np.int64)
    for b in numba.prange(nb):
        i0 = b * rows
        r2 = _general_block(indptr, indices, csr_edges, coef, ratio, along, loads, mode, base, hop_extra, relays, i0,
                            min(n, i0 + rows), out, outflow)
        mv[b] = r2[0]
        lo[b] = r2[1]
    moved = 0
    low = _INT64_MAX
    for b in range(nb):
        moved += mv[b]
        low = min(low, lo[b])
    return moved, low
