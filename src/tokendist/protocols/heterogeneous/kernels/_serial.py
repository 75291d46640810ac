"""Fused numba steps of FOS, integer FOS, SOS and integer SOS with IOUs (Elsässer, Monien, Schamberger 2006).

Each kernel does in one pass what the numpy reference in :mod:`._heterogeneous` does with edge
gathers and ``np.bincount``: the edge flows of eq. (3) / eq. (4), the new loads, and the per-node
outflow the engine's feasibility check needs. No per-step temporaries: the caller passes the
output buffers (n values each).

Coefficients without per-edge arrays. ``c_e = 1 / (c max(d_u, d_v))`` is ``min(inv_u, inv_v)``
with ``inv_i = 1 / (c d_i)``, bit for bit (``c d`` and ``1 / .`` are monotone under rounding, and
``max`` picks one of the two computations). So a kernel takes ``mode``:

* ``COEF_SCALAR`` (0): every ``inv_i`` equal (regular graph, no capacities): ``c_e = a0``;
* ``COEF_NODE`` (1): ``c_e = min(inv[u], inv[v])`` (n values);
* ``COEF_EDGE`` (2): ``c_e = alpha[e]`` (m values; only with capacities, ``cap_e / (c max(d_u, d_v))``).

The choice is written out in each loop: the same choice in a helper marked ``inline="always"``
made the FOS loop 15x slower (74 ns instead of 5 per edge on torus:1000x1000).

Loop shape (every result the reference's, bit for bit). Every array
index is cast to ``uint64`` (:data:`_U`): numba then emits no negative-index wraparound, which
cost three instructions per access (35-45% of the SOS loops' time in cache). A row's lower slots
(``j < i``) come first, so the SOS and real FOS rows are two loops (lower, then upper) with no
per-slot branch on ``j < i``. The SOS kernels take the coefficient mode as a type (``None`` for
the unused ``inv`` / ``alpha``: one compiled pass per mode). sos-iou settles a short node's
payments at the end of its own row, while the row is in cache (see :func:`_sos_iou_pass`).
Tried and dropped (no measurable gain): ``first`` and ``has_exc`` as types (LLVM hoists the
tests); a branch-free payment loop in sos-iou (selects instead of ``continue`` on the slots where
the short node does not send: 36 ns either way on hypercube:20 with beta 1.988, where half of the
nodes were short, cold caches; on a stencil run's rows, whose state is in cache, it is kept:
:func:`_iou_settle_run`). Why the stencil kernels repeat the CSR row code for their seam
rows instead of calling a shared row function: :func:`_sos_iou_pass`'s row as a function
returning the row's seven running values, called from both loops, made the CSR pass 2.3x slower
with ``inline="always"`` and 3.1x without (hypercube:20, step 8 of a run from loads uniform in
0..99, medians of 7 alternated calls: 11.0 -> 25.6 and 10.1 -> 31.3 ns per edge; the same bits);
a shared row-range function for the FOS seams cost 3.2 -> 4.5 on the same graph.

Offset stencils (the ``*_stencil`` kernels). On a regular graph without capacities
(``COEF_SCALAR``) whose :attr:`Graph.stencil` exists (tori, rings), the protocols call separate
entry points (so other graphs compile nothing new) that walk the stencil's runs: a node ``i`` in
a run has the neighbours ``i + lower[k]`` then ``i + upper[k]``, its CSR order, so it does the
same operations in the same order and the results are the same bits; the rows between the runs
are the CSR rows above. The offsets are numba tuples (their length is a compile-time constant:
the slot loops unroll and the offsets live in registers; an offsets array, or a runtime split
point into one tuple, was 2-4x slower), every index is unsigned, and a float sum across nodes
(real ``moved``) gets a loop of its own over the run (L1-resident, node order: the same bits),
since LLVM vectorises no sequential float sum without fastmath. The SOS kernels compute the
lower slots' edge ids as the running edge counter plus constant offsets (checked against
``csr_edges`` for every row used: :func:`tokendist.graphs._stencil.lower_edge_runs`, which drops
the first row of each torus run, where they differ) and split a run into loops whose rows do not depend on each other
(the upper edges' state first, then the nodes); see :func:`sos_real_stencil` and
:func:`sos_iou_stencil`. Measured on torus:1000x1000 (docs/protocols/heterogeneous.md,
"Offset stencils"): fos 4.6-6.9 -> 1.8, fos-floor 4.8-6.6 -> 1.3-1.5, sos 6.2-7.7 -> 3.3-3.6,
sos-iou main pass 10.6-12.2 -> 6.5 ns per edge (best of alternated calls).

Weighted loads ``x = w / s``: the caller passes ``x = loads`` itself when every speed is 1 (the
division by 1 is exact, so nothing is computed or stored), else a buffer holding ``loads / s``.

Bitwise agreement with the reference. Edges are stored with ``u < v``, sorted, and CSR rows list
their neighbours in increasing order, so in row ``i`` the slots with ``j < i`` are the edges with
``v = i`` in edge order and the slots with ``j > i`` those with ``u = i``. The FOS kernels walk
CSR rows and compute every edge from both ends (no scattered writes); summing the two kinds of
slot into separate accumulators repeats ``bincount(v, y) - bincount(u, y)`` operation for
operation. The SOS kernels keep a per-edge state, so they compute each edge once, from its lower
endpoint (a row's upper slots are the next edges of the edge list: a running counter is their
index), and the upper endpoint reads the stored value back through ``csr_edges`` in the same
order as ``bincount``. So the loads and outflows are the same bits. Only the real schemes'
``moved`` (a sum of ``|y|``) is added in another order than numpy's pairwise sum: equal to about 1e-15 relative.
"""

from __future__ import annotations

import numba
import numpy as np
from llvmlite import ir
from numba.core import types
from numba.extending import intrinsic

__all__ = ["fos_real_step", "fos_floor_step", "sos_real_step", "sos_iou_step", "node_alpha_sums",
           "fos_real_stencil", "fos_floor_stencil", "sos_real_stencil", "sos_iou_stencil",
           "COEF_SCALAR", "COEF_NODE", "COEF_EDGE"]

#: Every index is cast to this before it indexes an array: numba wraps negative signed indices
#: (``a[-1]``), three extra instructions per access; with unsigned ones it emits none. Measured
#: 35-45% faster on the SOS loops (sos-iou 10.6 -> 6.2 ns per edge in cache on torus:64x64, 9.1 ->
#: 5.7 on torus:1000x1000).
_U = np.uint64

COEF_SCALAR = 0
COEF_NODE = 1
COEF_EDGE = 2

#: Bit pattern of +inf: every non-negative float64 at or above it in bit order is inf or a NaN.
_INF_BITS = 0x7FF0000000000000


@intrinsic
def _float_bits(typingctx, x):
    """The bits of a float64 as an int64 (a bitcast, no instruction)."""
    def codegen(context, builder, signature, args):
        return builder.bitcast(args[0], ir.IntType(64))
    return types.int64(types.float64), codegen


@intrinsic
def _bits_float(typingctx, b):
    """The float64 with the bits of an int64 (a bitcast, no instruction)."""
    def codegen(context, builder, signature, args):
        return builder.bitcast(args[0], ir.DoubleType())
    return types.float64(types.int64), codegen


@numba.njit(cache=True, nogil=True)
def node_alpha_sums(indptr, indices, mode, a0, inv, alpha, csr_edges, total):
    """``total[i] = sum_j c_ij``, added as ``bincount(u, c) + bincount(v, c)`` adds it (same bits).

    Used for the validity check of M (its diagonal ``1 - total / s``) without an m-sized temporary.
    """
    n = total.shape[0]
    for i in range(n):
        ai = inv[i] if mode == 1 else a0
        low = 0.0
        up = 0.0
        for k in range(indptr[i], indptr[i + 1]):
            j = indices[k]
            a = a0 if mode == 0 else (min(ai, inv[j]) if mode == 1 else alpha[csr_edges[k]])
            if j < i:
                low += a
            else:
                up += a
        total[i] = up + low


@numba.njit(cache=True, nogil=True)
def fos_real_step(indptr, indices, csr_edges, mode, a0, inv, alpha, x, loads, out, outflow):
    """Real FOS, eq. (3): every row computes the flows of all its edges (no scattered writes).

    A row's lower slots (``j < i``) come first: two loops, no per-slot branch. Returns the load moved.
    """
    n = loads.shape[0]
    moved = 0.0
    for i in range(n):
        ui = _U(i)
        xi = x[ui]
        ai = inv[ui] if mode == 1 else a0
        k = indptr[ui]
        end = indptr[ui + _U(1)]
        inn = 0.0
        sent_in = 0.0
        while k < end:
            j = indices[_U(k)]
            if j > i:
                break
            uj = _U(j)
            a = a0 if mode == 0 else (min(ai, inv[uj]) if mode == 1 else alpha[_U(csr_edges[_U(k)])])
            y = a * (x[uj] - xi)  # edge (j, i): positive from j to i
            inn += y
            sent_in += max(-y, 0.0)
            k += 1
        outs = 0.0
        sent_out = 0.0
        for kk in range(k, end):
            uj = _U(indices[_U(kk)])
            a = a0 if mode == 0 else (min(ai, inv[uj]) if mode == 1 else alpha[_U(csr_edges[_U(kk)])])
            y = a * (xi - x[uj])  # edge (i, j)
            outs += y
            sent_out += max(y, 0.0)
        out[ui] = loads[ui] + (inn - outs)
        sent = sent_out + sent_in
        outflow[ui] = sent
        moved += sent
    return moved


@numba.njit(cache=True, nogil=True)
def fos_floor_step(indptr, indices, csr_edges, mode, a0, inv, alpha, x, loads, out, outflow):
    """Integer FOS: every edge carries ``trunc`` of its FOS flow; returns the tokens moved.

    Branch-free: ``trunc`` is odd and ``a (x_j - x_i) = -(a (x_i - x_j))`` exactly, so every slot
    computes the flow out of ``i`` the same way; integer sums do not depend on their order.
    """
    n = loads.shape[0]
    moved = 0
    for i in range(n):
        ui = _U(i)
        xi = np.float64(x[ui])
        ai = inv[ui] if mode == 1 else a0
        delta = 0
        sent = 0
        for k in range(indptr[ui], indptr[ui + _U(1)]):
            uj = _U(indices[_U(k)])
            a = a0 if mode == 0 else (min(ai, inv[uj]) if mode == 1 else alpha[_U(csr_edges[_U(k)])])
            z = np.int64(a * (xi - np.float64(x[uj])))  # float -> int truncates towards zero
            delta -= z
            sent += max(z, 0)
        out[ui] = loads[ui] + delta
        outflow[ui] = sent
        moved += sent
    return moved


@numba.njit(cache=True, nogil=True)
def sos_real_step(indptr, indices, csr_edges, mode, a0, inv, alpha, beta, first, x, loads, flow, out, outflow):
    """Real SOS, one step (:func:`_sos_real_pass`); the coefficient mode becomes a type (see :func:`sos_iou_step`)."""
    if mode == COEF_SCALAR:
        return _sos_real_pass(indptr, indices, csr_edges, a0, None, None, beta, first, x, loads, flow, out, outflow)
    if mode == COEF_NODE:
        return _sos_real_pass(indptr, indices, csr_edges, a0, inv, None, beta, first, x, loads, flow, out, outflow)
    return _sos_real_pass(indptr, indices, csr_edges, a0, None, alpha, beta, first, x, loads, flow, out, outflow)


@numba.njit(cache=True, nogil=True)
def _sos_real_pass(indptr, indices, csr_edges, a0, inv, alpha, beta, first, x, loads, flow, out, outflow):
    """Real SOS in flow form: ``y_e = beta F_e(w) + (beta - 1) y_e`` (``y_e = F_e`` when ``first``).

    Each edge's flow is computed once, from its lower endpoint: row ``i``'s upper slots are the
    next edges of the edge list, so a running counter is their index and ``flow`` (the previous
    step's flows, overwritten in place) is read and written in order. A lower slot ``(j, i)``,
    ``j < i``, reads the flow row ``j`` wrote earlier in the same pass (through ``csr_edges``).
    No scattered writes, no zeroing pass (measured 10-15% faster than adding into the upper
    endpoint's slot). A row's lower slots come first (sorted rows), so each row is two loops
    with no per-slot branch on ``j < i``: the lower loop stops at the first slot whose edge index
    is the running counter. Every index is cast to ``uint64`` (see :data:`_U`). Returns the load
    moved.
    """
    n = loads.shape[0]
    bm1 = beta - 1.0
    moved = 0.0
    e = 0
    for i in range(n):
        ui = _U(i)
        xi = x[ui]
        ai = a0
        if inv is not None:
            ai = inv[ui]
        k = indptr[ui]
        end = indptr[ui + _U(1)]
        inn = 0.0
        sent_in = 0.0
        while k < end:
            le = csr_edges[_U(k)]
            if le >= e:
                break
            y = flow[_U(le)]  # edge (j, i), j < i: this step's flow, written by row j
            inn += y
            sent_in += max(-y, 0.0)
            k += 1
        outs = 0.0
        sent_out = 0.0
        for kk in range(k, end):
            j = _U(indices[_U(kk)])
            ue = _U(e)
            a = a0
            if alpha is not None:
                a = alpha[ue]
            elif inv is not None:
                a = min(ai, inv[j])
            f = a * (xi - x[j])
            y = f if first else beta * f + bm1 * flow[ue]
            flow[ue] = y
            e += 1
            outs += y
            sent_out += max(y, 0.0)
        out[ui] = loads[ui] + (inn - outs)
        sent = sent_out + sent_in
        outflow[ui] = sent
        moved += sent
    return moved


@numba.njit(cache=True, nogil=True)
def sos_iou_step(indptr, indices, csr_edges, mode, a0, inv, alpha, beta, first, owed_stored, has_exc, exc_bits,
                 pay_iou, x, loads, yhat, iou, out, owe):
    """Integer SOS with IOUs, one step (:func:`_sos_iou_pass`).

    The coefficient mode becomes a type: the unused ``inv`` / ``alpha`` are passed as ``None``, so
    numba compiles one pass per mode without the choice in the loop (measured 5-15% faster in
    cache than the runtime ``mode`` test; making ``first`` and ``has_exc`` types too gained
    nothing measurable, LLVM already hoists those tests).
    """
    if mode == COEF_SCALAR:
        return _sos_iou_pass(indptr, indices, csr_edges, a0, None, None, beta, first, owed_stored, has_exc, exc_bits,
                             pay_iou, x, loads, yhat, iou, out, owe)
    if mode == COEF_NODE:
        return _sos_iou_pass(indptr, indices, csr_edges, a0, inv, None, beta, first, owed_stored, has_exc, exc_bits,
                             pay_iou, x, loads, yhat, iou, out, owe)
    return _sos_iou_pass(indptr, indices, csr_edges, a0, None, alpha, beta, first, owed_stored, has_exc, exc_bits,
                         pay_iou, x, loads, yhat, iou, out, owe)


@numba.njit(cache=True, nogil=True)
def _sos_iou_pass(indptr, indices, csr_edges, a0, inv, alpha, beta, first, owed_stored, has_exc, exc_bits,
                  pay_iou, x, loads, yhat, iou, out, owe):
    """Integer SOS with IOUs (Sec. 3): one step; updates ``yhat`` and ``iou`` in place.

    One fused pass over the CSR rows: each edge's ``yhat`` (eq. (4) in flow form), owed ``o = yhat +
    IOU`` and integer transfer ``t = trunc(o)`` are computed once, from its lower endpoint (upper
    slots are the next edges: a running index); the upper endpoint reads ``o`` back through
    ``csr_edges``. ``iou`` then keeps ``o`` itself: an edge paid in full has the IOU ``o - trunc(o)``
    (exact, below 1 in size), recovered when it is next read (``owed_stored``); this saves a second
    pass over the m-sized arrays.

    A node that owes more than it holds (``pay_iou``) pays each edge it sends on ``floor(|t| w_i /
    owe_i)`` instead. This is settled at the end of the node's own row, while the row's slots are
    still in cache (a separate pass over the short nodes afterwards cost about 5 ns per edge on
    torus:1000x1000, mostly cache misses): the IOU ``o - paid`` of such an edge (at least 1 in
    size) is stored in ``iou[e]`` itself and the edge's bit set in ``exc_bits`` (one bit per
    edge, ``has_exc`` when any is set), so the next step reads it as it is. An old bit is
    cleared when its edge is read (each edge is read once, from its lower endpoint, before any
    row can set its new bit). What was not paid goes back to both endpoints' loads: at once for
    the node itself and for a lower neighbour (its load is written already); an upper neighbour
    ``j`` reads ``trunc`` of the stored IOU instead of ``t`` later in the pass (it is the
    receiver: its amount owed does not change), so the difference is added to ``out[j]`` at once
    and row ``j`` adds its load to that: ``out`` must hold zeros on entry (``np.zeros``: fresh
    pages, no more costly than ``np.empty``). A growing list of such corrections was tried
    instead: its reallocation inside the loop made numba reference-count arrays in the hot
    loop (22 instead of 6 ns per edge). As every other IOU is below 1, the owed units and the largest IOU come from these
    exceptions.

    ``owe`` ends as what each node actually sent (the outflow). Sums of integer-valued floats are
    exact, so their order does not matter: the loads, outflows, IOUs, ``moved`` (the sum of what
    the nodes owe, less what was not paid), units and maximum equal the edge-by-edge numpy
    reference bit for bit. Every index is cast to ``uint64`` (see :data:`_U`). Returns ``(moved,
    short_nodes, iou_units, iou_max, any_exception)``.
    """
    n = loads.shape[0]
    bm1 = beta - 1.0
    moved = 0
    short = 0
    biggest = 0.0
    units = 0.0
    exc_big = 0.0
    any_exc = False
    e = 0
    for i in range(n):
        ui = _U(i)
        xi = np.float64(x[ui])
        ai = a0
        if inv is not None:
            ai = inv[ui]
        k0 = indptr[ui]
        end = indptr[ui + _U(1)]
        owed = 0.0
        delta = 0
        k = k0
        while k < end:
            le = csr_edges[_U(k)]
            if le >= e:
                break
            # Edge (j, i), j < i: row j stored its amount owed earlier in this pass.
            t = np.trunc(iou[_U(le)])
            owed += max(-t, 0.0)
            delta += np.int64(t)
            k += 1
        mid = k
        e0 = e
        for kk in range(mid, end):
            j = _U(indices[_U(kk)])
            ue = _U(e)
            a = a0
            if alpha is not None:
                a = alpha[ue]
            elif inv is not None:
                a = min(ai, inv[j])
            f = a * (xi - np.float64(x[j]))
            y = f if first else beta * f + bm1 * yhat[ue]
            yhat[ue] = y
            p = iou[ue]
            if has_exc and (exc_bits[_U(e >> 3)] >> (e & 7)) & 1:
                # An IOU itself (a node could not pay it in full last step); its bit is consumed.
                exc_bits[_U(e >> 3)] &= np.uint8(255 - (1 << (e & 7)))
            elif owed_stored:
                p = p - np.trunc(p)
            o = y + p
            iou[ue] = o
            t = np.trunc(o)
            owed += max(t, 0.0)
            delta -= np.int64(t)
            r = abs(o - t)
            if r > biggest:  # rarely true after the first edges: no dependency chain
                biggest = r
            e += 1
        held = loads[ui]
        moved += np.int64(owed)  # every edge's |t| is owed by its sender
        if owed > held:
            short += 1
            if pay_iou:
                heldf = np.float64(held)
                paid_sum = 0.0
                for kk in range(k0, end):
                    lower = kk < mid
                    le = np.int64(csr_edges[_U(kk)]) if lower else e0 + (kk - mid)
                    o = iou[_U(le)]
                    t = np.trunc(o)
                    if (t >= 0.0) if lower else (t <= 0.0):
                        continue  # i does not send on this edge
                    # floor(|t| w / T) as (|t| w) / T: exact while |t| w < 2**53 (the product is then
                    # exact and a quotient below an integer k never rounds up to k), so the payments
                    # add up to at most w; floor(|t| (w / T)) could pay one token less (22 * (15/22) < 15).
                    paid = np.sign(t) * np.floor((np.abs(t) * heldf) / owed)
                    paid_sum += np.abs(paid)
                    back = np.int64(t) - np.int64(paid)
                    moved -= abs(back)
                    r = o - paid  # |r| >= 1: paid is below t in size
                    iou[_U(le)] = r
                    exc_bits[_U(le >> 3)] |= np.uint8(1 << (le & 7))
                    units += np.floor(np.abs(r))
                    exc_big = max(exc_big, np.abs(r))
                    jn = indices[_U(kk)]
                    if lower:
                        delta -= back  # i = v[e]
                        out[_U(jn)] += back  # u[e] = j < i: its row is done
                    else:
                        delta += back  # i = u[e]
                        # v[e] = j > i will add trunc(r) where it should add paid: its row adds to this.
                        out[_U(jn)] += np.int64(paid) - np.int64(np.trunc(r))
                    any_exc = True
                owed = paid_sum
        owe[ui] = owed
        out[ui] += held + delta  # out starts at 0: it may hold a correction from a lower short neighbour
    if not any_exc:
        # Every IOU is o - trunc(o), of size below 1: no owed unit.
        return moved, short, 0.0, biggest, False
    return moved, short, units, exc_big, True


# --------------------------------------------------------------------------------------------------
# Offset-stencil paths (graphs/_stencil.py): the same steps on a regular graph without capacities
# (COEF_SCALAR), walking the stencil's runs with the offsets instead of CSR indices.


@numba.njit(cache=True, nogil=True)
def fos_real_stencil(indptr, indices, starts, ends, lower, upper, a0, x, loads, out, outflow):
    """:func:`fos_real_step` (``COEF_SCALAR``) over a stencil's runs; the same bits.

    Rows between the runs are the CSR rows of :func:`fos_real_step`. A row in a run has the
    neighbours ``i + lower[k]`` then ``i + upper[k]`` (its CSR order), so it does the same
    operations in the same order. ``lower`` and ``upper`` are tuples (loop unrolled, offsets in
    registers); ``moved`` is added in a second loop over the run, so that the first one has no
    sequential float sum and vectorises (in the same node order as before: the same bits).
    """
    n = loads.shape[0]
    moved = 0.0
    nr = starts.shape[0]
    prev = 0
    for r in range(nr + 1):
        stop = starts[r] if r < nr else n
        for i in range(prev, stop):
            ui = _U(i)
            xi = x[ui]
            k = indptr[ui]
            end = indptr[ui + _U(1)]
            inn = 0.0
            sent_in = 0.0
            while k < end:
                j = indices[_U(k)]
                if j > i:
                    break
                y = a0 * (x[_U(j)] - xi)
                inn += y
                sent_in += max(-y, 0.0)
                k += 1
            outs = 0.0
            sent_out = 0.0
            for kk in range(k, end):
                y = a0 * (xi - x[_U(indices[_U(kk)])])
                outs += y
                sent_out += max(y, 0.0)
            out[ui] = loads[ui] + (inn - outs)
            sent = sent_out + sent_in
            outflow[ui] = sent
            moved += sent
        if r == nr:
            break
        s = starts[r]
        e = ends[r]
        for i in range(s, e):
            ui = _U(i)
            xi = x[ui]
            inn = 0.0
            sent_in = 0.0
            for k in range(len(lower)):
                y = a0 * (x[_U(i + lower[k])] - xi)
                inn += y
                sent_in += max(-y, 0.0)
            outs = 0.0
            sent_out = 0.0
            for k in range(len(upper)):
                y = a0 * (xi - x[_U(i + upper[k])])
                outs += y
                sent_out += max(y, 0.0)
            out[ui] = loads[ui] + (inn - outs)
            outflow[ui] = sent_out + sent_in
        for i in range(s, e):
            moved += outflow[_U(i)]
        prev = e
    return moved


@numba.njit(cache=True, nogil=True)
def fos_floor_stencil(indptr, indices, starts, ends, lower, upper, a0, x, loads, out, outflow):
    """:func:`fos_floor_step` (``COEF_SCALAR``) over a stencil's runs; the same results.

    Integer sums: their order does not matter, so ``moved`` stays in the run loop.
    """
    n = loads.shape[0]
    moved = 0
    nr = starts.shape[0]
    prev = 0
    for r in range(nr + 1):
        stop = starts[r] if r < nr else n
        for i in range(prev, stop):
            ui = _U(i)
            xi = np.float64(x[ui])
            delta = 0
            sent = 0
            for k in range(indptr[ui], indptr[ui + _U(1)]):
                z = np.int64(a0 * (xi - np.float64(x[_U(indices[_U(k)])])))
                delta -= z
                sent += max(z, 0)
            out[ui] = loads[ui] + delta
            outflow[ui] = sent
            moved += sent
        if r == nr:
            break
        s = starts[r]
        e = ends[r]
        for i in range(s, e):
            ui = _U(i)
            xi = np.float64(x[ui])
            delta = 0
            sent = 0
            for k in range(len(lower)):
                z = np.int64(a0 * (xi - np.float64(x[_U(i + lower[k])])))
                delta -= z
                sent += max(z, 0)
            for k in range(len(upper)):
                z = np.int64(a0 * (xi - np.float64(x[_U(i + upper[k])])))
                delta -= z
                sent += max(z, 0)
            out[ui] = loads[ui] + delta
            outflow[ui] = sent
            moved += sent
        prev = e
    return moved


@numba.njit(cache=True, nogil=True)
def sos_real_stencil(indptr, indices, csr_edges, starts, ends, lower, upper, edge_delta, a0, beta, first, x, loads,
                     flow, out, outflow):
    """:func:`sos_real_step` (``COEF_SCALAR``) over a stencil's runs; the same bits.

    Rows between the runs are the CSR rows of :func:`_sos_real_pass`. In a run every row has
    ``U = len(upper)`` upper slots, so the running edge counter is ``e_s + U (i - s)`` at row ``i``
    and the lower slot ``k`` is the edge ``e_s + U (i - s) + edge_delta[k]`` (checked by
    :func:`~tokendist.graphs._stencil.lower_edge_runs` for every row it keeps): no ``csr_edges`` read. A run takes three
    loops: (1) every row's upper flows, which are written to ``flow`` (reading the previous step's
    flows: no dependency between rows, it vectorises); (2) every row's new load and outflow from
    the flows of its lower and upper edges, in the CSR order (the upper ones read back: the same
    values and the same sums as the one-loop row); (3) ``moved``, in node order.
    """
    n = loads.shape[0]
    bm1 = beta - 1.0
    moved = 0.0
    e = 0
    nr = starts.shape[0]
    nu = len(upper)
    prev = 0
    for r in range(nr + 1):
        stop = starts[r] if r < nr else n
        for i in range(prev, stop):
            ui = _U(i)
            xi = x[ui]
            k = indptr[ui]
            end = indptr[ui + _U(1)]
            inn = 0.0
            sent_in = 0.0
            while k < end:
                le = csr_edges[_U(k)]
                if le >= e:
                    break
                y = flow[_U(le)]
                inn += y
                sent_in += max(-y, 0.0)
                k += 1
            outs = 0.0
            sent_out = 0.0
            for kk in range(k, end):
                ue = _U(e)
                f = a0 * (xi - x[_U(indices[_U(kk)])])
                y = f if first else beta * f + bm1 * flow[ue]
                flow[ue] = y
                e += 1
                outs += y
                sent_out += max(y, 0.0)
            out[ui] = loads[ui] + (inn - outs)
            sent = sent_out + sent_in
            outflow[ui] = sent
            moved += sent
        if r == nr:
            break
        s = starts[r]
        en = ends[r]
        for i in range(s, en):
            ui = _U(i)
            xi = x[ui]
            eb = e + nu * (i - s)
            for k in range(nu):
                ue = _U(eb + k)
                f = a0 * (xi - x[_U(i + upper[k])])
                flow[ue] = f if first else beta * f + bm1 * flow[ue]
        for i in range(s, en):
            ui = _U(i)
            inn = 0.0
            sent_in = 0.0
            for k in range(len(lower)):
                y = flow[_U(e + nu * (i - s) + edge_delta[k])]
                inn += y
                sent_in += max(-y, 0.0)
            eb = e + nu * (i - s)
            outs = 0.0
            sent_out = 0.0
            for k in range(nu):
                y = flow[_U(eb + k)]
                outs += y
                sent_out += max(y, 0.0)
            out[ui] = loads[ui] + (inn - outs)
            outflow[ui] = sent_out + sent_in
        for i in range(s, en):
            moved += outflow[_U(i)]
        e += nu * (en - s)
        prev = en
    return moved


@numba.njit(cache=True, nogil=True)
def _clear_bits(bits, lo, hi):
    """Clear bits ``lo .. hi - 1`` of a little-endian bit array (``np.packbits(bitorder="little")``)."""
    if hi <= lo:
        return
    b0 = lo >> 3
    b1 = hi >> 3
    keep_low = np.uint8((1 << (lo & 7)) - 1)  # bits of b0 below lo
    keep_high = np.uint8(255 - ((1 << (hi & 7)) - 1))  # bits of b1 from hi on
    if b0 == b1:
        bits[_U(b0)] &= keep_low | keep_high
        return
    bits[_U(b0)] &= keep_low
    for b in range(b0 + 1, b1):
        bits[_U(b)] = 0
    if hi & 7:
        bits[_U(b1)] &= keep_high


@numba.njit(cache=True, nogil=True, inline="always")
def _iou_settle(indices, csr_edges, k0, mid, end, e0, held, owed, iou, exc_bits, out, units, exc_big):
    """A short node's payments (the ``pay_iou`` branch of :func:`_sos_iou_pass`, line for line).

    Slots ``k0 .. mid`` are the row's lower slots (edge ids from ``csr_edges``), ``mid .. end`` the
    upper ones (edges ``e0, e0 + 1, ...``). Returns ``(paid_sum, delta, moved, units, exc_big)``:
    what the node pays, the change of its load and of ``moved``, and the updated exception tallies.
    Used for the CSR rows of :func:`sos_iou_stencil` (a run's rows use :func:`_iou_settle_run`).
    """
    heldf = np.float64(held)
    paid_sum = 0.0
    delta = 0
    moved = 0
    for kk in range(k0, end):
        lower = kk < mid
        le = np.int64(csr_edges[_U(kk)]) if lower else e0 + (kk - mid)
        o = iou[_U(le)]
        t = np.trunc(o)
        if (t >= 0.0) if lower else (t <= 0.0):
            continue  # i does not send on this edge
        paid = np.sign(t) * np.floor((np.abs(t) * heldf) / owed)
        paid_sum += np.abs(paid)
        back = np.int64(t) - np.int64(paid)
        moved -= abs(back)
        r = o - paid
        iou[_U(le)] = r
        exc_bits[_U(le >> 3)] |= np.uint8(1 << (le & 7))
        units += np.floor(np.abs(r))
        exc_big = max(exc_big, np.abs(r))
        jn = indices[_U(kk)]
        if lower:
            delta -= back
            out[_U(jn)] += back
        else:
            delta += back
            out[_U(jn)] += np.int64(paid) - np.int64(np.trunc(r))
    return paid_sum, delta, moved, units, exc_big


@numba.njit(cache=True, nogil=True, inline="always")
def _iou_pay(o, t, held, owed, le, iou, exc_bits, units, exc_big):
    """One edge of a short node: what it pays, ``o - paid`` stored as an exception (see :func:`_iou_settle`)."""
    paid = np.sign(t) * np.floor((np.abs(t) * np.float64(held)) / owed)
    r = o - paid
    iou[_U(le)] = r
    exc_bits[_U(le >> 3)] |= np.uint8(1 << (le & 7))
    units += np.floor(np.abs(r))
    exc_big = max(exc_big, np.abs(r))
    return paid, r, units, exc_big


@numba.njit(cache=True, nogil=True, inline="always")
def _iou_pay_if(send, o, t, held, owed, le, iou, exc_bits, units, exc_big):
    """:func:`_iou_pay` where ``send``; returns ``(paid, tt, r, units, exc_big)``, ``tt`` the transfer paid on.

    Where not ``send`` it returns ``(0.0, 0.0, o, units, exc_big)`` and changes nothing.
    Branch-free: an edge on which the node does not send is taken with ``t = 0``, so it pays
    ``0.0``, stores ``o - 0.0 = o`` back (the same bits, ``-0.0`` included) and ORs a zero bit.
    """
    tt = t if send else 0.0
    paid = np.sign(tt) * np.floor((np.abs(tt) * np.float64(held)) / owed)
    r = o - paid
    iou[_U(le)] = r
    exc_bits[_U(le >> 3)] |= np.uint8(np.uint8(send) << (le & 7))
    units += np.floor(np.abs(r)) if send else 0.0
    exc_big = max(exc_big, np.abs(r) if send else 0.0)
    return paid, tt, r, units, exc_big


@numba.njit(cache=True, nogil=True, inline="always")
def _iou_settle_run(i, eb, lower, upper, edge_delta, held, owed, iou, exc_bits, out, units, exc_big, read_below):
    """:func:`_iou_settle` for a row of a stencil run: neighbours and edge ids from the offsets.

    The same slots in the same order (lower, then upper), so the same results; no CSR array is
    read (a short node's ``indptr``, ``indices`` and ``csr_edges`` were three cache misses: 14.9
    -> 11.0 ns per edge on torus:1000x1000 with 35,080 short nodes in the step).

    An upper neighbour ``j`` adds ``trunc`` of the edge's stored value to its load when it reads
    the edge: ``trunc(r)`` if it reads it later (``j >= read_below``, the end of the run), so it
    is corrected by ``paid - trunc(r)`` as in :func:`_sos_iou_pass`; ``t`` if it has read it
    already (a later row of the same run: loop (2a) of :func:`sos_iou_stencil` read every row's
    edges before any row of the run pays), corrected by ``paid - t``. Either way its load ends
    with ``paid``. A receiver's amount owed does not depend on which of the two it read (``t``
    and ``trunc(r)`` have the same sign), so neither does which rows are short.

    Every slot is taken, those on which the row does not send with ``t = 0`` (:func:`_iou_pay_if`),
    instead of skipping them with a branch: whether a short row sends on a slot is a coin flip to
    the branch predictor. The kernel 3-16% faster on torus:1000x1000 at
    step 150 of the bench's run, where 81% of the nodes were short (three alternated measurements;
    docs/design/kernels.md). The slots it does not send on are written back unchanged, so a row still
    writes only its own edges, bits and neighbours' loads: what the threaded kernel's chunks rely
    on (:mod:`._heterogeneous_stencil_parallel`).
    """
    paid_sum = 0.0
    delta = 0
    moved = 0
    for k in range(len(lower)):
        le = eb + edge_delta[k]
        o = iou[_U(le)]
        t = np.trunc(o)
        paid, tt, r, units, exc_big = _iou_pay_if(t < 0.0, o, t, held, owed, le, iou, exc_bits, units, exc_big)
        paid_sum += np.abs(paid)
        back = np.int64(tt) - np.int64(paid)  # 0 where the row does not send
        moved -= abs(back)
        delta -= back
        out[_U(i + lower[k])] += back
    for k in range(len(upper)):
        le = eb + k
        o = iou[_U(le)]
        t = np.trunc(o)
        send = t > 0.0
        paid, tt, r, units, exc_big = _iou_pay_if(send, o, t, held, owed, le, iou, exc_bits, units, exc_big)
        paid_sum += np.abs(paid)
        back = np.int64(tt) - np.int64(paid)
        moved -= abs(back)
        delta += back
        jn = i + upper[k]
        read = np.int64(tt) if jn < read_below else np.int64(np.trunc(r))
        out[_U(jn)] += np.int64(paid) - read if send else 0
    return paid_sum, delta, moved, units, exc_big


#: (2b) of :func:`sos_iou_stencil` pays a run's short rows with :func:`_pay_run` (passes over
#: every row) when more than one row in this many is short, else row by row. The passes cost
#: about 9 ns per edge of the run whatever the share of short rows; row by row the cost grows
#: with that share (about 15 ns per edge at 81%). The two were even at 45% (step 60 of the
#: bench's run on torus:1000x1000; docs/design/kernels.md).
_DENSE_SHORT = 2


@numba.njit(cache=True, nogil=True, inline="always")
def _paid_only(x, pay):
    """``x`` where ``pay``, else ``+0.0``: a select on the bits (no branch)."""
    return _bits_float(_float_bits(x) & -np.int64(pay))


@numba.njit(cache=True, nogil=True, inline="always")
def _paid_tallies(e0, stride, count, backs, iou, exc_bits, moved, units, exc_big):
    """Bits and tallies of the edges ``e0 + stride c`` (``c < count``) that were paid (``backs[c] != 0``).

    Their exception bits are set (built a byte at a time in a register: a read-modify-write of
    the byte per edge waited on the previous store), ``sum |back|``, the units and the largest
    IOU of the paid ones updated. Returns ``(moved, units, exc_big)``.
    """
    byte = -1
    acc = np.uint8(0)
    for c in range(count):
        le = e0 + stride * c
        b = backs[_U(c)]
        pay = b != 0.0
        rr = _paid_only(np.abs(iou[_U(le)]), pay)
        moved += abs(b)
        units += np.floor(rr)
        exc_big = max(exc_big, rr)
        if le >> 3 != byte:
            if byte >= 0:
                exc_bits[_U(byte)] |= acc
            byte = le >> 3
            acc = np.uint8(0)
        acc |= np.uint8(np.uint8(pay) << (le & 7))
    if byte >= 0:
        exc_bits[_U(byte)] |= acc
    return moved, units, exc_big


@numba.njit(cache=True, nogil=True, error_model="numpy")
def _pay_run(s, en, e, lower, upper, edge_delta, loads, owe, iou, exc_bits, out, backs, paids, backs_below,
             paids_below):
    """(2b) of :func:`sos_iou_stencil` for every short row of the run ``s .. en - 1`` at once; the same results.

    :func:`_iou_settle_run` row by row (node order, ``read_below = en``) makes each short row pay
    on every edge it sends on. A payment depends only on the edge's ``o``, the sender's load and
    what it owes (``owe``, as loop (2a) left it), so the edges can be taken in any order, each
    once, by its sender. Four passes over all the rows of the run, with selects instead of
    branches on whether a row is short or sends on an edge (a coin flip to the branch predictor):

    (A) every upper edge of the run: its sender is its lower end (``t > 0``) or its upper end
        (``t < 0``) if that is a row of the run; what is paid, ``o - paid`` stored (``o`` where
        nobody pays), and per edge ``back = t - paid`` (0 where nobody pays) and ``paid``
        (``backs``, ``paids``: scratch of ``len(upper)`` values per row);
    (B) the edges that end at a row of the run from below it (lower slots whose edge lies before
        the run): the row pays where it sends (``t < 0``), its lower neighbour, which has read
        ``t``, gets ``back``; ``back`` and ``paid`` per row and slot (``backs_below``,
        ``paids_below``: ``len(lower)`` values per row);
    (C) per row: its load (``+back`` of each of its upper edges and ``-back`` of each of its
        lower edges, whoever paid: each end has read ``t``, so each gets ``paid`` instead), what
        it paid (``owe``, short rows only), and ``paid - trunc(o - paid)`` to an upper neighbour
        past the run (it reads the edge later);
    (D) the exception bits and the tallies of every edge paid (:func:`_paid_tallies`). With them
        in (C), a read-modify-write of the bits' byte per edge, each waiting on the previous
        store, the passes were as slow as paying row by row.

    Every edge a row pays on has ``|back| >= 1`` (a short row pays less than ``t``), every other
    edge ``back = 0``. Returns ``(moved, units, exc_big)``: the change of ``moved`` (the tokens not
    paid, negative) and the exception tallies of the payments (integer-valued float sums, exact
    in any order, as the row loop's).
    """
    nu = len(upper)
    nl = len(lower)
    L = en - s
    # (A) The run's upper edges paid by a row of the run.
    for r in range(L):
        i = s + r
        ui = _U(i)
        short_i = owe[ui] > loads[ui]
        for k in range(nu):
            q = _U(nu * r + k)
            j = i + upper[k]
            uj = _U(j)
            o = iou[_U(e) + q]
            t = np.trunc(o)
            send_i = short_i & (t > 0.0)
            send_j = (t < 0.0) & (j < en) & (owe[uj] > loads[uj])  # owe[j] past the run: not used
            pay = send_i | send_j
            tt = t if pay else 0.0
            held = loads[ui] if send_i else loads[uj]
            total = owe[ui] if send_i else (owe[uj] if send_j else 1.0)
            paid = np.sign(tt) * np.floor((np.abs(tt) * np.float64(held)) / total)
            iou[_U(e) + q] = o - paid
            backs[q] = tt - paid
            paids[q] = paid
    # (B) Edges from below the run to its rows: the row, their upper end, sends where t < 0.
    for k in range(nl):
        below = min(L, (-edge_delta[k] + nu - 1) // nu)  # rows r with nu r + edge_delta[k] < 0
        for r in range(below):
            i = s + r
            ui = _U(i)
            le = _U(e + nu * r + edge_delta[k])
            o = iou[le]
            t = np.trunc(o)
            pay = (t < 0.0) & (owe[ui] > loads[ui])
            tt = t if pay else 0.0
            paid = np.sign(tt) * np.floor((np.abs(tt) * np.float64(loads[ui])) / (owe[ui] if pay else 1.0))
            iou[le] = o - paid
            back = tt - paid
            backs_below[_U(nl * r + k)] = back
            paids_below[_U(nl * r + k)] = paid
            out[_U(i + lower[k])] += np.int64(back)
    # (C) Per row: its load, what it paid, and paid - trunc(o - paid) to an upper neighbour past
    # the run (it reads the edge later). No value is carried from row to row: the tallies are (D).
    for r in range(L):
        i = s + r
        ui = _U(i)
        delta = 0.0
        paid_sum = 0.0
        for k in range(nl):
            qq = nu * r + edge_delta[k]
            if qq >= 0:  # an upper edge of the run, taken in (A)
                b = backs[_U(qq)]
                p = paids[_U(qq)]
            else:
                b = backs_below[_U(nl * r + k)]
                p = paids_below[_U(nl * r + k)]
            delta -= b  # the upper end: -back whoever paid
            paid_sum -= min(p, 0.0)  # p < 0 where this row paid (t < 0), else p >= 0 or nobody paid
        for k in range(nu):
            q = _U(nu * r + k)
            b = backs[q]
            p = paids[q]
            delta += b  # the lower end: +back whoever paid
            paid_sum += max(p, 0.0)  # p > 0 where this row paid (t > 0), else p <= 0
            j = i + upper[k]
            if j >= en:  # reads the edge later, as trunc(o - paid): it gets paid - trunc(o - paid)
                out[_U(j)] += np.int64(p - np.trunc(iou[_U(e) + q])) * np.int64(b > 0.0)
        out[ui] += np.int64(delta)
        total = owe[ui]
        owe[ui] = paid_sum if total > loads[ui] else total  # a store either way: no branch
    # (D) The bits and tallies of every edge paid: (A)'s edges in order, then (B)'s.
    moved, units, exc_big = _paid_tallies(e, 1, L * nu, backs, iou, exc_bits, 0.0, 0.0, 0.0)
    for k in range(nl):
        below = min(L, (-edge_delta[k] + nu - 1) // nu)
        moved, units, exc_big = _paid_tallies(e + edge_delta[k], nu, below, backs_below[k::nl], iou, exc_bits, moved,
                                              units, exc_big)
    return -np.int64(moved), units, exc_big


@numba.njit(cache=True, nogil=True)
def _pay_short_rows(s, en, e, found, shortbuf, lower, upper, edge_delta, loads, owe, iou, exc_bits, out, units,
                    exc_big, exc_idx, exc_val):
    """(2b) of :func:`sos_iou_stencil`: the run's ``found`` short rows (``shortbuf``, in node order) pay.

    Row by row (:func:`_iou_settle_run`), or, when more than one row in :data:`_DENSE_SHORT` is
    short, all at once (:func:`_pay_run`, its scratch cut from the kernels' run buffers:
    ``exc_idx``, ``len(upper)`` int64 per row of the longest run, and ``exc_val``, ``len(upper) +
    2 len(lower)`` floats per row). Returns ``(moved, units, exc_big)``: the change of ``moved``
    and the updated tallies.
    """
    nu = len(upper)
    if _DENSE_SHORT * found > en - s:
        return _pay_run_scratch(s, en, e, lower, upper, edge_delta, loads, owe, iou, exc_bits, out, units, exc_big,
                                exc_idx, exc_val)
    moved = 0
    for f in range(found):
        i = shortbuf[_U(f)]
        ui = _U(i)
        paid, dd, dm, units, exc_big = _iou_settle_run(i, e + nu * (i - s), lower, upper, edge_delta, loads[ui],
                                                       owe[ui], iou, exc_bits, out, units, exc_big, en)
        owe[ui] = paid
        out[ui] += dd
        moved += dm
    return moved, units, exc_big


@numba.njit(cache=True, nogil=True, inline="always")
def _pay_run_scratch(s, en, e, lower, upper, edge_delta, loads, owe, iou, exc_bits, out, units, exc_big, exc_idx,
                     exc_val):
    """:func:`_pay_run` with its scratch cut from the kernels' run buffers (``exc_idx``: ``len(upper)``
    int64 per row of the longest run, ``exc_val``: ``len(upper) + 2 len(lower)`` floats per row);
    returns ``(moved, units, exc_big)`` with the tallies updated."""
    nu = len(upper)
    nl = len(lower)
    longest = exc_idx.shape[0] // nu
    dm, du, de = _pay_run(s, en, e, lower, upper, edge_delta, loads, owe, iou, exc_bits, out, exc_idx.view(np.float64),
                          exc_val, exc_val[longest * nu:longest * (nu + nl)], exc_val[longest * (nu + nl):])
    return dm, units + du, max(exc_big, de)


@numba.njit(cache=True, nogil=True, inline="always")
def _save_exceptions(bits, lo, hi, iou, exc_idx, exc_val):
    """The edges ``lo .. hi - 1`` whose exception bit is set, into ``exc_idx``, with their IOUs, into ``exc_val``.

    Returns how many. Reads the bit array a byte at a time: most bytes are 0.
    """
    c = 0
    for b in range(lo >> 3, ((hi - 1) >> 3) + 1):
        byte = bits[_U(b)]
        if byte == 0:
            continue
        for q in range(8):
            ee = (b << 3) + q
            if (byte >> q) & 1 and lo <= ee < hi:
                exc_idx[_U(c)] = ee
                exc_val[_U(c)] = iou[_U(ee)]
                c += 1
    return c


@numba.njit(cache=True, nogil=True, inline="always")
def _upper_edges(s, en, e, upper, a0, beta, first, owed_stored, x, yhat, iou, keep):
    """Loop (1) of :func:`sos_iou_stencil` over the rows ``s .. en - 1`` of a run, whose first upper edge is ``e``.

    ``yhat`` of every upper edge (eq. (4) in flow form) and the amount owed ``o = yhat + IOU``,
    stored in ``iou``; an IOU kept as the amount owed last step (``owed_stored``) is ``p -
    trunc(p)``, except where ``keep[q]`` is 1 (edge ``e + q`` is an exception, its IOU stored as
    it is). Called with constant ``first`` and ``owed_stored``, and ``keep`` either ``None`` or a
    byte per edge: each combination is compiled into a loop of its own, with no test in it but
    the select on ``keep``.
    """
    nu = len(upper)
    bm1 = beta - 1.0
    for i in range(s, en):
        ui = _U(i)
        xi = np.float64(x[ui])
        eb = e + nu * (i - s)
        for k in range(nu):
            ue = _U(eb + k)
            f = a0 * (xi - np.float64(x[_U(i + upper[k])]))
            y = f if first else beta * f + bm1 * yhat[ue]
            yhat[ue] = y
            p = iou[ue]
            if owed_stored:
                p = p - np.trunc(p) if keep is None else (p if keep[_U(eb + k - e)] else p - np.trunc(p))
            iou[ue] = y + p


#: :func:`_run_upper` keeps a run's exceptions in its loop when more than one edge in this many
#: is one, and saves and recomputes them otherwise. Measured crossover on torus:1000x1000: 6-8%
#: of the edges (docs/design/kernels.md).
_DENSE_EXCEPTIONS = 12

#: Set bits of every byte value.
_POPCOUNT = np.array([bin(v).count("1") for v in range(256)], dtype=np.uint8)


@numba.njit(cache=True, nogil=True, inline="always")
def _count_bits(bits, lo, hi):
    """How many of bits ``lo .. hi - 1`` of a little-endian bit array are set."""
    if hi <= lo:
        return 0
    b0 = lo >> 3
    b1 = (hi - 1) >> 3
    c = 0
    for b in range(b0, b1 + 1):
        c += _POPCOUNT[bits[_U(b)]]
    # the bits of the end bytes outside the range
    c -= _POPCOUNT[bits[_U(b0)] & np.uint8((1 << (lo & 7)) - 1)]
    c -= _POPCOUNT[bits[_U(b1)] & np.uint8((255 << (((hi - 1) & 7) + 1)) & 255)]
    return c


@numba.njit(cache=True, nogil=True)
def _run_upper(s, en, e, upper, a0, beta, first, owed_stored, has_exc, exc_bits, x, yhat, iou, exc_idx, exc_val):
    """Loop (1) of :func:`sos_iou_stencil` over the rows ``s .. en - 1`` of a run (first upper edge ``e``).

    An exception keeps its IOU as it is: saved first (``exc_idx``, ``exc_val``: scratch of the
    run's length times ``len(upper)``), its ``o`` recomputed after the loop, so that the loop
    tests no bit (it then vectorises). The loop is compiled once per value of the flags
    (constant arguments of an inlined function): with the flags tested in the loop the step was
    13-18% slower (alternated chains of protocol steps on torus:1000x1000). The bits are left
    as they are: the caller clears the run's (every old bit of its upper edges is consumed).

    Saving costs about 15 ns per exception (the save is the first to touch the run's IOUs, one
    at a time), so when more than one upper edge in :data:`_DENSE_EXCEPTIONS` is an exception
    (long runs, where most nodes end their steps short) the bits are unpacked to a byte per edge
    instead and the loop selects per edge (``keep`` of :func:`_upper_edges`): one more specialisation
    of the loop, the same bits.

    Not inlined (one call per run): its loops are compiled once per type signature and shared by
    :func:`sos_iou_stencil` and the threaded kernel, instead of once in each. Inlined, the
    dense path had made a cold run of the threaded kernel's protocol test 43 -> 56 s; called, 44.5
    s, at the same speed.
    """
    hi = e + len(upper) * (en - s)
    if has_exc and owed_stored and not first and _DENSE_EXCEPTIONS * _count_bits(exc_bits, e, hi) > hi - e:
        # Many exceptions (long runs: most nodes short, most edges paid short): the bits as a
        # byte per edge, and a select in the loop, instead of saving and recomputing each one.
        keep = exc_idx.view(np.uint8)
        for ee in range(e, hi):
            keep[_U(ee - e)] = (exc_bits[_U(ee >> 3)] >> (ee & 7)) & 1
        _upper_edges(s, en, e, upper, a0, beta, False, True, x, yhat, iou, keep)
        return
    nexc = 0
    if has_exc:
        nexc = _save_exceptions(exc_bits, e, hi, iou, exc_idx, exc_val)
    if owed_stored and not first:  # every step after the first
        _upper_edges(s, en, e, upper, a0, beta, False, True, x, yhat, iou, None)
    elif owed_stored:
        _upper_edges(s, en, e, upper, a0, beta, True, True, x, yhat, iou, None)
    elif first:
        _upper_edges(s, en, e, upper, a0, beta, True, False, x, yhat, iou, None)
    else:
        _upper_edges(s, en, e, upper, a0, beta, False, False, x, yhat, iou, None)
    for q in range(nexc):
        ue = _U(exc_idx[_U(q)])
        iou[ue] = yhat[ue] + exc_val[_U(q)]  # o = y + p, as the loop computes it


@numba.njit(cache=True, nogil=True, inline="always")
def _run_transfers(s, a, b, e, nu, lower, edge_delta, iou, loads, out, owe, shortbuf, found):
    """Loop (2a) and the short-row scan of :func:`sos_iou_stencil` for the rows ``a .. b - 1`` of a run.

    ``s`` and ``e`` are the run's first row and first upper edge. Short rows are appended to
    ``shortbuf`` from ``found`` on. Returns ``(moved,
    found, run_big)``, ``run_big`` the largest ``|o - trunc(o)|`` of the rows' upper edges as a
    bit pattern (a NaN shows as a pattern at or above :data:`_INF_BITS`).
    """
    nl = len(lower)
    moved = 0
    run_big = 0
    for i in range(a, b):
        ui = _U(i)
        eb = e + nu * (i - s)
        owed = 0.0
        delta = 0.0
        for k in range(nl):
            t = np.trunc(iou[_U(eb + edge_delta[k])])
            owed += max(-t, 0.0)
            delta += t
        for k in range(nu):
            o = iou[_U(eb + k)]
            t = np.trunc(o)
            owed += max(t, 0.0)
            delta -= t
            run_big = max(run_big, _float_bits(abs(o - t)))
        held = loads[ui]
        moved += np.int64(owed)
        owe[ui] = owed
        out[ui] += held + np.int64(delta)
    for i in range(a, b):
        shortbuf[_U(found)] = i  # kept only if short: no branch to mispredict
        found += owe[_U(i)] > loads[_U(i)]
    return moved, found, run_big


@numba.njit(cache=True, nogil=True, inline="always")
def _largest(run_big, iou, lo, hi, biggest):
    """``biggest`` raised to the run's largest ``|o - trunc(o)|`` (edges ``lo .. hi - 1``), NaNs never picked."""
    if run_big >= _INF_BITS:
        for ee in range(lo, hi):
            o = iou[_U(ee)]
            rr = abs(o - np.trunc(o))
            if rr > biggest:
                biggest = rr
    elif _bits_float(run_big) > biggest:
        biggest = _bits_float(run_big)
    return biggest


@numba.njit(cache=True, nogil=True)
def sos_iou_stencil(indptr, indices, csr_edges, starts, ends, lower, upper, edge_delta, a0, beta, first, owed_stored,
                    has_exc, exc_bits, pay_iou, x, loads, yhat, iou, out, owe):
    """:func:`sos_iou_step` (``COEF_SCALAR``) over a stencil's runs; the same results.

    Rows between the runs are the CSR rows of :func:`_sos_iou_pass`; edge ids in a run are
    computed as in :func:`sos_real_stencil`. A run takes three loops:

    1. every row's upper edges: ``yhat``, the amount owed ``o`` (stored in ``iou``;
       :func:`_upper_edges`); they depend on no other row of this step. The run's old
       exceptions are saved before (:func:`_save_exceptions`) and their ``o`` recomputed after,
       and their bits are then cleared as a range (each edge is read once, here, and no row has
       set a new bit on them);
    (2a) every row's transfers ``trunc(o)`` of its lower and upper edges, what it owes (``owe``)
       and its load before payments, and the largest ``|o - trunc(o)|`` as an integer max of
       the bit patterns (for floats >= 0 the order of the float comparisons; an integer max
       vectorises, a float max does not); a NaN (an infinite ``o``) falls back to the float
       comparisons, which never pick one;
    (2b) the short rows (found by a scan), in node order, pay (:func:`_iou_settle_run`: a row
       after it in the run has read the edge already, so the correction differs, see there); in a
       run where more than one row in :data:`_DENSE_SHORT` is short, all of them at once, in
       branch-free passes by edges (:func:`_pay_run`; late in a long run most rows are short).

    ``moved``, the loads and the outflows are integer-valued sums (the same in any order); the
    IOUs, exception bits, units and largest IOU are the same bits as the one-loop pass's.
    """
    n = loads.shape[0]
    bm1 = beta - 1.0
    moved = 0
    short = 0
    biggest = 0.0
    units = 0.0
    exc_big = 0.0
    any_exc = False
    e = 0
    nr = starts.shape[0]
    nu = len(upper)
    longest = 0
    for r in range(nr):
        longest = max(longest, ends[r] - starts[r])
    shortbuf = np.empty(longest, np.int64)
    exc_idx = np.empty(longest * nu, np.int64)  # a run's old exceptions: edge ids and IOUs
    # (and _pay_run's scratch: len(upper) + 2 len(lower) values per row)
    exc_val = np.empty(longest * (nu + 2 * len(lower)))
    prev = 0
    for r in range(nr + 1):
        stop = starts[r] if r < nr else n
        for i in range(prev, stop):
            ui = _U(i)
            xi = np.float64(x[ui])
            k0 = indptr[ui]
            end = indptr[ui + _U(1)]
            owed = 0.0
            delta = 0
            k = k0
            while k < end:
                le = csr_edges[_U(k)]
                if le >= e:
                    break
                t = np.trunc(iou[_U(le)])
                owed += max(-t, 0.0)
                delta += np.int64(t)
                k += 1
            mid = k
            e0 = e
            for kk in range(mid, end):
                ue = _U(e)
                f = a0 * (xi - np.float64(x[_U(indices[_U(kk)])]))
                y = f if first else beta * f + bm1 * yhat[ue]
                yhat[ue] = y
                p = iou[ue]
                if has_exc and (exc_bits[_U(e >> 3)] >> (e & 7)) & 1:
                    exc_bits[_U(e >> 3)] &= np.uint8(255 - (1 << (e & 7)))
                elif owed_stored:
                    p = p - np.trunc(p)
                o = y + p
                iou[ue] = o
                t = np.trunc(o)
                owed += max(t, 0.0)
                delta -= np.int64(t)
                rr = abs(o - t)
                if rr > biggest:
                    biggest = rr
                e += 1
            held = loads[ui]
            moved += np.int64(owed)
            if owed > held:
                short += 1
                if pay_iou:
                    owed, dd, dm, units, exc_big = _iou_settle(indices, csr_edges, k0, mid, end, e0, held, owed, iou,
                                                               exc_bits, out, units, exc_big)
                    delta += dd
                    moved += dm
                    any_exc = True
            owe[ui] = owed
            out[ui] += held + delta
        if r == nr:
            break
        s = starts[r]
        en = ends[r]
        # (1) Upper edges: yhat, the amount owed o (kept in iou), old exception bits consumed.
        hi = e + nu * (en - s)
        _run_upper(s, en, e, upper, a0, beta, first, owed_stored, has_exc, exc_bits, x, yhat, iou, exc_idx, exc_val)
        if has_exc:
            # Every old bit of the run's upper edges is consumed (each edge is read once, above,
            # and no row has set a new bit on them yet): clear the range a byte at a time instead
            # of a read-modify-write per edge in the loop above (which then vectorises). Bits of
            # other edges in the two end bytes are kept.
            _clear_bits(exc_bits, e, hi)
        # (2a) Every row's transfers, what it owes, its load before payments (integer-valued
        # float sums: exact, as ``owed``; converting each transfer to int64 was slower). The
        # largest |o - trunc(o)| of the upper edges as an integer max of the bit patterns: for
        # floats >= 0 the same order as the float comparisons, and an integer max vectorises (a
        # float max does not; in loop (1) it made that loop 1.7x slower). Then the short rows,
        # found by a scan: a call inside the scan loop made the whole run 1.5-2x slower
        # (measured), outside it only short rows pay for it.
        mv, found, run_big = _run_transfers(s, s, en, e, nu, lower, edge_delta, iou, loads, out, owe, shortbuf, 0)
        moved += mv
        biggest = _largest(run_big, iou, e, hi, biggest)
        # (2b) Short rows pay (a call: inlined, the two ways of paying made the loops above about
        # 1 ns per edge slower, even in steps that take neither).
        short += found
        if pay_iou and found:
            dm, units, exc_big = _pay_short_rows(s, en, e, found, shortbuf, lower, upper, edge_delta, loads, owe, iou,
                                                 exc_bits, out, units, exc_big, exc_idx, exc_val)
            moved += dm
            any_exc = True
        e += nu * (en - s)
        prev = en
    if not any_exc:
        return moved, short, 0.0, biggest, False
    return moved, short, units, exc_big, True
