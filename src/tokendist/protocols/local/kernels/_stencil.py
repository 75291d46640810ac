"""The single-port step on a graph with an offset stencil (Ghosh et al. 1995, Sec. 1.1).

:func:`~tokendist.protocols.local.kernels._serial.single_port_counter_step` hashes every edge id
and then touches only the ~m p candidate edges, one after the other: each reads its ends, counts
them, and the kept ones read and write both loads. On torus:1000x1000, where p = 1/16, that
candidate work was two thirds of the step (about 45 ns per candidate). On a torus or a ring
(:attr:`Graph.stencil <tokendist.graphs.Graph.stencil>`) every node's edges sit at fixed offsets
of node and edge id, so the same step can be three streaming passes:

1. the candidate flag of every edge, ``counter_uniform(key, t, e) < p`` tested exactly as the
   counter kernel does (``(hash >> 11) < bound``), one byte per edge;
2. every node's *partner*: the neighbour across its one candidate edge, or -1 when it has none
   or more than one (Sec. 1.1 keeps a candidate edge iff neither end has another);
3. every node's new load: an edge ``(i, j)`` is in the matching iff ``partner[i] == j`` and
   ``partner[j] == i``; one token moves from the heavier to the lighter end when they differ by
   at least ``threshold``. Both ends decide from the same integers, so they agree; the lower end
   writes the edge's flow and selection count.

Pass 3 reads only per-node arrays at the stencil's offsets (``partner``, the loads): no per-edge
flag gather, which made a first version of it 3.8 ns per edge slower (stride-2 byte gathers at
computed edge ids do not vectorise). A node of a run ``[starts[r], ends[r])`` of
:func:`~tokendist.graphs._stencil.lower_edge_runs` has the upper edges ``e_i, e_i + 1, ...``
(``e_i`` advancing by ``len(upper)`` per row) and the lower edges ``e_i + edge_delta[k]``; every
other node (the seams) reads its CSR row. The flows, loads, selection counts and tokens moved
equal the counter kernel's and the numpy reference's bit for bit: the same coins, the same rule,
integers only. Unlike the counter kernel, ``flows`` is written on every edge (0 where no token
moves), so it needs no clearing between steps.
"""

from __future__ import annotations

import numba
import numpy as np

from ._serial import _mix64

__all__ = ["single_port_stencil_step"]

_U = np.uint64  # index casts: no negative-index wrap per access


@numba.njit(cache=True, nogil=True, inline="always")
def _sign_at_least(d, threshold):
    # +1 if d >= threshold, -1 if d <= -threshold, else 0 (threshold >= 1).
    return np.int64(d >= threshold) - np.int64(d <= -threshold)


@numba.njit(cache=True, nogil=True)
def single_port_stencil_step(indptr, indices, csr_edges, starts, ends, lower, upper, edge_delta, loads, key, t, bound,
                             threshold, out, flows, selected, flags, partner):
    """One single-port step (Sec. 1.1) over a stencil's edge runs; returns the tokens moved.

    Parameters
    ----------
    indptr, indices, csr_edges : ndarray
        The graph's CSR arrays (the rows between the runs).
    starts, ends, edge_delta : ndarray, ndarray, tuple
        :func:`~tokendist.graphs._stencil.lower_edge_runs` of the graph's stencil.
    lower, upper : tuple
        The stencil's offsets.
    loads : ndarray of int64
        Loads at the start of the step.
    key, t, bound, threshold : int
        The run's coin key, the step, :func:`coin_bound` of the candidate probability, the rule's
        threshold (Sec. 1.1: 1).
    out : ndarray of int64
        The new loads (written).
    flows : ndarray of int8
        Tokens from ``u[e]`` to ``v[e]``, on every edge (written).
    selected : ndarray of int32 or int64
        How often each edge was in the matching (incremented where it is).
    flags : ndarray of uint8
        Scratch of ``m`` bytes (the candidate flags).
    partner : ndarray of int32 or int64
        Scratch of ``n`` values (the partners).
    """
    n = loads.shape[0]
    m = flags.shape[0]
    nl = len(lower)
    nu = len(upper)
    nr = starts.shape[0]
    base = _mix64(np.uint64(key) ^ _mix64(np.uint64(t)))
    bound64 = np.uint64(bound)
    # (1) Candidate flags: no branch, vectorises (AVX-512 has 64-bit multiplies).
    for e in range(m):
        flags[_U(e)] = (_mix64(base ^ _mix64(np.uint64(e))) >> np.uint64(11)) < bound64
    # (2) Partners.
    prev = 0
    for r in range(nr + 1):
        stop = starts[r] if r < nr else n
        for i in range(prev, stop):
            c = 0
            p = 0
            for k in range(indptr[_U(i)], indptr[_U(i + 1)]):
                f = np.int64(flags[_U(csr_edges[_U(k)])])
                c += f
                p += f * np.int64(indices[_U(k)])
            partner[_U(i)] = p if c == 1 else -1
        if r == nr:
            break
        s = starts[r]
        e = np.int64(csr_edges[_U(indptr[_U(s)] + nl)])  # the run's first upper edge
        for i in range(s, ends[r]):
            eb = e + nu * (i - s)
            c = 0
            p = 0
            for k in range(nl):
                f = np.int64(flags[_U(eb + edge_delta[k])])
                c += f
                p += f * (i + lower[k])
            for k in range(nu):
                f = np.int64(flags[_U(eb + k)])
                c += f
                p += f * (i + upper[k])
            partner[_U(i)] = p if c == 1 else -1
        prev = ends[r]
    # (3) The matched edges move a token each; node i's load changes by what it receives.
    moved = 0
    prev = 0
    for r in range(nr + 1):
        stop = starts[r] if r < nr else n
        for i in range(prev, stop):
            li = loads[_U(i)]
            pi = partner[_U(i)]
            acc = 0
            for k in range(indptr[_U(i)], indptr[_U(i + 1)]):
                j = np.int64(indices[_U(k)])
                kept = np.int64(pi == j) & np.int64(partner[_U(j)] == i)
                s_in = kept * _sign_at_least(loads[_U(j)] - li, threshold)  # +1: j sends to i
                acc += s_in
                if j > i:  # i = u[e]: the lower end writes the edge
                    ue = _U(csr_edges[_U(k)])
                    flows[ue] = -s_in
                    selected[ue] += kept
                    moved += s_in * s_in
            out[_U(i)] = li + acc
        if r == nr:
            break
        s = starts[r]
        e = np.int64(csr_edges[_U(indptr[_U(s)] + nl)])
        for i in range(s, ends[r]):
            eb = e + nu * (i - s)
            li = loads[_U(i)]
            pi = partner[_U(i)]
            acc = 0
            for k in range(nl):
                j = i + lower[k]
                kept = np.int64(pi == j) & np.int64(partner[_U(j)] == i)
                acc += kept * _sign_at_least(loads[_U(j)] - li, threshold)
            for k in range(nu):
                j = i + upper[k]
                kept = np.int64(pi == j) & np.int64(partner[_U(j)] == i)
                s_in = kept * _sign_at_least(loads[_U(j)] - li, threshold)
                acc += s_in
                flows[_U(eb + k)] = -s_in
                selected[_U(eb + k)] += kept
                moved += s_in * s_in
            out[_U(i)] = li + acc
        prev = ends[r]
    return moved
