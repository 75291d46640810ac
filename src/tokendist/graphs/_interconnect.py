"""Interconnection networks: butterflies, FFT, cube-connected cycles, de Bruijn, shuffle-exchange,
and the Lubotzky-Phillips-Sarnak Ramanujan graphs.

These are the test topologies of Elsässer, Monien and Schamberger (2006), Section 4.1 and Table 1
(BFLY, FFT, CCC, DEBR, SE, RAMAN). Every generator is a plain vectorised function returning one
:class:`Graph`; the numbering of every family is documented in ``docs/guide/topologies.md``.

References
----------
.. [1] F. T. Leighton, *Introduction to Parallel Algorithms and Architectures: Arrays, Trees,
   Hypercubes*, Morgan Kaufmann 1992, Sections 3.1-3.3 (butterfly, wrapped butterfly, CCC,
   shuffle-exchange, de Bruijn).
.. [2] A. Lubotzky, R. Phillips, P. Sarnak, Ramanujan graphs, *Combinatorica* 8(3):261-277, 1988.
.. [3] G. Davidoff, P. Sarnak, A. Valette, *Elementary Number Theory, Group Theory and Ramanujan
   Graphs*, Cambridge University Press 2003, Sections 2.6 and 4.2 (the quaternions of norm p for
   p = 1 and p = 3 mod 4, and the map to PGL(2, F_q) through a solution of x^2 + y^2 + 1 = 0).
"""

from __future__ import annotations

import math

import numpy as np

from ..errors import SpecError
from ._model import Graph
from ._specs import check_size, parse_ints, topology

__all__ = ["butterfly_graph", "fft_graph", "ccc_graph", "debruijn_graph", "shuffle_exchange_graph",
           "lps_graph", "lps_quotient_graph", "lps_generators"]


def _graph(n, a, b, spec, **kw) -> Graph:
    return Graph.from_edges(n, np.stack([np.asarray(a, np.int64), np.asarray(b, np.int64)], axis=1), spec=spec, **kw)


# ---------------------------------------------------------------------- butterflies and CCC
def butterfly_graph(d: int) -> Graph:
    """The wrapped butterfly of dimension d (d >= 3): d * 2^d nodes, 4-regular.

    Node ``(l, w)`` (level ``0 <= l < d``, row ``0 <= w < 2^d``) has index ``l * 2^d + w``; it is
    joined to ``((l+1) mod d, w)`` (straight edge) and ``((l+1) mod d, w xor 2^l)`` (cross edge)
    (Leighton 1992, Section 3.1.2). For d < 3 the wrap-around produces parallel edges, so the
    family starts at d = 3.

    Examples
    --------
    >>> g = butterfly_graph(6)
    >>> g.n, g.m, set(g.degrees.tolist())
    (384, 768, {4})
    """
    if d < 3:
        raise SpecError(f"a wrapped butterfly needs d >= 3 (got {d})")
    rows = 1 << d
    n = d * rows
    check_size(f"butterfly:{d}", n)
    node = np.arange(n, dtype=np.int64)
    lev, w = node // rows, node % rows
    nxt = (lev + 1) % d
    a = np.concatenate([node, node])
    b = np.concatenate([nxt * rows + w, nxt * rows + (w ^ (np.int64(1) << lev))])
    return _graph(n, a, b, f"butterfly:{d}")


def fft_graph(d: int) -> Graph:
    """The (unwrapped) butterfly, or FFT network, of dimension d: d + 1 levels of 2^d nodes.

    Node ``(l, w)`` (``0 <= l <= d``) has index ``l * 2^d + w``; for ``l < d`` it is joined to
    ``(l+1, w)`` and ``(l+1, w xor 2^l)`` (Leighton 1992, Section 3.1). Levels 0 and d have degree
    2, the others degree 4; ``2 d 2^d`` edges.
    """
    if d < 1:
        raise SpecError(f"an FFT network needs d >= 1 (got {d})")
    rows = 1 << d
    n = (d + 1) * rows
    check_size(f"fft:{d}", n)
    node = np.arange(d * rows, dtype=np.int64)          # the nodes of levels 0..d-1
    lev, w = node // rows, node % rows
    a = np.concatenate([node, node])
    b = np.concatenate([node + rows, (lev + 1) * rows + (w ^ (np.int64(1) << lev))])
    return _graph(n, a, b, f"fft:{d}")


def ccc_graph(d: int) -> Graph:
    """The cube-connected cycles of dimension d (d >= 3): d * 2^d nodes, 3-regular.

    Node ``(w, i)`` (hypercube corner ``w``, cycle position ``0 <= i < d``) has index
    ``w * d + i``: the cycle of corner w is the block ``w*d .. w*d + d - 1``. Cycle edges
    ``(w, i) ~ (w, (i+1) mod d)``, cube edges ``(w, i) ~ (w xor 2^i, i)`` (Preparata and Vuillemin
    1981; Leighton 1992, Section 3.2.1). For d < 3 the cycle degenerates, so the family starts at 3.
    """
    if d < 3:
        raise SpecError(f"cube-connected cycles need d >= 3 (got {d})")
    n = d << d
    check_size(f"ccc:{d}", n)
    node = np.arange(n, dtype=np.int64)
    w, i = node // d, node % d
    lo = (w >> i) & 1 == 0                               # each cube edge once, from its lower corner
    a = np.concatenate([node, node[lo]])
    b = np.concatenate([w * d + (i + 1) % d, ((w ^ (np.int64(1) << i)) * d + i)[lo]])
    return _graph(n, a, b, f"ccc:{d}")


# ---------------------------------------------------------------------- de Bruijn, shuffle-exchange
def debruijn_graph(d: int) -> Graph:
    """The undirected binary de Bruijn graph on 2^d nodes.

    ``x ~ 2x mod 2^d`` and ``x ~ 2x + 1 mod 2^d``, the undirected version of the shift digraph;
    the self-loops at 0 and 2^d - 1 are dropped and parallel edges (from a 2-cycle such as
    ``01 <-> 10``) are merged (Leighton 1992, Section 3.3.2), so degrees are 2, 3 or 4.
    """
    if d < 1:
        raise SpecError(f"a de Bruijn graph needs d >= 1 (got {d})")
    n = 1 << d
    check_size(f"debruijn:{d}", n)
    x = np.arange(n, dtype=np.int64)
    mask = np.int64(n - 1)
    a = np.concatenate([x, x])
    b = np.concatenate([(2 * x) & mask, (2 * x + 1) & mask])
    return _graph(n, a, b, f"debruijn:{d}", drop_loops=True, merge_parallel=True)


def shuffle_exchange_graph(d: int) -> Graph:
    """The shuffle-exchange graph on 2^d nodes.

    Exchange edges ``x ~ x xor 1``, shuffle edges ``x ~ rotl(x)`` (rotate the d-bit word left by
    one); shuffle self-loops (at 0 and 2^d - 1) are dropped and parallel edges merged (Leighton
    1992, Section 3.3.1). Degrees are 1, 2 or 3.
    """
    if d < 1:
        raise SpecError(f"a shuffle-exchange graph needs d >= 1 (got {d})")
    n = 1 << d
    check_size(f"shuffle-exchange:{d}", n)
    x = np.arange(n, dtype=np.int64)
    mask = np.int64(n - 1)
    rot = ((x << 1) | (x >> (d - 1))) & mask
    a = np.concatenate([x, x])
    b = np.concatenate([x ^ 1, rot])
    return _graph(n, a, b, f"shuffle-exchange:{d}", drop_loops=True, merge_parallel=True)


# ---------------------------------------------------------------------- LPS Ramanujan graphs
def _is_prime(x: int) -> bool:
    if x < 2:
        return False
    f = 2
    while f * f <= x:
        if x % f == 0:
            return False
        f += 1
    return True


def _legendre(a: int, q: int) -> int:
    r = pow(a % q, (q - 1) // 2, q)
    return -1 if r == q - 1 else r


def _norm_p_quaternions(p: int) -> np.ndarray:
    """The p + 1 quaternions ``a0 + a1 i + a2 j + a3 k`` of norm p chosen by LPS (1988), Section 2.

    For p = 1 mod 4: a0 odd and positive, a1, a2, a3 even. For p = 3 mod 4 (the case p = 3 of
    Elsässer et al.'s RAMAN graphs): a0 even, and either a0 > 0 or a0 = 0 and a1 > 0
    (Davidoff, Sarnak, Valette 2003, Section 2.6). Either rule picks one representative of each
    class of ``alpha`` modulo the 8 units ``+-1, +-i, +-j, +-k``; Jacobi's four-square theorem
    gives exactly p + 1 of them.
    """
    r = math.isqrt(p)
    rng = np.arange(-r, r + 1)
    a0, a1, a2, a3 = (c.ravel() for c in np.meshgrid(rng, rng, rng, rng, indexing="ij"))
    ok = a0 * a0 + a1 * a1 + a2 * a2 + a3 * a3 == p
    if p % 4 == 1:
        ok &= (a0 > 0) & (a0 % 2 == 1) & (a1 % 2 == 0) & (a2 % 2 == 0) & (a3 % 2 == 0)
    else:
        ok &= (a0 % 2 == 0) & ((a0 > 0) | ((a0 == 0) & (a1 > 0)))
    sol = np.stack([a0[ok], a1[ok], a2[ok], a3[ok]], axis=1)
    assert sol.shape[0] == p + 1, "Jacobi's four-square count failed"  # a bug, not a user error
    return sol


def lps_generators(p: int, q: int) -> np.ndarray:
    """The p + 1 LPS generators as 2x2 matrices over F_q, shape ``(p+1, 2, 2)``, entries in 0..q-1.

    A quaternion ``alpha = (a0, a1, a2, a3)`` maps to
    ``[[a0 + a1 x + a3 y, -a1 y + a2 + a3 x], [-a1 y - a2 + a3 x, a0 - a1 x - a3 y]]`` mod q, where
    ``x^2 + y^2 + 1 = 0`` mod q (the smallest such x, then the smaller root y). This is an isomorphism of the
    quaternion algebra mod q onto ``M_2(F_q)`` with determinant = norm = p (Davidoff, Sarnak,
    Valette 2003, Section 4.2); for q = 1 mod 4 it is conjugate to LPS's
    ``[[a0 + i a1, a2 + i a3], [-a2 + i a3, a0 - i a1]]`` with ``i^2 = -1``.
    """
    sq = {}
    for t in range(q):
        sq.setdefault((t * t) % q, t)  # the smaller square root
    x = y = None
    for xx in range(q):
        need = (-1 - xx * xx) % q
        if need in sq:
            x, y = xx, sq[need]
            break
    assert x is not None  # every odd prime q has a solution
    s = _norm_p_quaternions(p)
    a0, a1, a2, a3 = s.T
    m = np.empty((len(s), 2, 2), dtype=np.int64)
    m[:, 0, 0] = a0 + a1 * x + a3 * y
    m[:, 0, 1] = -a1 * y + a2 + a3 * x
    m[:, 1, 0] = -a1 * y - a2 + a3 * x
    m[:, 1, 1] = a0 - a1 * x - a3 * y
    return m % q


def _check_pq(spec: str, p: int, q: int) -> None:
    if not (_is_prime(p) and p % 2 == 1):
        raise SpecError(f"bad spec {spec!r}: P must be an odd prime (got {p})")
    if not (_is_prime(q) and q % 2 == 1):
        raise SpecError(f"bad spec {spec!r}: Q must be an odd prime (got {q})")
    if p == q:
        raise SpecError(f"bad spec {spec!r}: P and Q must be different primes")
    if p > 1000:
        raise SpecError(f"bad spec {spec!r}: P at most 1000")
    if q > 400:
        raise SpecError(f"bad spec {spec!r}: Q at most 400 (the Cayley graph has about Q^3 nodes)")


def _normalise(m: np.ndarray, q: int, inv: np.ndarray) -> np.ndarray:
    """Scale each matrix (rows ``a, b, c, d``) so that its first non-zero entry of (a, b) is 1."""
    a, b = m[:, 0], m[:, 1]
    s = np.where(a != 0, inv[a], inv[b])
    return (m * s[:, None]) % q


def _code(m: np.ndarray, q: int) -> np.ndarray:
    """Integer code of normalised matrices: ``[[1,b],[c,d]] -> b q^2 + c q + d``,
    ``[[0,1],[c,d]] -> q^3 + c q + d``."""
    return np.where(m[:, 0] == 1, m[:, 1] * q * q + m[:, 2] * q + m[:, 3], q ** 3 + m[:, 2] * q + m[:, 3])


def _pgl_elements(q: int) -> np.ndarray:
    """All of PGL(2, q) as normalised rows ``(a, b, c, d)``, in increasing code order."""
    r = np.arange(q, dtype=np.int64)
    b, c, d = (t.ravel() for t in np.meshgrid(r, r, r, indexing="ij"))
    one = np.ones_like(b)
    first = np.stack([one, b, c, d], axis=1)[(d - b * c) % q != 0]
    c2, d2 = (t.ravel() for t in np.meshgrid(r[1:], r, indexing="ij"))
    second = np.stack([np.zeros_like(c2), np.ones_like(c2), c2, d2], axis=1)
    return np.concatenate([first, second])


def lps_graph(p: int, q: int) -> Graph:
    """The Lubotzky-Phillips-Sarnak Ramanujan graph X^{p,q} (LPS 1988, Section 2).

    The Cayley graph, with respect to the p + 1 generators of :func:`lps_generators`, of
    PGL(2, F_q) when the Legendre symbol ``(p/q) = -1`` (``q (q^2 - 1)`` nodes, bipartite), and of
    PSL(2, F_q) (the elements of PGL with square determinant) when ``(p/q) = 1``
    (``q (q^2 - 1) / 2`` nodes). It is (p+1)-regular. ``g ~ g s`` for every generator s; the
    generator set is closed under inverses in PGL, so the graph is undirected.

    Numbering: an element of PGL(2, q) is represented by its matrix scaled so that the first
    non-zero entry of its first row is 1; node ids follow the increasing code
    ``[[1,b],[c,d]] -> b q^2 + c q + d`` and ``[[0,1],[c,d]] -> q^3 + c q + d`` (so node 0 is
    ``[[1,0],[0,1]]``, the identity).

    LPS state the theorem for p, q = 1 mod 4; the same construction for p = 3 mod 4 is the one of
    Davidoff, Sarnak and Valette (2003), which Elsässer et al. use with p = 3 (RAMAN-C(3,7)).

    Examples
    --------
    >>> g = lps_graph(3, 7)          # (3/7) = -1: PGL(2, 7)
    >>> g.n, set(g.degrees.tolist()), g.is_connected
    (336, {4}, True)
    """
    spec = f"lps:{p},{q}"
    _check_pq(spec, p, q)
    # PSL(2, q) when p is a square mod q, else PGL(2, q); p + 1 generators: refuse before building.
    size = q * (q * q - 1) // (2 if _legendre(p, q) == 1 else 1)
    check_size(spec, size, size * (p + 1) // 2)
    inv = np.zeros(q, dtype=np.int64)
    inv[1:] = [pow(t, q - 2, q) for t in range(1, q)]
    el = _pgl_elements(q)
    if _legendre(p, q) == 1:
        squares = np.zeros(q, dtype=bool)
        squares[(np.arange(1, q) ** 2) % q] = True
        det = (el[:, 0] * el[:, 3] - el[:, 1] * el[:, 2]) % q
        el = el[squares[det]]
    codes = _code(el, q)
    order = np.argsort(codes)
    el, codes = el[order], codes[order]
    n = el.shape[0]
    check_size(spec, n)
    gens = lps_generators(p, q)
    a0, b0, c0, d0 = el.T
    us, vs = [], []
    for s in gens:
        prod = np.stack([a0 * s[0, 0] + b0 * s[1, 0], a0 * s[0, 1] + b0 * s[1, 1],
                         c0 * s[0, 0] + d0 * s[1, 0], c0 * s[0, 1] + d0 * s[1, 1]], axis=1) % q
        code = _code(_normalise(prod, q, inv), q)
        target = np.minimum(np.searchsorted(codes, code), n - 1)
        assert np.array_equal(codes[target], code), "LPS generator left the group"  # a bug, never user input
        us.append(np.arange(n, dtype=np.int64))
        vs.append(target)
    # Each edge appears twice (s and its inverse class); merging is exact, never hides a collision
    # because tests check (p+1)-regularity.
    return _graph(n, np.concatenate(us), np.concatenate(vs), spec, merge_parallel=True)


def _mobius(m, z: np.ndarray, q: int, inv: np.ndarray) -> np.ndarray:
    """Apply ``z -> (a z + b) / (c z + d)`` to points of P^1(F_q) coded 0..q-1 (finite), q (infinity)."""
    a, b, c, d = int(m[0, 0]), int(m[0, 1]), int(m[1, 0]), int(m[1, 1])
    fin = z < q
    zf = np.where(fin, z, 0)
    num, den = (a * zf + b) % q, (c * zf + d) % q
    out = np.where(den == 0, q, (num * inv[den]) % q)
    at_inf = q if c == 0 else (a * inv[c]) % q
    return np.where(fin, out, at_inf)


def lps_quotient_graph(p: int, q: int) -> Graph:
    """The LPS generators acting on ordered pairs of distinct points of the projective line.

    Nodes are the ``q (q + 1)`` ordered pairs ``(z1, z2)``, ``z1 != z2``, of points of
    ``P^1(F_q)`` (point ``z < q`` is ``[z : 1]``, point ``q`` is ``[1 : 0]``, infinity), numbered
    lexicographically: ``(0,1), (0,2), ..., (0,q), (1,0), (1,2), ...``. Each LPS generator s
    (:func:`lps_generators`) acts by Moebius transformation and ``(z1, z2) ~ (s z1, s z2)``.
    PGL(2, q) acts transitively on these pairs with the split torus as stabiliser, so this is the
    Schreier (coset) graph of X^{p,q} modulo that torus, a quotient of :func:`lps_graph`. A
    generator that fixes both points of a pair would give a self-loop, and two generators that
    agree on a pair a parallel edge; both are dropped/merged, so the graph can have degrees
    below p + 1.

    Examples
    --------
    >>> g = lps_quotient_graph(3, 17)
    >>> g.n, g.max_degree
    (306, 4)
    """
    spec = f"lps-quotient:{p},{q}"
    _check_pq(spec, p, q)
    inv = np.zeros(q, dtype=np.int64)
    inv[1:] = [pow(t, q - 2, q) for t in range(1, q)]
    z1, z2 = (t.ravel() for t in np.meshgrid(np.arange(q + 1), np.arange(q + 1), indexing="ij"))
    keep = z1 != z2
    z1, z2 = z1[keep], z2[keep]
    n = z1.size
    lookup = np.full((q + 1) * (q + 1), -1, dtype=np.int64)
    lookup[z1 * (q + 1) + z2] = np.arange(n)
    us, vs = [], []
    for s in lps_generators(p, q):
        w1, w2 = _mobius(s, z1, q, inv), _mobius(s, z2, q, inv)
        us.append(np.arange(n, dtype=np.int64))
        vs.append(lookup[w1 * (q + 1) + w2])
    return _graph(n, np.concatenate(us), np.concatenate(vs), spec, drop_loops=True, merge_parallel=True)


# ---------------------------------------------------------------------- registration
def _one(name, arg, minimum):
    (d,) = parse_ints(f"{name}:{arg}", arg, 1, minimum=minimum)
    if d > 24:
        raise SpecError(f"bad spec '{name}:{arg}': at most 24 dimensions")
    return d


@topology("butterfly", "butterfly:D", "wrapped butterfly, D*2^D nodes, 4-regular; node l*2^D+w (BFLY)")
def _butterfly_spec(arg, rng):
    return butterfly_graph(_one("butterfly", arg, 3))


@topology("fft", "fft:D", "unwrapped butterfly (FFT network), D+1 levels of 2^D nodes; node l*2^D+w")
def _fft_spec(arg, rng):
    return fft_graph(_one("fft", arg, 1))


@topology("ccc", "ccc:D", "cube-connected cycles, D*2^D nodes, 3-regular; node w*D+i")
def _ccc_spec(arg, rng):
    return ccc_graph(_one("ccc", arg, 3))


@topology("debruijn", "debruijn:D", "undirected binary de Bruijn graph on 2^D nodes (loops dropped, parallels merged)")
def _debruijn_spec(arg, rng):
    return debruijn_graph(_one("debruijn", arg, 1))


@topology("shuffle-exchange", "shuffle-exchange:D", "shuffle-exchange graph on 2^D nodes (loops dropped, parallels merged)")
def _se_spec(arg, rng):
    return shuffle_exchange_graph(_one("shuffle-exchange", arg, 1))


@topology("lps", "lps:P,Q", "LPS Ramanujan graph X^{P,Q}: Cayley graph of PGL(2,Q) or PSL(2,Q), (P+1)-regular")
def _lps_spec(arg, rng):
    p, q = parse_ints(f"lps:{arg}", arg, 2, minimum=0)
    return lps_graph(p, q)


@topology("lps-quotient", "lps-quotient:P,Q", "LPS generators on ordered pairs of distinct points of P^1(F_Q), Q(Q+1) nodes")
def _lps_quotient_spec(arg, rng):
    p, q = parse_ints(f"lps-quotient:{arg}", arg, 2, minimum=0)
    return lps_quotient_graph(p, q)
