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

import numba
import numpy as np

from ..errors import TokendistError
from ._interpreted import run_kernel
from ._model import Graph

__all__ = ["st_numbering", "st_orientation", "biconnected_supergraph", "orientation_sources_sinks", "is_biconnected"]


def _cut_vertices(graph) -> list[int]:
    from ._trees import cut_vertices

    return sorted(int(x) for x in cut_vertices(graph))


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
    size = graph.n + graph.m
    order, parent, low, pre, visited = run_kernel(_st_dfs, size, graph.indptr, graph.indices, s, t)
    name = graph.spec or "this graph"
    if visited < n:
        raise TokendistError(f"st-numbering needs a biconnected graph; {name} is not connected")
    cut = run_kernel(_dfs_cut_vertex, size, order, parent, low, pre, s)
    if cut >= 0:
        raise TokendistError(f"st-numbering needs a biconnected graph; {name} has cut vertex {cut}")
    return run_kernel(_st_list, size, order, parent, low, s, t)


@numba.njit(cache=True, nogil=True)
def _st_dfs(indptr, indices, s, t):
    """Iterative DFS from s whose first tree edge is st: preorder, parents, low-point vertices."""
    n = indptr.shape[0] - 1
    pre = np.full(n, -1, dtype=np.int64)
    parent = np.full(n, -1, dtype=np.int64)
    low = np.arange(n)
    order = np.empty(n, dtype=np.int64)
    it = indptr[:-1].astype(np.int64).copy()
    stack = np.empty(n, dtype=np.int64)
    pre[s], order[0] = 0, s
    pre[t], order[1], parent[t] = 1, t, s
    stack[0], stack[1] = s, t
    sp, cnt = 2, 2
    while sp > 0:
        v = stack[sp - 1]
        if it[v] < indptr[v + 1]:
            w = indices[it[v]]
            it[v] += 1
            if pre[w] < 0:
                pre[w] = cnt
                order[cnt] = w
                cnt += 1
                parent[w] = v
                stack[sp] = w
                sp += 1
            elif w != parent[v] and pre[w] < pre[low[v]]:
                low[v] = w  # back edge
        else:
            sp -= 1
            p = parent[v]
            if p >= 0 and pre[low[v]] < pre[low[p]]:
                low[p] = low[v]
    return order[:cnt], parent, low, pre, cnt


@numba.njit(cache=True, nogil=True)
def _dfs_cut_vertex(order, parent, low, pre, s):
    """A cut vertex found by the DFS (-1 if none): p with a child v whose subtree reaches no proper
    ancestor of p (pre[low[v]] >= pre[p]), or the root s with two tree children."""
    root_children = 0
    for k in range(1, order.shape[0]):
        v = order[k]
        p = parent[v]
        if p == s:
            root_children += 1
            if root_children > 1:
                return s
        elif pre[low[v]] >= pre[p]:
            return p
    return -1


@numba.njit(cache=True, nogil=True)
def _st_list(order, parent, low, s, t):
    """Tarjan's list insertion; returns the position of every vertex in the final list."""
    n = order.shape[0]
    nxt = np.full(n, -1, dtype=np.int64)
    prv = np.full(n, -1, dtype=np.int64)
    minus = np.zeros(n, dtype=np.bool_)
    nxt[s], prv[t] = t, s
    minus[s] = True
    for k in range(2, n):
        v = order[k]
        p = parent[v]
        if minus[low[v]]:  # insert v just before p(v); sign(p) = +
            a = prv[p]
            prv[v], nxt[v] = a, p
            prv[p] = v
            if a >= 0:
                nxt[a] = v
            minus[p] = False
        else:  # insert v just after p(v); sign(p) = -
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


def _is_biconnected(graph) -> bool:
    # One DFS (the one the st-numbering uses) decides it without building a networkx graph.
    if graph.m == 0:
        return graph.n <= 1
    s = 0
    nb = graph.neighbours(s)
    if len(nb) == 0:
        return False
    size = graph.n + graph.m
    order, parent, low, pre, visited = run_kernel(_st_dfs, size, graph.indptr, graph.indices, s, int(nb[0]))
    return visited == graph.n and run_kernel(_dfs_cut_vertex, size, order, parent, low, pre, s) < 0


def is_biconnected(graph) -> bool:
    """Whether ``graph`` is biconnected in the sense of Sec. 4 (fewer than 3 nodes count as such).

    Examples
    --------
    >>> from tokendist.graphs import make_graph
    >>> is_biconnected(make_graph("ring:5")), is_biconnected(make_graph("path:4"))
    (True, False)
    """
    return graph.n < 3 or _is_biconnected(graph)


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
    if is_biconnected(graph):
        return graph, np.full(graph.m, -1, dtype=np.int64)
    cuts = _cut_vertices(graph)
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
