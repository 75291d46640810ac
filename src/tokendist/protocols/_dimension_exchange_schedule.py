"""The dimension-exchange schedule (Houle, Symvonis, Wood 2004, Sec. 1.1 and Definition 1).

A proper edge colouring with colours ``0 .. chi-1``; at step ``t`` only the edges of colour
``(colour_start + t) mod chi`` are active, so each node talks to at most one neighbour (single-port).
``chi`` steps make a round, ``chi * n`` steps a phase (Definition 3).

This module resolves the colouring (computed by :func:`tokendist.graphs.edge_colouring` or read from
a file), the spanning tree that the tree protocols run on when the graph is not a tree, and lays the
colour classes out as contiguous edge arrays so that a step touches only the active matching.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..errors import TokendistError

__all__ = ["Schedule", "make_schedule", "resolve_colouring", "spanning_tree", "SPANNING_TREES"]

#: Spanning-tree choices of threshold1/discrepancy1 on a graph that is not a tree.
SPANNING_TREES = ("none", "bfs", "min-diameter")


def spanning_tree(graph, how: str):
    """The spanning tree ``how`` (``bfs`` from node 0, or ``min-diameter``) as an edge subgraph.

    The result keeps ``base_edges`` (each tree edge's index in ``graph``) so that flows can be
    reported on the graph's edges.
    """
    from ..graphs import bfs_tree, min_diameter_spanning_tree

    if not graph.is_connected:
        raise TokendistError(f"a spanning tree needs a connected graph; {graph.spec or 'this graph'} is not connected")
    if how == "bfs":
        tree = bfs_tree(graph)
    elif how == "min-diameter":
        tree = min_diameter_spanning_tree(graph)
    else:
        raise TokendistError(f"spanning_tree must be one of {', '.join(SPANNING_TREES[1:])}; got {how!r}")
    if tree.base_edges is None:  # a tree built afresh: find its edges in the graph
        idx = graph.edge_index(tree.u, tree.v)
        mask = np.zeros(graph.m, dtype=bool)
        mask[idx] = True
        tree = graph.edge_subgraph(mask)
    return tree


def resolve_colouring(graph, colouring: str = "auto") -> np.ndarray:
    """Colours of ``graph``'s edges from a parameter value.

    ``auto`` or a method of :func:`tokendist.graphs.edge_colouring` (``tree``, ``bipartite``,
    ``misra-gries``, ``greedy``), or ``file:PATH`` with one colour per line in the graph's edge
    order (``u < v``, sorted); a file colouring must be proper.
    """
    from ..graphs import edge_colouring, is_proper_edge_colouring

    colouring = (colouring or "auto").strip()
    if colouring.startswith("file:"):
        from ..engine._initial import read_loads_file

        colours = read_loads_file(colouring[5:], graph.m)
        if not is_proper_edge_colouring(graph, colours):
            raise TokendistError(f"{colouring[5:]}: not a proper edge colouring of {graph.spec or 'the graph'}")
        return colours.astype(np.int64)
    return edge_colouring(graph, method=colouring)


@dataclass
class Schedule:
    """A coloured graph laid out for stepping.

    Attributes
    ----------
    graph : Graph
        The graph the schedule runs on (the input graph, or its spanning tree).
    colours : ndarray
        One colour per edge of ``graph``.
    chi : int
        Number of colours (the period in steps).
    start : int
        The colour active at step 0.
    eu, ev, eid : ndarray
        Edge endpoints (``eu < ev``) and the edge's index in the *run's* graph, grouped by colour.
    offsets : ndarray
        Colour ``c`` occupies ``offsets[c]:offsets[c+1]`` of ``eu``/``ev``/``eid``.
    partner : ndarray, shape (n, chi)
        The neighbour across each node's edge of each colour, or the node itself.
    """

    graph: object
    colours: np.ndarray
    chi: int
    start: int
    eu: np.ndarray
    ev: np.ndarray
    eid: np.ndarray
    offsets: np.ndarray
    partner: np.ndarray

    def colour_at(self, t: int) -> int:
        return (self.start + t) % self.chi

    def active(self, t: int) -> tuple[int, int]:
        c = self.colour_at(t)
        return int(self.offsets[c]), int(self.offsets[c + 1])


def make_schedule(run_graph, *, colouring: str = "auto", colour_start: int = 0, spanning: str = "none",
                  need_tree: bool = False) -> Schedule:
    """Colour ``run_graph`` (or its spanning tree when ``need_tree`` and it is not a tree)."""
    graph = run_graph
    if need_tree and not run_graph.is_tree:
        if spanning == "none":
            raise TokendistError(f"{run_graph.spec or 'this graph'} is not a tree; pass spanning_tree=bfs or "
                                 "spanning_tree=min-diameter to run on a spanning tree")
        graph = spanning_tree(run_graph, spanning)
    colours = resolve_colouring(graph, colouring) if graph.m else np.zeros(0, dtype=np.int64)
    chi = int(colours.max()) + 1 if colours.size else 1
    if colour_start < 0:
        raise TokendistError("colour_start must be >= 0")
    order = np.argsort(colours, kind="stable")
    offsets = np.zeros(chi + 1, dtype=np.int64)
    np.cumsum(np.bincount(colours, minlength=chi), out=offsets[1:])
    base = graph.base_edges if graph is not run_graph else None
    eid = order if base is None else base[order]
    partner = np.repeat(np.arange(graph.n, dtype=np.int64)[:, None], chi, axis=1)
    partner[graph.u, colours] = graph.v
    partner[graph.v, colours] = graph.u
    return Schedule(graph, colours, chi, colour_start % chi, np.ascontiguousarray(graph.u[order]),
                    np.ascontiguousarray(graph.v[order]), np.ascontiguousarray(eid, dtype=np.int64), offsets, partner)

