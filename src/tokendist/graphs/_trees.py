"""Spanning trees, tree centroids and biconnectivity.

The tree algorithms (Houle, Symvonis and Wood 2004; Margara, Pistocchi and Vassura) run on a tree,
so on a general network they run on a spanning tree; the time they take grows with the tree's
diameter, hence :func:`min_diameter_spanning_tree`. The st-orientation used by the Subramanian-
Scherson rounding needs a biconnected graph (:func:`is_biconnected`).
"""

from __future__ import annotations

import numba
import numpy as np
from scipy.sparse.csgraph import breadth_first_order

from ..errors import TokendistError
from ._interpreted import run_kernel
from ._properties import _require_connected, _sweeps, eccentricities

__all__ = ["rooted_tree", "tree_diameter", "bfs_tree", "min_diameter_spanning_tree", "tree_centroid", "subtree_sizes", "parents",
           "biconnected_components", "cut_vertices", "is_biconnected", "MDST_EXACT_WORK"]

#: Above this many BFS steps (``n * (n + m)``), :func:`min_diameter_spanning_tree` switches to
#: the double-sweep heuristic unless ``exact=True``.
MDST_EXACT_WORK = 500_000_000


def parents(tree, root: int = 0) -> np.ndarray:
    """The BFS parent of every node from ``root`` (-1 for the root), int64.

    On a tree this is the parent in the tree rooted at ``root``; on any graph, the parent in the
    BFS tree (neighbours are scanned in increasing order). Unreachable nodes also get -1.
    """
    _check_root(tree, root)
    _, pred = breadth_first_order(tree._structure(), root, directed=False, return_predecessors=True)
    pred = pred.astype(np.int64)
    pred[pred < 0] = -1
    return pred


def _check_root(graph, root) -> None:
    if not 0 <= int(root) < graph.n:
        raise TokendistError(f"root {root} out of range 0..{graph.n - 1}")


def _tree_from_parents(graph, pred, extra_edges=(), spec="") -> "Graph":  # noqa: F821
    child = np.flatnonzero(pred >= 0)
    e = graph.edge_index(child, pred[child])
    mask = np.zeros(graph.m, dtype=bool)
    mask[e] = True
    for a, b in extra_edges:
        mask[graph.edge_index(a, b)] = True
    t = graph.edge_subgraph(mask)
    t.spec = spec or t.spec
    return t


def bfs_tree(graph, root: int = 0) -> "Graph":  # noqa: F821
    """The breadth-first spanning tree from ``root``, as a Graph on the same nodes.

    Each node's parent is its smallest-numbered neighbour one step closer to the root (scipy's
    BFS scans neighbours in increasing order). The tree keeps the graph's speeds, the capacities of
    the kept edges, and ``base_edges`` (the index of each tree edge in ``graph``).

    Raises
    ------
    TokendistError
        If the graph is disconnected or ``root`` is out of range.
    """
    _check_root(graph, root)
    _require_connected(graph, "spanning tree")
    return _tree_from_parents(graph, parents(graph, root), spec=f"bfs-tree({graph.spec},{root})")


def min_diameter_spanning_tree(graph, *, exact: bool | None = None) -> "Graph":  # noqa: F821
    """A spanning tree of smallest possible diameter (exact), or a BFS tree from a near-centre.

    Exact method (Hassin and Tamir 1995): a minimum-diameter spanning tree is a shortest-path tree
    from an *absolute 1-centre*, a point of the graph (on a node or inside an edge) minimising the
    distance to the farthest node, and its diameter is twice that absolute radius. With unit edge
    lengths the absolute centre lies on a node or at the midpoint of an edge, so tokendist
    evaluates

    * every node ``c``: the BFS tree from ``c`` has diameter ``<= 2 ecc(c)``;
    * every edge ``(a, b)``: the BFS forest from both ends plus the edge ``a-b`` has diameter
      ``<= 2 q + 1`` with ``q = max_x min(d(a, x), d(b, x))`` (the midpoint is ``q + 1/2`` from
      every node),

    and returns the best: diameter ``min(2 * radius, 2 * min_e q + 1)``, which is optimal.
    A BFS tree from a centre node alone has diameter at most ``2 * radius`` but can be one longer
    than optimal: on the 9-node graph with edges 0-2 0-8 1-4 1-7 2-3 2-4 2-5 2-6 2-7 5-6 6-7 6-8 7-8
    (radius 2) every BFS tree from a centre node has diameter 4, while the tree grown from the edge
    2-7 has diameter 3 (checked against all spanning trees in the tests). Cost: a BFS from every
    node and from every edge inside the centre, ``O((n + m) n)`` at worst.

    Heuristic (``exact=False``, or automatically above ``MDST_EXACT_WORK`` BFS steps): a double
    sweep (BFS from node 0 to a farthest node ``a``, BFS from ``a`` to a farthest node ``b``) and
    the BFS tree from the middle node of that ``a-b`` path. Its diameter is at most ``2 ecc(c)``;
    no optimality guarantee.

    Parameters
    ----------
    exact : bool or None
        True: always the exact method; False: the heuristic; None (default): exact when
        ``n * (n + m) <= MDST_EXACT_WORK``.

    References
    ----------
    R. Hassin, A. Tamir, On the minimum diameter spanning tree problem, IPL 53 (1995) 109-111.
    """
    _require_connected(graph, "spanning tree")
    if graph.is_tree:
        return graph
    if exact is None:
        exact = graph.n * (graph.n + graph.m) <= MDST_EXACT_WORK
    if not exact:
        d0 = _distances_from(graph, 0)
        a = int(np.argmax(d0))
        pa = parents(graph, a)
        b = int(np.argmax(_distances_from(graph, a)))
        path = [b]
        while path[-1] != a:
            path.append(int(pa[path[-1]]))
        c = path[len(path) // 2]
        t = bfs_tree(graph, c)
        t.spec = f"mdst-heuristic({graph.spec})"
        return t
    ecc = eccentricities(graph)
    c = int(np.argmin(ecc))
    r = int(ecc[c])
    # An edge beats the centre node only if q <= r - 1; as ecc(a) <= q + 1 and ecc(b) <= q + 1,
    # both its ends are then centre nodes, so only edges inside the centre are tried.
    cand = np.flatnonzero((ecc[graph.u] == r) & (ecc[graph.v] == r))
    q = _sweeps(graph, graph.u[cand], graph.v[cand])[0] if cand.size else np.zeros(0, np.int64)
    if q.size and 2 * int(q.min()) + 1 < 2 * r:
        e = int(cand[np.argmin(q)])
        a, b = int(graph.u[e]), int(graph.v[e])
        pred = _two_source_parents(graph, a, b)
        return _tree_from_parents(graph, pred, extra_edges=[(a, b)], spec=f"mdst({graph.spec})")
    t = bfs_tree(graph, c)
    t.spec = f"mdst({graph.spec})"
    return t


def _distances_from(graph, s) -> np.ndarray:
    from ._properties import bfs_distances

    return bfs_distances(graph, [s])[0]


def _two_source_parents(graph, a, b) -> np.ndarray:
    # BFS from the super-source {a, b}: add a virtual node n joined to a and b.
    import scipy.sparse as sp

    n = graph.n
    extra = sp.coo_array((np.ones(2), ([n, n], [a, b])), shape=(n + 1, n + 1))
    adj = sp.block_diag([graph._structure(), sp.csr_array((1, 1))], format="csr") + extra + extra.T
    _, pred = breadth_first_order(adj.tocsr(), n, directed=False, return_predecessors=True)
    pred = pred[:n].astype(np.int64)
    pred[(pred == n) | (pred < 0)] = -1
    return pred


@numba.njit(cache=True, nogil=True)
def _accumulate_up(order, pred, sizes):  # pragma: no cover - compiled
    # Children come after their parent in BFS order: add each subtree to its parent, deepest first.
    for i in range(order.shape[0] - 1, 0, -1):
        x = order[i]
        sizes[pred[x]] += sizes[x]


def subtree_sizes(tree, root: int = 0) -> np.ndarray:
    """The number of nodes in the subtree of every node when ``tree`` is rooted at ``root`` (int64)."""
    _check_root(tree, root)
    if not tree.is_tree:
        raise TokendistError(f"subtree sizes need a tree; {tree.spec or 'this graph'} is not one")
    order, pred = breadth_first_order(tree._structure(), root, directed=False, return_predecessors=True)
    sizes = np.ones(tree.n, dtype=np.int64)
    run_kernel(_accumulate_up, tree.n + tree.m, order.astype(np.int64), pred.astype(np.int64), sizes)
    return sizes


def tree_centroid(graph) -> np.ndarray:
    """The centroid of a tree: the 1 or 2 nodes whose removal leaves components of at most n/2 nodes.

    A node's weight is the size of the largest component left when it is removed; the centroid
    minimises it (Jordan 1869). Returns the centroid nodes sorted.

    Raises
    ------
    TokendistError
        If the graph is not a tree.
    """
    if not graph.is_tree:
        raise TokendistError(f"the centroid needs a tree; {graph.spec or 'this graph'} is not one")
    if graph.n == 1:
        return np.zeros(1, dtype=np.int64)
    sizes = subtree_sizes(graph, 0)
    pred = parents(graph, 0)
    biggest_child = np.zeros(graph.n, dtype=np.int64)
    child = np.flatnonzero(pred >= 0)
    np.maximum.at(biggest_child, pred[child], sizes[child])
    weight = np.maximum(biggest_child, graph.n - sizes)
    return np.flatnonzero(weight == weight.min())


def biconnected_components(graph) -> list[np.ndarray]:
    """The node sets of the biconnected components (blocks), each sorted, ordered by smallest node.

    A bridge is a block of two nodes; isolated nodes belong to no block. Computed by networkx
    (Hopcroft-Tarjan), at the boundary.
    """
    import networkx as nx

    blocks = [np.array(sorted(c), dtype=np.int64) for c in nx.biconnected_components(graph.to_networkx())]
    blocks.sort(key=lambda a: (int(a[0]), a.size))
    return blocks


def cut_vertices(graph) -> np.ndarray:
    """The articulation points (nodes whose removal disconnects their component), sorted."""
    import networkx as nx

    return np.array(sorted(nx.articulation_points(graph.to_networkx())), dtype=np.int64)


def is_biconnected(graph) -> bool:
    """Whether the graph is connected, has at least 2 nodes and no cut vertex (networkx's convention:
    the single edge K_2 is biconnected)."""
    return graph.n >= 2 and graph.is_connected and cut_vertices(graph).size == 0


def rooted_tree(tree, root: int = 0):
    """Breadth-first order, parent (-1 at the root) and depth of every node of a tree.

    Parameters
    ----------
    tree : Graph
        A tree (connected, ``m = n - 1``).
    root : int
        The root.

    Returns
    -------
    order, parent, depth : ndarray of int64
    """
    if not tree.is_tree:
        raise TokendistError(f"{tree.spec or 'this graph'} is not a tree")
    order, pred = breadth_first_order(tree.adjacency, root, directed=False, return_predecessors=True)
    order = order.astype(np.int64)
    parent = pred.astype(np.int64)
    parent[parent < 0] = -1
    depth = np.zeros(tree.n, dtype=np.int64)
    for v in order[1:]:
        depth[v] = depth[parent[v]] + 1
    return order, parent, depth


def tree_diameter(tree) -> int:
    """The diameter of a tree (two breadth-first searches)."""
    if tree.n <= 1:
        return 0
    _, _, d0 = rooted_tree(tree, 0)
    far = int(np.argmax(d0))
    _, _, d1 = rooted_tree(tree, far)
    return int(d1.max())
