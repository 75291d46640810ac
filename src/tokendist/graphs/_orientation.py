"""st-numberings and st-orientations (Subramanian and Scherson 1994, Sec. 4, Case 1 and Case 2).

The oriented rounding of Sec. 4 needs an orientation of a biconnected graph with no directed cycle,
a unique minimal vertex s (in-degree zero), a unique maximal vertex t (out-degree zero) and an edge
joining s and t. Numbering the vertices 1..N so that s = 1, t = N and every other vertex has a lower
and a higher numbered neighbour (an st-numbering, which exists exactly when the graph plus the edge
st is biconnected) and directing every edge from the lower to the higher number gives such an
orientation. The paper builds it from an open ear decomposition, ear by ear; we compute the
st-numbering with Tarjan's streamlined algorithm (one depth-first search plus a list insertion per
vertex), which yields an orientation with the same three properties (not necessarily the same one).

For a graph that is not biconnected (Case 2) the paper balances on a supergraph H: "for each
cut-vertex u of G, chain the neighbors of u in a cycle". :func:`biconnected_supergraph` builds H and
names, for each added edge, the cut vertex through which G simulates it.

References
----------
R. Subramanian, I. D. Scherson, An analysis of diffusive load-balancing, SPAA 1994, Sec. 4.
R. E. Tarjan, Two streamlined depth-first search algorithms, Fund. Inform. 9 (1986) 85-94.
"""

from __future__ import annotations

import numpy as np

from ..errors import TokendistError
from ._model import Graph

__all__ = ["st_numbering", "st_orientation", "biconnected_supergraph", "orientation_sources_sinks"]


def _cut_vertices(graph) -> list[int]:
    try:  # the shared implementation (graphs/_trees.py) when it is there
        from . import _trees

        fn = getattr(_trees, "cut_vertices", None)
        if fn is not None:
            return sorted(int(x) for x in fn(graph))
    except ImportError:  # pragma: no cover
        pass
    import networkx as nx

    return sorted(int(x) for x in nx.articulation_points(graph.to_networkx()))


def _require_biconnected(graph, what: str) -> None:
    name = graph.spec or "this graph"
    if graph.n >= 2 and not graph.is_connected:
        raise TokendistError(f"{what} needs a biconnected graph; {name} is not connected")
    cuts = _cut_vertices(graph) if graph.n >= 3 else []
    if cuts:
        raise TokendistError(f"{what} needs a biconnected graph; {name} has cut vertex {cuts[0]}")


def _default_ends(graph, s, t) -> tuple[int, int]:
    if s is None and t is None:
        s = 0
    if s is None:
        s = int(graph.neighbours(t)[0]) if len(graph.neighbours(t)) else t
    if t is None:
        nb = graph.neighbours(s)
        if len(nb) == 0:
            raise TokendistError(f"st-numbering: vertex {s} has no neighbour")
        t = int(nb[0])
    return int(s), int(t)


def st_numbering(graph, s: int | None = None, t: int | None = None) -> np.ndarray:
    """An st-numbering of a biconnected graph: ``num[s] = 0``, ``num[t] = n - 1``.

    Every other vertex has a neighbour with a lower and a neighbour with a higher number.

    Parameters
    ----------
    graph : Graph
        Biconnected (a single edge counts as biconnected).
    s, t : int, optional
        Adjacent vertices. Defaults: s = 0 and t = the smallest neighbour of s.

    Returns
    -------
    ndarray of int64
        ``num[v]`` in 0..n-1, a permutation.

    Notes
    -----
    Tarjan (1986): a depth-first search from s whose first edge is st computes the preorder, the
    parents p(v) and low(v) (the vertex of smallest preorder reachable from the subtree of v by one
    back edge). Start from the list [s, t] with sign(s) = -; for every other vertex v in preorder,
    if sign(low(v)) is - insert v just before p(v) and set sign(p(v)) = +, otherwise insert v just
    after p(v) and set sign(p(v)) = -. The list order is the st-numbering.

    Examples
    --------
    >>> from tokendist.graphs import make_graph
    >>> st_numbering(make_graph("ring:5"), 0, 1).tolist()
    [0, 4, 3, 2, 1]
    """
    n = graph.n
    if n == 1:
        return np.zeros(1, dtype=np.int64)
    s, t = _default_ends(graph, s, t)
    for x in (s, t):
        if not 0 <= x < n:
            raise TokendistError(f"st-numbering: vertex {x} is not in the graph (n = {n})")
    if s == t or graph.edge_index(s, t) < 0:
        raise TokendistError(f"st-numbering: s = {s} and t = {t} must be adjacent")
    _require_biconnected(graph, "st-numbering")
    indptr, indices = graph.indptr, graph.indices
    pre = np.full(n, -1, dtype=np.int64)
    parent = np.full(n, -1, dtype=np.int64)
    low = np.arange(n, dtype=np.int64)
    order = []
    # Iterative DFS; s visits t first so that st is the first tree edge.
    pre[s] = 0
    order.append(s)
    s_nbrs = [t] + [int(x) for x in indices[indptr[s]:indptr[s + 1]] if x != t]
    stack = [(s, iter(s_nbrs))]
    while stack:
        v, it = stack[-1]
        advanced = False
        for w in it:
            w = int(w)
            if pre[w] < 0:
                pre[w] = len(order)
                order.append(w)
                parent[w] = v
                stack.append((w, iter(indices[indptr[w]:indptr[w + 1]].tolist())))
                advanced = True
                break
            if w != parent[v] and pre[w] < pre[low[v]]:
                low[v] = w  # back edge
        if not advanced:
            stack.pop()
            p = parent[v]
            if p >= 0 and pre[low[v]] < pre[low[p]]:
                low[p] = low[v]
    nxt = np.full(n, -1, dtype=np.int64)
    prv = np.full(n, -1, dtype=np.int64)
    nxt[s], prv[t] = t, s
    minus = np.zeros(n, dtype=bool)
    minus[s] = True
    for v in order[2:]:
        p = parent[v]
        if minus[low[v]]:  # insert v before p(v)
            a = prv[p]
            prv[v], nxt[v] = a, p
            prv[p] = v
            if a >= 0:
                nxt[a] = v
            minus[p] = False
        else:  # insert v after p(v)
            b = nxt[p]
            nxt[v], prv[v] = b, p
            nxt[p] = v
            if b >= 0:
                prv[b] = v
            minus[p] = True
    head = s
    while prv[head] >= 0:
        head = prv[head]
    num = np.empty(n, dtype=np.int64)
    k, x = 0, head
    while x >= 0:
        num[x] = k
        k += 1
        x = nxt[x]
    return num


def st_orientation(graph, s: int | None = None, t: int | None = None) -> np.ndarray:
    """Per-edge direction of an st-orientation: ``+1`` means ``u[e] -> v[e]``, ``-1`` the reverse.

    Acyclic, s the unique source (in-degree 0, the paper's minimal vertex), t the unique sink
    (out-degree 0, the maximal vertex), and s, t adjacent: the orientation of Sec. 4, Case 1.

    Examples
    --------
    >>> from tokendist.graphs import make_graph
    >>> st_orientation(make_graph("ring:4")).tolist()  # 0->1, 0->3, 2->1, 3->2
    [1, 1, -1, -1]
    """
    num = st_numbering(graph, s, t)
    return np.where(num[graph.u] < num[graph.v], 1, -1).astype(np.int8)


def orientation_sources_sinks(graph, direction: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The sources (in-degree 0) and sinks (out-degree 0) of an orientation given per edge."""
    direction = np.asarray(direction)
    tail = np.where(direction > 0, graph.u, graph.v)
    head = np.where(direction > 0, graph.v, graph.u)
    indeg = np.bincount(head, minlength=graph.n)
    outdeg = np.bincount(tail, minlength=graph.n)
    return np.flatnonzero(indeg == 0), np.flatnonzero(outdeg == 0)


def biconnected_supergraph(graph) -> tuple[Graph, np.ndarray]:
    """The supergraph H of Sec. 4, Case 2, and the relay vertex of each of its edges.

    For every cut vertex c of G (ascending), its neighbours in ascending order are chained in a
    cycle (two neighbours: one edge). An added edge already in G, or already added for a smaller
    cut vertex, is not added again (H stays simple, so P on H is well defined).

    Returns
    -------
    H : Graph
        Same vertices as G; spec ``"<spec>+chain"``.
    relay : ndarray of int64
        Per edge of H: -1 for an edge of G, else the cut vertex c through which G simulates it
        (the path a - c - b, dilation 2).
    """
    cuts = _cut_vertices(graph) if graph.n >= 3 else []
    relay_of: dict[tuple[int, int], int] = {}
    for c in cuts:
        nb = [int(x) for x in graph.neighbours(c)]
        k = len(nb)
        pairs = [(nb[i], nb[(i + 1) % k]) for i in range(k if k > 2 else 1)]
        for a, b in pairs:
            key = (min(a, b), max(a, b))
            if graph.edge_index(*key) >= 0 or key in relay_of:
                continue
            relay_of[key] = c
    if not relay_of:
        return graph, np.full(graph.m, -1, dtype=np.int64)
    added = np.array(sorted(relay_of), dtype=np.int64).reshape(-1, 2)
    edges = np.concatenate([np.stack([graph.u, graph.v], axis=1), added])
    h = Graph.from_edges(graph.n, edges, spec=f"{graph.spec}+chain" if graph.spec else "")
    relay = np.full(h.m, -1, dtype=np.int64)
    for (a, b), c in relay_of.items():
        relay[h.edge_index(a, b)] = c
    return h, relay
