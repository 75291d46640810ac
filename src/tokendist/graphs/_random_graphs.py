"""Random graph families: random regular graphs, connected G(n, p), random geometric graphs.

Every generator takes ``seed`` (None, int or ``numpy.random.Generator``) and draws only from it; the
spec families draw from the run's ``topology`` sub-stream, so the same seed builds the same graph in
every command. All three are vectorised and scale to 10^6 nodes.
"""

from __future__ import annotations

import math

import numpy as np

from .._random import make_rng
from ..errors import SpecError, TokendistError
from ._model import Graph
from ._specs import MAX_EDGES, check_size, parse_ints, topology

__all__ = ["random_regular_graph", "gnp_graph", "geometric_graph"]

def _switch_repair(a: np.ndarray, b: np.ndarray, n: int, rng: np.random.Generator, max_rounds: int = 10_000):
    """Remove self-loops and repeated edges of a multigraph by random degree-preserving switches.

    Each bad edge ``{a, b}`` (a loop, or a later copy of an edge) picks a uniformly random partner
    edge ``{c, d}``; a greedy set of disjoint pairs (no edge in two switches) is rewired to
    ``{a, c}, {b, d}`` or ``{a, d}, {b, c}`` (a fair coin). Rounds repeat until the graph is
    simple. Degrees never change.
    """
    m = a.size
    for _ in range(max_rounds):
        lo, hi = np.minimum(a, b), np.maximum(a, b)
        key = lo * n + hi
        bad = lo == hi
        # A plain sort finds the repeated keys (argsort of 10^7 keys is several times slower); only
        # the few edges carrying a repeated key are then ranked, and every copy but one is bad.
        ks = np.sort(key)
        rep = np.unique(ks[1:][ks[1:] == ks[:-1]])
        if rep.size:
            cand = np.flatnonzero(np.isin(key, rep))
            corder = cand[np.argsort(key[cand], kind="stable")]
            ck = key[corder]
            bad[corder[1:][ck[1:] == ck[:-1]]] = True
        bad_idx = np.flatnonzero(bad)
        if bad_idx.size == 0:
            return a, b
        partner = rng.integers(0, m, size=bad_idx.size)
        coin = rng.random(bad_idx.size) < 0.5
        # Switch only disjoint pairs this round (greedily, in the order drawn): an edge takes part
        # in one switch at most. The partner may itself be bad, otherwise a multigraph made only
        # of loops could never move. The loop is over the bad edges only: O(d^2) of them.
        used: set = set()
        ok = np.zeros(bad_idx.size, dtype=bool)
        for k, (e, f) in enumerate(zip(bad_idx.tolist(), partner.tolist())):
            if e != f and e not in used and f not in used:
                used.update((e, f))
                ok[k] = True
        e, f, coin = bad_idx[ok], partner[ok], coin[ok]
        ae, be, af, bf = a[e], b[e], a[f], b[f]
        a[e], b[e] = ae, np.where(coin, af, bf)
        a[f], b[f] = be, np.where(coin, bf, af)
    raise TokendistError("random-regular: could not remove loops and repeated edges; D too close to N?")


def random_regular_graph(n: int, d: int, seed=None) -> Graph:
    """A random d-regular simple graph on n nodes (configuration model with switch repair).

    Parameters
    ----------
    n, d : int
        Nodes and degree; ``n * d`` must be even and ``d < n``.
    seed : None, int or Generator

    Notes
    -----
    The n*d half-edges ("stubs") are paired by a uniform random permutation (the configuration
    model, Bollobás 1980); each self-loop and each repeated edge is then removed by a switch with a
    uniformly random other edge (:func:`_switch_repair`). For fixed d the pairing has about
    ``(d-1)/2`` loops and ``(d-1)^2/4`` double edges in expectation, so the result differs from the
    configuration-model pairing in O(1) edges; the distribution is close to, but **not exactly**,
    uniform over simple d-regular graphs (exact uniformity by rejection would need about
    ``exp((d^2-1)/4)`` restarts). When ``d > (n-1)/2`` the graph is the complement of a random
    ``(n-1-d)``-regular graph (switches converge slowly on dense graphs). The graph may be
    disconnected (always for d <= 1, and for d = 2 a union of cycles); for d >= 3 it is connected
    with probability 1 - o(1).

    Examples
    --------
    >>> g = random_regular_graph(10, 3, seed=1)
    >>> g.degrees.tolist() == [3] * 10
    True
    """
    rng = make_rng(seed)
    spec = f"random-regular:{n},{d}"
    if n < 1:
        raise SpecError(f"bad spec {spec!r}: N must be at least 1")
    if d >= n:
        raise SpecError(f"bad spec {spec!r}: the degree D must be below N")
    if (n * d) % 2:
        raise SpecError(f"bad spec {spec!r}: N*D must be even")
    # About 2 us per edge (random-regular:4000000,4: 16 s for 8M edges on this machine, busy).
    check_size(spec, n, n * d // 2, seconds_per_edge=2e-6)
    if d > (n - 1) / 2:
        comp = random_regular_graph(n, n - 1 - d, rng)
        a, b = np.triu_indices(n, 1)
        keep = np.ones(a.size, dtype=bool)
        # index of (u, v) in the row-major upper triangle
        cu, cv = comp.u.astype(np.int64), comp.v.astype(np.int64)
        keep[cu * (2 * n - cu - 1) // 2 + (cv - cu - 1)] = False
        return Graph(n, a[keep], b[keep], spec=spec)
    stubs = rng.permutation(np.repeat(np.arange(n, dtype=np.int64), d))
    a, b = _switch_repair(stubs[0::2].copy(), stubs[1::2].copy(), n, rng)
    return Graph(n, *_sorted(a, b, n), spec=spec)


def _gnp_edges(n: int, p: float, rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
    """The edges of one G(n, p) sample by geometric skipping (Batagelj and Brandes 2005).

    The pairs ``i < j`` are enumerated as ``k = j (j-1)/2 + i``; the gaps between chosen pairs are
    independent Geometric(p), so only the ~p n^2/2 chosen pairs are touched.
    """
    total = n * (n - 1) // 2
    if p <= 0.0 or total == 0:
        return np.zeros(0, np.int64), np.zeros(0, np.int64)
    if p >= 1.0:
        k = np.arange(total, dtype=np.int64)
    else:
        chunks, pos = [], -1
        while pos < total:
            want = p * (total - pos)
            gaps = rng.geometric(p, size=int(want + 6 * math.sqrt(want) + 16))
            ks = pos + np.cumsum(gaps, dtype=np.int64)
            chunks.append(ks)
            pos = int(ks[-1])
        k = np.concatenate(chunks)
        k = k[k < total]
    j = np.floor((1.0 + np.sqrt(1.0 + 8.0 * k.astype(np.float64))) / 2.0).astype(np.int64)
    # Correct floating-point rounding of the inverse triangular number.
    j = np.where(j * (j - 1) // 2 > k, j - 1, j)
    j = np.where((j + 1) * j // 2 <= k, j + 1, j)
    i = k - j * (j - 1) // 2
    return i, j


def gnp_graph(n: int, p: float, seed=None, *, connected: bool = True, max_tries: int = 100) -> Graph:
    """An Erdős-Rényi graph G(n, p), conditioned on being connected.

    Parameters
    ----------
    n : int
        Nodes.
    p : float
        Edge probability, 0 <= p <= 1.
    seed : None, int or Generator
    connected : bool
        Resample until connected (default), which samples G(n, p) conditioned on connectivity
        exactly (rejection). After ``max_tries`` disconnected samples a :class:`TokendistError`
        says that p is too small (the threshold is ln(n)/n).

    Examples
    --------
    >>> gnp_graph(50, 0.2, seed=3).is_connected
    True
    """
    rng = make_rng(seed)
    spec = f"gnp:{n},{p}"
    if n < 1:
        raise SpecError(f"bad spec {spec!r}: N must be at least 1")
    if not (0.0 <= p <= 1.0):
        raise SpecError(f"bad spec {spec!r}: P must be a probability in [0, 1]")
    check_size(spec, n)
    if p * n * (n - 1) / 2 > MAX_EDGES:
        raise SpecError(f"bad spec {spec!r}: about {p * n * (n - 1) / 2:.3g} edges is too many")
    check_size(spec, n, int(p * n * (n - 1) / 2))  # the expected edges against the memory available
    if connected and n > 1:
        # Fail fast below the connectivity threshold: with mu expected isolated nodes a sample has
        # none with probability about exp(-mu) (Poisson limit), so for mu > 5 fewer than 1 in 150
        # samples are connected and max_tries = 100 rejections would almost surely fail anyway.
        mu = n * math.exp((n - 1) * math.log1p(-p)) if p < 1.0 else 0.0
        if mu > 5.0:
            raise TokendistError(f"{spec}: a connected sample is too unlikely (about {mu:.3g} isolated nodes "
                                 f"expected); the connectivity threshold is P = ln(N)/N = {math.log(n) / n:.3g}")
    for _ in range(max_tries if connected else 1):
        i, j = _gnp_edges(n, p, rng)
        g = Graph(n, *_sorted(i, j, n), spec=spec)
        if not connected or _connected(g):
            return g
    raise TokendistError(f"{spec}: {max_tries} samples were all disconnected; P is too small for a connected "
                         f"graph (the connectivity threshold is ln(N)/N = {math.log(max(n, 2)) / n:.3g})")


def _connected(g: Graph) -> bool:
    """Connectivity from the CSR arrays (strong components of the symmetric digraph need neither
    the COO -> CSR conversion nor the transpose of ``Graph.is_connected``); cached on the graph."""
    import scipy.sparse as sp
    from scipy.sparse.csgraph import connected_components

    a = sp.csr_array((np.ones(g.indices.size, dtype=np.int8), g.indices, g.indptr), shape=(g.n, g.n))
    ok = connected_components(a, directed=True, connection="strong", return_labels=False) == 1
    g.__dict__["is_connected"] = bool(ok)  # the cached_property's slot: the same value it would compute
    return bool(ok)


def _sorted(i, j, n):
    """Edge arrays ``u < v`` sorted by ``(u, v)`` for the trusted constructor (edges known simple)."""
    key = np.sort(np.minimum(i, j) * n + np.maximum(i, j))
    return key // n, key % n


def geometric_graph(n: int, r: float, seed=None, *, wrap: bool = False) -> Graph:
    """A random geometric graph: n uniform points in the unit square, edges between points at
    distance at most r.

    Parameters
    ----------
    n : int
    r : float
        Disc radius, r >= 0.
    seed : None, int or Generator
    wrap : bool
        Measure distance on the torus [0, 1)^2 (wrap-around), as in the mobile ad-hoc networks of
        Elsässer et al. (2006), Section 4.

    Notes
    -----
    Points are ``rng.random((n, 2))`` and node i sits at ``positions[i]``. Pairs come from
    ``scipy.spatial.cKDTree.query_pairs`` (with ``boxsize=1`` when wrapping). The graph may be
    disconnected; protocols that need connectivity refuse it.
    """
    rng = make_rng(seed)
    spec = f"geometric:{n},{r}" + (",wrap" if wrap else "")
    if n < 1:
        raise SpecError(f"bad spec {spec!r}: N must be at least 1")
    if not (r >= 0.0 and math.isfinite(r)):
        raise SpecError(f"bad spec {spec!r}: R must be a non-negative number")
    check_size(spec, n)
    expected = min(1.0, math.pi * r * r) * n * (n - 1) / 2
    if expected > MAX_EDGES:
        raise SpecError(f"bad spec {spec!r}: too many edges")
    check_size(spec, n, int(expected))  # against the memory available
    from scipy.spatial import cKDTree

    pos = rng.random((n, 2))
    tree = cKDTree(pos, boxsize=1.0 if wrap else None)
    pairs = tree.query_pairs(r, output_type="ndarray").astype(np.int64).reshape(-1, 2)
    i, j = _sorted(pairs[:, 0], pairs[:, 1], n)
    return Graph(n, i, j, spec=spec, positions=pos)


# ---------------------------------------------------------------------- registration
def _float(spec: str, text: str, what: str) -> float:
    try:
        x = float(text)
    except ValueError:
        raise SpecError(f"bad spec {spec!r}: {what} {text.strip()!r} is not a number") from None
    if not math.isfinite(x):
        raise SpecError(f"bad spec {spec!r}: {what} must be finite")
    return x


@topology("random-regular", "random-regular:N,D",
          "random D-regular graph (configuration model + switch repair, seeded)", randomized=True)
def _random_regular_spec(arg, rng):
    n, d = parse_ints(f"random-regular:{arg}", arg, 2, minimum=0)
    return random_regular_graph(n, d, rng)


@topology("gnp", "gnp:N,P", "Erdős-Rényi G(N,P) conditioned on being connected (resampled, seeded)",
          randomized=True)
def _gnp_spec(arg, rng):
    spec = f"gnp:{arg}"
    parts = arg.split(",")
    if len(parts) != 2:
        raise SpecError(f"bad spec {spec!r}: expected N,P")
    (n,) = parse_ints(spec, parts[0], 1, minimum=1)
    return gnp_graph(n, _float(spec, parts[1], "P"), rng)


@topology("geometric", "geometric:N,R[,wrap]",
          "random geometric graph: N points in the unit square, edges at distance <= R (seeded)",
          randomized=True)
def _geometric_spec(arg, rng):
    spec = f"geometric:{arg}"
    parts = [p.strip() for p in arg.split(",")]
    if len(parts) not in (2, 3) or (len(parts) == 3 and parts[2].lower() != "wrap"):
        raise SpecError(f"bad spec {spec!r}: expected N,R or N,R,wrap")
    (n,) = parse_ints(spec, parts[0], 1, minimum=1)
    return geometric_graph(n, _float(spec, parts[1], "R"), rng, wrap=len(parts) == 3)
