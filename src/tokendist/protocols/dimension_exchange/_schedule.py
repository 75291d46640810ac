"""The dimension-exchange schedule (Houle, Symvonis, Wood 2004, Sec. 1.1 and Definition 1).

A proper edge colouring with colours ``0 .. chi-1``; at step ``t`` only the edges of colour
``(colour_start + t) mod chi`` are active, so each node talks to at most one neighbour (single-port).
``chi`` steps make a round, ``chi * n`` steps a phase (Definition 3).

This module resolves the colouring (computed by :func:`tokendist.graphs.edge_colouring` or read from
a file), the spanning tree that the tree protocols run on when the graph is not a tree, and lays the
colour classes out as contiguous edge arrays so that a step touches only the active matching.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from ...errors import TokendistError
from ...engine._initial import read_loads_file
from ...graphs import bfs_tree, edge_colouring, is_proper_edge_colouring, min_diameter_spanning_tree

__all__ = ["Schedule", "make_schedule", "resolve_colouring", "spanning_tree", "SPANNING_TREES"]

#: Spanning-tree choices of threshold1/discrepancy1 on a graph that is not a tree.
SPANNING_TREES = ("none", "bfs", "min-diameter")


def spanning_tree(graph, how: str):
    """The spanning tree ``how`` (``bfs`` from node 0, or ``min-diameter``) as an edge subgraph.

    The result keeps ``base_edges`` (each tree edge's index in ``graph``) so that flows can be
    reported on the graph's edges.
    """

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

    colouring = "auto" if colouring is None else colouring.strip()
    if not colouring:  # (an empty --param colouring= is a mistake, not a request for the default)
        raise TokendistError("colouring: empty; expected auto, tree, bipartite, misra-gries, greedy or file:PATH")
    if colouring.startswith("file:"):
        colours = read_loads_file(colouring[5:], graph.m, what="colours", per="edges")
        if not is_proper_edge_colouring(graph, colours):
            raise TokendistError(f"{colouring[5:]}: not a proper edge colouring of {graph.spec or 'the graph'}")
        return colours.astype(np.int64)
    return edge_colouring(graph, method=colouring)


@dataclass
class Schedule:
    """A coloured graph laid out for stepping.

    Only what a step reads is stored (4 bytes per schedule edge plus the offsets): the colour
    classes as contiguous runs of edge indices. The endpoints, the colours and the per-node partner
    table are derived on demand (tests, the numpy kernel, the per-node form) and cached.

    Attributes
    ----------
    graph : Graph
        The graph the schedule runs on (the input graph, or its spanning tree).
    chi : int
        Number of colours (the period in steps).
    start : int
        The colour active at step 0.
    eid : ndarray of int32
        The schedule's edges as indices into the *run's* graph, grouped by colour (within a colour
        in increasing edge order, so that a step sweeps memory forwards).
    offsets : ndarray
        Colour ``c`` occupies ``offsets[c]:offsets[c+1]`` of ``eid``.
    run_u, run_v : ndarray
        The run graph's endpoint arrays (shared, not copied): edge ``eid[i]`` joins
        ``run_u[eid[i]] < run_v[eid[i]]``.
    """

    graph: object
    chi: int
    start: int
    eid: np.ndarray
    offsets: np.ndarray
    run_u: np.ndarray
    run_v: np.ndarray
    _cache: dict = field(default_factory=dict, repr=False)

    def colour_at(self, t: int) -> int:
        return (self.start + t) % self.chi

    def active(self, t: int) -> tuple[int, int]:
        c = self.colour_at(t)
        return int(self.offsets[c]), int(self.offsets[c + 1])

    @property
    def eu(self) -> np.ndarray:
        """Smaller endpoint of each schedule edge, in ``eid`` order."""
        return self.run_u[self.eid]

    @property
    def ev(self) -> np.ndarray:
        """Larger endpoint of each schedule edge, in ``eid`` order."""
        return self.run_v[self.eid]

    @property
    def colours(self) -> np.ndarray:
        """One colour per edge of :attr:`graph` (int64), rebuilt from the colour classes."""
        if "colours" not in self._cache:
            colours = np.empty(self.eid.size, dtype=np.int64)
            colours[self._order()] = np.repeat(np.arange(self.chi, dtype=np.int64), np.diff(self.offsets))
            self._cache["colours"] = colours
        return self._cache["colours"]

    @property
    def partner(self) -> np.ndarray:
        """shape (n, chi): the neighbour across each node's edge of each colour, or the node itself
        (the per-node form's ``contacts``; built on first use)."""
        if "partner" not in self._cache:
            g, colours = self.graph, self.colours
            partner = np.repeat(np.arange(g.n, dtype=np.int64)[:, None], self.chi, axis=1)
            partner[g.u, colours] = g.v
            partner[g.v, colours] = g.u
            self._cache["partner"] = partner
        return self._cache["partner"]

    def _order(self) -> np.ndarray:
        """Position in :attr:`graph`'s edge order of each entry of ``eid``."""
        base = self.graph.base_edges if self.run_u is not self.graph.u else None
        if base is None:
            return self.eid
        inv = np.argsort(base, kind="stable")
        return inv[np.searchsorted(base[inv], self.eid)]


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
    # Stable sort by colour, so that within a colour the edges stay in increasing order. On 16-bit
    # keys numpy's stable sort is a radix sort: O(m), 0.1 s instead of 2 s on 10^7 edges.
    keys = colours.astype(np.int16) if chi < 2**15 else colours
    order = np.argsort(keys, kind="stable")
    offsets = np.zeros(chi + 1, dtype=np.int64)
    np.cumsum(np.bincount(colours, minlength=chi), out=offsets[1:])
    base = graph.base_edges if graph is not run_graph else None
    eid = order if base is None else base[order]
    idx = np.int32 if run_graph.m < 2**31 else np.int64
    sched = Schedule(graph, chi, colour_start % chi, np.ascontiguousarray(eid, dtype=idx), offsets,
                     run_graph.u, run_graph.v)
    if graph.n <= 4096:
        sched._cache["colours"] = np.asarray(colours, dtype=np.int64)
    return sched
