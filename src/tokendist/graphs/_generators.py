"""Elementary topologies: paths, rings, stars, complete graphs, trees, meshes, tori, hypercubes.

Every generator is a plain vectorised function returning one :class:`Graph`; the numbering of each
family is documented in ``docs/guide/topologies.md``. The interconnection networks of Elsässer et al.'s
Table 1 (butterflies, CCC, de Bruijn, shuffle-exchange, Ramanujan graphs) and the random families
live in :mod:`tokendist.graphs._interconnect` and :mod:`tokendist.graphs._random_graphs`.
"""

from __future__ import annotations

import heapq

import numpy as np

from .._random import make_rng
from ..errors import SpecError
from ._model import Graph
from ._specs import check_size, parse_dims, parse_ints, topology

__all__ = ["path_graph", "ring_graph", "star_graph", "complete_graph", "kary_tree", "random_tree",
           "grid_graph", "torus_graph", "hypercube_graph"]


def _graph(n, a, b, spec, **kw) -> Graph:
    return Graph.from_edges(n, np.stack([a, b], axis=1), spec=spec, **kw)


def path_graph(n: int) -> Graph:
    """The path 0 - 1 - ... - (n-1)."""
    check_size(f"path:{n}", n, max(n - 1, 0))
    i = np.arange(n - 1)
    return _graph(n, i, i + 1, f"path:{n}")


def ring_graph(n: int) -> Graph:
    """The cycle 0 - 1 - ... - (n-1) - 0 (n >= 3)."""
    if n < 3:
        raise SpecError(f"a ring needs at least 3 nodes (got {n})")
    check_size(f"ring:{n}", n, n)
    i = np.arange(n)
    return _graph(n, i, (i + 1) % n, f"ring:{n}")


def star_graph(k: int) -> Graph:
    """The star with centre 0 and leaves 1..k."""
    check_size(f"star:{k}", k + 1, k)
    i = np.arange(1, k + 1)
    return _graph(k + 1, np.zeros(k, dtype=np.int64), i, f"star:{k}")


def complete_graph(n: int) -> Graph:
    """K_n."""
    a, b = np.triu_indices(n, 1)
    return _graph(n, a, b, f"complete:{n}")


def kary_tree(k: int, h: int) -> Graph:
    """The complete k-ary tree of height h: root 0, breadth-first numbering, parent of i is (i-1)//k.

    It has (k^(h+1) - 1)/(k - 1) nodes (h + 1 for k = 1). This is T_{h,k} of Houle, Symvonis and
    Wood (2004), Section 4.5.
    """
    if k < 1:
        raise SpecError("kary needs k >= 1")
    n = h + 1 if k == 1 else (k ** (h + 1) - 1) // (k - 1)
    check_size(f"kary:{k},{h}", n)
    child = np.arange(1, n)
    return _graph(n, (child - 1) // k, child, f"kary:{k},{h}")


def random_tree(n: int, seed=None) -> Graph:
    """A uniformly random labelled tree on n nodes (decoding a uniform Prüfer sequence)."""
    rng = make_rng(seed)
    if n <= 2:
        return path_graph(n) if n >= 1 else path_graph(1)
    prufer = rng.integers(0, n, size=n - 2)
    degree = np.bincount(prufer, minlength=n) + 1
    leaves = np.flatnonzero(degree == 1).tolist()
    heapq.heapify(leaves)
    a = np.empty(n - 1, dtype=np.int64)
    b = np.empty(n - 1, dtype=np.int64)
    deg = degree.tolist()
    for i, x in enumerate(prufer.tolist()):
        leaf = heapq.heappop(leaves)
        a[i], b[i] = leaf, x
        deg[x] -= 1
        if deg[x] == 1:
            heapq.heappush(leaves, x)
    a[-1], b[-1] = heapq.heappop(leaves), heapq.heappop(leaves)
    return _graph(n, a, b, f"random-tree:{n}")


def _mesh(dims, wrap: bool, spec: str) -> Graph:
    n = 1
    for size in dims:
        n *= int(size)  # Python ints: no int64 overflow for absurd dimensions
    # Edges per axis: n with wrap-around (size > 2), else n - n / size (none for size 1).
    m = sum(n if wrap and size > 2 else n - n // size for size in dims if size > 1)
    check_size(spec, n, m)
    idx = np.arange(n, dtype=np.int64).reshape(dims)
    us, vs = [], []
    for axis, size in enumerate(dims):
        if size == 1:
            continue
        nxt = np.roll(idx, -1, axis=axis)
        if wrap and size > 2:
            us.append(idx.ravel())
            vs.append(nxt.ravel())
        else:
            # Without wrap-around (or with a dimension of 2, where the wrap edge is the same edge).
            sl = [slice(None)] * len(dims)
            sl[axis] = slice(0, size - 1)
            us.append(idx[tuple(sl)].ravel())
            vs.append(nxt[tuple(sl)].ravel())
    a = np.concatenate(us) if us else np.zeros(0, dtype=np.int64)
    b = np.concatenate(vs) if vs else np.zeros(0, dtype=np.int64)
    return _graph(n, a, b, spec)


def grid_graph(dims) -> Graph:
    """The mesh with the given dimensions, row-major numbering (last coordinate fastest)."""
    return _mesh(list(dims), False, "grid:" + "x".join(map(str, dims)))


def torus_graph(dims) -> Graph:
    """The mesh with wrap-around (a dimension of size 2 gives a single edge, of size 1 none)."""
    return _mesh(list(dims), True, "torus:" + "x".join(map(str, dims)))


def hypercube_graph(d: int) -> Graph:
    """The d-dimensional hypercube: x ~ x xor 2^k."""
    n = 1 << d
    check_size(f"hypercube:{d}", n, d * n // 2)
    x = np.arange(n, dtype=np.int64)
    a = np.concatenate([x[(x >> k) & 1 == 0] for k in range(d)]) if d else np.zeros(0, dtype=np.int64)
    b = np.concatenate([x[(x >> k) & 1 == 0] | (1 << k) for k in range(d)]) if d else np.zeros(0, dtype=np.int64)
    return _graph(n, a, b, f"hypercube:{d}")


# ---------------------------------------------------------------------- registration
@topology("path", "path:N", "path on N nodes, 0-1-...-(N-1)")
def _path_spec(arg, rng):
    (n,) = parse_ints(f"path:{arg}", arg, 1, minimum=1)
    return path_graph(n)


@topology("ring", "ring:N", "cycle on N >= 3 nodes")
def _ring_spec(arg, rng):
    (n,) = parse_ints(f"ring:{arg}", arg, 1, minimum=3)
    return ring_graph(n)


@topology("star", "star:K", "star with K leaves; the centre is node 0")
def _star_spec(arg, rng):
    (k,) = parse_ints(f"star:{arg}", arg, 1, minimum=0)
    return star_graph(k)


@topology("complete", "complete:N", "complete graph K_N")
def _complete_spec(arg, rng):
    (n,) = parse_ints(f"complete:{arg}", arg, 1, minimum=1)
    check_size(f"complete:{n}", n, n * (n - 1) // 2)
    return complete_graph(n)


@topology("kary", "kary:K,H", "complete K-ary tree of height H, root 0, breadth-first numbering")
def _kary_spec(arg, rng):
    k, h = parse_ints(f"kary:{arg}", arg, 2, minimum=0)
    if k == 0:
        raise SpecError("bad spec 'kary:0,...': K must be at least 1")
    if h * max(1, np.log2(max(k, 2))) > 40:
        raise SpecError(f"bad spec 'kary:{arg}': tree too large")
    return kary_tree(k, h)


@topology("random-tree", "random-tree:N", "uniformly random labelled tree on N nodes (seeded)", randomized=True)
def _random_tree_spec(arg, rng):
    (n,) = parse_ints(f"random-tree:{arg}", arg, 1, minimum=1)
    check_size(f"random-tree:{arg}", n)
    return random_tree(n, rng)


@topology("grid", "grid:AxBx...", "mesh without wrap-around, any dimension, row-major numbering")
def _grid_spec(arg, rng):
    return grid_graph(parse_dims(f"grid:{arg}", arg))


@topology("torus", "torus:AxBx...", "mesh with wrap-around, any dimension, row-major numbering")
def _torus_spec(arg, rng):
    return torus_graph(parse_dims(f"torus:{arg}", arg))


@topology("hypercube", "hypercube:D", "D-dimensional hypercube, x ~ x xor 2^k")
def _hypercube_spec(arg, rng):
    (d,) = parse_ints(f"hypercube:{arg}", arg, 1, minimum=0)
    if d > 27:
        raise SpecError(f"bad spec 'hypercube:{d}': at most 27 dimensions")
    return hypercube_graph(d)
