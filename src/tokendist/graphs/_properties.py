"""Structural graph quantities: degrees, components, bipartiteness, distances, girth.

These are the quantities in which the papers state their bounds: the maximum degree ``Delta``
(Houle et al. 2004; Ghosh et al. 1995), the diameter (Elsässer et al. 2006, Table 1; Ghosh et al.
1995, Sec. 4), the girth (Elsässer et al. 2006, Table 1) and the radius/centre (the root of a
minimum-diameter spanning tree).
"""

from __future__ import annotations

import numpy as np
import scipy.sparse as sp
from scipy.sparse.csgraph import breadth_first_order
from scipy.sparse.csgraph import connected_components as _cc

from ..errors import TokendistError

__all__ = ["degree_stats", "connected_components", "bipartition", "is_bipartite", "bfs_depths"]


def degree_stats(graph) -> dict:
    """Minimum, average and maximum degree: ``{"min": int, "avg": float, "max": int}``."""
    d = graph.degrees
    if graph.n == 0:
        return {"min": 0, "avg": 0.0, "max": 0}
    return {"min": int(d.min()), "avg": float(2.0 * graph.m / graph.n), "max": int(d.max())}


def connected_components(graph) -> list[np.ndarray]:
    """The node sets of the connected components, each sorted, ordered by their smallest node."""
    k, labels = _cc(graph.adjacency, directed=False)
    order = np.argsort(labels, kind="stable")
    parts = np.split(order, np.cumsum(np.bincount(labels, minlength=k))[:-1])
    parts.sort(key=lambda a: int(a[0]))
    return parts


def bfs_depths(graph) -> tuple[np.ndarray, np.ndarray]:
    """BFS depth and component root of every node, from the smallest node of each component.

    A virtual super-root joined to the first node of every component makes one scipy BFS cover a
    disconnected graph; the depths then come from the predecessor array by pointer doubling
    (``O(n log n)`` whole-array steps, no Python loop over nodes).
    """
    n = graph.n
    k, labels = _cc(graph.adjacency, directed=False)
    roots = np.full(k, n, dtype=np.int64)
    np.minimum.at(roots, labels, np.arange(n))
    extra = sp.coo_array((np.ones(k), (np.full(k, n), roots)), shape=(n + 1, n + 1))
    a = sp.block_diag([graph.adjacency, sp.csr_array((1, 1))], format="csr") + extra + extra.T
    _, pred = breadth_first_order(a.tocsr(), n, directed=False, return_predecessors=True)
    anc = pred[:n].astype(np.int64)
    depth = np.ones(n, dtype=np.int64)
    is_root = anc == n
    anc[is_root] = np.flatnonzero(is_root)
    depth[is_root] = 0
    # Pointer doubling: depth[i] accumulates the lengths of the jumps i -> anc[i].
    while True:
        nxt = anc[anc]
        if np.array_equal(nxt, anc):
            break
        depth = depth + depth[anc]
        anc = nxt
    return depth, anc


def bipartition(graph) -> np.ndarray | None:
    """A side (0 or 1) for each node with every edge between the sides, or None if there is an odd cycle."""
    depth, _ = bfs_depths(graph)
    side = depth & 1
    if graph.m and np.any(side[graph.u] == side[graph.v]):
        return None
    return side


def is_bipartite(graph) -> bool:
    """Whether the graph has no odd cycle."""
    return bipartition(graph) is not None


def _require_connected(graph, what: str) -> None:
    if not graph.is_connected:
        raise TokendistError(f"the {what} needs a connected graph; {graph.spec or 'this graph'} is disconnected")
