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

from ._common import COEF_EDGE, COEF_NODE, COEF_SCALAR, _U

__all__ = ["fos_real_step", "fos_floor_step", "sos_real_step", "sos_iou_step", "node_alpha_sums",
           "COEF_SCALAR", "COEF_NODE", "COEF_EDGE"]

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
