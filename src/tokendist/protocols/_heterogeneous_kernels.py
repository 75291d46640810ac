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

Weighted loads ``x = w / s``: the caller passes ``x = loads`` itself when every speed is 1 (the
division by 1 is exact, so nothing is computed or stored), else a buffer holding ``loads / s``.

Bitwise agreement with the reference. Edges are stored with ``u < v``, sorted, and CSR rows list
their neighbours in increasing order, so in row ``i`` the slots with ``j < i`` are the edges with
``v = i`` in edge order and the slots with ``j > i`` those with ``u = i``, which are the next edges
of the edge list: a running counter over the upper slots is the edge index, no ``csr_edges``
lookup. Summing the two kinds of slot into separate accumulators repeats ``bincount(v, y) -
bincount(u, y)`` operation for operation, so the loads and outflows are the same bits. Only the
real schemes' ``moved`` (a sum of ``|y|``) is added in another order than numpy's pairwise sum:
equal to about 1e-15 relative.
"""

from __future__ import annotations

import numba
import numpy as np

__all__ = ["fos_real_step", "fos_floor_step", "sos_real_step", "sos_iou_step", "node_alpha_sums",
           "COEF_SCALAR", "COEF_NODE", "COEF_EDGE"]

COEF_SCALAR = 0
COEF_NODE = 1
COEF_EDGE = 2


@numba.njit(cache=True, nogil=True, inline="always")
def _coef(mode, a0, inv, alpha, ai, j, e):
    if mode == 0:
        return a0
    if mode == 1:
        return min(ai, inv[j])
    return alpha[e]


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
            a = _coef(mode, a0, inv, alpha, ai, j, csr_edges[k] if mode == 2 else 0)
            if j < i:
                low += a
            else:
                up += a
        total[i] = up + low


@numba.njit(cache=True, nogil=True)
def fos_real_step(indptr, indices, csr_edges, mode, a0, inv, alpha, x, loads, out, outflow):
    """Real FOS, eq. (3): every row computes the flows of all its edges (no scattered writes).

    Returns the load moved.
    """
    n = loads.shape[0]
    moved = 0.0
    for i in range(n):
        xi = x[i]
        ai = inv[i] if mode == 1 else a0
        inn = 0.0
        outs = 0.0
        sent_in = 0.0
        sent_out = 0.0
        for k in range(indptr[i], indptr[i + 1]):
            j = indices[k]
            a = _coef(mode, a0, inv, alpha, ai, j, csr_edges[k] if mode == 2 else 0)
            if j < i:
                y = a * (x[j] - xi)  # edge (j, i): positive from j to i
                inn += y
                sent_in += max(-y, 0.0)
            else:
                y = a * (xi - x[j])  # edge (i, j)
                outs += y
                sent_out += max(y, 0.0)
        out[i] = loads[i] + (inn - outs)
        sent = sent_out + sent_in
        outflow[i] = sent
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
        xi = np.float64(x[i])
        ai = inv[i] if mode == 1 else a0
        delta = 0
        sent = 0
        for k in range(indptr[i], indptr[i + 1]):
            j = indices[k]
            a = _coef(mode, a0, inv, alpha, ai, j, csr_edges[k] if mode == 2 else 0)
            z = np.int64(a * (xi - np.float64(x[j])))  # float -> int truncates towards zero
            delta -= z
            sent += max(z, 0)
        out[i] = loads[i] + delta
        outflow[i] = sent
        moved += sent
    return moved


@numba.njit(cache=True, nogil=True)
def sos_real_step(indptr, indices, mode, a0, inv, alpha, beta, first, x, loads, flow, out, outflow):
    """Real SOS in flow form: ``y_e = beta F_e(w) + (beta - 1) y_e`` (``y_e = F_e`` when ``first``).

    Each edge is computed once, from its lower endpoint ``i``: its index is the running count of
    upper slots, so ``flow`` (indexed by edge, the previous step's flows, overwritten in place) is
    read and written in order. What the upper endpoint ``j`` receives is added into ``out[j]``
    and ``outflow[j]`` (they are complete when row ``j`` is reached: all edges ``(i, j)`` with
    ``i < j`` come first). Returns the load moved.
    """
    n = loads.shape[0]
    bm1 = beta - 1.0
    for i in range(n):
        out[i] = 0.0
        outflow[i] = 0.0
    moved = 0.0
    e = 0
    for i in range(n):
        xi = x[i]
        ai = inv[i] if mode == 1 else a0
        outs = 0.0
        sent_out = 0.0
        for k in range(indptr[i], indptr[i + 1]):
            j = indices[k]
            if j > i:
                f = _coef(mode, a0, inv, alpha, ai, j, e) * (xi - x[j])
                y = f if first else beta * f + bm1 * flow[e]
                flow[e] = y
                e += 1
                outs += y
                sent_out += max(y, 0.0)
                out[j] += y
                outflow[j] += max(-y, 0.0)
        out[i] = loads[i] + (out[i] - outs)
        sent = sent_out + outflow[i]
        outflow[i] = sent
        moved += sent
    return moved


@numba.njit(cache=True, nogil=True)
def sos_iou_step(indptr, indices, mode, a0, inv, alpha, beta, first, pay_iou, x, loads, yhat, iou, out, owe):
    """Integer SOS with IOUs (Sec. 3): one step, each edge from its lower endpoint; updates ``yhat``, ``iou``.

    Pass 1: ``yhat`` (eq. (4) in flow form), owed ``o = yhat + iou`` (kept in ``iou``), the integer
    transfer ``trunc(o)`` and the tokens each node owes in total (``owe``). Pass 2: a node that owes
    more than it holds pays each edge ``floor(|t| w_i / owe_i)`` when ``pay_iou``; the new IOU is
    ``o - sent``; the loads change by the integer transfers. ``owe`` ends as what each node
    actually sent (the outflow): unchanged where nobody is scaled, and the few short nodes' sums
    are kept aside meanwhile (a short node's ``owe`` holds ``-(k + 1)``, ``k`` its place in the
    short list). Sums of integer-valued floats are exact, so their order does not matter.
    Returns ``(moved, short_nodes, iou_units, iou_max)``.
    """
    n = loads.shape[0]
    bm1 = beta - 1.0
    for i in range(n):
        owe[i] = 0.0
        out[i] = loads[i]
    e = 0
    for i in range(n):
        xi = np.float64(x[i])
        ai = inv[i] if mode == 1 else a0
        mine = 0.0
        for k in range(indptr[i], indptr[i + 1]):
            j = indices[k]
            if j > i:
                f = _coef(mode, a0, inv, alpha, ai, j, e) * (xi - np.float64(x[j]))
                y = f if first else beta * f + bm1 * yhat[e]
                yhat[e] = y
                o = y + iou[e]
                iou[e] = o
                t = np.trunc(o)
                mine += max(t, 0.0)
                owe[j] += max(-t, 0.0)
                e += 1
        owe[i] += mine
    short = 0
    for i in range(n):
        if owe[i] > loads[i]:
            short += 1
    scale = pay_iou and short > 0
    nshort = short if scale else 0
    owed_short = np.empty(nshort)
    sent_short = np.zeros(nshort)
    where = np.empty(nshort, dtype=np.int64)
    if scale:
        q = 0
        for i in range(n):
            if owe[i] > loads[i]:
                owed_short[q] = owe[i]
                where[q] = i
                owe[i] = -(q + 1.0)
                q += 1
    moved = 0
    units = 0.0
    biggest = 0.0
    e = 0
    for i in range(n):
        for k in range(indptr[i], indptr[i + 1]):
            j = indices[k]
            if j > i:
                o = iou[e]
                t = np.trunc(o)
                if scale and t != 0.0:
                    sender = i if t > 0 else j
                    if owe[sender] < 0.0:
                        q = np.int64(-owe[sender]) - 1
                        t = np.sign(t) * np.floor(np.abs(t) * (loads[sender] / owed_short[q]))
                        sent_short[q] += np.abs(t)
                r = o - t
                iou[e] = r
                e += 1
                units += np.floor(np.abs(r))
                biggest = max(biggest, np.abs(r))
                kk = np.int64(t)
                out[j] += kk
                out[i] -= kk
                moved += abs(kk)
    for q in range(nshort):
        owe[where[q]] = sent_short[q]
    return moved, short, units, biggest
