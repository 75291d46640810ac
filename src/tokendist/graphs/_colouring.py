"""Proper edge colourings: the schedules of the dimension-exchange algorithms.

A proper edge colouring gives every edge a colour so that the edges at a node have distinct
colours. A dimension-exchange algorithm (Houle, Symvonis and Wood 2004, Sec. 2) cycles through the
colour classes: in the round of colour ``c`` the matched endpoints of each edge of colour ``c``
balance with each other. Fewer colours means a shorter period, so tokendist colours

* trees and bipartite graphs with exactly ``Delta`` colours (König's edge colouring theorem);
* any other graph with at most ``Delta + 1`` colours (Vizing's theorem, by the algorithm of
  Misra and Gries 1992).

Every colouring is verified proper before it is returned.

The kernels keep a table ``slot[x * K + c]`` = the edge of colour ``c`` at node ``x`` (or -1), so
that finding a free colour costs ``O(K)`` and following an alternating path costs ``O(1)`` a step;
the table has ``n * K`` int32 entries, ``K`` the number of colours allowed.
"""

from __future__ import annotations

import numba
import numpy as np

from ..errors import TokendistError
from ._interpreted import run_kernel

__all__ = ["edge_colouring", "is_proper_edge_colouring", "colour_classes", "COLOURING_METHODS"]

#: The methods of :func:`edge_colouring` (besides ``"auto"``).
COLOURING_METHODS = ("bipartite", "tree", "misra-gries", "greedy")

# n * K table entries above which a kernel would need too much memory (int32: 4 bytes each).
_TABLE_LIMIT = 60_000_000
# n * colours above which is_proper_edge_colouring sorts keys instead of marking a flag table.
_CHECK_TABLE_LIMIT = 400_000_000


# ---------------------------------------------------------------------------- numba kernels
@numba.njit(cache=True, nogil=True)
def _greedy_kernel(n, eu, ev, order, K):  # pragma: no cover - compiled
    """Colour edges in ``order``, each with the smallest colour free at both ends (``K`` columns)."""
    m = eu.shape[0]
    col = np.full(m, -1, np.int64)
    slot = np.full(n * K, -1, np.int32)
    for i in range(order.shape[0]):
        e = order[i]
        x, y = eu[e], ev[e]
        c = 0
        while c < K and (slot[x * K + c] >= 0 or slot[y * K + c] >= 0):
            c += 1
        if c == K:
            return col, False
        col[e] = c
        slot[x * K + c] = e
        slot[y * K + c] = e
    return col, True


@numba.njit(cache=True, nogil=True)
def _tree_kernel(n, indptr, indices, csr_edges, bfs_order, parent_edge, m):  # pragma: no cover - compiled
    """A tree in BFS order: the child edges of each node get 0, 1, 2, ... skipping the parent edge's colour.

    A node of degree d uses d distinct colours below ``d <= Delta``: exactly ``Delta`` colours.
    """
    col = np.full(m, -1, np.int64)
    for i in range(bfs_order.shape[0]):
        x = bfs_order[i]
        pe = parent_edge[x]
        pc = col[pe] if pe >= 0 else -1
        c = 0
        for s in range(indptr[x], indptr[x + 1]):
            e = csr_edges[s]
            if e == pe:
                continue
            if c == pc:
                c += 1
            col[e] = c
            c += 1
    return col


@numba.njit(cache=True, nogil=True)
def _free_colour(slot, x, K):  # pragma: no cover - compiled
    for c in range(K):
        if slot[x * K + c] < 0:
            return c
    return -1


@numba.njit(cache=True, nogil=True)
def _invert_path(slot, col, eu, ev, start, a, b, K, buf):  # pragma: no cover - compiled
    """Swap colours a <-> b on the maximal path from ``start`` whose edges alternate a, b, a, ...

    ``start`` must have ``b`` free (so the path is well defined: it leaves ``start`` by colour a).
    Returns the last node of the path.
    """
    k = 0
    x = start
    c = a
    while True:
        e = slot[x * K + c]
        if e < 0:
            break
        buf[k] = e
        k += 1
        x = ev[e] if eu[e] == x else eu[e]
        c = b if c == a else a
    last = x
    # Clear the table entries of the path, then write them back with swapped colours.
    for i in range(k):
        e = buf[i]
        slot[eu[e] * K + col[e]] = -1
        slot[ev[e] * K + col[e]] = -1
    for i in range(k):
        e = buf[i]
        nc = b if col[e] == a else a
        col[e] = nc
        slot[eu[e] * K + nc] = e
        slot[ev[e] * K + nc] = e
    return last


@numba.njit(cache=True, nogil=True)
def _bipartite_kernel(n, eu, ev, K):  # pragma: no cover - compiled
    """König's edge colouring of a bipartite graph with ``K = Delta`` colours.

    For an uncoloured edge (x, y) take a colour a free at x and b free at y. If a is also free at
    y, use it. Otherwise swap a and b on the alternating a/b path starting at y: in a bipartite
    graph that path cannot reach x (it would close an odd cycle with the edge x-y), so afterwards a
    is free at both ends.
    """
    m = eu.shape[0]
    col = np.full(m, -1, np.int64)
    slot = np.full(n * K, -1, np.int32)
    buf = np.empty(n + 1, np.int64)
    for e in range(m):
        x, y = eu[e], ev[e]
        a = _free_colour(slot, x, K)
        b = _free_colour(slot, y, K)
        if a < 0 or b < 0:
            return col, False
        if slot[y * K + a] >= 0:
            last = _invert_path(slot, col, eu, ev, y, a, b, K, buf)
            if last == x:  # not bipartite after all
                return col, False
        col[e] = a
        slot[x * K + a] = e
        slot[y * K + a] = e
    return col, True


@numba.njit(cache=True, nogil=True)
def _misra_gries_kernel(n, eu, ev, K):  # pragma: no cover - compiled
    """Misra and Gries (1992): a proper colouring with ``K = Delta + 1`` colours.

    For each uncoloured edge (x, f): build a maximal fan ``F = [f = F0, F1, ..., Fk]`` of x (the
    edge x-F(i+1) has a colour free on Fi); let c be free on x and d free on Fk; invert the cd path
    starting at x; find the first w in F with d free on w; rotate the fan up to w (each edge x-Fi
    takes the colour of x-F(i+1)) and colour x-w with d.
    """
    m = eu.shape[0]
    col = np.full(m, -1, np.int64)
    slot = np.full(n * K, -1, np.int32)
    buf = np.empty(n + 1, np.int64)
    in_fan = np.zeros(n, np.bool_)
    fan = np.empty(K + 1, np.int64)      # fan nodes
    fan_e = np.empty(K + 1, np.int64)    # the edge x - fan[i]
    for e0 in range(m):
        x, f = eu[e0], ev[e0]
        # 1. a maximal fan of x starting with f.
        k = 1
        fan[0] = f
        fan_e[0] = e0
        in_fan[f] = True
        grown = True
        while grown:
            grown = False
            last = fan[k - 1]
            for c in range(K):
                if slot[last * K + c] >= 0:
                    continue  # c is not free on the last fan node
                e = slot[x * K + c]
                if e < 0:
                    continue
                z = ev[e] if eu[e] == x else eu[e]
                if not in_fan[z]:
                    fan[k] = z
                    fan_e[k] = e
                    in_fan[z] = True
                    k += 1
                    grown = True
                    break
        for i in range(k):
            in_fan[fan[i]] = False
        # 2. c free on x, d free on the last fan node.
        c = _free_colour(slot, x, K)
        d = _free_colour(slot, fan[k - 1], K)
        if c < 0 or d < 0:
            return col, False
        # 3. invert the cd path from x (it leaves x by colour d since c is free on x).
        if c != d and slot[x * K + d] >= 0:
            _invert_path(slot, col, eu, ev, x, d, c, K, buf)
        # 4. the first fan node on which d is free.
        w = -1
        for i in range(k):
            if slot[fan[i] * K + d] < 0:
                w = i
                break
        if w < 0:
            return col, False
        # 5. rotate the fan prefix F0..Fw and colour x - Fw with d.
        for i in range(w):
            ea, eb = fan_e[i], fan_e[i + 1]
            cb = col[eb]
            # edge eb gives up colour cb, edge ea takes it.
            slot[x * K + cb] = -1
            slot[fan[i + 1] * K + cb] = -1
            if col[ea] >= 0:
                slot[x * K + col[ea]] = -1
                slot[fan[i] * K + col[ea]] = -1
            col[ea] = cb
            slot[x * K + cb] = ea
            slot[fan[i] * K + cb] = ea
            col[eb] = -1
        ew = fan_e[w]
        col[ew] = d
        slot[x * K + d] = ew
        slot[fan[w] * K + d] = ew
    return col, True


@numba.njit(cache=True, nogil=True)
def _two_colouring_kernel(n, indptr, indices):  # pragma: no cover - compiled
    """BFS 2-colouring of every component: (side per node, True) or (partial, False) on an odd cycle.

    O(n + m) with one queue; the generic ``bipartition`` (pointer doubling over a scipy BFS) took
    5 s on ``torus:1000x1000`` and the colouring needs only the yes/no answer.
    """
    side = np.full(n, -1, np.int8)
    queue = np.empty(n, np.int64)
    for r in range(n):
        if side[r] >= 0:
            continue
        side[r] = 0
        head, tail = 0, 1
        queue[0] = r
        while head < tail:
            x = queue[head]
            head += 1
            for s in range(indptr[x], indptr[x + 1]):
                y = indices[s]
                if side[y] < 0:
                    side[y] = 1 - side[x]
                    queue[tail] = y
                    tail += 1
                elif side[y] == side[x]:
                    return side, False
    return side, True


def _dimension_colouring(graph):
    """Colour edge (u, v) by the bit where u and v differ, if every edge differs in one bit.

    A structural shortcut for hypercube-labelled graphs (dimension exchange's own schedule,
    Houle et al. 2004, Sec. 2): two edges at a node with the same bit would join it to the same
    neighbour, so in a simple graph it is proper; it is used only when it needs exactly ``Delta``
    colours (optimal), and the caller verifies it like every other colouring. O(m) in numpy,
    against about 5 s for König's method on ``hypercube:20``. Returns None when it does not apply.
    """
    x = np.bitwise_xor(graph.u.astype(np.int64), graph.v.astype(np.int64))
    if not np.all((x & (x - 1)) == 0):
        return None
    bits = np.log2(x.astype(np.float64)).astype(np.int64)   # exact for powers of two
    if np.count_nonzero(np.bincount(bits)) != graph.max_degree:
        return None
    return bits


def _is_bipartite(graph) -> bool:
    return bool(run_kernel(_two_colouring_kernel, graph.n + graph.m, graph.n, graph.indptr, graph.indices)[1])


# ---------------------------------------------------------------------------- public API
def is_proper_edge_colouring(graph, colours) -> bool:
    """Whether ``colours`` (one non-negative int per edge) is a proper edge colouring of ``graph``.

    Proper: no two edges sharing an endpoint have the same colour.

    Examples
    --------
    >>> from tokendist.graphs import ring_graph
    >>> is_proper_edge_colouring(ring_graph(4), [0, 1, 1, 0])
    True
    >>> is_proper_edge_colouring(ring_graph(4), [0, 0, 1, 1])
    False
    """
    colours = np.asarray(colours)
    if colours.shape != (graph.m,):
        return False
    if graph.m == 0:
        return True
    if not np.issubdtype(colours.dtype, np.integer) or colours.min() < 0:
        return False
    colours = colours.astype(np.int64, copy=False)
    k = int(colours.max()) + 1
    # The (node, colour) keys over both endpoints of every edge must be distinct. O(m): mark each
    # key in a table of n * k flags; the keys are distinct exactly when 2m flags end up set
    # (np.unique sorts the 2m keys, 6-30 s at 10^6 edges under numpy 2.x).
    ku = graph.u.astype(np.int64) * k + colours
    kv = graph.v.astype(np.int64) * k + colours
    if graph.n * k <= _CHECK_TABLE_LIMIT:
        seen = np.zeros(graph.n * k, dtype=np.bool_)
        seen[ku] = True
        seen[kv] = True
        return bool(np.count_nonzero(seen) == 2 * graph.m)
    # Huge colour numbers (arbitrary input): sort the keys instead, still no np.unique.
    keys = np.sort(np.concatenate([ku, kv]))
    return bool(np.all(keys[1:] != keys[:-1]))


def colour_classes(graph, colours) -> list[np.ndarray]:
    """The edge indices of each colour ``0 .. max(colours)``, each sorted (a matching when proper)."""
    colours = np.asarray(colours, dtype=np.int64)
    if colours.shape != (graph.m,):
        raise TokendistError(f"expected {graph.m} edge colours, got {colours.shape[0]}")
    if graph.m == 0:
        return []
    order = np.argsort(colours, kind="stable")
    counts = np.bincount(colours, minlength=int(colours.max()) + 1)
    return np.split(order, np.cumsum(counts)[:-1])


def _check_table(graph, k: int, method: str) -> None:
    if graph.n * k > _TABLE_LIMIT:
        raise TokendistError(f"edge colouring by {method!r} needs an n x colours table of {graph.n * k:,} entries;"
                             f" the limit is {_TABLE_LIMIT:,}")


def _tree_colouring(graph) -> np.ndarray:
    from scipy.sparse.csgraph import breadth_first_order

    order, pred = breadth_first_order(graph._structure(), 0, directed=False, return_predecessors=True)
    parent_edge = np.full(graph.n, -1, np.int64)
    child = order[1:]
    parent_edge[child] = graph.edge_index(child, pred[child])
    return run_kernel(_tree_kernel, graph.n + graph.m, graph.n, graph.indptr, graph.indices, graph.csr_edges, order.astype(np.int64),
                        parent_edge, graph.m)


def edge_colouring(graph, *, method: str = "auto") -> np.ndarray:
    """A proper edge colouring of ``graph``: one colour ``0 .. chi-1`` per edge (int64, edge order).

    Parameters
    ----------
    graph : Graph
    method : {"auto", "bipartite", "tree", "misra-gries", "greedy"}
        * ``"tree"``: trees only; BFS from node 0, the child edges of each node take the smallest
          colours other than the parent edge's: exactly ``Delta`` colours, ``O(n)``.
        * ``"bipartite"``: bipartite graphs only; König's theorem by alternating-path recolouring:
          exactly ``Delta`` colours, ``O(m n)`` worst case, near ``O(m Delta)`` on meshes. Tried
          first, here and in ``"auto"``: when every edge joins labels differing in one bit
          (hypercube labelling) and that gives ``Delta`` colours, each edge takes the index of
          its bit (O(m); verified proper like every result).
        * ``"misra-gries"``: any graph; Misra and Gries (1992): at most ``Delta + 1`` colours,
          ``O(m (Delta^2 + n))`` worst case.
        * ``"greedy"``: any graph; edges in index order take the smallest colour free at both
          ends: at most ``2 Delta - 1`` colours (a baseline).
        * ``"auto"`` (default): ``"tree"`` for trees, ``"bipartite"`` for other bipartite
          graphs (forests included), ``"misra-gries"`` otherwise. So the result has ``Delta``
          colours on bipartite graphs and at most ``Delta + 1`` on any graph.

    Returns
    -------
    ndarray of int64, shape (m,)
        ``colours[e]`` is the colour of edge ``e = (u[e], v[e])``; the colours used are exactly
        ``0 .. colours.max()``.

    Raises
    ------
    TokendistError
        An unknown method, ``"tree"`` on a non-tree, ``"bipartite"`` on a non-bipartite graph,
        or a graph too large for the colour table (``n * colours > 6e7``).

    Notes
    -----
    The result is checked with :func:`is_proper_edge_colouring` before it is returned; a failure
    there is a bug and raises ``RuntimeError``.

    References
    ----------
    M. E. Houle, A. Symvonis, D. R. Wood, Dimension-exchange algorithms for token distribution on
    tree-connected architectures, JPDC 64 (2004), Sec. 2 (the colouring as a schedule).
    J. Misra, D. Gries, A constructive proof of Vizing's theorem, IPL 41 (1992) 131-133.
    D. König, Gráfok és alkalmazásuk ..., 1916 (bipartite graphs are Delta-edge-colourable).

    Examples
    --------
    >>> from tokendist.graphs import make_graph
    >>> int(edge_colouring(make_graph("torus:4x4")).max()) + 1
    4
    >>> int(edge_colouring(make_graph("complete:5")).max()) + 1 <= 5
    True
    """
    if method not in ("auto",) + COLOURING_METHODS:
        raise TokendistError(f"unknown colouring method {method!r}; choose one of auto, {', '.join(COLOURING_METHODS)}")
    m, delta = graph.m, graph.max_degree
    if m == 0:
        return np.zeros(0, dtype=np.int64)
    method_given = method != "auto"  # auto has just checked bipartiteness: do not repeat it
    if method in ("auto", "bipartite") and (not method_given or _is_bipartite(graph)):
        # Optimal (Delta colours) whenever it applies, so tried before any graph traversal.
        colours = _dimension_colouring(graph)
        if colours is not None and is_proper_edge_colouring(graph, colours):
            return _compact(colours)
    if method == "auto":
        if graph.is_tree:
            method = "tree"
        elif _is_bipartite(graph):
            method = "bipartite"
        else:
            method = "misra-gries"
    eu, ev = np.ascontiguousarray(graph.u), np.ascontiguousarray(graph.v)
    if method == "tree":
        if not graph.is_tree:
            raise TokendistError(f"colouring method 'tree' needs a tree; {graph.spec or 'this graph'} is not one")
        colours, ok = _tree_colouring(graph), True
    elif method == "bipartite":
        if method_given and not _is_bipartite(graph):
            raise TokendistError(f"colouring method 'bipartite' needs a bipartite graph; "
                                 f"{graph.spec or 'this graph'} has an odd cycle")
        _check_table(graph, delta, method)
        colours, ok = run_kernel(_bipartite_kernel, graph.n + m, graph.n, eu, ev, delta)
    elif method == "misra-gries":
        _check_table(graph, delta + 1, method)
        colours, ok = run_kernel(_misra_gries_kernel, graph.n + m, graph.n, eu, ev, delta + 1)
    else:
        _check_table(graph, 2 * delta - 1, method)
        colours, ok = run_kernel(_greedy_kernel, graph.n + m, graph.n, eu, ev, np.arange(m, dtype=np.int64),
                                 2 * delta - 1)
    if not ok or colours.min() < 0 or not is_proper_edge_colouring(graph, colours):
        raise RuntimeError(f"edge colouring {method!r} failed on {graph!r}: this is a bug")
    return _compact(colours)


def _compact(colours: np.ndarray) -> np.ndarray:
    """Renumber the colours used to ``0 .. k-1`` (keeping their order)."""
    present = np.bincount(colours) > 0   # O(m + k), not np.unique's sort
    if present.all():
        return colours
    return (np.cumsum(present) - 1)[colours].astype(np.int64)
