"""Which idealised SOS process the IOUs of ``sos-iou`` track (Elsässer, Monien, Schamberger 2006, Sec. 3).

Section 3 defines the IOU of an edge as "the difference between the total flow moved along an
edge in the idealized scheme and in the realistic algorithm", and Theorem 1's proof writes the
integer process as eq. (5), ``w^k = beta M w^{k-1} - (beta - 1) w^{k-2} + delta_{k-1}``. Three
readings of "the idealized scheme" follow; per edge ``e = {u, v}`` and step ``k``, with ``w`` the
integer loads, ``x = w / s``, ``F_e(x) = c_e (x_u - x_v)`` the FOS flow and ``sent_e^k`` the
integer tokens that actually crossed the edge (signed, after any proportional pay-back):

* ``shadow`` (the default; the paper's words and Muthukrishnan, Ghosh, Schultz 1998, whose
  integer schedule "simulates the idealized schedule" of real-valued weights): a real-valued SOS
  process runs alongside on its own divisible loads ``w'`` (``w'^0 = w^0``):
  ``y_e^k = beta F_e(w'^{k-1} / s) + (beta - 1) y_e^{k-1}`` (``y^1 = F(w'^0 / s)``),
  ``w'^k = w'^{k-1} - div y^k`` (eq. (4) in flow form). The integer process sends
  ``trunc(y_e^k + IOU_e^{k-1})``; ``IOU^k = IOU^{k-1} + y^k - sent^k``. Each node keeps its own
  share ``w'_i`` (local). On a dynamic graph an edge that disappears gives its IOU back to the
  shadow loads of its ends (``w'_u += IOU_e``, ``w'_v -= IOU_e``), which keeps
  ``w' = w - div IOU`` (the idealised process never runs ahead of the real one by an IOU that can
  no longer be paid).
* ``sent``: the momentum on the flow actually sent, driven by the integer loads:
  ``y_e^k = beta F_e(x^{k-1}) + (beta - 1) sent_e^{k-1}``; this is eq. (5) on the real loads with
  ``delta`` the change of the IOUs.
* ``driven``: the momentum on the previous *ideal* flow, driven by
  the integer loads: ``y_e^k = beta F_e(x^{k-1}) + (beta - 1) y_e^{k-1}``.

In all three the amount owed is ``o = y + IOU``, the sender transfers ``trunc(o)`` (a short node
pays in proportion, ``overdraw=iou``) and ``IOU = o - sent``.
"""

from __future__ import annotations

import numba
import numpy as np

__all__ = ["IDEAL_READINGS", "fold_dropped_ious", "shadow_update", "shadow_step"]

#: The readings of ``sos-iou``'s ``ideal`` parameter; the first is the default.
IDEAL_READINGS = ("shadow", "sent", "driven")


def fold_dropped_ious(shadow: np.ndarray, prev_graph, prev_iou: np.ndarray, graph) -> float:
    """Give the IOUs of ``prev_graph``'s edges that ``graph`` lacks back to the shadow loads, in place.

    ``shadow[u] += IOU_e`` and ``shadow[v] -= IOU_e`` for each such edge, in edge order: node i
    then adds its dropped edges' IOUs (``IOU_ij``, oriented out of i) in ascending order of the
    neighbour j, which is what its node form does (:func:`._heterogeneous_node.shadow_publish`),
    so both give the same bits. Returns the total absolute IOU given back.
    """
    prev_keys, keys = prev_graph.edge_keys, graph.edge_keys
    if prev_keys.size == 0 or (prev_keys.shape == keys.shape and np.array_equal(prev_keys, keys)):
        return 0.0
    if keys.size:
        pos = np.minimum(np.searchsorted(keys, prev_keys), keys.size - 1)
        gone = np.flatnonzero(keys[pos] != prev_keys)
    else:
        gone = np.arange(prev_keys.size)
    if gone.size == 0:
        return 0.0
    iou = prev_iou[gone]
    at = np.column_stack((prev_graph.u[gone], prev_graph.v[gone])).ravel()
    # np.add.at applies the pairs in order (unbuffered): each node sees its edges in edge order.
    np.add.at(shadow, at, np.column_stack((iou, -iou)).ravel())
    return float(np.abs(iou).sum())


@numba.njit(cache=True, nogil=True)
def shadow_update(u, v, flows, shadow):
    """``shadow + (bincount(v, flows) - bincount(u, flows))`` in place: the shadow's ``w' - div y``.

    The same sums in the same (edge) order as :func:`._heterogeneous_matrix.apply_flows`, so the
    same bits, without its four n-sized temporaries (the numba path of ``ideal=shadow``).
    """
    n = shadow.shape[0]
    up = np.zeros(n)
    low = np.zeros(n)
    for e in range(u.shape[0]):
        up[u[e]] += flows[e]
        low[v[e]] += flows[e]
    for i in range(n):
        shadow[i] = shadow[i] + (low[i] - up[i])


@numba.njit(cache=True, nogil=True)
def shadow_step(u, v, flows, shadow, owed, has_exc, exc_bits, key):
    """:func:`shadow_update`, then ``key = [flows | IOUs | shadow]``: the state ``sos-iou`` hands the
    engine's cycle detection (``SOSIOU.state_key``), written where the engine reads it.

    ``owed`` is the stencil and CSR kernels' per-edge state, the amounts owed ``o``: the IOU is
    ``o - trunc(o)``, or ``o`` itself where the edge's exception bit is set (``exc_bits``, read
    when ``has_exc``), the operations of :func:`._edge_state.actual_ious`, so the same bits. One
    call a step where the shadow update, the IOUs and their concatenation were a call and five
    numpy operations (sos-iou's row of the default compare takes 10,000 steps). An empty ``key``:
    the shadow update only (the engine hashes no state on large graphs; writing it cost torus:1000x1000
    2-3 ns per edge and step).
    """
    shadow_update(u, v, flows, shadow)
    if key.shape[0] == 0:
        return
    m = flows.shape[0]
    for e in range(m):
        key[e] = flows[e]
        o = owed[e]
        if not (has_exc and (exc_bits[e >> 3] >> (e & 7)) & 1):
            o = o - np.trunc(o)
        key[m + e] = o
    key[2 * m:] = shadow
