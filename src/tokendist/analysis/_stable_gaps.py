"""The THRESHOLD-1 theory of Houle, Symvonis and Wood (2004), Section 4, made computable.

* subtree sizes ``|T(x, y)|`` (:func:`edge_subtree_sizes`) and the stable gaps ``SG_1(T)`` (Sec. 4.3);
* the stability of every gap, ``SG_i(T)`` and ``MSD(T)`` (Sec. 4.3; the fast search is in
  :mod:`tokendist.analysis._msd`);
* the observer tour, the c-orderings and the c-gaps of an edge-coloured tree (Sec. 4.1);
* the stable distribution of discrepancy ``MSD(T)`` (proof of Theorem 12);
* the CONSTRUCT SUBGRAPH algorithm with centroids (Sec. 4.4, Lemmas 14 and 15);
* the bounds of Lemma 13, Theorem 16 and Lemma 17.

The bounds providers of ``threshold2`` (Theorem 5), ``threshold1`` (Theorems 12, 16) and
``discrepancy1`` (Theorem 18) register here for ``tokendist bounds``.
"""

from __future__ import annotations

import math
import re

import numba
import numpy as np

from ..errors import TokendistError
from ..graphs import diameter
from ..protocols.dimension_exchange._schedule import resolve_colouring, spanning_tree
from ._bounds import register_bounds
from ._msd import (gap_stability, gap_stability_naive, generators_from_sizes, kary_order, kary_subtree_sizes,
                   msd_from_sizes)
from ..graphs import Graph, edge_colouring, is_proper_edge_colouring, make_graph, parents, subtree_sizes, tree_centroid
from ..graphs._specs import check_size, split_spec

# ASCII digits: str.isdigit() is true for '\u0664' (read as 4) and '\u00b2' (which int() refuses).
_DIGITS = re.compile(r"[0-9]+")

__all__ = ["edge_subtree_sizes", "stable_gaps_1", "stable_gaps", "stability", "msd", "msd_of_spec",
           "gap_stability", "gap_stability_naive", "msd_from_sizes", "kary_order", "kary_subtree_sizes",
           "partner_table", "round_map", "c_ordering", "c_gap", "gap_positions", "observer_tour",
           "theorem12_distribution", "construct_subgraph", "lemma15_terms", "lemma13_bound",
           "theorem16_bound", "lemma17_bound", "msd_conjecture"]


def _require_tree(tree) -> None:
    if not tree.is_tree:
        raise TokendistError(f"the stable-gap theory is for trees; {tree.spec or 'this graph'} is not a tree")


# ---------------------------------------------------------------------------- subtree sizes
def edge_subtree_sizes(tree) -> np.ndarray:
    """``|T(u_e, v_e)|`` for every edge ``e``: the nodes on ``u_e``'s side once ``e`` is removed.

    ``|T(v_e, u_e)| = n - |T(u_e, v_e)|``. ``O(n)``: the subtree sizes of the tree rooted at 0
    (:func:`tokendist.graphs.subtree_sizes`); removing an edge leaves the child's subtree on the
    child's side.

    Examples
    --------
    >>> from tokendist.graphs import path_graph
    >>> edge_subtree_sizes(path_graph(4)).tolist()
    [1, 2, 3]
    """

    _require_tree(tree)
    n = tree.n
    if n == 1:
        return np.zeros(0, dtype=np.int64)
    size = subtree_sizes(tree, 0)
    pred = parents(tree, 0)
    child_is_v = pred[tree.v] == tree.u
    return np.where(child_is_v, n - size[tree.v], size[tree.u])


def stable_gaps_1(tree) -> np.ndarray:
    """``SG_1(T) = {|T(x, y)|, |T(y, x)| : xy in E}``, sorted (Sec. 4.3).

    Examples
    --------
    >>> from tokendist.graphs import kary_tree
    >>> stable_gaps_1(kary_tree(2, 2)).tolist()
    [1, 3, 4, 6]
    """
    return generators_from_sizes(tree.n, edge_subtree_sizes(tree))


def stability(tree) -> np.ndarray:
    """``stability(p)`` for every gap ``p = 0 .. n-1`` of the tree (entry 0 is 0), int32."""
    return gap_stability(tree.n, stable_gaps_1(tree)) if tree.n > 1 else np.zeros(1, dtype=np.int32)


def stable_gaps(tree, i: int) -> np.ndarray:
    """``SG_i(T)`` restricted to the gaps ``1 .. n-1`` (eq. 4): the gaps of stability at most ``i``."""
    if i < 1:
        raise TokendistError("SG_i is defined for i >= 1")
    st = stability(tree)
    p = np.flatnonzero(st <= i)
    return p[p > 0]


def msd(tree) -> int:
    """``MSD(T) = min{i : SG_i(T) = {1 .. n-1}}``: the maximum stable discrepancy under THRESHOLD-1.

    Theorem 12. For a single node there are no gaps and the value is 0 (the maximum stability over
    an empty set of gaps; the paper's ``min`` formula would say 1, but no distribution on one node
    has discrepancy 1).

    Examples
    --------
    >>> from tokendist.graphs import star_graph, path_graph
    >>> msd(star_graph(9)), msd(path_graph(10))
    (5, 1)
    """
    _require_tree(tree)
    return int(stability(tree).max())


def msd_of_spec(spec: str, seed=None) -> dict:
    """MSD of a tree given by a spec, without building the graph for ``kary``, ``star`` and ``path``.

    Returns ``{"n", "max_degree", "msd", "generators"}``; the closed forms of the subtree sizes make
    ``kary:2,24`` (33.5 million nodes) cost only the search over ``Z_n``.
    """

    family, arg = split_spec(spec)
    parts = [a.strip() for a in arg.split(",")] if arg else []
    # The closed forms allocate O(n) for the search over Z_n: the graphs' size limit applies to
    # them too (kary:50,50 has about 9e84 nodes).
    if family == "kary" and len(parts) == 2 and all(_DIGITS.fullmatch(p) for p in parts):
        k, h = int(parts[0]), int(parts[1])
        n = kary_order(k, h)
        check_size(spec, n, n - 1)
        n, sizes = kary_subtree_sizes(k, h)
        # Root degree k, inner nodes k + 1, leaves 1.
        delta = 0 if h == 0 else (k if h == 1 else k + 1)
    elif family == "star" and len(parts) == 1 and _DIGITS.fullmatch(parts[0]):
        k = int(parts[0])
        check_size(spec, k + 1, k)
        n, sizes, delta = k + 1, np.ones(1 if k else 0, dtype=np.int64), k
    elif family == "path" and len(parts) == 1 and _DIGITS.fullmatch(parts[0]) and int(parts[0]) >= 1:
        n = int(parts[0])
        check_size(spec, n, max(n - 1, 0))
        sizes, delta = np.arange(1, n, dtype=np.int64), min(2, n - 1)
    else:
        g = make_graph(spec, seed=seed)
        _require_tree(g)
        return {"n": g.n, "max_degree": g.max_degree, "msd": msd(g), "generators": stable_gaps_1(g)}
    gens = generators_from_sizes(n, sizes)
    return {"n": n, "max_degree": delta, "msd": msd_from_sizes(n, sizes), "generators": gens}


# ---------------------------------------------------------------------------- observer tour (Sec. 4.1)
def _colours_of(tree, colours):
    if colours is None:
        colours = edge_colouring(tree)
    colours = np.asarray(colours, dtype=np.int64)

    if not is_proper_edge_colouring(tree, colours):
        raise TokendistError("the edge colouring is not proper (two edges at a node share a colour)")
    return colours


def partner_table(tree, colours=None, chi: int | None = None) -> np.ndarray:
    """``out[v, c]``: the neighbour of ``v`` across its edge of colour ``c``, or ``v`` (a self-loop of T').

    Sec. 4.1: ``T'`` adds ``chi - deg(v)`` self-loops at ``v`` so that every node has one outgoing
    arc of each colour. The observer tour, c-orderings and gaps all start here, so a graph that
    is not a tree is refused here (it was a RuntimeError from Lemma 6's check, meant for bugs).
    """
    _require_tree(tree)
    colours = _colours_of(tree, colours)
    k = (int(colours.max()) + 1 if colours.size else 1) if chi is None else int(chi)
    if colours.size and colours.max() >= k:
        raise TokendistError(f"chi={k} is smaller than the number of colours used ({int(colours.max()) + 1})")
    out = np.repeat(np.arange(tree.n, dtype=np.int64)[:, None], k, axis=1)
    out[tree.u, colours] = tree.v
    out[tree.v, colours] = tree.u
    return out


def round_map(out: np.ndarray, c: int) -> np.ndarray:
    """Where a token (or an observer) at each node is after one round of colours ``c, c+1, ..., c-1``."""
    chi = out.shape[1]
    pos = np.arange(out.shape[0], dtype=np.int64)
    for j in range(chi):
        pos = out[pos, (c + j) % chi]
    return pos


@numba.njit(cache=True, nogil=True)
def _orbit(r, s):  # pragma: no cover - compiled
    n = r.shape[0]
    seq = np.empty(n, np.int64)
    x = s
    for i in range(n):
        seq[i] = x
        x = r[x]
    return seq, x


def c_ordering(tree, colours=None, c: int = 0, start: int = 0, chi: int | None = None) -> np.ndarray:
    """The c-ordering of the nodes (Sec. 4.1), read cyclically from ``start``.

    The outgoing arcs of colour ``c`` in the order of the observer tour; consecutive entries are one
    round apart on the tour. Lemma 6 (the tour is Eulerian in ``T'``) makes it a permutation: a
    failure of that is a bug and raises ``RuntimeError``.
    """
    out = partner_table(tree, colours, chi)
    seq, back = _orbit(round_map(out, c % out.shape[1]), int(start))
    if back != start or np.bincount(seq, minlength=tree.n).max() != 1:
        raise RuntimeError("the observer tour is not a single cycle: Lemma 6 failed (not a tree?)")
    return seq


def gap_positions(tree, colours=None, c: int = 0, start: int = 0, chi: int | None = None) -> np.ndarray:
    """``pos[v] = gap_c(start, v)`` (0 at ``start``); ``gap_c(v, w) = (pos[w] - pos[v]) mod n``."""
    seq = c_ordering(tree, colours, c, start, chi)
    pos = np.empty(tree.n, dtype=np.int64)
    pos[seq] = np.arange(tree.n)
    return pos


def c_gap(tree, v: int, w: int, colours=None, c: int = 0, chi: int | None = None) -> int:
    """``gap_c(v, w)``: how many places ``w`` comes after ``v`` in the cyclic c-ordering."""
    return int(gap_positions(tree, colours, c, v, chi)[w])


def observer_tour(tree, colours=None, start: int = 0, colour: int = 0, chi: int | None = None) -> np.ndarray:
    """The observer tour (Definition 2) as ``chi * n`` arcs ``(from, to, colour)`` from ``start``.

    Arc ``vw`` of colour ``c`` is followed by the outgoing arc of colour ``c + 1 mod chi`` at ``w``
    (a self-loop where ``w`` has no such edge). It is the path of a lone token under THRESHOLD-1.
    """
    out = partner_table(tree, colours, chi)
    k = out.shape[1]
    arcs = np.empty((k * tree.n, 3), dtype=np.int64)
    x, c = int(start), colour % k
    for i in range(k * tree.n):
        y = int(out[x, c])
        arcs[i] = (x, y, c)
        x, c = y, (c + 1) % k
    return arcs


def theorem12_distribution(tree, colours=None, c: int = 0, node: int = 0, chi: int | None = None,
                           base: int = 0) -> np.ndarray:
    """The stable distribution of discrepancy MSD(T) from the proof of Theorem 12.

    ``load(s) = 0`` and ``load(v) = stability(gap_c(s, v))``, plus ``base`` on every node. It is
    stable under THRESHOLD-1 at every time ``t = c (mod chi)`` for the given colouring.
    """
    _require_tree(tree)
    if not 0 <= node < tree.n:
        raise TokendistError(f"node {node} does not exist (n={tree.n})")
    pos = gap_positions(tree, colours, c, node, chi)
    loads = stability(tree)[pos].astype(np.int64)
    # Loads are int64, and so is their total wherever a run sums them.
    if int(base) < 0 or int(loads.sum()) + int(base) * tree.n > np.iinfo(np.int64).max:
        raise TokendistError(f"base {base}: must be >= 0, and the total load must fit in int64")
    return loads + int(base)


# ---------------------------------------------------------------------------- CONSTRUCT SUBGRAPH (Sec. 4.4)
def _adjacency(tree) -> list[list[int]]:
    adj = [[] for _ in range(tree.n)]
    for a, b in zip(tree.u.tolist(), tree.v.tolist()):
        adj[a].append(b)
        adj[b].append(a)
    for row in adj:
        row.sort()
    return adj


def _component(adj, start, allowed: set, banned: int) -> set:
    comp, stack = {start}, [start]
    while stack:
        x = stack.pop()
        for y in adj[x]:
            if y != banned and y in allowed and y not in comp:
                comp.add(y)
                stack.append(y)
    return comp


def _centroid(adj, nodes: set) -> int:
    """A centroid of the subtree induced on ``nodes``: least largest component after removal; ties
    go to the smallest node id (Kang and Ault 1975: that component has at most |nodes|/2 nodes)."""
    index = {x: i for i, x in enumerate(sorted(nodes))}
    edges = [(index[x], index[y]) for x in nodes for y in adj[x] if y in index and x < y]
    sub = Graph.from_edges(len(index), edges)
    centre = np.atleast_1d(np.asarray(tree_centroid(sub)))
    return sorted(nodes)[int(centre.min())]


def construct_subgraph(tree, p: int, *, leaf: int | None = None, order: str = "neighbour") -> dict:
    """CONSTRUCT SUBGRAPH (Sec. 4.4): a connected subtree alpha with exactly ``p`` nodes.

    Parameters
    ----------
    p : int
        A gap, ``1 <= p <= n - 1``.
    leaf : int, optional
        The leaf alpha starts from (default: the smallest leaf id; the paper says "choose a leaf").
    order : {"neighbour", "largest", "smallest"}
        The order of ``beta_2 .. beta_d`` around the centroid, which the paper leaves open: by the
        id of the centroid's neighbour in them (default), or by size.

    Returns
    -------
    dict
        ``alpha`` (sorted node list), ``iterations`` (while-loop passes; Lemma 14 says at most
        ``ceil(log2 n)``), ``cases`` (1, 2 or 3 per pass) and ``centroids``.
    """
    _require_tree(tree)
    n = tree.n
    if not 1 <= p <= n - 1:
        raise TokendistError(f"a gap lies in 1 .. n-1 = {n - 1}; got {p}")
    if order not in ("neighbour", "largest", "smallest"):
        raise TokendistError("order must be neighbour, largest or smallest")
    adj = _adjacency(tree)
    leaves = [x for x in range(n) if len(adj[x]) == 1]
    if leaf is None:
        leaf = leaves[0]
    elif leaf not in leaves:
        raise TokendistError(f"node {leaf} is not a leaf")
    alpha, beta = {leaf}, set(range(n)) - {leaf}
    iterations, cases, centroids = 0, [], []
    while len(alpha) < p:
        iterations += 1
        v = _centroid(adj, beta)
        centroids.append(v)
        comps = [(w, _component(adj, w, beta, v)) for w in adj[v] if w in beta]
        touches = [i for i, (_, comp) in enumerate(comps) if any(y in alpha for x in comp for y in adj[x])]
        if any(y in alpha for y in adj[v]):
            beta1 = set()
            rest = comps
        else:
            beta1 = comps[touches[0]][1]
            rest = [c for i, c in enumerate(comps) if i != touches[0]]
        if order == "largest":
            rest.sort(key=lambda wc: (-len(wc[1]), wc[0]))
        elif order == "smallest":
            rest.sort(key=lambda wc: (len(wc[1]), wc[0]))
        parts = [beta1] + [c for _, c in rest]
        if len(alpha) + len(beta1) > p:
            cases.append(1)
            beta = beta1
        elif len(alpha) + len(beta1) == p:
            cases.append(2)
            alpha |= beta1
        else:
            cases.append(3)
            total, i = len(alpha) + 1, None
            for j, part in enumerate(parts):
                total += len(part)
                if total > p:
                    i = j
                    break
            if i is None:  # cannot happen while |alpha| + |beta| > p (Lemma 14, invariant c)
                raise RuntimeError("CONSTRUCT SUBGRAPH: invariant |alpha| + |beta| > p broken")
            alpha |= {v}.union(*parts[:i]) if i else {v}
            beta = parts[i]
    return {"alpha": sorted(alpha), "iterations": iterations, "cases": cases, "centroids": centroids}


def lemma15_terms(tree, alpha) -> dict:
    """The two representations of Lemma 15's proof for a connected node set ``alpha`` of size ``p``.

    ``p = sum over boundary edges (v_i, w_ij) of (n - |T(w_ij, v_i)|) (mod n)`` uses ``M1`` terms
    (one per edge leaving alpha); ``n - p`` uses ``r + sum_i (delta_i - c_i)`` terms, where ``r``
    is the number of boundary nodes ``v_i``, ``c_i`` their edges leaving alpha and ``delta_i`` their
    degrees. Both are counts of terms of ``SG_1``, so ``stability(p) <= min(M1, M2)``.
    """
    inside = np.zeros(tree.n, dtype=bool)
    inside[np.asarray(alpha, dtype=np.int64)] = True
    leaving = inside[tree.u] != inside[tree.v]
    m1 = int(leaving.sum())
    inner = np.where(inside[tree.u[leaving]], tree.u[leaving], tree.v[leaving])
    boundary, c = np.unique(inner, return_counts=True)
    r = int(boundary.size)
    m2 = int(r + (tree.degrees[boundary] - c).sum())
    return {"p": int(inside.sum()), "M1": m1, "M2": m2, "r": r, "boundary": boundary.tolist()}


# ---------------------------------------------------------------------------- bounds (Sec. 4.4, 4.5)
def lemma13_bound(n: int) -> int:
    """Lemma 13: MSD(T) <= n/2 (integral: floor(n/2))."""
    return n // 2


def theorem16_bound(n: int, max_degree: int) -> int:
    """Theorem 16: ``min{floor(n/2), 1 + (D-2) ceil(log2 n), floor((D+1)/2 ceil(log2 n))}``.

    Evaluated exactly as printed. For ``n = 2`` (``D = 1``) the middle term is 0 while MSD = 1: the
    proof of Lemma 15 assumes ``D >= 2`` (see docs/protocols/dimension-exchange.md).
    """
    if n <= 1:
        return 0
    lg = math.ceil(math.log2(n))
    return min(n // 2, 1 + (max_degree - 2) * lg, ((max_degree + 1) * lg) // 2)


def lemma17_bound(k: int, h: int) -> float:
    """Lemma 17 for ``T_{h,k}``: ``min{(k-1)h + 1, (k+2)(h+1)/2}`` (as printed, not rounded)."""
    return min((k - 1) * h + 1, (k + 2) * (h + 1) / 2)


def msd_conjecture(k: int, h: int) -> tuple[int, int]:
    """The two values Sec. 4.5 conjectures for MSD(T_{h,k}): ``floor((k-1)h/2)`` and one more."""
    low = ((k - 1) * h) // 2
    return low, low + 1


# ---------------------------------------------------------------------------- registered bounds
def _kary_of(graph):
    family, arg = split_spec(graph.spec) if graph.spec else ("", "")
    if family == "kary":
        try:
            k, h = (int(x) for x in arg.split(","))
            return k, h
        except ValueError:
            return None
    return None


def _tree_for(graph, params: dict, default: str):
    if graph.is_tree:
        return graph
    how = str(params.get("spanning_tree", default))
    if how == "none":
        raise TokendistError(f"{graph.spec or 'this graph'} is not a tree; pass spanning_tree=bfs or min-diameter")
    return spanning_tree(graph, how)


@register_bounds("threshold2")
def _threshold2_bounds(graph, loads, params):
    d = diameter(graph)
    return {"final_discrepancy_bound": d, "max_stable_discrepancy": d,
            "basis": "Theorem 5: THRESHOLD-2 ends with discrepancy <= diameter, attained by the distance distribution"}


@register_bounds("threshold1")
def _threshold1_bounds(graph, loads, params):
    tree = _tree_for(graph, params, "bfs")  # the protocol's default spanning tree
    value = msd(tree)
    out = {"final_discrepancy_bound": value, "msd": value, "bound_theorem16": theorem16_bound(tree.n, tree.max_degree),
           "bound_lemma13": lemma13_bound(tree.n),
           "basis": "Theorem 12: the final discrepancy is at most MSD(T) (exact); Theorem 16 bounds MSD(T)"}
    kh = _kary_of(tree)
    if kh is not None and kh[1] >= 1:
        out["bound_lemma17"] = lemma17_bound(*kh)
    return out


@register_bounds("discrepancy1")
def _discrepancy1_bounds(graph, loads, params):
    tree = _tree_for(graph, params, "bfs")
    chi = int(resolve_colouring(tree, str(params.get("colouring", "auto"))).max()) + 1 if tree.m else 1
    d0 = int(np.max(loads) - np.min(loads)) if len(loads) else 0
    return {"final_discrepancy_bound": min(d0, 1), "time_bound": 2 * max(d0 - 1, 0) * chi * tree.n,
            "chi": chi, "basis": "Theorem 18: discrepancy <= 1 within 2 (Delta_0 - 1) chi n steps"}
