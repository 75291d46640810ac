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
from .kernels._serial import THRESHOLD1, THRESHOLD2

__all__ = ["de_setup", "de_step", "threshold2_is_stable", "tree_is_stable"]


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


def _signs(rule, wa, wb):
    d = wa - wb
    if rule == THRESHOLD2:
        return (d >= 2).astype(np.int64) - (d <= -2)
    return (d >= 1).astype(np.int64) - (d <= -1)  # THRESHOLD1


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
