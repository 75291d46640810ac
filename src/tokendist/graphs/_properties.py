"""Structural graph quantities: degrees, components, bipartiteness, distances, girth.

These are the quantities in which the papers state their bounds: the maximum degree ``Delta``
(Houle et al. 2004; Ghosh et al. 1995), the diameter (Elsässer et al. 2006, Table 1; Ghosh et al.
1995, Sec. 4), the girth (Elsässer et al. 2006, Table 1) and the radius/centre (the root of a
minimum-diameter spanning tree).
"""

from __future__ import annotations

import numba
import numpy as np
import scipy.sparse as sp
from scipy.sparse.csgraph import breadth_first_order
from scipy.sparse.csgraph import connected_components as _cc

from ..errors import TokendistError

__all__ = ["degree_stats", "connected_components", "bipartition", "is_bipartite", "bfs_depths", "bfs_distances",
           "eccentricities", "diameter", "radius", "centre", "girth"]


def degree_stats(graph) -> dict:
    """Minimum, average and maximum degree: ``{"min": int, "avg": float, "max": int}``."""
    d = graph.degrees
    if graph.n == 0:
        return {"min": 0, "avg": 0.0, "max": 0}
    return {"min": int(d.min()), "avg": float(2.0 * graph.m / graph.n), "max": int(d.max())}


def connected_components(graph) -> list[np.ndarray]:
    """The node sets of the connected components, each sorted, ordered by their smallest node."""
    k, labels = _cc(graph._structure(), directed=False)
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
    k, labels = _cc(graph._structure(), directed=False)
    roots = np.full(k, n, dtype=np.int64)
    np.minimum.at(roots, labels, np.arange(n))
    extra = sp.coo_array((np.ones(k), (np.full(k, n), roots)), shape=(n + 1, n + 1))
    a = sp.block_diag([graph._structure(), sp.csr_array((1, 1))], format="csr") + extra + extra.T
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


# ---------------------------------------------------------------------------- distances
#: Rows of the BFS distance matrix computed at once (bounds memory to about chunk * (n + m) * 8 bytes).
_CHUNK_ENTRIES = 4_000_000


def _chunks(graph):
    size = max(1, min(graph.n, _CHUNK_ENTRIES // max(1, graph.n + graph.m)))
    return [np.arange(s, min(s + size, graph.n)) for s in range(0, graph.n, size)]


def bfs_distances(graph, sources) -> np.ndarray:
    """Hop distances from each source to every node: int64 array (len(sources), n), -1 where unreachable."""
    from scipy.sparse.csgraph import shortest_path

    sources = np.atleast_1d(np.asarray(sources, dtype=np.int64))
    d = shortest_path(graph._structure(), directed=False, unweighted=True, indices=sources)
    d = np.atleast_2d(d)
    out = np.full(d.shape, -1, dtype=np.int64)
    fin = np.isfinite(d)
    out[fin] = d[fin].astype(np.int64)
    return out


@numba.njit(cache=True, nogil=True)
def _bfs_sweeps(n, indptr, indices, first, second, want_girth):  # pragma: no cover - compiled
    """One BFS per run ``r`` from the source set ``{first[r], second[r]}`` (``second[r] = -1``: one source).

    Returns per run the largest distance reached (the eccentricity of the source set), the number
    of nodes reached and, if ``want_girth``, the shortest closed walk found that contains a cycle
    (see :func:`girth`), else a huge value. ``O(n + m)`` a run, no allocation inside the loop.
    """
    runs = first.shape[0]
    ecc = np.zeros(runs, np.int64)
    reached = np.zeros(runs, np.int64)
    cyc = np.full(runs, 1 << 62, np.int64)
    dist = np.full(n, -1, np.int64)
    par = np.full(n, -1, np.int64)
    queue = np.empty(n, np.int64)
    for r in range(runs):
        head, tail = 0, 0
        for s in (first[r], second[r]):
            if s >= 0 and dist[s] < 0:
                dist[s] = 0
                par[s] = -1
                queue[tail] = s
                tail += 1
        best = 1 << 62
        while head < tail:
            x = queue[head]
            head += 1
            dx = dist[x]
            if want_girth and 2 * dx + 1 >= best:
                break  # nothing further from s can close a shorter cycle
            for k in range(indptr[x], indptr[x + 1]):
                y = indices[k]
                if dist[y] < 0:
                    dist[y] = dx + 1
                    par[y] = x
                    queue[tail] = y
                    tail += 1
                elif want_girth:
                    if dist[y] == dx:
                        best = min(best, 2 * dx + 1)       # odd closed walk s..x-y..s
                    elif dist[y] == dx + 1 and par[y] != x:
                        best = min(best, 2 * dx + 2)       # y has two neighbours one step closer
        if want_girth:
            # The loop may have stopped early: nodes still queued are not all scanned, but every
            # shorter cycle through s would have been found (it closes at distance < best / 2).
            for i in range(tail):
                ecc[r] = max(ecc[r], dist[queue[i]])
        else:
            ecc[r] = dist[queue[tail - 1]] if tail > 0 else 0
        reached[r] = tail
        cyc[r] = best
        for i in range(tail):
            dist[queue[i]] = -1
    return ecc, reached, cyc


def _sweeps(graph, first, second=None, *, want_girth=False, progress=None, chunk=512):
    first = np.ascontiguousarray(first, dtype=np.int64)
    second = np.full_like(first, -1) if second is None else np.ascontiguousarray(second, dtype=np.int64)
    out = [np.empty(first.size, np.int64) for _ in range(3)]
    indptr, indices = graph.indptr, graph.indices
    total = max(1, -(-first.size // chunk))
    for i, s in enumerate(range(0, first.size, chunk)):
        sl = slice(s, s + chunk)
        res = _bfs_sweeps(graph.n, indptr, indices, first[sl], second[sl], want_girth)
        for o, r in zip(out, res):
            o[sl] = r
        if progress is not None:
            progress(i + 1, total)
    return out


def _tree_eccentricities(graph) -> np.ndarray:
    # In a tree every eccentricity is attained at an end of a diameter path (a, b), found by two
    # BFS sweeps: ecc(x) = max(d(x, a), d(x, b)).
    d0 = bfs_distances(graph, [0])[0]
    a = int(np.argmax(d0))
    da = bfs_distances(graph, [a])[0]
    b = int(np.argmax(da))
    db = bfs_distances(graph, [b])[0]
    return np.maximum(da, db)


def eccentricities(graph, *, progress=None) -> np.ndarray:
    """The eccentricity ``max_y d(x, y)`` of every node (int64).

    Exact. Trees: three BFS sweeps, ``O(n)``. Other graphs: a BFS from every node (one numba
    kernel), ``O(n m)`` time: about a second for 5000 nodes and 10^4 edges.

    Parameters
    ----------
    progress : callable or None
        Called as ``progress(done, total)`` after each chunk of sources.

    Raises
    ------
    TokendistError
        If the graph is disconnected (every eccentricity would be infinite).
    """
    _require_connected(graph, "eccentricity")
    if graph.is_tree:
        return _tree_eccentricities(graph)
    return _sweeps(graph, np.arange(graph.n), progress=progress)[0]


def diameter(graph, *, progress=None) -> int:
    """The largest hop distance between two nodes (exact; see :func:`eccentricities` for the cost)."""
    return int(eccentricities(graph, progress=progress).max())


def radius(graph, *, progress=None) -> int:
    """The smallest eccentricity (exact)."""
    return int(eccentricities(graph, progress=progress).min())


def centre(graph, *, progress=None) -> np.ndarray:
    """The nodes of smallest eccentricity (the graph centre), sorted."""
    ecc = eccentricities(graph, progress=progress)
    return np.flatnonzero(ecc == ecc.min())


def girth(graph, *, progress=None) -> int | None:
    """The length of a shortest cycle, or None for a forest.

    Exact, by a BFS from every node ``s`` with distances ``D``:

    * an edge ``(a, b)`` with ``D[a] == D[b]`` closes an odd closed walk of length ``2 D[a] + 1``;
    * a node ``x`` with two neighbours at distance ``D[x] - 1`` closes a closed walk of length
      ``2 D[x]`` made of two different shortest paths.

    Each such walk contains a cycle at most as long, and for ``s`` on a shortest cycle of length
    ``g`` one of the two cases gives exactly ``g`` (the antipodal edge for odd ``g``, the antipodal
    node for even ``g``), so the minimum over all ``s`` is the girth. One BFS per node in a numba
    kernel, each stopped once it cannot close a shorter cycle: ``O(n m)`` time at worst (the graphs
    of Elsässer et al. 2006, Table 1, take at most about a second each).

    References
    ----------
    A. Itai, M. Rodeh, Finding a minimum circuit in a graph, SIAM J. Comput. 7 (1978) 413-423.
    """
    if graph.m <= graph.n - 1 and graph.m == graph.n - len(connected_components(graph)):
        return None  # a forest: m = n - (number of components)
    cyc = _sweeps(graph, np.arange(graph.n), want_girth=True, progress=progress)[2]
    return int(cyc.min())
