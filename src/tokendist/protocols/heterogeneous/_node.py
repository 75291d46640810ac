"""Per-node rules of ``sos`` and ``sos-iou`` (Elsässer, Monien, Schamberger 2006, Sec. 2 eq. (4), Sec. 3).

What one node i does in step k, given its own state (``view.memory``) and what its neighbours
published this step (``view.received[0]``: ``(w_j / s_j, d_j)`` per live neighbour j, the same
message as ``fos``):

1. FOS flow out of i on each edge: ``f_ij = c_ij (x_i - x_j)``, ``x = w / s``,
   ``c_ij = cap_ij / (c max(d_i, d_j))``;
2. SOS flow (eq. (4) in flow form): ``y_ij = f_ij`` in the first step, else
   ``y_ij = beta f_ij + (beta - 1) yhat_ij`` with ``yhat_ij`` the edge's previous SOS flow as i
   sees it (0 on an edge that is new this step);
3. ``sos``: send ``y_ij`` to every neighbour where it is positive; remember ``yhat_ij = y_ij``.
4. ``sos-iou``: first settle last step's accounts: ``IOU_ij = o_ij - (sent_ij - got_ij)``, with
   ``o_ij`` what was owed on the edge last step, ``sent_ij`` the tokens i sent and ``got_ij`` the
   tokens that arrived from j (``view.delivered``: only they tell i what j paid, j may pay less
   than it owed). Then ``o_ij = y_ij + IOU_ij`` and ``t_ij = trunc(o_ij)``; i sends on every edge
   with ``t_ij > 0``. If these add up to ``T_i > w_i`` (and ``overdraw=iou``), i pays each of them
   ``floor(t_ij w_i / T_i)`` instead (exact while ``t_ij w_i < 2**53``); what it did not pay
   stays owed through the IOU.

Orientation: node i keeps every per-edge value as seen from i (flow out of i positive), so its
neighbour j holds the negation. The kernels compute each edge once from its lower endpoint u;
the upper endpoint's operations are the same ones on negated operands (``x_v - x_u``,
``beta (-f)``, ``(-a) + (-b)``, ``trunc(-o)``), which IEEE rounding-to-nearest negates exactly,
so both ends hold the kernel's values bit for bit (the conformance suite checks the traces).

Dynamic graphs: the live neighbours of a step are those i heard from (``view.received[0]``);
the state of any other neighbour is dropped, as the kernels drop the state of an edge that
disappears (an edge that comes back starts with ``yhat = IOU = 0``).
"""

from __future__ import annotations

import math

__all__ = ["fos_node_flows", "sos_node_flows", "sos_iou_node_sends", "node_publish", "shadow_publish"]


def _degree(protocol, node, view) -> float:
    """``d_i`` as the kernels take it on the step's graph, from what ``node`` knows locally.

    ``adapt_degrees`` (default): the number of live neighbours (``view.neighbours``, the step's
    graph), or with capacities their weighted sum added as ``node_degrees`` adds it
    (``bincount(u) + bincount(v)``: the upper neighbours in order, then the lower ones, same bits).
    Otherwise the base graph's degree.
    """
    base = protocol._base
    if not protocol.options["adapt_degrees"]:
        return float(protocol._base_deg()[node])
    nbrs = sorted(int(j) for j in view.neighbours)
    if base.capacities is None:
        return float(len(nbrs))
    up = low = 0.0
    for j in nbrs:
        cap = float(base.capacities[base.edge_index(node, j)])
        if j > node:
            up += cap
        else:
            low += cap
    return up + low


def node_publish(protocol, node, view):
    """The one message of a step: ``(w_i / s_i, d_i)``."""
    return (view.load / protocol._s[node], _degree(protocol, node, view))


def shadow_publish(protocol, node, view):
    """``sos-iou`` with ``ideal=shadow``: the message ``(w'_i / s_i, d_i)`` of the node's shadow load.

    First gives back to the shadow the IOU of every edge that is gone this step (a neighbour of last
    step that is not a neighbour now), in ascending order of the neighbour, as
    :func:`._heterogeneous_sos_readings.fold_dropped_ious` does for the whole graph.
    """
    mem = view.memory
    if "shadow" not in mem:
        mem["shadow"] = float(view.load)  # w'^0 = w^0
    live = {int(j) for j in view.neighbours}
    owed = mem.get("owed", {})
    for j in sorted(owed):
        if j not in live:
            mem["shadow"] += _settle(mem, view, j)
            del owed[j]
    return (mem["shadow"] / protocol._s[node], _degree(protocol, node, view))


def _settle(mem, view, j) -> float:
    """Last step's IOU on the edge to ``j``: what was owed minus the net tokens that went out on it.

    ``o - t`` exactly when paid in full (``o - trunc(o)`` is exact); ``got``: the tokens that
    arrived from j (``view.delivered``), which alone tell i what j paid.
    """
    return mem["owed"][j] - float(mem.get("sent", {}).get(j, 0) - view.delivered.get(j, 0))


def _fos_out(protocol, node, view, x_i=None):
    """``{j: (f_ij, live)}``: the FOS flow out of ``node`` to each neighbour it heard from this step.

    The same expression as the kernels' ``c_e (x_u - x_v)`` (negated at the upper endpoint, which
    IEEE arithmetic does exactly); ``fos`` and ``fos-floor`` send its positive entries. ``x_i``:
    the node's own published value when it is not ``w_i / s_i`` (``sos-iou``, ``ideal=shadow``).
    """
    pub_x, d_i = node_publish(protocol, node, view)
    x_i = pub_x if x_i is None else x_i
    c = protocol.options["c"]
    base = protocol._base
    out = {}
    for j in sorted(view.received[0]):
        x_j, d_j = view.received[0][j]
        cap = 1.0 if base.capacities is None else float(base.capacities[base.edge_index(node, j)])
        out[j] = cap / (c * max(d_i, d_j)) * (x_i - x_j)
    return out


fos_node_flows = _fos_out


def _sos_out(protocol, node, view, f):
    """This step's SOS flow out of ``node`` per live neighbour; drops the state of absent ones."""
    mem = view.memory
    first = mem.get("k", 0) == 0
    prev = mem.get("yhat", {})
    beta = protocol.beta
    bm1 = beta - 1.0  # as the kernels compute it
    y = {j: fj if first else beta * fj + bm1 * prev.get(j, 0.0) for j, fj in f.items()}
    mem["yhat"] = y  # neighbours not heard from this step are forgotten (edge gone)
    mem["k"] = mem.get("k", 0) + 1
    return y


def sos_node_flows(protocol, node, view) -> dict:
    """``sos``: the real amounts ``node`` sends this step, ``{j: y_ij}`` for ``y_ij > 0``."""
    y = _sos_out(protocol, node, view, _fos_out(protocol, node, view))
    return {j: yj for j, yj in y.items() if yj > 0}


def sos_iou_node_sends(protocol, node, view) -> dict:
    """``sos-iou``: the tokens ``node`` sends this step, ``{j: count}``; updates its IOU accounts.

    The flow ``y_ij`` per reading (:mod:`._heterogeneous_sos_readings`): ``shadow`` from the
    published shadow values (``shadow_publish``), then ``w'_i`` loses ``sum_j y_ij``; ``sent`` with
    last step's net tokens on the edge as the momentum; ``driven`` as ``sos``.
    """
    mem = view.memory
    ideal = protocol.options["ideal"]
    owed_prev = mem.get("owed", {})
    sent_prev = mem.get("sent", {})
    x_i = mem["shadow"] / protocol._s[node] if ideal == "shadow" else None
    f = _fos_out(protocol, node, view, x_i)
    if ideal == "sent" and mem.get("k", 0):
        # Momentum on the tokens that crossed the edge last step (0 on an edge new this step).
        mem["yhat"] = {j: float(sent_prev.get(j, 0) - view.delivered.get(j, 0)) for j in owed_prev}
    y = _sos_out(protocol, node, view, f)
    owed, trunc = {}, {}
    for j, yj in y.items():
        # Total ideal minus total real flow (0 on the first step or on an edge new this step).
        iou = _settle(mem, view, j) if j in owed_prev else 0.0
        o = yj + iou
        owed[j] = o
        trunc[j] = math.trunc(o)
    sends = {j: t for j, t in trunc.items() if t > 0}
    total = sum(sends.values())
    if total > view.load and protocol.options["overdraw"] == "iou":
        # Short: pay every outgoing edge in proportion, rounded down (the kernel's operations).
        sends = {j: int(math.floor((float(t) * float(view.load)) / float(total))) for j, t in sends.items()}
    if ideal == "shadow":
        # w' - div y, summed as numpy's bincount sums the reference's edge flows: the edges where i
        # is the lower end (neighbours above i, ascending) and those where it is the upper end.
        up = low = 0.0
        for j in sorted(y):
            if j > node:
                up += y[j]
            else:
                low += -y[j]
        mem["shadow"] = mem["shadow"] + (low - up)
    mem["owed"] = owed
    mem["sent"] = sends
    return {j: t for j, t in sends.items() if t > 0}
