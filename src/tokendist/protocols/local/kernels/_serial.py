"""numba kernels of the Ghosh et al. (1995) local balancing protocols (``_local_balancing``).

One synchronous step each. No kernel allocates an array of size n or m: every buffer is the
caller's and is reused from step to step. Two loop forms:

* *edge scan* over the sorted edge list ``(u, v)`` (int32): each edge's decision is made once,
  from its lower end, whose running change stays in a register, and written to both ends;
* *rows*: node i's CSR row, writing only node i's entries (each edge decided at both ends with
  the same integers, so both agree). On a D-regular graph row i is slots ``D*i .. D*i + D - 1``:
  no ``indptr`` read, the same trip count for every row, and with ``indices`` viewed as unsigned
  no negative-index wrap per slot (signed slot indices made the loop 1.5x slower whenever it did
  not start at the constant 0). On torus:1000x1000 and hypercube:20 the regular row loops take
  about half the time of the edge scans (no scattered read-modify-write of the far end), and they
  split into blocks of rows for threads (``_local_balancing_parallel``). Measurements:
  docs/protocols/local.md, "Performance".
* *stencil rows* (``*_stencil`` kernels): on a regular graph with an offset stencil
  (:attr:`Graph.stencil <tokendist.graphs.Graph.stencil>`, :mod:`tokendist.graphs._stencil`: a
  torus or ring away from its seams), node i of a run ``[starts[r], ends[r])`` has the neighbours
  ``i + lower[k]`` then ``i + upper[k]``, exactly its CSR row. The run loop reads no ``indices``
  (4 of the ~12-16 bytes per edge a regular row loop moves) and its loads in a few contiguous
  streams, which LLVM vectorises; nodes between runs keep the regular row code, so results are
  the same bit for bit. Why this form (each point measured on torus:1000x1000 for real FOS,
  docs/design/engine.md, "Offset stencils"): the offsets are numba *tuples*, so their count is a
  compile-time constant and the offset loops unroll with the offsets in registers (an offsets
  array, or a runtime split of one tuple, was 2-4x slower); every index is cast to unsigned
  (:data:`_U`: no negative-index wrap). The float kernels elsewhere need a second loop to keep a
  sequential float sum out of the vectorised loop; here every reduction (tokens moved, the DS
  out-of-range flag, kept as an integer count) is an integer sum, which LLVM may reorder, so one
  loop over the run suffices. The rows ``i0..i1`` helpers (:func:`_multi_port_stencil_rows`,
  :func:`_ds_stencil_rows`) find the runs overlapping a range by ``np.searchsorted``, so a block
  of rows could use them; the kernels call them on ``(0, n)`` (a parallel form compiled too slowly
  to keep: docs/protocols/local.md). The protocol takes these kernels when ``graph.stencil`` is not
  None and the step is serial (``threads=1``) on the reset graph; they are separate entry points,
  so graphs without a stencil compile nothing new. On torus:1000x1000 (kernel alone, best of 15-21
  alternated calls): multi-port 4.1-4.3 -> 1.1-1.2 ns per edge, DS 6.1-8.5 -> 1.35-1.5.
  Single-port's stencil path is a kernel of its own, in three passes over every edge and node
  (:mod:`._local_balancing_stencil`); the counter kernel below reads only the ~m p candidates'
  ends and loads, one by one (docs/protocols/local.md, "Performance", gives both measurements).

Kernels:

* :func:`multi_port_step` -- Sec. 1.1 multi-port rule (one token across every edge whose ends
  differ by at least the threshold), edge scan (any graph);
  :func:`multi_port_step_regular` -- the same on a regular graph, rows;
  :func:`multi_port_step_stencil` -- the same with stencil rows.
* :func:`single_port_counter_step` -- Sec. 1.1 single-port rule with the default per-edge counter
  coins ``counter_uniform(key, t, e) < p``, bit for bit; the hashes are computed in blocks by a
  vectorisable loop and only the ~m p candidates are touched afterwards (dense coins: flags
  packed to bit words, one iteration per set bit).
* :func:`single_port_geometric_step` -- the same rule with geometric skipping (``coins=geometric``).
* :func:`ds_step_nodes` -- Sec. 5 DS rule when every estimate is the neighbour's previous load
  (static networks after the first step): n values of state, rows (regular or CSR path);
  :func:`ds_step_nodes_stencil` -- the same with stencil rows.
* :func:`ds_step`, :func:`ds_step_indexed` -- Sec. 5 DS rule with per-edge estimates (arbitrary
  initial ones, dynamic networks), edge scans; the second for a step graph whose edges map to
  base edges.
"""

from __future__ import annotations

import numba
import numpy as np

__all__ = ["multi_port_step", "multi_port_rows", "multi_port_step_regular", "multi_port_step_stencil", "single_port_counter_step",
           "single_port_geometric_step", "coin_bound", "ds_step", "ds_step_indexed", "ds_step_nodes",
           "ds_step_nodes_stencil", "INT32_MIN", "INT32_MAX", "BLOCK"]

#: Index cast of the stencil loops: an unsigned index makes numba emit no negative-index wrap.
_U = np.uint64

INT32_MIN = -(2**31)
INT32_MAX = 2**31 - 1
#: Edges hashed per block by the single-port kernel; candidate buffers keep BLOCK spare slots.
BLOCK = 1024


# ---------------------------------------------------------------------------------------------------
# multi-port (Sec. 1.1, 3.2)
# ---------------------------------------------------------------------------------------------------
@numba.njit(cache=True, nogil=True)
def multi_port_rows(indptr, indices, rows, loads, threshold, out, outflow):
    """The multi-port step of the nodes ``rows`` only, each over its CSR row (the per-node rule).

    ``out[i]`` and ``outflow[i]`` (tokens i sends) for every i in ``rows``; other entries are left
    as they are. A partitioned run (``tokendist.engine.mpi``) passes a rank's owned nodes of its
    local graph: their rows hold every edge at them, so the values are the whole-graph step's.
    """
    for r in range(rows.shape[0]):
        i = rows[r]
        wi = loads[i]
        sent = 0
        got = 0
        for k in range(indptr[i], indptr[i + 1]):
            diff = wi - loads[indices[k]]
            sent += np.int64(diff >= threshold)
            got += np.int64(diff <= -threshold)
        out[i] = wi - sent + got
        outflow[i] = sent


@numba.njit(cache=True, nogil=True)
def multi_port_step(eu, ev, loads, threshold, out):
    """One multi-port step; writes the new loads to ``out`` and returns the tokens moved.

    Edges are sorted by ``(u, v)``, so the edges of node a (as lower end) are consecutive: a's
    load and its running change stay in registers, each edge's sign ``s`` (+1: a sends to b) is
    computed once and applied to both ends; branch-free (docs/design/kernels.md).
    """
    n = loads.shape[0]
    m = eu.shape[0]
    for i in range(n):
        out[i] = loads[i]
    moved = 0
    e = 0
    while e < m:
        a = eu[e]
        wa = loads[a]
        delta = 0
        while e < m and eu[e] == a:
            b = ev[e]
            diff = wa - loads[b]
            s = np.int64(diff >= threshold) - np.int64(diff <= -threshold)
            delta -= s
            out[b] += s
            moved += s * s
            e += 1
        out[a] += delta
    return moved


@numba.njit(inline="always")
def _multi_port_regular_rows(indices, D, loads, threshold, out, i0, i1):
    # Rows i0..i1-1 of a D-regular graph (row i: slots D*i .. D*i + D - 1, ``indices`` unsigned):
    # node i loses one token to every neighbour at least ``threshold`` lighter and gains one from
    # every neighbour at least ``threshold`` heavier; each edge is decided at both ends with the
    # same integers, so the ends agree. Counts the moves at the heavier end (each edge once).
    moved = 0
    uD = np.uint64(D)
    for i in range(i0, i1):
        wi = loads[i]
        base = uD * np.uint64(i)
        gain = 0
        loss = 0
        for kk in range(uD):
            diff = wi - loads[indices[base + kk]]
            loss += np.int64(diff >= threshold)
            gain += np.int64(diff <= -threshold)
        out[i] = wi + (gain - loss)
        moved += loss
    return moved


@numba.njit(cache=True, nogil=True)
def multi_port_step_regular(indices, degree, loads, threshold, out):
    """:func:`multi_port_step` on a ``degree``-regular graph as a row loop over the CSR adjacency.

    Rows of ``degree`` slots (no ``indptr``, the same trip count for every row), ``indices``
    viewed as unsigned; each row writes only ``out[i]`` (no scattered read-modify-write of the
    far end) at the price of deciding each edge twice. Same loads and tokens moved; ``threshold``
    must be at least 1 (the protocol's always is).
    """
    return _multi_port_regular_rows(indices, degree, loads, threshold, out, 0, loads.shape[0])


@numba.njit(inline="always")
def _multi_port_stencil_rows(indices, D, starts, ends, lower, upper, loads, threshold, out, i0, i1):
    # Rows i0..i1-1: those in a stencil run [starts[r], ends[r]) read loads[i + o] for the offsets
    # (tuples, unrolled; unsigned indices); the others (seams) are rows of D slots. The runs
    # overlapping [i0, i1) start at the first r with ends[r] > i0 (a block of the parallel kernel
    # may begin or end inside a run).
    moved = 0
    pos = i0
    r = np.searchsorted(ends, i0, side="right")
    while r < starts.shape[0] and starts[r] < i1:
        s = max(starts[r], pos)
        e = min(ends[r], i1)
        moved += _multi_port_regular_rows(indices, D, loads, threshold, out, pos, s)
        for i in range(s, e):
            ui = _U(i)
            wi = loads[ui]
            gain = 0
            loss = 0
            for k in range(len(lower)):
                diff = wi - loads[_U(i + lower[k])]
                loss += np.int64(diff >= threshold)
                gain += np.int64(diff <= -threshold)
            for k in range(len(upper)):
                diff = wi - loads[_U(i + upper[k])]
                loss += np.int64(diff >= threshold)
                gain += np.int64(diff <= -threshold)
            out[ui] = wi + (gain - loss)
            moved += loss
        pos = e
        r += 1
    return moved + _multi_port_regular_rows(indices, D, loads, threshold, out, pos, i1)


@numba.njit(cache=True, nogil=True)
def multi_port_step_stencil(indices, degree, starts, ends, lower, upper, loads, threshold, out):
    """:func:`multi_port_step_regular` on a graph with an offset stencil (:mod:`tokendist.graphs._stencil`).

    Nodes in the stencil's runs ``[starts[r], ends[r])`` compare their load with ``loads[i + o]``
    for the offsets ``o`` in ``lower`` then ``upper`` (tuples: their lengths are compile-time
    constants, so the offset loops unroll and the offsets live in registers; indices unsigned: no
    negative-index wrap), which reads no ``indices`` and vectorises (integer sums reassociate
    freely). The other nodes (the seams) run :func:`_multi_port_regular_rows`. Same rule, same
    integers: same loads and tokens moved as :func:`multi_port_step_regular`.
    """
    return _multi_port_stencil_rows(indices, degree, starts, ends, lower, upper, loads, threshold, out, 0,
                                    loads.shape[0])


# ---------------------------------------------------------------------------------------------------
# single-port (Sec. 1.1, 3.1)
# ---------------------------------------------------------------------------------------------------
@numba.njit(inline="always")
def _mix64(x):
    # SplitMix64 finaliser, bit for bit the one in tokendist._random (uint64 arithmetic wraps).
    x = x + np.uint64(0x9E3779B97F4A7C15)
    x = (x ^ (x >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)
    x = (x ^ (x >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)
    return x ^ (x >> np.uint64(31))


def coin_bound(p: float) -> int:
    """The integer K with ``counter_uniform(...) < p``  iff  ``(hash >> 11) < K``.

    ``counter_uniform`` returns ``k * 2**-53`` for the 53-bit integer ``k = hash >> 11``; both that
    product and ``p * 2**53`` are exact in float64, so ``k * 2**-53 < p`` iff ``k < ceil(p * 2**53)``.
    """
    return int(np.ceil(float(p) * 2.0**53))


#: Byte k of ``x`` (0 or 1) becomes bit k of ``(x * _PACK) >> 56`` (no carries between the terms).
_PACK = np.uint64(0x0102040810204080)
#: De Bruijn multiplier and table: ``_BIT[(b * _DEBRUIJN) >> 58] = k`` for the word ``b = 2**k``.
_DEBRUIJN = np.uint64(0x03F79D71B4CB0A89)
#: Coin bounds below this (p < 1/32) take the sparse compaction (:func:`_compact_block`).
_SPARSE = np.uint64(2**48)
_BIT = np.zeros(64, np.int64)
for _k in range(64):
    _BIT[((1 << _k) * 0x03F79D71B4CB0A89 % 2**64) >> 58] = _k
del _k


@numba.njit(inline="always")
def _hash_block(base, bound64, start, stop, buf):
    # Candidate flags (0/1 bytes) of edges start..stop-1 into buf, zeros after: a loop without
    # branches that vectorises (AVX-512 has 64-bit multiplies).
    for e in range(start, stop):
        buf[e - start] = (_mix64(base ^ _mix64(np.uint64(e))) >> np.uint64(11)) < bound64
    for j in range(stop - start, BLOCK):
        buf[j] = 0


@numba.njit(inline="always")
def _pack64(buf8, w):
    # The flags of edges 64 w .. 64 w + 63 of the block (bytes of buf, viewed as 8 uint64) as one bit word.
    x = np.uint64(0)
    for k in range(8):
        x |= ((buf8[8 * w + k] * _PACK) >> np.uint64(56)) << np.uint64(8 * k)
    return x


@numba.njit(inline="always")
def _count_candidate(count, a, b):
    # Saturating count of candidate edges per node (only "exactly one" matters): 0, 1, 2.
    x = count[a]
    count[a] = x + (x < 2)
    y = count[b]
    count[b] = y + (y < 2)


@numba.njit(inline="always")
def _take_bits(x, e0, eu, ev, cands, ca, cb, count, ncand):
    # Append the edges e0 + k for the set bits k of x to the candidate buffers (ascending), and
    # count them at both ends. One iteration per candidate: the lowest set bit's index by a De
    # Bruijn multiply, no test per edge (a byte-wise scan mispredicts when p = 1/16).
    while x != 0:
        low = x & (~x + np.uint64(1))
        x ^= low
        e = e0 + _BIT[(low * _DEBRUIJN) >> np.uint64(58)]
        a = eu[e]
        b = ev[e]
        cands[ncand] = e
        ca[ncand] = a
        cb[ncand] = b
        ncand += 1
        _count_candidate(count, a, b)
    return ncand


@numba.njit(inline="always")
def _compact_block(buf, buf8, start, sparse, eu, ev, cands, ca, cb, count, ncand):
    # The candidates of the block whose flags are in buf (edges start..), appended and counted.
    # Sparse coins (p < 1/32, e.g. 1/(4d) on hypercube:20): most 8-flag words are empty, so a
    # test per word (rarely true, well predicted) and a branch-free byte scan of the others is
    # cheapest; denser coins (p = 1/16 on a torus): 64 flags packed into a bit word and one
    # iteration per set bit. ``sparse`` is fixed for the whole step (a predictable branch).
    if sparse:
        first = ncand
        for w in range(BLOCK // 8):
            if buf8[w] != 0:
                for j in range(8 * w, 8 * w + 8):
                    cands[ncand] = start + j  # branch-free compaction
                    ncand += buf[j]
        for i in range(first, ncand):
            e = cands[i]
            a = eu[e]
            b = ev[e]
            ca[i] = a
            cb[i] = b
            _count_candidate(count, a, b)
        return ncand
    for w in range(BLOCK // 64):
        ncand = _take_bits(_pack64(buf8, w), start + 64 * w, eu, ev, cands, ca, cb, count, ncand)
    return ncand


@numba.njit(inline="always")
def _resolve_matching(loads, threshold, out, flows, count, cands, ca, cb, ncand, selected):
    # Keep the candidates whose two ends have no other candidate (Sec. 1.1); one token from the
    # heavier to the lighter end of each kept edge; then clear the counts for the next step. (A
    # branch-free form, writing 0 for the dropped third of the candidates, measured no faster on
    # torus:1000x1000 and slower on hypercube:20, where a dropped candidate's far end misses the cache.)
    moved = 0
    for i in range(ncand):
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
            moved += s * s
    for i in range(ncand):
        count[ca[i]] = 0
        count[cb[i]] = 0
    return moved


@numba.njit(cache=True, nogil=True)
def single_port_counter_step(eu, ev, loads, key, t, bound, threshold, out, flows, count, cands, ca, cb, nprev,
                             selected):
    """One single-port step with the per-edge counter coins; returns ``(moved, ncand)``.

    Edge e is a candidate iff ``counter_uniform(key, t, e) < p``, tested exactly as
    ``(hash >> 11) < bound`` with ``bound = coin_bound(p)``. The hashes of a block of :data:`BLOCK`
    edges go to a byte buffer in a loop without branches (it vectorises), each 64 flags are packed
    into a bit word (one multiply per 8 flags) and only the set bits are visited: the candidates
    go to ``cands`` (edge ids) and ``ca``/``cb`` (their ends), ascending, and are counted per node
    in ``count`` (uint8, all zero between steps). ``flows`` (int8) is non-zero only on the
    previous step's candidates ``cands[:nprev]``, cleared first. ``selected`` counts how often
    each edge was in the matching (Lemma 3.2 report).

    Returns ``(-1, 0)`` without touching ``selected`` when the candidate buffers (size at least
    ``BLOCK`` more than the candidates found) are too small: the caller grows them and calls again
    with ``nprev = 0``.
    """
    n = loads.shape[0]
    m = eu.shape[0]
    for i in range(nprev):
        flows[cands[i]] = 0
    for i in range(n):
        out[i] = loads[i]
    base = _mix64(np.uint64(key) ^ _mix64(np.uint64(t)))
    bound64 = np.uint64(bound)
    cap = cands.shape[0]
    buf = np.zeros(BLOCK, np.uint8)
    buf8 = buf.view(np.uint64)
    sparse = bound64 < _SPARSE
    ncand = 0
    for start in range(0, m, BLOCK):
        if ncand + BLOCK > cap:
            for i in range(ncand):
                count[ca[i]] = 0
                count[cb[i]] = 0
            return -1, 0
        _hash_block(base, bound64, start, min(start + BLOCK, m), buf)
        ncand = _compact_block(buf, buf8, start, sparse, eu, ev, cands, ca, cb, count, ncand)
    return _resolve_matching(loads, threshold, out, flows, count, cands, ca, cb, ncand, selected), ncand


@numba.njit(cache=True, nogil=True)
def single_port_geometric_step(eu, ev, loads, key, t, p, threshold, out, flows, count, cands, ca, cb, nprev,
                               selected):
    """One single-port step touching only the candidate edges (geometric skipping).

    The gaps between candidate edges are Geometric(p): gap j is ``floor(log(1 - U_j) / log(1 - p))``
    with ``U_j = counter_uniform(key, t, j)``, so each edge is a candidate independently with
    probability p, using ~m p draws instead of m (docs/design/kernels.md). Buffers and return value as in
    :func:`single_port_counter_step` (``(-1, 0)`` when ``cands`` is full).
    """
    n = loads.shape[0]
    m = eu.shape[0]
    for i in range(nprev):
        flows[cands[i]] = 0
    for i in range(n):
        out[i] = loads[i]
    if p <= 0.0:
        return 0, 0
    base = _mix64(np.uint64(key) ^ _mix64(np.uint64(t)))
    scale = 1.0 / 9007199254740992.0  # 2**-53
    logq = np.log1p(-p) if p < 1.0 else -np.inf
    cap = cands.shape[0]
    ncand = 0
    pos = -1
    j = 0
    while True:
        r = np.float64(_mix64(base ^ _mix64(np.uint64(j))) >> np.uint64(11)) * scale
        j += 1
        gap = 0.0 if p >= 1.0 else np.floor(np.log1p(-r) / logq)
        if gap > m:
            break
        pos += np.int64(gap) + 1
        if pos >= m:
            break
        if ncand == cap:
            for i in range(ncand):
                count[ca[i]] = 0
                count[cb[i]] = 0
            return -1, 0
        a = eu[pos]
        b = ev[pos]
        cands[ncand] = pos
        ca[ncand] = a
        cb[ncand] = b
        ncand += 1
        _count_candidate(count, a, b)
    return _resolve_matching(loads, threshold, out, flows, count, cands, ca, cb, ncand, selected), ncand


# ---------------------------------------------------------------------------------------------------
# ds (Sec. 5)
# ---------------------------------------------------------------------------------------------------
@numba.njit(inline="always")
def _fits_int32(loads):
    for i in range(loads.shape[0]):
        w = loads[i]
        if w < INT32_MIN or w > INT32_MAX:
            return False
    return True


#: ``np.uint64(w) > _U31`` iff w < 0 or w > INT32_MAX: one unsigned comparison flags both the
#: loads that make the next step need outflows (w < 0) and those that do not fit an int32 ``prev``.
_U31 = np.uint64(INT32_MAX)


@numba.njit(inline="always")
def _ds_regular_rows(indices, D, loads, threshold, prev, new_prev, out, outflow, i0, i1):
    # Rows i0..i1-1 of a D-regular graph: row i is slots D*i .. D*i + D - 1 (no indptr read, a
    # trip count that is the same for every row). Slot and neighbour indices are unsigned
    # (``indices`` viewed as uint32/uint64): numba then emits no negative-index wrap per slot, which
    # made the loop 1.5x slower whenever i0 is not the constant 0 (the blocks of the parallel kernel).
    moved = 0
    flag = False
    uD = np.uint64(D)
    for i in range(i0, i1):
        wi = loads[i]
        pi = prev[i]
        base = uD * np.uint64(i)
        gain = 0
        sent = 0
        net = 0
        for kk in range(uD):
            j = indices[base + kk]
            s_ij = np.int64(wi - prev[j] > threshold)  # i sends to j (Sec. 5, step 1)
            s_ji = np.int64(loads[j] - pi > threshold)  # j sends to i
            gain += s_ji
            sent += s_ij
            if outflow is not None:  # compiled away when outflow is None
                net += np.int64(s_ij > s_ji)
        out[i] = wi + (gain - sent)
        new_prev[i] = wi  # the load i's messages carry this step (Sec. 5, step 2)
        if outflow is not None:
            outflow[i] = net
        moved += sent
        flag |= np.uint64(wi) > _U31
    return moved, flag


@numba.njit(inline="always")
def _ds_general_rows(indptr, indices, loads, threshold, prev, new_prev, out, outflow, i0, i1):
    # :func:`_ds_regular_rows` on any graph: row i is slots indptr[i] .. indptr[i + 1] - 1.
    moved = 0
    flag = False
    for i in range(i0, i1):
        wi = loads[i]
        pi = prev[i]
        gain = 0
        sent = 0
        net = 0
        for k in range(np.uint64(indptr[i]), np.uint64(indptr[i + 1])):
            j = indices[k]
            s_ij = np.int64(wi - prev[j] > threshold)
            s_ji = np.int64(loads[j] - pi > threshold)
            gain += s_ji
            sent += s_ij
            if outflow is not None:
                net += np.int64(s_ij > s_ji)
        out[i] = wi + (gain - sent)
        new_prev[i] = wi
        if outflow is not None:
            outflow[i] = net
        moved += sent
        flag |= np.uint64(wi) > _U31
    return moved, flag


@numba.njit(cache=True, nogil=True)
def ds_step_nodes(indptr, indices, degree, loads, threshold, prev, new_prev, out, outflow):
    """One DS step when every estimate is a neighbour's load of the previous step (Sec. 5).

    On a static graph every message of step t - 1 refreshed every estimate, so
    ``e^i(j) = prev[j]`` for every edge, with ``prev`` the loads at the start of step t - 1
    (before step 0: the initial estimates when they are of that form, ``exact``, ``zero`` and
    ``max``); the state is n values instead of 2m. Row form over the CSR adjacency: node i sends
    to j iff ``w(i) - prev[j] > threshold`` and receives from j iff ``w(j) - prev[i] > threshold``,
    both computed with the integers of :func:`ds_step`, so each edge's two decisions are the
    same at both ends; each row writes only ``out[i]``, ``new_prev[i] = w(i)`` and
    ``outflow[i]``. Same loads, tokens moved and outflows as :func:`ds_step`.

    Parameters
    ----------
    indptr, indices : CSR adjacency; ``indices`` viewed as unsigned (uint32 or uint64).
    degree : D > 0 if every node has degree D (rows of D slots, ``indptr`` not read), else 0.
    loads : int64 loads at the start of the step (read only).
    prev, new_prev : the previous step's loads, and where this step's go (the next step's
        ``prev``; a separate buffer, as rows read their neighbours' ``prev``). Same dtype, int32
        while every load fits; a load that does not is truncated in ``new_prev`` and reported
        in the flag, and the caller replaces ``new_prev`` by an int64 copy of ``loads``.
    out : the new loads. outflow : None, or int32 per node: what it sends over the *net* flow of
        each edge (the engine's feasibility check); ``None`` compiles a kernel without it.

    Returns
    -------
    (moved, flag) : the tokens sent, and True if some load is negative or above INT32_MAX (the
        caller then computes the smallest load and the dtype of ``new_prev`` itself; rare).
    """
    n = loads.shape[0]
    if degree > 0:
        return _ds_regular_rows(indices, degree, loads, threshold, prev, new_prev, out, outflow, 0, n)
    return _ds_general_rows(indptr, indices, loads, threshold, prev, new_prev, out, outflow, 0, n)


@numba.njit(inline="always")
def _ds_stencil_rows(indices, D, starts, ends, lower, upper, loads, threshold, prev, new_prev, out, outflow, i0, i1):
    # Rows i0..i1-1 as in _multi_port_stencil_rows: stencil runs by offsets, seams by
    # _ds_regular_rows; returns (moved, flag).
    moved = 0
    flag = False
    pos = i0
    r = np.searchsorted(ends, i0, side="right")
    while r < starts.shape[0] and starts[r] < i1:
        s = max(starts[r], pos)
        e = min(ends[r], i1)
        m_, f_ = _ds_regular_rows(indices, D, loads, threshold, prev, new_prev, out, outflow, pos, s)
        moved += m_
        flag |= f_
        # The flag as an integer count: an integer reduction that does not stop the loop vectorising.
        bad = 0
        for i in range(s, e):
            ui = _U(i)
            wi = loads[ui]
            pi = prev[ui]
            gain = 0
            sent = 0
            net = 0
            for k in range(len(lower)):
                j = _U(i + lower[k])
                s_ij = np.int64(wi - prev[j] > threshold)  # i sends to j (Sec. 5, step 1)
                s_ji = np.int64(loads[j] - pi > threshold)  # j sends to i
                gain += s_ji
                sent += s_ij
                if outflow is not None:  # compiled away when outflow is None
                    net += np.int64(s_ij > s_ji)
            for k in range(len(upper)):
                j = _U(i + upper[k])
                s_ij = np.int64(wi - prev[j] > threshold)
                s_ji = np.int64(loads[j] - pi > threshold)
                gain += s_ji
                sent += s_ij
                if outflow is not None:
                    net += np.int64(s_ij > s_ji)
            out[ui] = wi + (gain - sent)
            new_prev[ui] = wi  # the load i's messages carry this step (Sec. 5, step 2)
            if outflow is not None:
                outflow[ui] = net
            moved += sent
            bad += np.int64(np.uint64(wi) > _U31)
        flag |= bad > 0
        pos = e
        r += 1
    m_, f_ = _ds_regular_rows(indices, D, loads, threshold, prev, new_prev, out, outflow, pos, i1)
    return moved + m_, flag | f_


@numba.njit(cache=True, nogil=True)
def ds_step_nodes_stencil(indices, degree, starts, ends, lower, upper, loads, threshold, prev, new_prev, out,
                          outflow):
    """:func:`ds_step_nodes` on a regular graph with an offset stencil (:mod:`tokendist.graphs._stencil`).

    Nodes in the stencil's runs ``[starts[r], ends[r])`` read their neighbours at ``i + o`` for the
    offsets ``o`` in ``lower`` then ``upper`` (tuples, unrolled; unsigned indices) instead of
    through ``indices``; the seams run :func:`_ds_regular_rows`. All integer: same loads, tokens
    moved, ``new_prev``, outflows and flag as :func:`ds_step_nodes` (arguments as there).
    """
    return _ds_stencil_rows(indices, degree, starts, ends, lower, upper, loads, threshold, prev, new_prev, out,
                            outflow, 0, loads.shape[0])


@numba.njit(cache=True, nogil=True)
def ds_step(eu, ev, loads, threshold, est_u, est_v, out, outflow):
    """One DS step on the base graph itself; returns the tokens moved, or -1 (nothing written)
    when ``est_u`` is int32 and a load does not fit in it (the caller widens and calls again).

    Per edge e = (a, b): a sends iff ``w(a) - est_u[e] > threshold``, b sends iff
    ``w(b) - est_v[e] > threshold``; then ``est_u[e] = w(b)``, ``est_v[e] = w(a)`` (the loads the
    messages carry, Sec. 5 step 2). ``outflow`` gets what each node sends over the *net* flow of
    each edge (what the engine derived from the per-edge flows before), for its feasibility check.
    """
    if est_u.itemsize == 4 and not _fits_int32(loads):
        return -1
    n = loads.shape[0]
    m = eu.shape[0]
    for i in range(n):
        out[i] = loads[i]
        outflow[i] = 0
    moved = 0
    e = 0
    while e < m:
        a = eu[e]
        wa = loads[a]
        delta = 0
        sent = 0
        while e < m and eu[e] == a:
            b = ev[e]
            wb = loads[b]
            s_ab = np.int64(wa - est_u[e] > threshold)
            s_ba = np.int64(wb - est_v[e] > threshold)
            est_u[e] = wb
            est_v[e] = wa
            f = s_ab - s_ba
            delta -= f
            out[b] += f
            sent += f > 0
            outflow[b] += f < 0
            moved += s_ab + s_ba
            e += 1
        out[a] += delta
        outflow[a] += sent
    return moved


@numba.njit(cache=True, nogil=True)
def ds_step_indexed(eu, ev, base_index, loads, threshold, est_u, est_v, out, outflow):
    """:func:`ds_step` on a step graph whose edge e is base-graph edge ``base_index[e]`` (dynamic
    networks: an edge that is down keeps its stale estimates)."""
    if est_u.itemsize == 4 and not _fits_int32(loads):
        return -1
    n = loads.shape[0]
    m = eu.shape[0]
    for i in range(n):
        out[i] = loads[i]
        outflow[i] = 0
    moved = 0
    for e in range(m):
        a = eu[e]
        b = ev[e]
        k = base_index[e]
        wa = loads[a]
        wb = loads[b]
        s_ab = np.int64(wa - est_u[k] > threshold)
        s_ba = np.int64(wb - est_v[k] > threshold)
        est_u[k] = wb
        est_v[k] = wa
        f = s_ab - s_ba
        out[a] -= f
        out[b] += f
        outflow[a] += f > 0
        outflow[b] += f < 0
        moved += s_ab + s_ba
    return moved
