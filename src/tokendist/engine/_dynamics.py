"""Network dynamics (PeerSim's *Control*): what changes the network between steps.

A :class:`Dynamics` yields the graph of each step: the base graph with some edges down
(:class:`EdgeFailures`), a user-supplied sequence of graphs (:class:`GraphSequence`), or moving
nodes (random-waypoint mobility, :mod:`tokendist.engine._mobility`). Protocols that declare
``dynamic = True`` accept a different graph every step.
"""

from __future__ import annotations

import numpy as np

from ..errors import TokendistError
from ..registry import Registry

__all__ = ["Dynamics", "EdgeFailures", "GraphSequence", "DYNAMICS", "register_dynamics"]


class Dynamics:
    """Base class: ``reset`` once, then ``graph_at(t)`` for each step t = 0, 1, ..."""

    name = ""

    def reset(self, graph, rng: np.random.Generator) -> None:
        self.base = graph
        self.rng = rng

    def graph_at(self, t: int):
        raise NotImplementedError

    def describe(self) -> dict:
        return {"name": self.name}


DYNAMICS: Registry[type[Dynamics]] = Registry("network dynamics")


def register_dynamics(cls):
    DYNAMICS.add(cls.name, cls)
    return cls


@register_dynamics
class EdgeFailures(Dynamics):
    """Each edge fails independently with probability ``p`` in each step (Elsässer et al., Sec. 4).

    The step's graph keeps the surviving edges; ``graph.base_edges`` maps them to the base graph.
    """

    name = "edge-failure"

    def __init__(self, p: float):
        p = float(p)
        if not 0.0 <= p <= 1.0:
            raise TokendistError(f"edge failure probability must be in [0, 1], got {p}")
        self.p = p

    def graph_at(self, t):
        alive = self.rng.random(self.base.m) >= self.p
        return self.base.edge_subgraph(alive)

    def describe(self):
        return {"name": self.name, "p": self.p}


@register_dynamics
class GraphSequence(Dynamics):
    """A user-supplied sequence of graphs on the same nodes, used in turn (cyclically)."""

    name = "sequence"

    def __init__(self, graphs):
        self.graphs = list(graphs)
        if not self.graphs:
            raise TokendistError("a graph sequence needs at least one graph")

    def reset(self, graph, rng):
        super().reset(graph, rng)
        for g in self.graphs:
            if g.n != graph.n:
                raise TokendistError(f"every graph of a sequence needs {graph.n} nodes; {g.spec} has {g.n}")

    def graph_at(self, t):
        g = self.graphs[t % len(self.graphs)]
        if self.base.speeds is not None and g.speeds is None:
            g = g.with_speeds(self.base.speeds)
        return g

    def describe(self):
        return {"name": self.name, "graphs": [g.spec for g in self.graphs]}
