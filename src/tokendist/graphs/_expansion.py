"""Expansion and conductance: edge expansion alpha, node expansion mu (Ghosh et al. 1995), and the
electrical and fluid conductance Gamma and Phi (Subramanian and Scherson 1994).

Definitions (quoted in the docstrings): for small graphs each quantity is computed exactly, by
enumerating every node set (bitmasks, vectorised) or from the Laplacian pseudo-inverse; otherwise
tokendist returns a certified interval ``[lower, upper]``. Every result is an :class:`Estimate`
that says which.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass

import numpy as np

from ..errors import TokendistError
from ._spectrum import DENSE_LIMIT, _dense_eigh, lambda2_pair, laplacian

__all__ = ["Estimate", "edge_expansion", "node_expansion", "fluid_conductance", "electrical_conductance",
           "effective_resistances", "max_degree_diffusivity", "EXACT_LIMIT", "MAX_EXACT_LIMIT"]

#: Default largest n for exhaustive enumeration of node sets (2^20 bitmasks, about a second).
EXACT_LIMIT = 20
#: Hard cap on ``exact_limit`` (2^26 bitmasks take minutes).
MAX_EXACT_LIMIT = 26


@dataclass(frozen=True)
class Estimate:
    """A graph quantity, exact or bracketed.

    Attributes
    ----------
    value : float
        The exact value when ``exact``; otherwise the best certified estimate (the upper bound
        for the expansions, which is attained by an actual node set).
    lower, upper : float
        Certified bounds: ``lower <= true value <= upper`` (equal to ``value`` when exact).
    exact : bool
    method : str
        How it was computed, e.g. ``"exhaustive over 2^16 node sets"`` or
        ``"Cheeger lower bound lambda2/2; best sweep cut of the Fiedler vector"``.
    """

    value: float
    lower: float
    upper: float
    exact: bool
    method: str

    def to_dict(self) -> dict:
        return asdict(self)


def _check_limit(exact_limit: int) -> int:
    exact_limit = int(exact_limit)
    if exact_limit > MAX_EXACT_LIMIT:
        raise TokendistError(f"exact_limit {exact_limit} is too large (at most {MAX_EXACT_LIMIT}: 2^n node sets)")
    return exact_limit


def _require(graph, what):
    if graph.n < 2:
        raise TokendistError(f"the {what} needs at least 2 nodes")
    if not graph.is_connected:
        raise TokendistError(f"the {what} of a disconnected graph is 0; {graph.spec or 'this graph'} is disconnected")


def max_degree_diffusivity(graph) -> np.ndarray:
    """The diffusivity ``P_ij = 1 / (2 max(d_i, d_j))`` per edge (symmetric, ``P_ii >= 1/2``).

    The default diffusion matrix of tokendist's DIFFUSE (Subramanian and Scherson 1994, Sec. 2
    only require P symmetric, stochastic, positive on the edges, ``P_ii >= 1/2``; this choice is the
    one :func:`tokendist.protocols.default_diffusivity` uses).
    """
    d = graph.degrees
    return 1.0 / (2.0 * np.maximum(d[graph.u], d[graph.v]))


def _plain(graph, w):
    """The same graph with edge weights ``w`` as capacities and no speeds (these quantities ignore speeds)."""
    cache = graph.__dict__.setdefault("_expansion_cache", {})
    key = hash(w.tobytes())
    if key not in cache:
        cache[key] = type(graph)(graph.n, graph.u, graph.v, spec=graph.spec, capacities=w)
    return cache[key]


def _weights(graph, weights) -> np.ndarray:
    if weights is None or (isinstance(weights, str) and weights == "unit"):
        return np.ones(graph.m)
    if isinstance(weights, str):
        if weights == "max-degree":
            return max_degree_diffusivity(graph)
        raise TokendistError(f"unknown edge weights {weights!r}; use 'unit', 'max-degree' or an array")
    w = np.asarray(weights, dtype=np.float64)
    if w.shape != (graph.m,) or not np.all(np.isfinite(w)) or w.min() <= 0:
        raise TokendistError(f"edge weights must be {graph.m} finite positive numbers")
    return w


# ---------------------------------------------------------------------------- exhaustive search
def _popcount(x: np.ndarray) -> np.ndarray:
    if hasattr(np, "bitwise_count"):
        return np.bitwise_count(x).astype(np.int64)
    x = x.astype(np.uint64)
    c = np.zeros(x.shape, dtype=np.int64)
    while np.any(x):
        c += (x & np.uint64(1)).astype(np.int64)
        x >>= np.uint64(1)
    return c


def _exhaustive(graph, weights, *, node: bool):
    """Minimum over node sets S, 1 <= |S| <= n/2, of cut(S)/|S| (weighted edges) or |N(S) minus S|/|S|.

    Every set is a bitmask ``0 .. 2^n - 1``, processed in blocks of 2^18: for the edge version the
    cut weight is the sum over edges of ``w_e * (bit u xor bit v)``; for the node version the
    neighbourhood is the OR of the neighbour masks of the members. Returns (value, argmin mask).
    """
    n = graph.n
    nbmask = np.zeros(n, dtype=np.int64)
    np.bitwise_or.at(nbmask, graph.u, np.left_shift(1, graph.v))
    np.bitwise_or.at(nbmask, graph.v, np.left_shift(1, graph.u))
    best, best_mask = math.inf, 0
    block = 1 << 18
    for start in range(1, 1 << n, block):
        s = np.arange(start, min(start + block, 1 << n), dtype=np.int64)
        size = _popcount(s)
        keep = size <= n // 2
        s, size = s[keep], size[keep]
        if s.size == 0:
            continue
        if node:
            nb = np.zeros_like(s)
            for i in range(n):
                nb |= np.where((s >> i) & 1 == 1, nbmask[i], 0)
            num = _popcount(nb & ~s).astype(np.float64)
        else:
            num = np.zeros(s.size)
            for e in range(graph.m):
                num += weights[e] * (((s >> graph.u[e]) ^ (s >> graph.v[e])) & 1)
        ratio = num / size
        i = int(np.argmin(ratio))
        if ratio[i] < best:
            best, best_mask = float(ratio[i]), int(s[i])
    return best, best_mask


# ---------------------------------------------------------------------------- sweep cuts
def _sweep(graph, weights, order):
    """The edge and node expansion of every prefix S of ``order`` with |S| <= n/2 (vectorised).

    Returns (best cut(S)/|S|, best |N(S) minus S|/|S|) over the prefixes: both are values of actual
    sets, hence upper bounds on the minima.
    """
    n = graph.n
    pos = np.empty(n, dtype=np.int64)
    pos[order] = np.arange(n)
    pu, pv = pos[graph.u], pos[graph.v]
    lo, hi = np.minimum(pu, pv), np.maximum(pu, pv)
    # Edge e is cut by the prefix of length k exactly when lo < k <= hi.
    delta = np.zeros(n + 1)
    np.add.at(delta, lo + 1, weights)
    np.add.at(delta, hi + 1, -weights)
    cut = np.cumsum(delta)[1:]  # cut[k-1]: prefix of length k
    # Node x outside a prefix of length k is a neighbour of it iff its earliest neighbour
    # position is < k and its own position is >= k.
    first_nb = np.full(n, n, dtype=np.int64)
    np.minimum.at(first_nb, graph.u, pv)
    np.minimum.at(first_nb, graph.v, pu)
    fpos = first_nb[order]  # by position
    cnt = np.zeros(n + 2)
    own = np.arange(n)
    ok = fpos < own  # boundary for k in (fpos, own]
    np.add.at(cnt, fpos[ok] + 1, 1)
    np.add.at(cnt, own[ok] + 1, -1)
    bnd = np.cumsum(cnt)[1:n + 1]
    k = np.arange(1, n // 2 + 1)
    return float((cut[k - 1] / k).min()), float((bnd[k - 1] / k).min())


def _spectral_bounds(graph, w):
    """lambda2 of the weighted Laplacian and the two sweep upper bounds from its Fiedler vector."""
    g = _plain(graph, w)
    lam, x = lambda2_pair(g, generalized=True)
    vectors = [x]
    if graph.n <= DENSE_LIMIT:
        # The dense solve has every eigenvector: also sweep the next few. When lambda2 is multiple
        # (tori, hypercubes) the solver's Fiedler vector is an arbitrary mix of the eigenspace and
        # its sweep cut can be poor; every sweep set is an actual set, so the bound stays valid.
        vectors = list(_dense_eigh(g, True)[1][:, 1:min(graph.n, 7)].T)
    best_e = best_n = math.inf
    for v in vectors:
        order = np.argsort(v, kind="stable")
        for o in (order, order[::-1]):
            e, nn = _sweep(graph, w, o)
            best_e, best_n = min(best_e, e), min(best_n, nn)
    return lam, best_e, best_n


def _weighted_expansion(graph, w, exact_limit, what):
    _require(graph, what)
    exact_limit = _check_limit(exact_limit)
    if graph.n <= exact_limit:
        val, _ = _exhaustive(graph, w, node=False)
        return Estimate(val, val, val, True, f"exhaustive over all 2^{graph.n} node sets")
    lam, sweep, _ = _spectral_bounds(graph, w)
    dmax = float(np.bincount(np.concatenate([graph.u, graph.v]), weights=np.concatenate([w, w]),
                             minlength=graph.n).max())
    lower = lam / 2.0
    upper = min(sweep, math.sqrt(2.0 * dmax * lam))
    return Estimate(upper, lower, upper, False,
                    "bounds: lambda2/2 <= h (Cheeger, Mohar 1989) and the best sweep cut of the low "
                    "eigenvectors (an actual set), capped by sqrt(2 D lambda2) (Jerrum-Sinclair)")


def edge_expansion(graph, *, exact_limit: int = EXACT_LIMIT) -> Estimate:
    """Edge expansion alpha (Ghosh et al. 1995, Sec. 1 and 2).

    "The largest value such that for every set S of n/2 or fewer nodes in G, there are at least
    alpha |S| edges in G with one endpoint in S and the other not in S", i.e.
    ``alpha = min_{1 <= |S| <= n/2} |E(S, V minus S)| / |S|``.

    Exact for ``n <= exact_limit`` (default 20, at most 26) by enumerating every bitmask.
    Otherwise bounds: ``lambda2 / 2 <= alpha`` (for ``|S| <= n/2``,
    ``|E(S, V minus S)| >= lambda2 |S| |V minus S| / n >= lambda2 |S| / 2``) and
    ``alpha <= min(best sweep cut of the Fiedler vector, sqrt(2 Delta lambda2))``.

    Raises
    ------
    TokendistError
        Fewer than 2 nodes or a disconnected graph (its expansion is 0).

    Examples
    --------
    >>> from tokendist.graphs import ring_graph
    >>> edge_expansion(ring_graph(8)).value   # an arc of 4 nodes: 2 edges leave it
    0.5
    """
    return _weighted_expansion(graph, np.ones(graph.m), exact_limit, "edge expansion")


def node_expansion(graph, *, exact_limit: int = EXACT_LIMIT) -> Estimate:
    """Node expansion mu (Ghosh et al. 1995, Sec. 1 and 2).

    "The largest value such that every set S of n/2 or fewer nodes in G has at least mu |S|
    neighbors outside of S", i.e. ``mu = min_{1 <= |S| <= n/2} |N(S) minus S| / |S|``.

    Exact for ``n <= exact_limit`` by enumeration. Otherwise bounds: ``alpha / Delta <= mu``
    (every outside neighbour takes at most Delta cut edges), so ``lambda2 / (2 Delta) <= mu``; and
    ``mu <=`` the best node expansion of a sweep set of the Fiedler vector, and ``mu <= alpha``'s
    upper bound (``|N(S) minus S| <= |E(S, V minus S)|``).
    """
    _require(graph, "node expansion")
    exact_limit = _check_limit(exact_limit)
    if graph.n <= exact_limit:
        val, _ = _exhaustive(graph, None, node=True)
        return Estimate(val, val, val, True, f"exhaustive over all 2^{graph.n} node sets")
    w = np.ones(graph.m)
    lam, esweep, nsweep = _spectral_bounds(graph, w)
    delta = graph.max_degree
    lower = lam / (2.0 * delta)
    upper = min(nsweep, esweep, math.sqrt(2.0 * delta * lam))
    return Estimate(upper, lower, upper, False,
                    "bounds: lambda2/(2 Delta) <= mu (Cheeger, mu >= alpha/Delta) and the best sweep set of the "
                    "low eigenvectors (an actual set), mu <= alpha")


def fluid_conductance(graph, *, weights="max-degree", exact_limit: int = EXACT_LIMIT) -> Estimate:
    """Fluid conductance Phi (Subramanian and Scherson 1994, Sec. 3).

    Each edge is a pipe of capacity ``P_ij`` (the diffusivity matrix); ``CAP(S, V minus S)`` is the
    total capacity between S and its complement, and
    ``Phi = min_S CAP(S, V minus S) / min(|S|, |V minus S|)`` (the conductance of the Markov chain
    P with uniform stationary distribution, Jerrum and Sinclair 1989). This equals the weighted
    edge expansion over ``1 <= |S| <= n/2``.

    Parameters
    ----------
    weights : "max-degree" (default), "unit" or array of m floats
        The ``P_ij``: ``1 / (2 max(d_i, d_j))`` (tokendist's default diffusivity), 1 per edge, or
        given.

    Exact for ``n <= exact_limit``; otherwise ``lambda2(L_P) / 2 <= Phi <= min(best sweep cut,
    sqrt(2 lambda2(L_P)))``, where ``L_P = I - P`` restricted to the edges (``1 - lambda2(L_P)`` is
    the second largest eigenvalue of P; Jerrum-Sinclair: ``lambda2(L_P) >= Phi^2 / 2`` when every
    weighted degree is at most 1).
    """
    w = _weights(graph, weights)
    return _weighted_expansion(graph, w, exact_limit, "fluid conductance")


def effective_resistances(graph, *, weights="max-degree") -> np.ndarray:
    """The matrix of effective resistances ``RES(u, v)`` with edge resistances ``1 / P_ij`` (dense).

    ``RES(u, v) = L+_uu + L+_vv - 2 L+_uv`` with ``L+`` the pseudo-inverse of the weighted
    Laplacian (edge conductances ``P_ij``). ``O(n^3)``; refuses ``n > DENSE_LIMIT``.
    """
    _require(graph, "effective resistance")
    if graph.n > DENSE_LIMIT:
        raise TokendistError(f"dense effective resistances are limited to {DENSE_LIMIT} nodes")
    w = _weights(graph, weights)
    lap = laplacian(_plain(graph, w), generalized=True).toarray()
    # L+ = (L + J/n)^-1 - J/n for a connected graph (J the all-ones matrix).
    n = graph.n
    lp = np.linalg.inv(lap + 1.0 / n) - 1.0 / n
    d = np.diag(lp)
    return d[:, None] + d[None, :] - 2.0 * lp


def electrical_conductance(graph, *, weights="max-degree", exact_limit: int = DENSE_LIMIT) -> Estimate:
    """Electrical conductance Gamma (Subramanian and Scherson 1994, Sec. 3).

    Edge ``ij`` is a resistor of resistance ``1 / P_ij``; ``RES(u, v)`` is the effective
    resistance (the voltage of v w.r.t. u when a unit current enters at v and leaves at u), and
    ``Gamma = min_{u, v} 1 / RES(u, v) = 1 / max_{u, v} RES(u, v)``.

    Exact for ``n <= exact_limit`` (default ``DENSE_LIMIT`` = 2000) from the Laplacian
    pseudo-inverse. Otherwise bounds on ``R = max RES``: ``R >= RES(a, b)`` for the far pair
    ``(a, b)`` of a double BFS sweep (one sparse solve), and ``R <= min(2 / lambda2(L_P),
    2 ecc(0) max_e 1/P_e)`` (``RES(u, v) <= |e_u - e_v|^2 / lambda2``; a path of at most
    ``2 ecc(0)`` edges in series); Gamma's bounds are the reciprocals.
    """
    _require(graph, "electrical conductance")
    w = _weights(graph, weights)
    if graph.n <= exact_limit and graph.n <= DENSE_LIMIT:
        r = float(effective_resistances(graph, weights=w).max())
        return Estimate(1.0 / r, 1.0 / r, 1.0 / r, True, "1 / max effective resistance from the Laplacian "
                                                         "pseudo-inverse")
    from scipy.sparse.linalg import spsolve

    from ._properties import bfs_distances

    plain = _plain(graph, w)
    d0 = bfs_distances(graph, [0])[0]
    a = int(np.argmax(d0))
    b = int(np.argmax(bfs_distances(graph, [a])[0]))
    lap = laplacian(plain, generalized=True).tocsc()
    # Ground node a: solve the reduced system for a unit current entering at b.
    keep = np.flatnonzero(np.arange(graph.n) != a)
    rhs = np.zeros(graph.n - 1)
    rhs[np.searchsorted(keep, b)] = 1.0
    volt = spsolve(lap[keep][:, keep].tocsc(), rhs)
    r_low = float(volt[np.searchsorted(keep, b)])
    lam, _ = lambda2_pair(plain, generalized=True)
    r_up = min(2.0 / lam, 2.0 * float(d0.max()) * float((1.0 / w).max()))
    return Estimate(1.0 / r_low, 1.0 / r_up, 1.0 / r_low, False,
                    "bounds: 1/Gamma >= RES(a, b) for a double-sweep far pair (sparse solve); "
                    "1/Gamma <= min(2/lambda2(L_P), 2 ecc(0) max 1/P_e)")
