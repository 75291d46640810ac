"""The exact optimum number of token exchanges to reach a perfect distribution on a tree.

Margara, Pistocchi and Vassura (Perfect Token Distribution on Trees, Sec. 5) compare the token
exchanges of their algorithm with "the optimum": the fewest single-token moves across edges that
turn the initial loads into a *perfect* distribution (every node ``floor(T/N)`` or ``ceil(T/N)``).
Which ``r = T mod N`` nodes receive the ceiling is part of the optimisation.

On a tree the transport cost for fixed targets has a closed form: every token that must cross an
edge crosses it once and in one direction, so the cost is ``sum_e |S_e - G_e|`` where, for the
edge between ``v`` and its parent, ``S_e`` and ``G_e`` are the tokens and the target in the
subtree of ``v``. With ``G_e = a * size_e + k_e`` (``a = floor(T/N)``, ``k_e`` the number of
ceiling nodes in the subtree) the choice of the ceiling set is a knapsack over the tree:
``f_v[k]`` = least cost inside the subtree of ``v`` (edge to the parent included) with ``k``
ceiling nodes in it. :func:`min_exchanges` computes it exactly (min-plus merges truncated at
``r``, O(N r) work); tests check it against brute force over every ceiling set on small trees.

This module also registers the bounds provider of ``perfect-tree`` (``tokendist bounds``).
"""

from __future__ import annotations

import math

import numpy as np
from scipy.sparse.csgraph import breadth_first_order

from ..engine._metrics import exact_total
from ..errors import TokendistError
from ..graphs import rooted_tree, tree_diameter
from ..protocols.perfect_tree import spanning_tree_of
from ._bounds import register_bounds

__all__ = ["transport_cost", "min_exchanges", "perfect_tree_bounds",
           "EXCESS_CONSTANT"]

#: The constant c in "excess over the optimum <= c * D * min(T mod N, ...)" that the analysis in
#: docs/protocols/perfect-tree.md derives: phase 2 costs at most opt + r * height, phase 3 at
#: most r * height, and height <= D.
EXCESS_CONSTANT = 2
# A cost is at most (n - 1) (T + n) tokens times edges; from this bound on the costs are Python ints
# (int64 wrapped: [2**62, 0, 0, 0, 0] on path:5 cost 2**63 + 2 and came out 2**61 - 1).
_INT64_COSTS = 2**60
_NO_COST = {np.dtype(np.int64): np.iinfo(np.int64).max // 4, np.dtype(object): 2**200}  # (infinity)


def _subtree_sums(order, parent, values) -> np.ndarray:
    s = np.asarray(values, dtype=np.int64).copy()
    for v in order[:0:-1]:  # children before parents
        s[parent[v]] += s[v]
    return s


def transport_cost(tree, loads, targets) -> int:
    """Fewest token exchanges (tokens times edges crossed) from ``loads`` to ``targets`` on a tree.

    The closed form ``sum_e |S_e - G_e|`` (see the module docstring).
    """
    loads = np.asarray(loads, dtype=np.int64)
    targets = np.asarray(targets, dtype=np.int64)
    if exact_total(loads) != exact_total(targets):
        raise TokendistError("loads and targets hold different numbers of tokens")
    if tree.n <= 1:
        return 0
    order, parent, _ = rooted_tree(tree, 0)
    diff = _subtree_sums(order, parent, loads - targets)
    cross = np.abs(diff[order[1:]])
    top = int(cross.max()) if cross.size else 0
    return int(cross.sum()) if top * cross.size < 2**63 else sum(int(x) for x in cross)


def _min_plus(a: np.ndarray, b: np.ndarray, cap: int) -> np.ndarray:
    """``c[k] = min_{i+j=k} a[i] + b[j]`` for ``k <= cap``."""
    if a.size < b.size:
        a, b = b, a
    size = min(a.size + b.size - 1, cap + 1)
    c = np.full(size, _NO_COST[a.dtype], dtype=a.dtype)
    for j in range(min(b.size, size)):
        hi = min(a.size, size - j)
        np.minimum(c[j:j + hi], a[:hi] + b[j], out=c[j:j + hi])
    return c


def min_exchanges(tree, loads) -> int:
    """The optimum number of token exchanges to a perfect distribution on a tree (exact).

    Parameters
    ----------
    tree : Graph
        A tree.
    loads : array_like of int
        Initial tokens per node.

    Returns
    -------
    int
        ``min over ceiling sets C with |C| = T mod N`` of :func:`transport_cost` to the targets
        ``floor(T/N) + [v in C]``.

    Examples
    --------
    >>> from tokendist.graphs import path_graph
    >>> min_exchanges(path_graph(3), [3, 0, 0])   # 1 token to the middle, 1 token two hops
    3
    >>> min_exchanges(path_graph(3), [4, 0, 0])   # targets (2, 1, 1): 2 + 1 crossings
    3
    """
    loads = np.asarray(loads, dtype=np.int64)
    n = tree.n
    if n <= 1:
        return 0
    total = exact_total(loads)
    a, r = divmod(total, n)
    dtype = np.int64 if (n - 1) * (abs(total) + n) < _INT64_COSTS else object
    order, parent, _ = rooted_tree(tree, 0)
    size = _subtree_sums(order, parent, np.ones(n, dtype=np.int64))
    excess = _subtree_sums(order, parent, loads - a)  # S_v - a * size_v
    f: list = [None] * n
    own = np.zeros(min(1, r) + 1, dtype=dtype)  # a node is a ceiling node or not, at no cost
    for v in order[::-1]:
        g = own
        for c in tree.neighbours(int(v)):
            if c != parent[v]:
                g = _min_plus(g, f[c], r)
                f[c] = None
        if parent[v] >= 0:
            k = np.arange(g.size, dtype=np.int64)
            g = g + np.abs(excess[v] - k).astype(dtype)  # tokens crossing the edge to the parent
        f[v] = g
    return int(f[order[0]][r])


@register_bounds("perfect-tree")
def perfect_tree_bounds(graph, loads, params) -> dict:
    """The figures of Margara, Pistocchi, Vassura (Sec. 5) for one instance.

    On a non-tree graph the protocol runs on a spanning tree (``spanning_tree`` parameter); the
    figures are those of that tree.
    """
    tree = spanning_tree_of(graph, (params or {}).get("spanning_tree", "bfs"))
    loads = np.asarray(loads, dtype=np.int64)
    n, total = tree.n, exact_total(loads)
    diam = tree_diameter(tree)
    d = int(tree.max_degree) if tree.n > 1 else 0
    r = total % n
    opt = min_exchanges(tree, loads)
    logs = math.log2(max(total, 2)) + math.log2(max(n, 2))
    return {
        "T": total, "N": n, "D": diam, "max_degree": d, "T_mod_N": r,
        "optimum_token_exchanges": opt,
        "excess_bound_D_min_T_N": diam * min(total, n),
        "excess_bound_with_constant": EXCESS_CONSTANT * diam * r,
        "time_bound_TD": total * diam,
        "phase1_time_Dd": diam * d,
        "memory_bits_scale_max_dv_logT_logN": float(d * logs),
        "basis": "Margara, Pistocchi, Vassura, Sec. 5: time O(TD), exchanges <= opt + O(D min{T,N}),"
                 " memory Theta(d_v (log T + log N)); constant 2 derived in docs/protocols/perfect-tree.md",
    }
