"""Partitioned steps of dimension exchange (``--backend mpi``; :mod:`tokendist.engine.mpi`).

Every rank builds the same schedule (the colouring, and the spanning tree of the tree protocols,
are deterministic functions of the whole graph and the parameters). At step t the active colour
class is a matching (Houle, Symvonis, Wood 2004, Sec. 1.1): each of its edges decides from its two
ends' loads alone. A rank keeps, per colour, the active edges with at least one end it owns; the
other end is a neighbour in the graph (a spanning tree's edges are graph edges), so a ghost whose
load the halo exchange provides. Both ranks of a cut edge decide it the same; each applies the
token to its own end. Integer rules: the owned loads are the single-process ones exactly.

``discrepancy1`` also reads ``localMax``, which a node updates from its own load alone, so each
rank keeps it for its ghosts as well; its bookkeeping (cycle discrepancies, when each node would
stop) is measured with reductions over the ranks and gathered on rank 0 at the end.
"""

from __future__ import annotations

import numpy as np

from ...engine import Step
from .kernels._serial import THRESHOLD1, THRESHOLD1_PLUS, THRESHOLD2

__all__ = ["de_setup", "de_step", "threshold2_is_stable", "tree_is_stable", "d1_setup", "d1_step", "d1_is_stable",
           "d1_state_key", "d1_finish"]


def de_setup(self, part):
    """Per colour, the active edges with an owned end, as local endpoint ids."""
    s = self.sched
    owned = np.zeros(part.global_graph.n, dtype=bool)
    owned[part.owned_global] = True
    nodes = part.nodes
    self._part_colours = []
    for c in range(s.chi):
        e = s.eid[s.offsets[c]:s.offsets[c + 1]]
        a, b = s.run_u[e].astype(np.int64), s.run_v[e].astype(np.int64)
        keep = owned[a] | owned[b]
        self._part_colours.append((np.searchsorted(nodes, a[keep]), np.searchsorted(nodes, b[keep]),
                                   2 * int(e.size)))
    # Every schedule edge with an owned end (the stability test of the tree protocols).
    e = s.eid
    a, b = s.run_u[e].astype(np.int64), s.run_v[e].astype(np.int64)
    keep = owned[a] | owned[b]
    self._part_tree = (np.searchsorted(nodes, a[keep]), np.searchsorted(nodes, b[keep]))


def _signs(rule, wa, wb, lm_a=None, lm_b=None):
    d = wa - wb
    if rule == THRESHOLD2:
        return (d >= 2).astype(np.int64) - (d <= -2)
    if rule == THRESHOLD1:
        return (d >= 1).astype(np.int64) - (d <= -1)
    # THRESHOLD-1 PLUS (Sec. 5): a difference-1 edge sends only from a node below its localMax.
    return (d >= 2).astype(np.int64) - (d <= -2) + ((d == 1) & (wa != lm_a)) - ((d == -1) & (wb != lm_b))


def de_step(self, t, part, loads):
    """The active colour's edges at this rank (``colour_step_numpy``'s rule); the owned ends exact."""
    a, b, messages = self._part_colours[self.sched.colour_at(t)]
    s = _signs(self._rule(t, loads), loads[a], loads[b])
    new = np.array(loads, dtype=np.int64, copy=True)
    new[a] -= s  # a matching: no index repeats within one colour
    new[b] += s
    out = np.zeros(new.size, dtype=np.int64)
    out[a] = np.maximum(s, 0)
    out[b] = np.maximum(-s, 0)
    return Step(new, messages=messages, outflow=out)


def threshold2_is_stable(self, part, loads):
    """Lemma 4 over the ranks: every edge of the graph has discrepancy at most 1."""
    g = part.graph
    return part.allreduce(bool(g.m == 0 or np.abs(loads[g.u] - loads[g.v]).max() <= 1), "and")


def tree_is_stable(self, part, loads):
    """THRESHOLD-1 over the ranks: every schedule edge has equal ends."""
    a, b = self._part_tree
    return part.allreduce(bool(np.all(loads[a] == loads[b])), "and")


# ---------------------------------------------------------------------------------------------- discrepancy1
_NODE_STATE = ("lm", "same", "pending", "halted", "stop_step", "stop_discrepancy")


def d1_setup(self, part):
    """``de_setup``, and ``Discrepancy1``'s per-node bookkeeping for the local nodes (ghosts too)."""
    de_setup(self, part)
    for name in _NODE_STATE:
        setattr(self, f"_p_{name}", np.array(getattr(self, name)[part.nodes]))
    self._p_prev = None


def _discrepancy(part, loads) -> int:
    """max - min of the loads over the ranks (collective)."""
    own = np.asarray(loads)[part.owned]
    big = np.iinfo(np.int64).max
    hi, neg_lo = part.allreduce_array(np.array([own.max(initial=-big), -own.min(initial=big)], dtype=np.int64), "max")
    return int(hi + neg_lo)


def d1_step(self, t, part, loads):
    """``Discrepancy1.step`` on a rank's part: localMax of the local nodes, discrepancies reduced over the ranks."""
    pos = t % self.L
    loads = np.asarray(loads, dtype=np.int64)
    if pos == 0:  # Discrepancy1._advance at a cycle's start
        disc = _discrepancy(part, loads)
        if t > 0:
            self.cycles[-1]["end_discrepancy"] = disc
            stopping = self._p_pending & (self._p_stop_step < 0)
            self._p_stop_step[stopping] = t
            self._p_stop_discrepancy[stopping] = disc
            self._p_pending[:] = False
            if self.options["termination"] == "halt":
                self._p_halted |= stopping
        self.cycles.append({"cycle": t // self.L, "start_step": t, "start_discrepancy": disc})
        self._p_lm = loads.copy()
    elif pos <= self.A:
        np.maximum(self._p_lm, loads, out=self._p_lm)
    a, b, messages = self._part_colours[self.sched.colour_at(t)]
    rule = THRESHOLD1 if pos < self.A else THRESHOLD1_PLUS
    s = _signs(rule, loads[a], loads[b], self._p_lm[a], self._p_lm[b])
    halted = self._p_halted
    s = np.where(halted[a] | halted[b], 0, s)
    new = loads.copy()
    new[a] -= s
    new[b] += s
    out = np.zeros(new.size, dtype=np.int64)
    out[a] = np.maximum(s, 0)
    out[b] = np.maximum(-s, 0)
    if pos == self.A:  # Discrepancy1._after: the B-phase starts
        self.cycles[-1]["b_start_discrepancy"] = _discrepancy(part, loads)
        if part.global_graph.n <= 64:
            full = part.gather_nodes(self._p_lm)
            if full is not None:
                self.cycles[-1]["local_max"] = full.tolist()
        if self._p_prev is not None:
            k = self.options["stop_cycles"] - 1
            self._p_same = np.where(self._p_lm == self._p_prev, np.minimum(self._p_same + 1, k), 0)
            self._p_pending = self._p_same >= k
        self._p_prev = self._p_lm.copy()
    self._next = t + 1
    return Step(new, messages=messages, outflow=out)


def d1_is_stable(self, part, loads):
    """``Discrepancy1.is_stable`` over the ranks: no schedule edge between unequal, unhalted ends."""
    a, b = self._part_tree
    halted = self._p_halted
    return part.allreduce(bool(not np.any((loads[a] != loads[b]) & ~(halted[a] | halted[b]))), "and")


def _gather_flags(part, flags):
    full = part.gather_nodes(flags.view(np.uint8))
    return None if full is None else full.view(bool)


def d1_state_key(self, part):
    """``Discrepancy1.state_key`` from the node arrays gathered on rank 0; collective."""
    lm, same = part.gather_nodes(self._p_lm), part.gather_nodes(self._p_same)
    prev = None if self._p_prev is None else part.gather_nodes(self._p_prev)
    halted, pending = _gather_flags(part, self._p_halted), _gather_flags(part, self._p_pending)
    if lm is None:
        return None
    return (np.int64(self._next % self.L).tobytes() + lm.tobytes() + (b"" if prev is None else prev.tobytes())
            + same.tobytes() + halted.tobytes() + pending.tobytes())


def d1_finish(self, part):
    """The per-node bookkeeping on rank 0 in global order (``report()``: when each node would stop)."""
    full = {name: part.gather_nodes(getattr(self, f"_p_{name}")) for name in ("lm", "same", "stop_step",
                                                                               "stop_discrepancy")}
    full["pending"] = _gather_flags(part, self._p_pending)
    full["halted"] = _gather_flags(part, self._p_halted)
    prev = None if self._p_prev is None else part.gather_nodes(self._p_prev)
    if part.rank == 0:
        for name, values in full.items():
            setattr(self, name, values)
        self.prev_lm = prev
        self._any_halted = bool(self.halted.any())
