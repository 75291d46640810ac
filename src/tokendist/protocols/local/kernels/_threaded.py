"""Opt-in multi-threaded steps (``threads=k``) of ``multi-port``, ``single-port`` and ``ds`` (Ghosh et al. 1995).

Every kernel here gives the serial kernel's results bit for bit (integer arithmetic; reductions
are integer sums, equal in any order), tested against the serial kernels and the numpy
references in tests/protocols/test_local_balancing_parallel.py and test_parallel_kernels.py.

``multi-port`` (Sec. 1.1, 3.2). On a regular graph the serial kernel is already a row loop
(:func:`._local_balancing_kernels.multi_port_step_regular`); :func:`multi_port_step_regular_par`
runs its row loop on blocks of ``block`` rows. On other graphs the serial kernel is the edge scan
:func:`._local_balancing_kernels.multi_port_step`, which writes to both ends of each edge and so
cannot be shared between threads; :func:`multi_port_step_par` is the same rule as a per-node row
loop over the CSR adjacency: node i gains one token from every neighbour at least ``threshold``
heavier and loses one to every neighbour at least ``threshold`` lighter (each edge's decision is
computed from both ends, with the same integers, so both ends agree). Each row writes only
``out[i]``; the tokens moved are counted once, at the heavier end.

``ds`` (Sec. 5, per-node estimates, :func:`ds_step_nodes_par`): the serial kernel is a row form
(each row writes only its own ``out``, ``new_prev`` and ``outflow`` entries and reads ``prev``,
which no row writes), so the rows are cut into blocks of ``block`` rows, each running the serial
row loop (``_ds_regular_rows`` / ``_ds_general_rows``). The per-edge estimates (random initial
ones, dynamic networks) stay on the serial edge scans.

``single-port`` (Sec. 1.1, 3.1, per-edge counter coins, :func:`single_port_counter_step_par`):
which edges are candidates is a pure function of (key, t, e), so the coins split into edge
blocks; the candidates keep the serial order (per-block counts, a prefix sum, each block writing
from its offset); the kept candidates form a matching, so resolving them in parallel writes no
node or edge twice. What stays serial is the per-node candidate count (scattered increments of a
shared counter that two threads would lose without atomics), about 2 m p writes. The geometric
coins stay serial: each candidate's position is the sum of all gaps drawn before it.

Blocks are handed out :data:`._diffusion_parallel.CHUNK` at a time by :func:`run_parallel` (a
thread the OS deschedules then holds back only its chunk). Each kernel is its own function with
``parallel=True`` (a separate cache entry from the serial kernel, docs/design/kernels.md).
Caveat: numba's threading layer here is GNU OpenMP, not fork-safe.
"""

from __future__ import annotations

import numba
import numpy as np

from ....kernels._threads import ROW_BLOCK, run_parallel
from ._serial import (_BIT, _DEBRUIJN, BLOCK, _count_candidate, _ds_general_rows, _ds_regular_rows,
                                      _hash_block, _mix64, _multi_port_regular_rows, _pack64)

__all__ = ["multi_port_step_par", "multi_port_step_regular_par", "ds_step_nodes_par", "single_port_counter_step_par",
           "run_parallel", "ROW_BLOCK", "EDGE_BLOCK", "ITEM_BLOCK"]


@numba.njit(parallel=True, cache=True, nogil=True)
def multi_port_step_par(indptr, indices, loads, threshold, out):
    """One multi-port step, rows in parallel; writes the new loads to ``out``, returns the tokens moved.

    ``threshold`` must be at least 1 (else an edge between equal loads would move both ways; the
    protocol's threshold is always >= 1). Branch-free (docs/design/kernels.md).
    """
    n = loads.shape[0]
    moved = 0
    for i in numba.prange(n):
        wi = loads[i]
        gain = 0
        loss = 0
        for k in range(indptr[i], indptr[i + 1]):
            diff = wi - loads[indices[k]]
            loss += np.int64(diff >= threshold)
            gain += np.int64(diff <= -threshold)
        out[i] = wi + (gain - loss)
        moved += loss  # prange reduction: each moving edge counted at its heavier end
    return moved


@numba.njit(parallel=True, cache=True, nogil=True)
def multi_port_step_regular_par(indices, degree, loads, threshold, out, block=ROW_BLOCK):
    """:func:`._local_balancing_kernels.multi_port_step_regular` over blocks of ``block`` rows in parallel.

    The serial kernel's row loop on each block (rows write only their own ``out``); same loads and
    tokens moved, bit for bit.
    """
    n = loads.shape[0]
    moved = 0
    for b in numba.prange((n + block - 1) // block):
        moved += _multi_port_regular_rows(indices, degree, loads, threshold, out, b * block, min(b * block + block, n))
    return moved


@numba.njit(parallel=True, cache=True, nogil=True)
def ds_step_nodes_par(indptr, indices, degree, loads, threshold, prev, new_prev, out, outflow, block=ROW_BLOCK):
    """:func:`._local_balancing_kernels.ds_step_nodes` over blocks of ``block`` rows in parallel.

    Same arguments and results (bit for bit); ``block`` (rows per block, >= 1) is a parameter so
    that tests can cut small graphs into many blocks.
    """
    n = loads.shape[0]
    nblocks = (n + block - 1) // block
    moved = 0
    flags = 0
    for b in numba.prange(nblocks):
        i0 = b * block
        i1 = min(i0 + block, n)
        if degree > 0:
            mv, fl = _ds_regular_rows(indices, degree, loads, threshold, prev, new_prev, out, outflow, i0, i1)
        else:
            mv, fl = _ds_general_rows(indptr, indices, loads, threshold, prev, new_prev, out, outflow, i0, i1)
        moved += mv  # prange reductions (integers: any order gives the same sum)
        flags += fl
    return moved, flags > 0


# ---------------------------------------------------------------------------------------------------
# single-port, per-edge counter coins
# ---------------------------------------------------------------------------------------------------
#: Edges per block of the parallel single-port hash and compaction (a multiple of 64).
EDGE_BLOCK = 16 * BLOCK
#: Candidates per block when the matching is resolved.
ITEM_BLOCK = 4096
_M1, _M2, _M4 = np.uint64(0x5555555555555555), np.uint64(0x3333333333333333), np.uint64(0x0F0F0F0F0F0F0F0F)
_H01 = np.uint64(0x0101010101010101)


@numba.njit(inline="always")
def _popcount(x):
    # Set bits of a uint64 (SWAR; LLVM emits popcnt where the CPU has it).
    x = x - ((x >> np.uint64(1)) & _M1)
    x = (x & _M2) + ((x >> np.uint64(2)) & _M2)
    x = (x + (x >> np.uint64(4))) & _M4
    return np.int64((x * _H01) >> np.uint64(56))


@numba.njit(parallel=True, cache=True, nogil=True)
def single_port_counter_step_par(eu, ev, loads, key, t, bound, threshold, out, flows, count, cands, ca, cb, nprev,
                                 selected, words, per_block, eblock=EDGE_BLOCK, iblock=ITEM_BLOCK):
    """:func:`._local_balancing_kernels.single_port_counter_step` with its parallel parts on threads.

    Same arguments and results (loads, flows, selection counts, candidate buffers in the same
    ascending order, ``(moved, ncand)``, ``(-1, 0)`` when ``cands`` is too small), plus two
    scratch arrays: ``words`` (uint64, at least ``16 * ceil(m / BLOCK)``: every edge's candidate
    flag as a bit) and ``per_block`` (int64, ``max(1, ceil(m / eblock))``). Phases:

    1. and 2. parallel over blocks of ``eblock`` edges: the coins (a pure function of (key, t, e),
       so a block draws exactly the serial kernel's), packed to bit words, candidates counted per
       block; each block also clears its share of the previous flows and copies its share of the
       loads to ``out``;
    3. serial: offsets of the blocks (a prefix sum over m / eblock numbers);
    4. parallel: each block writes its candidates (edge, ends) from its offset: the serial order;
    5. serial: count the candidates at both ends (scattered increments of a shared per-node count:
       two threads would lose updates, and numba has no atomic add);
    6. parallel over candidates: keep those whose ends both count 1; the kept edges form a
       matching, so no two write the same node or edge;
    7. serial: clear the counts.

    Only phases 5 and 7 (two scattered writes per candidate, about m p) and 3 stay serial.
    """
    n = loads.shape[0]
    m = eu.shape[0]
    base = _mix64(np.uint64(key) ^ _mix64(np.uint64(t)))
    bound64 = np.uint64(bound)
    nblocks = max((m + eblock - 1) // eblock, 1)
    for b in numba.prange(nblocks):
        # Phase 1 rides along with phase 2 (one parallel region fewer, so one barrier fewer at
        # which a thread the OS has descheduled keeps the other waiting): block b also clears
        # its share of the previous flows and copies its share of the loads.
        for i in range(b * nprev // nblocks, (b + 1) * nprev // nblocks):
            flows[cands[i]] = 0
        for i in range(b * n // nblocks, (b + 1) * n // nblocks):
            out[i] = loads[i]
        buf = np.empty(BLOCK, np.uint8)
        buf8 = buf.view(np.uint64)
        e1 = min(b * eblock + eblock, m)
        found = 0
        for start in range(b * eblock, e1, BLOCK):
            stop = min(start + BLOCK, e1)
            _hash_block(base, bound64, start, stop, buf)
            for w in range((stop - start + 63) // 64):  # this block's words only
                x = _pack64(buf8, w)
                words[start // 64 + w] = x
                found += _popcount(x)
        per_block[b] = found
    ncand = 0
    for b in range(nblocks):
        found = per_block[b]
        per_block[b] = ncand
        ncand += found
    if ncand > cands.shape[0]:
        return -1, 0  # flows cleared; count and selected untouched: the caller grows the buffers
    for b in numba.prange(nblocks):
        pos = per_block[b]
        for w in range(b * eblock // 64, (min(b * eblock + eblock, m) + 63) // 64):
            x = words[w]
            while x != 0:
                low = x & (~x + np.uint64(1))
                x ^= low
                e = 64 * w + _BIT[(low * _DEBRUIJN) >> np.uint64(58)]
                cands[pos] = e
                ca[pos] = eu[e]
                cb[pos] = ev[e]
                pos += 1
    for i in range(ncand):
        _count_candidate(count, ca[i], cb[i])
    moved = 0
    for ib in numba.prange((ncand + iblock - 1) // iblock):
        part = 0
        for i in range(ib * iblock, min(ib * iblock + iblock, ncand)):
            a = ca[i]
            b = cb[i]
            if count[a] == 1 and count[b] == 1:
                e = cands[i]
                selected[e] += 1
                diff = loads[a] - loads[b]
                s = np.int64(diff >= threshold) - np.int64(diff <= -threshold)
                flows[e] = s
                out[a] -= s
                out[b] += s
                part += s * s
        moved += part  # prange reduction (integers)
    for i in range(ncand):
        count[ca[i]] = 0
        count[cb[i]] = 0
    return moved, ncand
