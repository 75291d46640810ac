"""The walk of one rank's tokens in a partitioned main random walk step (``random-walk``, ``--backend mpi``).

:func:`walk_owned` is the walk of :func:`._walk_serial.mrws_step` (Elsässer, Monien, Schamberger
2006, Sec. 3: every marked and every negative token moves one step by M) restricted to the rows a
rank owns, on its local graph (:class:`tokendist.engine.mpi.LocalPart`): the same row
probabilities, summed in the same order, and the same coins, keyed by the node's *global* id
(``gid``), so a token draws the coin and takes the slot it takes in one process. It records the
moves per local edge and direction instead of settling the real tokens: what crosses a cut edge
is sent to the rank owning the other end, which settles that edge from both sides
(:mod:`.._random_walk_partitioned`).
"""

from __future__ import annotations

import numba
import numpy as np

from ....kernels._coins import _step_base, _uniform
from ._walk_serial import _row_bounds

__all__ = ["walk_owned"]


@numba.njit(cache=True, nogil=True)
def walk_owned(indptr, indices, csr_edges, a0, inv, deg, caps, c, s, gid, rows, key, step, kind, counts, stays, fwd,
               back, g):
    """One step by M of the ``counts[i]`` tokens of kind ``kind`` on every local node i in ``rows``.

    Parameters
    ----------
    indptr, indices, csr_edges
        The local graph's CSR (local ids in the order of the global ids: an owned row lists the
        whole graph's neighbours in the whole graph's order).
    a0, inv, deg, caps, c
        The whole graph's coefficients restricted to the local graph, as ``mrws_step`` takes them:
        the scalar ``a0`` (``inv``, ``caps`` empty), ``inv = 1 / (c d_i)`` per local node, or the
        whole graph's degrees ``deg`` per local node with ``caps`` per local edge.
    s : float64 (local n,)
        The speeds of the local nodes.
    gid : int64 (local n,)
        The global id of every local node: token k of node i draws
        ``counter_uniform(key, step, token_index(gid[i], kind, k))``.
    rows : int64
        The owned local nodes (their rows are whole).
    stays, fwd, back : int64
        Filled in (the caller zeroes them): tokens that stay per node, and moves per local edge
        from its lower end ``u`` to ``v`` (``fwd``) and from ``v`` to ``u`` (``back``).
    g : float64
        Scratch of at least the maximum degree.

    Returns
    -------
    int
        The number of tokens that moved.
    """
    base = _step_base(np.uint64(key), np.uint64(step))
    hi = np.uint64(kind) << np.uint64(31)
    has_caps = caps.shape[0] > 0
    has_inv = inv.shape[0] > 0
    moves = 0
    for r in range(rows.shape[0]):
        i = rows[r]
        ci = counts[i]
        if ci == 0:
            continue
        a = indptr[i]
        b = indptr[i + 1]
        stay = _row_bounds(i, a, b, indices, csr_edges, a0, inv, deg, caps, c, s[i], has_caps, has_inv, g)
        last = b - a - 1
        st = 0
        node_bits = (np.uint64(gid[i]) << np.uint64(32)) | hi
        for t in range(ci):
            u = _uniform(base, node_bits | np.uint64(t))
            if u < stay:
                st += 1
                continue
            k = a
            for q in range(last):
                k += g[q] <= u
            e = csr_edges[k]
            if i < indices[k]:
                fwd[e] += 1
            else:
                back[e] += 1
            moves += 1
        stays[i] = st
    return moves
