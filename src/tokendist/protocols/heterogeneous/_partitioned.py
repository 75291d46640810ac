"""Partitioned steps of ``sos`` and ``sos-iou`` (``--backend mpi``; :mod:`tokendist.engine.mpi`).

Both schemes keep a flow per edge (SOS's momentum ``y^{k-1}``, Elsässer, Monien, Schamberger
2006, eq. (4) in flow form) and ``sos-iou`` an IOU per edge (Sec. 3). A rank keeps that state on
every edge of its local graph, the cut edges included: both ranks of a cut edge hold the loads of
both its ends (the ghost exchange) and the same previous state, so they compute the same new
state, and the edge's state never travels.

* ``sos``: the serial CSR kernel :func:`~.kernels._serial.sos_real_step` on the local graph. It
  computes each edge's flow once, from its lower end, and an owned node's row lists the same
  neighbours in the same order as the whole graph's: the owned loads and outflows are the
  single-process kernel's, bit for bit.
* ``sos-iou``: the rule of the numpy reference step (``SOSIOU.step`` with ``kernel=numpy``, which
  the numba kernels equal bit for bit), in two phases, because a node that owes more than it
  holds pays every edge in proportion to its total ``T_i`` (``overdraw=iou``), a sum over its
  whole row: each rank sums ``T_i`` for its own nodes, a second exchange gives it ``T_i`` of its
  ghosts, then both ranks of a cut edge pay it the same. With ``ideal=shadow`` the shadow loads
  ``w'`` are exchanged as the loads are.

The figures of ``report()`` that the single process sums over all edges or steps (IOU units per
step, negative-load events, the largest IOU) are kept per rank over the edges and nodes it counts
and reduced once at the end (:func:`sos_iou_finish`), when the IOUs, flows and shadow loads are
gathered on rank 0 in global order.
"""

from __future__ import annotations

import numpy as np

from ...engine import Step
from .kernels._serial import sos_real_step
from ._sos_readings import shadow_update

__all__ = ["partitioned_coefs", "sos_setup", "sos_step", "sos_is_stable", "sos_state_key", "sos_iou_setup",
           "sos_iou_step", "sos_iou_state_key", "sos_iou_finish"]


def partitioned_coefs(protocol, part):
    """``(mode, a0, inv, alpha, s)`` of a rank's local graph for the serial CSR kernels.

    The whole graph's coefficients restricted to the local nodes and edges: ``inv`` per local
    node, ``alpha`` per local edge (capacities), ``s`` the local nodes' scaled speeds.
    """
    mode, a0, inv, alpha = protocol._kernel_coefs(part.global_graph)
    inv = inv[part.nodes] if inv.size else inv
    alpha = np.ascontiguousarray(alpha[part.edges]) if alpha.size else alpha
    s = np.ones(part.nodes.size) if protocol._unit else np.ascontiguousarray(protocol._s[part.nodes])
    return mode, a0, np.ascontiguousarray(inv), alpha, s


def _balanced(part, x) -> bool:
    """``ptp(x) <= 1e-12 max(1, max |x|)`` over the owned nodes of every rank (collective)."""
    x = x[part.owned]
    hi, lo, top = part.allreduce_array(np.array([x.max(initial=-np.inf), -x.min(initial=np.inf),
                                                 np.abs(x).max(initial=0.0)]), "max")
    return bool(hi - (-lo) <= 1e-12 * max(1.0, float(top)))


# ---------------------------------------------------------------------------------------------- sos
def sos_setup(self, part):
    self._part_coefs = partitioned_coefs(self, part)
    self._part_flow = None  # y^{k-1} per local edge (None before the first step)


def sos_step(self, t, part, loads):
    """One SOS step on a rank's local graph; the owned entries of the result are the kernel's."""
    g = part.graph
    loads = np.ascontiguousarray(loads, dtype=np.float64)
    mode, a0, inv, alpha, s = self._part_coefs
    if self._part_flow is None:
        self._part_flow = np.zeros(g.m)
    out, outflow = np.empty(g.n), np.empty(g.n)
    x = loads if self._unit else loads / s
    sos_real_step(g.indptr, g.indices, g.csr_edges, mode, a0, inv, alpha, self.beta, self._k == 0, x, loads,
                  self._part_flow, out, outflow)
    self._k += 1
    return Step(out, messages=2 * part.global_graph.m, outflow=outflow)


def sos_is_stable(self, part, loads):
    """``SOS.is_stable`` over the ranks: balanced, and every edge's last flow below 1e-12."""
    flow = self._part_flow
    big = float(np.abs(flow[part.edge_owned]).max(initial=0.0)) if flow is not None else 0.0
    still = part.allreduce(big, "max") < 1e-12
    return _balanced(part, loads if self._unit else loads / self._part_coefs[4]) and still


def sos_state_key(self, part):
    """``SOS.state_key`` (the flows in global edge order) on rank 0; collective."""
    if self._part_flow is None:
        return b""
    full = part.gather_edges(self._part_flow)
    return None if full is None else full.tobytes()


# ---------------------------------------------------------------------------------------------- sos-iou
def sos_iou_setup(self, part):
    g = part.graph
    # The whole graph's c_e on the local edges (the reference's edge_coefficients, the same bits
    # as the kernels' min(1/(c d_u), 1/(c d_v))).
    self._part_alpha = np.ascontiguousarray(self._alpha(part.global_graph)[part.edges])
    self._part_s = np.ones(part.nodes.size) if self._unit else np.ascontiguousarray(self._s[part.nodes])
    self._part_prev = np.zeros(g.m)
    self._part_iou = np.zeros(g.m)
    self._part_shadow = None if self._shadow is None else np.ascontiguousarray(self._shadow[part.nodes])
    self._part_short = []  # short owned nodes per step (reduced at the end)
    self._part_units = []  # sum of floor(|IOU|) over the counted edges per step
    self._part_max = 0.0


def sos_iou_step(self, t, part, loads):
    """One ``sos-iou`` step on a rank's local graph: the reference rule, paid in two phases."""
    g = part.graph
    ideal = self.options["ideal"]
    src = self._part_shadow if ideal == "shadow" else loads
    x = src / self._part_s
    f = self._part_alpha * (x[g.u] - x[g.v])
    y = f if self._k == 0 else self.beta * f + (self.beta - 1.0) * self._part_prev
    self._k += 1
    owed = y + self._part_iou
    send = np.trunc(owed)
    out = (np.bincount(g.u, weights=np.maximum(send, 0), minlength=g.n)
           + np.bincount(g.v, weights=np.maximum(-send, 0), minlength=g.n))
    short = out > loads  # right for the owned nodes, whose rows are whole
    self._part_short.append(int(np.count_nonzero(short[part.owned])))
    if self.options["overdraw"] == "iou" and part.allreduce(bool(short[part.owned].any()), "or"):
        part.exchange(out)  # T_i of the ghosts from their owners: both ends of a cut edge pay the same
        short = out > loads
        sender = np.where(send > 0, g.u, g.v)
        pays = short[sender]
        prop = np.floor((np.abs(send) * loads[sender]) / np.where(pays, out[sender], 1.0))
        send = np.where(pays, np.sign(send) * prop, send)
    self._part_iou = owed - send
    self._part_prev = send.astype(np.float64) if ideal == "sent" else y
    if ideal == "shadow":
        shadow_update(g.u, g.v, y, self._part_shadow)
        part.exchange(self._part_shadow)  # the ghosts' rows are partial: their owners' values
    iou = self._part_iou
    self._part_units.append(float(np.floor(np.abs(iou[part.edge_owned])).sum()))
    if iou.size:
        self._part_max = max(self._part_max, float(np.abs(iou).max()))
    send = send.astype(np.int64)
    new = loads - np.bincount(g.u, weights=send, minlength=g.n).astype(np.int64) \
        + np.bincount(g.v, weights=send, minlength=g.n).astype(np.int64)
    outflow = (np.bincount(g.u, weights=np.maximum(send, 0), minlength=g.n)
               + np.bincount(g.v, weights=np.maximum(-send, 0), minlength=g.n)).astype(np.int64)
    return Step(new, messages=2 * part.global_graph.m, outflow=outflow)


def sos_iou_is_stable(self, part, loads):
    """The single process has no stability test for ``sos-iou`` (the IOUs keep moving)."""
    return False


def sos_iou_state_key(self, part):
    """``SOSIOU.state_key`` (flows, IOUs, shadow loads) on rank 0; collective."""
    if self._k == 0:
        return b""
    prev, iou = part.gather_edges(self._part_prev), part.gather_edges(self._part_iou)
    shadow = None if self._part_shadow is None else part.gather_nodes(self._part_shadow)
    if prev is None:
        return None
    key = prev.tobytes() + iou.tobytes()
    return key if shadow is None else key + shadow.tobytes()


def sos_iou_finish(self, part):
    """The run's IOUs, flows and shadow loads on rank 0 in global order, the counters reduced: ``report()``."""
    prev, iou = part.gather_edges(self._part_prev), part.gather_edges(self._part_iou)
    shadow = None if self._part_shadow is None else part.gather_nodes(self._part_shadow)
    short = part.allreduce_array(np.array(self._part_short, dtype=np.int64), "sum")
    units = part.allreduce_array(np.array(self._part_units, dtype=np.float64), "sum")
    self.iou_max = max(self.iou_max, float(part.allreduce(self._part_max, "max")))
    self.events += int(short.sum())
    self.event_steps += int(np.count_nonzero(short))
    self.iou_series.extend(units.tolist())
    self.path = "numpy"
    if part.rank == 0 and self._k:
        self._prev, self._iou = prev, iou
        if shadow is not None:
            self._shadow = shadow
