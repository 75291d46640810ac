"""SOS and integer SOS with IOUs (Elsässer et al. 2006, eq. (4), Sec. 3) on a hypercube, a dimension at a time.

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

:func:`sos_iou_cube` is :func:`._heterogeneous_kernels.sos_iou_step` walked the same way, with the
IOUs and the exception bits in the same layout; its sums are all of integers, so it needs no
fixed order of dimensions (see its pass, :func:`_sos_iou_cube_pass`).

Measured on hypercube:20 with ``python benchmarks/probes/sos_hypercube.py`` (two chains of steps, row
loop and cube kernel alternated, loads equal after every step; medians of 7 steps): sos 4.22 ->
3.05 ns per edge, sos-iou 7.81 -> 4.52, sos-iou with many short nodes 16.8 -> 16.6; the protocol
steps of ``tokendist bench --graphs "hypercube:20" --algos sos,sos-iou --steps 10`` went from
5.8-6.1 to 2.6-4.5 (sos) and from 10.0-11.2 to 4.6-5.1 (sos-iou). On
hypercube:10, whose state fits in L2, the row loop was faster (3.0 against 3.9 for sos), so the
protocols take these kernels from :data:`SOS_CUBE_MIN_DIMENSION` dimensions on.
"""

from __future__ import annotations

import numba
import numpy as np

from ._walk_cube import CUBE_BLOCK_BITS

__all__ = ["sos_real_cube", "sos_iou_cube", "cube_flow_slot", "flows_to_cube", "flows_from_cube",
           "SOS_CUBE_MIN_DIMENSION"]

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
    """Per-edge values of ``hypercube:d`` in edge order (flows, IOUs) as a ``(d, n / 2)`` state by dimension."""
    out = np.empty((d, graph.n // 2))
    _move_flows(graph.u, graph.v, np.ascontiguousarray(flows, dtype=np.float64), out, True)
    return out


def flows_from_cube(graph, by_dim):
    """A ``(d, n / 2)`` state by dimension (flows, IOUs) back in edge order (``m`` values)."""
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


# --------------------------------------------------------------------------------------------------
# sos-iou (Sec. 3): the same walk. Every sum is of integers or integer-valued floats, exact in any
# order, so an edge is added to both of its ends when it is computed, and a short node pays one
# dimension at a time.


@numba.njit(inline="always")
def _bit_of(le):
    # Byte and bit of bit index le, in signed arithmetic: numba turns uint64 mixed with int64 into
    # float64 (such a mix in the bit test made the step 48 ns per edge slower on hypercube:20).
    e = np.int64(le)
    return _U(e >> 3), e & 7


@numba.njit(inline="always")
def _take_bit(exc_bits, le):
    # Whether bit le is set; it is cleared (consumed) either way.
    byte, bit = _bit_of(le)
    was = (exc_bits[byte] >> bit) & 1
    exc_bits[byte] &= np.uint8(255 - (1 << bit))
    return was != 0


@numba.njit(inline="always")
def _owed(y, ue, le, io, exc_read, owed_stored):
    # The amount owed o = y + IOU on the edge at io[ue] (bit le), stored in its place; as the row
    # loop. exc_read is None when no bit is set (a compile-time branch: the bit test in the loop,
    # even behind a false flag, kept LLVM from unswitching it).
    p = io[ue]
    if exc_read is not None and _take_bit(exc_read, le):
        pass  # an IOU itself (a node could not pay it in full last step): kept as it is
    elif owed_stored:
        p = p - np.trunc(p)
    o = y + p
    io[ue] = o
    return o


@numba.njit(inline="always")
def _iou_across_lower(B, c0, p0, base, a0, beta, bm1, first, owed_stored, exc_read, fx, x, yh, io, owed, delta, big):
    # An unset dimension k >= b: the block is the lower end of B edges to the block at p0 (taken
    # later, which reads them back); base is the bit index of row k's first value.
    for r in range(B):
        ur = _U(r)
        ue = c0 + ur
        f = a0 * (fx[ur] - np.float64(x[p0 + ur]))
        y = f if first else beta * f + bm1 * yh[ue]
        yh[ue] = y
        o = _owed(y, ue, base + ue, io, exc_read, owed_stored)
        t = np.trunc(o)
        owed[ur] += max(t, 0.0)
        delta[ur] -= t
        big[ur] = max(big[ur], abs(o - t))  # per node: a running max over the loop would not vectorise


@numba.njit(inline="always")
def _iou_across_upper(B, c0, io, owed, delta):
    # A set dimension k >= b: the lower block (taken earlier, its short nodes paid) stored o or o - paid.
    for r in range(B):
        t = np.trunc(io[c0 + _U(r)])
        owed[r] += max(-t, 0.0)
        delta[r] += t


@numba.njit(inline="always")
def _iou_across_read(B, c0, io, owed, delta):
    # An unset dimension k >= dl (threaded kernel): the block is the lower end of B edges to
    # another chunk, whose o was computed before the chunks were walked.
    for r in range(B):
        t = np.trunc(io[c0 + _U(r)])
        owed[r] += max(t, 0.0)
        delta[r] -= t


@numba.njit(inline="always")
def _iou_inside(h, B, c0, base, a0, beta, bm1, first, owed_stored, exc_read, fx, yh, io, owed, delta, big):
    # A dimension 2^k = h < B: every edge of the dimension in the block, added to both ends.
    uh = _U(h)
    for g in range(0, B, 2 * h):
        cg = c0 + _U(g >> 1)
        for s in range(h):
            lo = _U(g) + _U(s)
            up = lo + uh
            ue = cg + _U(s)
            f = a0 * (fx[lo] - fx[up])
            y = f if first else beta * f + bm1 * yh[ue]
            yh[ue] = y
            o = _owed(y, ue, base + ue, io, exc_read, owed_stored)
            t = np.trunc(o)
            owed[lo] += max(t, 0.0)
            delta[lo] -= t
            owed[up] += max(-t, 0.0)
            delta[up] += t
            big[lo] = max(big[lo], abs(o - t))


@numba.njit(inline="always")
def _iou_pay(k, b, half, i0, shorts, count, loads, owed, delta, paid_sum, io, exc_bits, out, moved, units, exc_big):
    # Dimension k of the block's short nodes: each pays floor(|t| w / T) where it sends (as the row
    # loop, whose order of slots does not matter: integer sums). What it did not pay goes back: to a
    # lower neighbour at once (its load counts from its own row); an upper neighbour inside the block
    # has added t already (its edge was computed with both ends), one in a later block will add
    # trunc(r) when it reads the edge, so it is corrected by paid - t or paid - trunc(r).
    h = np.int64(1) << k
    for s in range(count):
        r = shorts[s]
        i = i0 + r
        lower = (i & h) != 0  # bit k set: the edge (i - h, i), i its upper end
        j = i - h if lower else i + h
        ue = _U(cube_flow_slot(j if lower else i, k))
        o = io[ue]
        t = np.trunc(o)
        if (t >= 0.0) if lower else (t <= 0.0):
            continue  # i does not send on this edge
        # floor(|t| w / T) as (|t| w) / T: exact while |t| w < 2**53 (see _sos_iou_pass).
        paid = np.sign(t) * np.floor((np.abs(t) * np.float64(loads[_U(i)])) / owed[r])
        paid_sum[r] += np.abs(paid)
        back = np.int64(t) - np.int64(paid)
        moved -= abs(back)
        rest = o - paid  # |rest| >= 1: paid is below t in size
        io[ue] = rest
        byte, bit = _bit_of(_U(k) * half + ue)
        exc_bits[byte] |= np.uint8(1 << bit)
        units += np.floor(np.abs(rest))
        exc_big = max(exc_big, np.abs(rest))
        if lower:
            delta[r] -= back
            out[_U(j)] += back
        else:
            delta[r] += back
            out[_U(j)] += np.int64(paid) - (np.int64(t) if k < b else np.int64(np.trunc(rest)))
    return moved, units, exc_big


@numba.njit(cache=True, nogil=True)
def sos_iou_cube(d, a0, beta, first, owed_stored, has_exc, exc_bits, pay_iou, x, loads, yhat, iou, out, owe):
    """:func:`~._heterogeneous_kernels.sos_iou_step` on ``hypercube:d`` with scalar coefficients ``a0``, by dimensions.

    ``yhat`` and ``iou`` are ``(d, n / 2)`` states by dimension (module docstring), ``exc_bits`` has
    one bit per value of that layout (bit ``k n / 2 + c``); all three are updated in place as the
    row loop updates its edge-ordered ones; ``out`` must hold zeros on entry, ``owe`` ends as the
    outflow. Returns the row loop's ``(moved, short_nodes, iou_units, iou_max, any_exception)``,
    and writes its loads and outflows, bit for bit (:func:`_sos_iou_cube_pass`).
    """
    n = loads.shape[0]
    no_list = np.empty(0, np.int64)
    no_owed = np.empty(0)
    if has_exc:  # the bit test compiled in only when a bit may be set
        res = _sos_iou_cube_pass(d, d, 0, n, a0, beta, first, owed_stored, exc_bits, exc_bits, pay_iou, x, loads, yhat,
                                 iou, out, owe, no_list, no_owed)
    else:
        res = _sos_iou_cube_pass(d, d, 0, n, a0, beta, first, owed_stored, None, exc_bits, pay_iou, x, loads, yhat,
                                 iou, out, owe, no_list, no_owed)
    moved, short, biggest, units, exc_big, any_exc, _ = res
    if not any_exc:
        # Every IOU is o - trunc(o), of size below 1: no owed unit.
        return moved, short, 0.0, biggest, False
    return moved, short, units, exc_big, True


@numba.njit(cache=True, nogil=True, error_model="numpy")
def _sos_iou_cube_pass(d, dl, n0, n1, a0, beta, first, owed_stored, exc_read, exc_bits, pay_iou, x, loads, yhat, iou,
                       out, owe, listed, listed_owed):
    """Integer SOS with IOUs by dimensions, nodes ``n0 .. n1 - 1``: :func:`sos_iou_cube` with the bit test as a type.

    ``dl = d`` and the whole cube (``n0 = 0``, ``n1 = n``) is :func:`sos_iou_cube`'s step. The
    threaded kernel (:mod:`._heterogeneous_sos_cube_parallel`) walks a chunk of ``2^dl`` nodes
    with ``dl < d``: the edges of dimensions ``dl .. d - 1`` join it to other chunks; their
    ``yhat`` and ``o`` are computed before (every end only reads them here), and a short node
    pays on them after, listed with what it owes at ``listed[listed_count]`` and
    ``listed_owed[...]`` (from ``n0`` on). Returns ``(moved, short, biggest, units, exc_big,
    any_exc, listed_count)``.

    A block takes its dimensions in any order (every sum is exact): an edge across ``k >= b`` is
    computed by its lower block and read back by the upper one (taken later: blocks go in
    increasing order), an edge inside the block is computed and added to both ends. Then its nodes
    in order: the amount owed is added to ``moved``, the short ones listed; those pay a dimension
    at a time (:func:`_iou_pay`), reading the state the block has just streamed through (a
    payment loop per short node over its ``d`` rows missed the cache on the across dimensions: 71
    against 19 ns per edge for the row loop on hypercube:20 with 258,000 short nodes); last,
    the outflows and the loads.
    """
    half = _U(loads.shape[0] >> 1)
    b = min(d, CUBE_BLOCK_BITS)
    B = 1 << b
    bm1 = beta - 1.0
    fx = np.empty(B)
    owed = np.empty(B)
    # The change of each load as a float: sums of integer-valued floats are exact below 2^53, as
    # the row loop's float ``owed`` already assumes; the float -> int64 conversion per edge kept
    # the loops from vectorising (3.7-4.4 against 3.9-5.1 ns per edge on hypercube:20).
    delta = np.empty(B)
    big = np.empty(B)
    paid_sum = np.empty(B)
    shorts = np.empty(B, np.int64)
    moved = 0
    short = 0
    biggest = 0.0
    units = 0.0
    exc_big = 0.0
    any_exc = False
    n_listed = 0
    for i0 in range(n0, n1, B):
        for r in range(B):
            fx[r] = np.float64(x[_U(i0 + r)])
            owed[r] = 0.0
            delta[r] = 0.0
            big[r] = 0.0
        for k in range(d):
            h = 1 << k
            if k < b:
                _iou_inside(h, B, _U(i0 >> 1), _U(k) * half, a0, beta, bm1, first, owed_stored, exc_read, fx, yhat[k],
                            iou[k], owed, delta, big)
            elif i0 & h:
                _iou_across_upper(B, _U(cube_flow_slot(i0 - h, k)), iou[k], owed, delta)
            elif k >= dl:  # to another chunk: computed before, read here
                _iou_across_read(B, _U(cube_flow_slot(i0, k)), iou[k], owed, delta)
            else:
                _iou_across_lower(B, _U(cube_flow_slot(i0, k)), _U(i0 + h), _U(k) * half, a0, beta, bm1, first,
                                  owed_stored, exc_read, fx, x, yhat[k], iou[k], owed, delta, big)
        count = 0
        for r in range(B):
            biggest = max(biggest, big[r])
            ow = owed[r]
            moved += np.int64(ow)  # every edge's |t| is owed by its sender
            if ow > loads[_U(i0 + r)]:
                short += 1
                if pay_iou:
                    shorts[count] = r
                    paid_sum[r] = 0.0
                    count += 1
        if count:
            any_exc = True
            if dl < d:  # listed, with what it owes, to pay across chunks later
                for s in range(count):
                    listed[_U(n0 + n_listed)] = i0 + shorts[s]
                    listed_owed[_U(n0 + n_listed)] = owed[shorts[s]]
                    n_listed += 1
            for k in range(dl):
                moved, units, exc_big = _iou_pay(k, b, half, i0, shorts, count, loads, owed, delta, paid_sum, iou[k],
                                                 exc_bits, out, moved, units, exc_big)
            for s in range(count):
                owed[shorts[s]] = paid_sum[shorts[s]]  # a short node's outflow is what it paid (so far)
        for r in range(B):
            i = _U(i0 + r)
            owe[i] = owed[r]
            out[i] += loads[i] + np.int64(delta[r])  # out starts at 0: it may hold corrections from short neighbours
    return moved, short, biggest, units, exc_big, any_exc, n_listed
