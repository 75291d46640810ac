"""Fused numba steps of FOS, integer FOS, SOS and integer SOS with IOUs (Elsässer, Monien, Schamberger 2006).

Each kernel does in one pass what the numpy reference in :mod:`._heterogeneous` does with edge
gathers and ``np.bincount``: the weighted loads ``x = w / s``, the edge flows of eq. (3) / eq. (4),
the new loads, and the per-node outflow the engine's feasibility check needs. No per-step
temporaries: the caller passes the output buffers.

Bitwise agreement with the reference. Edges are stored with ``u < v``, sorted, and CSR rows list
their neighbours in increasing order, so in row ``i`` the slots with ``j < i`` are the edges with
``v = i`` in edge order and the slots with ``j > i`` those with ``u = i``. Summing them into two
separate accumulators repeats ``bincount(v, y) - bincount(u, y)`` operation for operation, so the
loads (and outflows) are the same bits. Only the real schemes' ``moved`` (a sum of ``|y|``) is
added in another order than numpy's pairwise sum: equal to about 1e-15 relative.
"""

from __future__ import annotations

import numba
import numpy as np

__all__ = ["fos_real_step", "fos_floor_step", "sos_real_step", "sos_iou_step"]


@numba.njit(cache=True, nogil=True)
def fos_real_step(indptr, indices, coef, s, loads, x, out, outflow):
    """Real FOS, eq. (3), over CSR with per-slot coefficients ``coef``; returns the load moved."""
    n = loads.shape[0]
    for i in range(n):
        x[i] = loads[i] / s[i]
    moved = 0.0
    for i in range(n):
        xi = x[i]
        inn = 0.0
        outs = 0.0
        sent_in = 0.0
        sent_out = 0.0
        for k in range(indptr[i], indptr[i + 1]):
            j = indices[k]
            if j < i:
                y = coef[k] * (x[j] - xi)  # edge (j, i): positive from j to i
                inn += y
                sent_in += max(-y, 0.0)
            else:
                y = coef[k] * (xi - x[j])  # edge (i, j)
                outs += y
                sent_out += max(y, 0.0)
        out[i] = loads[i] + (inn - outs)
        sent = sent_out + sent_in
        outflow[i] = sent
        moved += sent
    return moved


@numba.njit(cache=True, nogil=True)
def fos_floor_step(indptr, indices, coef, s, loads, x, out, outflow):
    """Integer FOS: every edge carries ``trunc`` of its FOS flow; returns the tokens moved."""
    n = loads.shape[0]
    for i in range(n):
        x[i] = loads[i] / s[i]
    moved = 0
    for i in range(n):
        xi = x[i]
        delta = 0
        sent = 0
        for k in range(indptr[i], indptr[i + 1]):
            j = indices[k]
            if j < i:
                y = np.int64(np.trunc(coef[k] * (x[j] - xi)))
                delta += y
                sent += max(-y, 0)
            else:
                y = np.int64(np.trunc(coef[k] * (xi - x[j])))
                delta -= y
                sent += max(y, 0)
        out[i] = loads[i] + delta
        outflow[i] = sent
        moved += sent
    return moved


@numba.njit(cache=True, nogil=True)
def sos_real_step(indptr, indices, csr_edges, coef, s, beta, first, loads, x, flow, out, outflow):
    """Real SOS in flow form: ``y_e = beta F_e(w) + (beta - 1) y_e`` (``y_e = F_e`` when ``first``).

    ``flow`` (indexed by edge) holds the previous step's flows and is overwritten in place: row
    ``i`` computes the flow of its edges to larger neighbours; the edges to smaller neighbours were
    updated earlier in the same pass (serial loop). Returns the load moved.
    """
    n = loads.shape[0]
    bm1 = beta - 1.0
    for i in range(n):
        x[i] = loads[i] / s[i]
    moved = 0.0
    for i in range(n):
        xi = x[i]
        inn = 0.0
        outs = 0.0
        sent_in = 0.0
        sent_out = 0.0
        for k in range(indptr[i], indptr[i + 1]):
            j = indices[k]
            e = csr_edges[k]
            if j < i:
                y = flow[e]
                inn += y
                sent_in += max(-y, 0.0)
            else:
                f = coef[k] * (xi - x[j])
                y = f if first else beta * f + bm1 * flow[e]
                flow[e] = y
                outs += y
                sent_out += max(y, 0.0)
        out[i] = loads[i] + (inn - outs)
        sent = sent_out + sent_in
        outflow[i] = sent
        moved += sent
    return moved


@numba.njit(cache=True, nogil=True)
def sos_iou_step(u, v, alpha, s, beta, first, pay_iou, loads, x, yhat, iou, out, owe, outflow):
    """Integer SOS with IOUs (Sec. 3): one step, edge by edge; updates ``yhat`` and ``iou`` in place.

    Pass 1: ``yhat`` (eq. (4) in flow form), owed ``o = yhat + iou`` (kept in ``iou``), the integer
    transfer ``trunc(o)`` and the tokens each node owes in total (``owe``). Pass 2: a node that owes
    more than it holds pays each edge ``floor(|t| w_i / owe_i)`` when ``pay_iou``; the new IOU is
    ``o - sent``; the loads change by the integer transfers. Returns ``(moved, short_nodes,
    iou_units, iou_max)``; ``outflow`` gets what each node actually sent.
    """
    n = loads.shape[0]
    m = u.shape[0]
    bm1 = beta - 1.0
    for i in range(n):
        x[i] = loads[i] / s[i]
        owe[i] = 0.0
        outflow[i] = 0
        out[i] = loads[i]
    for e in range(m):
        a = u[e]
        b = v[e]
        f = alpha[e] * (x[a] - x[b])
        y = f if first else beta * f + bm1 * yhat[e]
        yhat[e] = y
        o = y + iou[e]
        iou[e] = o
        t = np.trunc(o)
        owe[a] += max(t, 0.0)
        owe[b] += max(-t, 0.0)
    short = 0
    for i in range(n):
        if owe[i] > loads[i]:
            short += 1
    scale = pay_iou and short > 0
    moved = 0
    units = 0.0
    biggest = 0.0
    for e in range(m):
        a = u[e]
        b = v[e]
        o = iou[e]
        t = np.trunc(o)
        if scale:
            sender = a if t > 0 else b
            if t != 0.0 and owe[sender] > loads[sender]:
                t = np.sign(t) * np.floor(np.abs(t) * (loads[sender] / owe[sender]))
        r = o - t
        iou[e] = r
        units += np.floor(np.abs(r))
        biggest = max(biggest, np.abs(r))
        k = np.int64(t)
        out[b] += k
        out[a] -= k
        if k > 0:
            outflow[a] += k
            moved += k
        else:
            outflow[b] -= k
            moved -= k
    return moved, short, units, biggest
