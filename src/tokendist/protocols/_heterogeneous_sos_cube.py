"""Real SOS (Elsässer et al. 2006, eq. (4)) on a hypercube, a dimension at a time.

:func:`sos_real_cube` is :func:`._heterogeneous_kernels.sos_real_step` with scalar coefficients on
the graph ``hypercube:d`` (:attr:`Graph.cube_dimension <tokendist.graphs.Graph.cube_dimension>`),
with the same results bit for bit, in another loop order and another layout of the per-edge state.
The row loop gathers the ``d`` neighbours of one node after another and reads the lower slots'
flows through ``csr_edges``, scattered; here the nodes are taken in blocks of ``B = 2^b`` (``b`` =
:data:`~._heterogeneous_random_walk_cube.CUBE_BLOCK_BITS`, as in the random-walk cube kernel) and,
inside a block, one dimension after another:

* a dimension ``k >= b`` joins the block to the ``B`` consecutive nodes of the partner block
  ``i0 xor 2^k``, whose flows on that dimension are ``B`` consecutive values of the state;
* a dimension ``k < b`` joins the two halves of every group of ``2^(k+1)`` nodes inside the block,
  read from the block's scratch copy of ``x``.

The flow state by dimension. ``flow[k, c]`` is the SOS flow on the edge ``(u, u + 2^k)``, ``u``'s
bit ``k`` unset, where ``c`` is ``u`` with bit ``k`` taken out (:func:`cube_flow_slot`): ``d`` rows of
``n / 2`` values, the ``m`` values of the edge-ordered state, moved (:func:`flows_to_cube`,
:func:`flows_from_cube`). Along a dimension the lower endpoints of a block are consecutive values
of their row, so every dimension is a contiguous stream.

Each edge's flow is computed once, from its lower endpoint ``u`` and with the row loop's
operations (``f = a (x_u - x_v)``, then ``beta f + (beta - 1) y``), so it has the row loop's bits.
Dimensions ``k >= b`` are computed when the lower block is taken, and the blocks go in increasing
order, so the upper block reads this step's flow (as the row loop's upper endpoint does). Inside
the block the set-bit pass computes them and the unset-bit pass reads them back.

Why the order of the dimensions is fixed. The row loop keeps four float sums per node: ``inn`` and
``sent_in`` over its neighbours ``j < i`` in increasing ``j``, ``outs`` and ``sent_out`` over
``j > i`` in increasing ``j``. On the cube ``j < i`` is ``i - 2^k`` for a bit ``k`` set in ``i``, in
decreasing ``k``; ``j > i`` is ``i + 2^k`` for an unset bit, in increasing ``k``. So the block adds
its set dimensions from ``d - 1`` down to 0, then its unset dimensions from 0 up to ``d - 1``, and
every node sees the same additions in the same order; its row end is the row loop's.

Measured on hypercube:20 (docs/elsasser-monien-schamberger.md, "Seventh pass"): 3.6-4.5 ns per
edge against 5.6-6.8 for the row loop, in the same process; on hypercube:10, whose state fits in
L2, the row loop was faster (3.0 against 3.9), so the protocol takes this kernel from
:data:`SOS_CUBE_MIN_DIMENSION` dimensions on.
"""

from __future__ import annotations

import numba
import numpy as np

from ._heterogeneous_random_walk_cube import CUBE_BLOCK_BITS

__all__ = ["sos_real_cube", "cube_flow_slot", "flows_to_cube", "flows_from_cube", "SOS_CUBE_MIN_DIMENSION"]

#: The protocol runs :func:`sos_real_cube` on ``hypercube:d`` for ``d`` at least this (the blocks
#: of ``2^b`` nodes then leave dimensions across blocks; below it the row loop was as fast or faster).
SOS_CUBE_MIN_DIMENSION = CUBE_BLOCK_BITS

_U = np.uint64  # index casts: no negative-index wrap per access


@numba.njit(inline="always")
def cube_flow_slot(u, k):
    """Column of the edge ``(u, u + 2^k)`` in row ``k`` of the by-dimension flow state: ``u`` without bit ``k``."""
    return ((u >> (k + 1)) << k) | (u & ((1 << k) - 1))


@numba.njit(cache=True, nogil=True)
def _move_flows(u, v, edge_order, by_dim, to_cube):
    # One pass over the edges, no temporaries: v - u = 2^k for the edge's dimension k.
    for e in range(u.shape[0]):
        lo = np.int64(u[e])
        k = 0
        while (np.int64(1) << (k + 1)) <= np.int64(v[e]) - lo:
            k += 1
        c = cube_flow_slot(lo, k)
        if to_cube:
            by_dim[k, c] = edge_order[e]
        else:
            edge_order[e] = by_dim[k, c]


def flows_to_cube(graph, d, flows):
    """The edge-ordered per-edge ``flows`` of ``hypercube:d`` as the ``(d, n / 2)`` state of :func:`sos_real_cube`."""
    out = np.empty((d, graph.n // 2))
    _move_flows(graph.u, graph.v, np.ascontiguousarray(flows, dtype=np.float64), out, True)
    return out


def flows_from_cube(graph, by_dim):
    """The ``(d, n / 2)`` state of :func:`sos_real_cube` back in edge order (``m`` values)."""
    out = np.empty(graph.m)
    _move_flows(graph.u, graph.v, out, by_dim, False)
    return out


@numba.njit(inline="always")
def _set_across(B, c0, fl, inn, sin):
    # A set dimension k >= b: the lower block (taken earlier) wrote this step's flows at c0 ...
    for r in range(B):
        y = fl[c0 + _U(r)]
        inn[r] += y
        sin[r] += max(-y, 0.0)


@numba.njit(inline="always")
def _unset_across(B, c0, p0, a0, beta, bm1, first, fx, x, fl, outs, sout):
    # An unset dimension k >= b: the block is the lower end of B edges to the block at p0.
    for r in range(B):
        ur = _U(r)
        f = a0 * (fx[ur] - x[p0 + ur])
        y = f if first else beta * f + bm1 * fl[c0 + ur]
        fl[c0 + ur] = y
        outs[ur] += y
        sout[ur] += max(y, 0.0)


@numba.njit(inline="always")
def _set_inside(h, B, c0, a0, beta, bm1, first, fx, fl, inn, sin):
    # A dimension 2^k = h < B, set-bit pass: compute every flow of the dimension in the block.
    uh = _U(h)
    for g in range(0, B, 2 * h):
        cg = c0 + _U(g >> 1)
        for t in range(h):
            lo = _U(g) + _U(t)
            up = lo + uh
            f = a0 * (fx[lo] - fx[up])
            y = f if first else beta * f + bm1 * fl[cg + _U(t)]
            fl[cg + _U(t)] = y
            inn[up] += y
            sin[up] += max(-y, 0.0)


@numba.njit(inline="always")
def _unset_inside(h, B, c0, fl, outs, sout):
    # The same dimension, unset-bit pass: the lower ends read back the flows just computed.
    for g in range(0, B, 2 * h):
        cg = c0 + _U(g >> 1)
        for t in range(h):
            y = fl[cg + _U(t)]
            lo = _U(g) + _U(t)
            outs[lo] += y
            sout[lo] += max(y, 0.0)


@numba.njit(cache=True, nogil=True, error_model="numpy")
def sos_real_cube(d, a0, beta, first, x, loads, flow, out, outflow):
    """:func:`~._heterogeneous_kernels.sos_real_step` on ``hypercube:d`` with scalar coefficients ``a0``, by dimensions.

    ``flow`` is the ``(d, n / 2)`` state by dimension (module docstring), read and overwritten in
    place; ``x = w / s`` (``loads`` itself with unit speeds). Writes ``out`` and ``outflow`` and
    returns the load moved: the row loop's results, bit for bit. ``d`` (at least 1) must be the
    graph's :attr:`~tokendist.graphs.Graph.cube_dimension`: the neighbours are computed, not read.
    """
    n = loads.shape[0]
    b = min(d, CUBE_BLOCK_BITS)
    B = 1 << b
    bm1 = beta - 1.0
    fx = np.empty(B)
    inn = np.empty(B)
    outs = np.empty(B)
    sin = np.empty(B)
    sout = np.empty(B)
    moved = 0.0
    for i0 in range(0, n, B):
        for r in range(B):
            fx[r] = x[_U(i0 + r)]
            inn[r] = 0.0
            outs[r] = 0.0
            sin[r] = 0.0
            sout[r] = 0.0
        for k in range(d - 1, -1, -1):  # set bits, decreasing: inn, sent_in
            h = 1 << k
            if k >= b:
                if i0 & h:
                    _set_across(B, _U(cube_flow_slot(i0 - h, k)), flow[k], inn, sin)
            else:
                _set_inside(h, B, _U(i0 >> 1), a0, beta, bm1, first, fx, flow[k], inn, sin)
        for k in range(d):  # unset bits, increasing: outs, sent_out
            h = 1 << k
            if k >= b:
                if not (i0 & h):
                    _unset_across(B, _U(cube_flow_slot(i0, k)), _U(i0 + h), a0, beta, bm1, first, fx, x, flow[k],
                                  outs, sout)
            else:
                _unset_inside(h, B, _U(i0 >> 1), flow[k], outs, sout)
        for r in range(B):  # the row loop's row end, in node order
            i = _U(i0 + r)
            out[i] = loads[i] + (inn[r] - outs[r])
            sent = sout[r] + sin[r]
            outflow[i] = sent
            moved += sent
    return moved
