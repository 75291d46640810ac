"""The one graph representation of tokendist: an immutable undirected simple graph on arrays.

A :class:`Graph` holds ``n``, the edge endpoint arrays ``u < v`` (sorted, no self-loops, no
parallel edges), and derives the CSR adjacency and degrees once. It is built and validated once,
at the boundary (:meth:`Graph.from_edges`, :func:`tokendist.graphs.from_networkx`, a spec string or a
file); nothing downstream validates again. Node speeds and edge capacities (the heterogeneous
networks of Elsässer, Monien and Schamberger 2006, Section 2) are optional arrays.
"""

from __future__ import annotations

import numbers
from functools import cached_property

import numpy as np
import scipy.sparse as sp

from ..errors import TokendistError

__all__ = ["Graph", "unsigned_view"]


#: Graphs with fewer edges build their CSR arrays by one sort (``Graph._csr_sorted``), larger ones by
#: scipy's counting sort (``Graph._csr_counting``): on disc graphs the sort took 0.43 of the
#: conversions' time at 1,012 edges, 0.90 at 4,086 and 1.50 at 6,152
#: (``python benchmarks/probes/csr_build.py``).
_SORTED_CSR_EDGES = 1 << 12


def _index_dtype(count: int):
    """int32 for node and edge ids when they fit, else int64."""
    return np.int32 if count < 2**31 else np.int64


def unsigned_view(ids: np.ndarray) -> np.ndarray:
    """An int32 id array (CSR indices, ``csr_edges``) viewed as uint32, without a copy.

    Numba kernels index with it and then emit no negative-index wrap per access (35-45% of an SOS
    loop's time, docs/protocols/heterogeneous.md). int64 ids stay signed: a uint64 compared
    with an int64 node number would be compared as a float.
    """
    return ids.view(np.uint32) if ids.dtype == np.int32 else ids


def _readonly(a: np.ndarray) -> np.ndarray:
    a.flags.writeable = False
    return a


class Graph:
    """An immutable undirected simple graph.

    Attributes
    ----------
    n : int
        Number of nodes, labelled ``0 .. n-1``.
    u, v : ndarray of int32 (int64 when n >= 2**31), shape (m,)
        Edge endpoints with ``u[e] < v[e]``, sorted by ``(u, v)``. Edge ``e`` is the pair
        ``(u[e], v[e])``; a signed per-edge flow is positive from ``u`` to ``v``. Node and edge
        ids are int32 when they fit: they are most of a large graph's memory (the design budget
        is at most 64 bytes per edge for graph plus state). Use :attr:`edge_keys` for ``u*n + v``,
        which needs 64 bits.
    spec : str
        The spec the graph was built from (``"torus:16x16"``, ``"file:g.txt"``, ...).
    speeds : ndarray of float64 or None
        Node speeds ``s_i > 0`` (None: homogeneous, every speed 1).
    capacities : ndarray of float64 or None
        Edge capacities ``c_e > 0`` (None: every capacity 1).
    positions : ndarray of float64 or None, shape (n, k)
        Coordinates for geometric graphs and plots.
    base_edges : ndarray of int64 or None
        For a subgraph made by :meth:`edge_subgraph`, the index of each edge in the parent graph.

    Examples
    --------
    >>> g = Graph.from_edges(3, [(0, 1), (1, 2)], spec="path:3")
    >>> g.n, g.m, g.degrees.tolist()
    (3, 2, [1, 2, 1])
    """

    __slots__ = ("n", "u", "v", "spec", "speeds", "capacities", "positions", "base_edges", "__dict__")

    def __init__(self, n, u, v, *, spec="", speeds=None, capacities=None, positions=None, base_edges=None):
        # Trusted constructor: callers guarantee u < v, sorted, unique. Use from_edges otherwise.
        self.n = int(n)
        index_dtype = _index_dtype(self.n)
        self.u = _readonly(np.ascontiguousarray(u, dtype=index_dtype))
        self.v = _readonly(np.ascontiguousarray(v, dtype=index_dtype))
        self.spec = spec
        self.speeds = None if speeds is None else _readonly(np.asarray(speeds, dtype=np.float64).copy())
        self.capacities = None if capacities is None else _readonly(np.asarray(capacities, dtype=np.float64).copy())
        self.positions = None if positions is None else _readonly(np.asarray(positions, dtype=np.float64).copy())
        self.base_edges = None if base_edges is None else _readonly(np.asarray(base_edges, dtype=np.int64))

    # ------------------------------------------------------------------ construction
    @classmethod
    def from_edges(cls, n, edges, *, spec="", speeds=None, capacities=None, positions=None,
                   drop_loops=False, merge_parallel=False) -> "Graph":
        """Build and validate a graph from an edge list (any iterable of pairs or an (m, 2) array).

        Parameters
        ----------
        n : int
            Number of nodes.
        edges : array_like, shape (m, 2)
            Undirected edges; orientation does not matter.
        drop_loops, merge_parallel : bool
            Generators whose definition produces self-loops or parallel edges (de Bruijn,
            shuffle-exchange) drop and merge them; otherwise they are an error.

        Raises
        ------
        TokendistError
            Negative or out-of-range node ids, self-loops, duplicate edges, bad speeds.
        """
        if not isinstance(n, numbers.Integral) or isinstance(n, bool):
            raise TokendistError(f"the number of nodes must be an integer, got {n!r}")
        n = int(n)
        if n < 1:
            raise TokendistError(f"a graph needs at least one node (n={n})")
        raw = np.asarray(edges)
        # Node ids are integers: a float id is refused unless integral (casting truncated 0.5 to 0).
        if raw.size and raw.dtype.kind not in "iu" and not (raw.dtype.kind == "f" and np.all(raw == np.round(raw))):
            raise TokendistError(f"node ids must be integers, got {raw.dtype} values")
        e = raw.astype(np.int64)
        if e.size == 0:
            e = e.reshape(0, 2)
        if e.ndim != 2 or e.shape[1] != 2:
            raise TokendistError("edges must be pairs (u, v)")
        if e.size and (e.min() < 0 or e.max() >= n):
            bad = e[(e < 0) | (e >= n)][0]
            raise TokendistError(f"node id {bad} out of range 0..{n - 1}")
        a, b = np.minimum(e[:, 0], e[:, 1]), np.maximum(e[:, 0], e[:, 1])
        loops = a == b
        if loops.any():
            if not drop_loops:
                raise TokendistError(f"self-loop at node {a[loops][0]}")
            a, b = a[~loops], b[~loops]
        key = a * n + b
        order = np.argsort(key, kind="stable")
        key = key[order]
        dup = np.flatnonzero(key[1:] == key[:-1])
        if dup.size:
            if not merge_parallel:
                k = key[dup[0]]
                raise TokendistError(f"duplicate edge ({k // n}, {k % n})")
            key = np.unique(key)
            if capacities is not None:
                raise TokendistError("cannot merge parallel edges that carry capacities")
        elif capacities is not None:
            capacities = np.asarray(capacities, dtype=np.float64)[~loops][order]
        g = cls(n, key // n, key % n, spec=spec, speeds=speeds, capacities=capacities, positions=positions)
        g._validate_attributes()
        return g

    def _validate_attributes(self) -> None:
        if self.speeds is not None:
            if self.speeds.shape != (self.n,):
                raise TokendistError(f"expected {self.n} speeds, got {self.speeds.shape[0]}")
            if not np.all(np.isfinite(self.speeds)) or self.speeds.min() <= 0:
                raise TokendistError("node speeds must be finite and positive")
            if self.speeds.min() < np.finfo(np.float64).tiny:
                # 1 / s overflows for subnormal s (the protocols divide by the speeds).
                raise TokendistError(f"node speed {self.speeds.min():g} is below {np.finfo(np.float64).tiny:g}: "
                                     "scale the speeds up")
            with np.errstate(over="ignore"):
                total = self.speeds.sum()
            if not np.isfinite(total):
                # The ideal loads are W s_i / sum(s): an infinite sum makes every one of them 0.
                raise TokendistError(f"node speeds sum to {total}: beyond float64 (scale them down)")
        if self.capacities is not None:
            if self.capacities.shape != (self.m,):
                raise TokendistError(f"expected {self.m} edge capacities, got {self.capacities.shape[0]}")
            if self.capacities.size and (not np.all(np.isfinite(self.capacities)) or self.capacities.min() <= 0):
                raise TokendistError("edge capacities must be finite and positive")

    def with_speeds(self, speeds) -> "Graph":
        """The same graph with node speeds (validated)."""
        g = Graph(self.n, self.u, self.v, spec=self.spec, speeds=speeds, capacities=self.capacities,
                  positions=self.positions)
        g._validate_attributes()
        return g

    def with_capacities(self, capacities) -> "Graph":
        """The same graph with edge capacities (validated)."""
        g = Graph(self.n, self.u, self.v, spec=self.spec, speeds=self.speeds, capacities=capacities,
                  positions=self.positions)
        g._validate_attributes()
        return g

    def edge_subgraph(self, mask: np.ndarray) -> "Graph":
        """The spanning subgraph keeping the edges where ``mask`` is True (same nodes, speeds)."""
        idx = np.flatnonzero(mask)
        caps = None if self.capacities is None else self.capacities[idx]
        return Graph(self.n, self.u[idx], self.v[idx], spec=self.spec, speeds=self.speeds, capacities=caps,
                     positions=self.positions, base_edges=idx)

    # ------------------------------------------------------------------ derived arrays
    @property
    def m(self) -> int:
        """Number of edges."""
        return int(self.u.shape[0])

    @cached_property
    def degrees(self) -> np.ndarray:
        """Node degrees, int64."""
        return _readonly(np.bincount(np.concatenate([self.u, self.v]), minlength=self.n).astype(np.int64))

    @property
    def max_degree(self) -> int:
        return int(self.degrees.max()) if self.n else 0

    @cached_property
    def _csr(self):
        # The CSR structure and, for each CSR slot, the edge it belongs to. A small graph sorts its
        # 2m slots at once: scipy's conversions below cost about 0.1 ms a call whatever the size,
        # which a graph rebuilt every step (mobility) paid every step (35 against 83 us at m = 1,012).
        if self.m < _SORTED_CSR_EDGES:
            return self._csr_sorted()
        return self._csr_counting()

    def _csr_sorted(self):
        # One stable sort of the slots by (node, neighbour): the same arrays as _csr_lexsort.
        n, m = self.n, self.m
        src = np.concatenate([self.u, self.v]).astype(np.int64)
        dst = np.concatenate([self.v, self.u]).astype(np.int64)
        order = np.argsort(src * n + dst, kind="stable")
        indptr = np.zeros(n + 1, dtype=np.int64)
        np.cumsum(np.bincount(src, minlength=n), out=indptr[1:])
        idx_dtype = _index_dtype(max(n, m))
        eid = np.concatenate([np.arange(m), np.arange(m)])
        return (_readonly(indptr), _readonly(dst[order].astype(idx_dtype)), _readonly(eid[order].astype(idx_dtype)))

    def _csr_counting(self):
        # Builds the CSR structure and, for each CSR slot, the edge it belongs to, in O(n + m).
        # Row i is [u[e] for edges (u, i)] (all < i) followed by [v[e] for edges (i, v)] (all > i).
        # Edges are sorted by (u, v), so the second part is already in order; the first part is
        # the transpose, which scipy's csr -> csc counting sort produces with rows ascending.
        # (np.lexsort over 2m keys took ~3 s for 10^7 edges.)
        n, m = self.n, self.m
        idx_dtype = _index_dtype(max(n, m))
        # The order check needs the keys once; they are not cached here (8 bytes per edge that
        # a run on a static graph never needs again).
        key = vars(self).get("edge_keys")
        if key is None:
            key = self.u.astype(np.int64) * n + self.v
        if m and not np.all(key[1:] > key[:-1]):  # not the documented order: the general path
            return self._csr_lexsort()
        outdeg = np.bincount(self.u, minlength=n)
        indeg = np.bincount(self.v, minlength=n)
        indptr = np.zeros(n + 1, dtype=np.int64)
        np.cumsum(outdeg + indeg, out=indptr[1:])
        out_ptr = np.zeros(n + 1, dtype=np.int64)
        np.cumsum(outdeg, out=out_ptr[1:])
        eids = np.arange(m, dtype=np.int64)
        csc = sp.csr_array((eids, self.v, out_ptr), shape=(n, n)).tocsc()
        nb = np.empty(2 * m, dtype=idx_dtype)
        eid = np.empty(2 * m, dtype=idx_dtype)
        pos_in = eids + np.repeat(indptr[:-1] - np.asarray(csc.indptr[:-1], dtype=np.int64), indeg)
        nb[pos_in] = csc.indices
        eid[pos_in] = csc.data
        pos_out = eids + (indptr[:-1] + indeg - out_ptr[:-1])[self.u]
        nb[pos_out] = self.v
        eid[pos_out] = eids
        return (_readonly(indptr), _readonly(nb), _readonly(eid))

    def _csr_lexsort(self):
        # The plain construction (reference for tests, and the path for unsorted trusted input).
        src = np.concatenate([self.u, self.v])
        dst = np.concatenate([self.v, self.u])
        eid = np.concatenate([np.arange(self.m), np.arange(self.m)])
        order = np.lexsort((dst, src))
        indptr = np.zeros(self.n + 1, dtype=np.int64)
        np.cumsum(np.bincount(src, minlength=self.n), out=indptr[1:])
        idx_dtype = _index_dtype(max(self.n, self.m))
        return (_readonly(indptr), _readonly(dst[order].astype(idx_dtype)), _readonly(eid[order].astype(idx_dtype)))

    @property
    def indptr(self) -> np.ndarray:
        """CSR row pointer: the neighbours of ``i`` are ``indices[indptr[i]:indptr[i+1]]``, sorted."""
        return self._csr[0]

    @property
    def indices(self) -> np.ndarray:
        """CSR column indices (int32 when n and m < 2**31)."""
        return self._csr[1]

    @property
    def csr_edges(self) -> np.ndarray:
        """For each CSR slot, the index of its edge in ``u``/``v`` (int32 when n and m < 2**31)."""
        return self._csr[2]

    @cached_property
    def edge_keys(self) -> np.ndarray:
        """``u * n + v`` for each edge as int64, ascending (edges are sorted by ``(u, v)``)."""
        return _readonly(self.u.astype(np.int64) * self.n + self.v)

    def neighbours(self, i: int) -> np.ndarray:
        return self.indices[self.indptr[i]:self.indptr[i + 1]]

    @cached_property
    def adjacency(self) -> sp.csr_array:
        """The adjacency matrix as ``scipy.sparse.csr_array`` (weights: capacities, or 1)."""
        data = np.ones(2 * self.m) if self.capacities is None else np.concatenate([self.capacities] * 2)
        # Build from COO so that scipy sorts indices; then it matches indptr/indices above.
        a = sp.coo_array((data, (np.concatenate([self.u, self.v]), np.concatenate([self.v, self.u]))),
                         shape=(self.n, self.n)).tocsr()
        a.sort_indices()
        return a

    def edge_index(self, a, b) -> np.ndarray:
        """Index of edge {a, b} (vectorised); -1 where there is no such edge.

        A binary search for ``max(a, b)`` in the sorted CSR row of ``min(a, b)``, all queries at
        once (about log2 of the largest degree whole-array steps); no per-edge key array is kept.
        """
        a, b = np.asarray(a, dtype=np.int64), np.asarray(b, dtype=np.int64)
        lo, hi = np.minimum(a, b), np.maximum(a, b)
        valid = (lo >= 0) & (hi < self.n) & (lo != hi)
        if self.m == 0:
            return np.full(lo.shape, -1, dtype=np.int64)
        indptr, indices = self.indptr, self.indices
        row = np.where(valid, lo, 0)
        left, right = indptr[row], indptr[row + 1]
        end = right
        while True:  # invariant: the slot of hi in row lo, if any, is in [left, right)
            open_ = left < right
            if not open_.any():
                break
            mid = (left + right) // 2
            below = open_ & (indices[np.where(open_, mid, 0)] < hi)
            left = np.where(below, mid + 1, left)
            right = np.where(open_ & ~below, mid, right)
        slot = np.where(valid & (left < end), left, 0)
        found = valid & (left < end) & (indices[slot] == hi)
        return np.where(found, self.csr_edges[slot], -1).astype(np.int64)

    def _structure(self) -> sp.csr_array:
        """An unweighted adjacency matrix on the graph's own CSR arrays, not cached.

        For scipy's structural algorithms (connected components, BFS, reverse Cuthill-McKee):
        only the data array (``2m`` int8) is new, and it is freed with the matrix; the cached
        :attr:`adjacency` would keep 24 bytes per edge for the rest of the graph's life.
        """
        # scipy gives both index arrays one dtype: an int32 copy of the row pointers (n values)
        # lets it keep the int32 column indices as they are, where an int64 copy would cost 2m.
        indptr = self.indptr.astype(self.indices.dtype)
        return sp.csr_array((np.ones(self.indices.shape[0], dtype=np.int8), self.indices, indptr),
                            shape=(self.n, self.n))

    def to_networkx(self):
        """A ``networkx.Graph`` copy (for analysis at the boundary; never inside a run)."""
        import networkx as nx

        g = nx.Graph()
        g.add_nodes_from(range(self.n))
        g.add_edges_from(zip(self.u.tolist(), self.v.tolist()))
        return g

    @cached_property
    def stencil(self):
        """The graph's offset stencil (:class:`tokendist.graphs._stencil.Stencil`), or None.

        Runs of nodes whose neighbours are ``i + offset`` for one fixed pattern (a torus away from
        its seams); kernels walk them without CSR indices. Found once, on first use.
        """
        from ._stencil import find_stencil

        return find_stencil(self)

    @cached_property
    def cube_dimension(self):
        """``d`` if the graph is the d-dimensional hypercube labelled ``x ~ x xor 2^k``, else None.

        Kernels that know it walk the cube one dimension at a time
        (:func:`tokendist.graphs._cube.cube_dimension`). Found once, on first use.
        """
        from ._cube import cube_dimension

        return cube_dimension(self)

    @cached_property
    def is_connected(self) -> bool:
        from scipy.sparse.csgraph import connected_components

        return connected_components(self._structure(), directed=False, return_labels=False) == 1

    @cached_property
    def is_tree(self) -> bool:
        return self.m == self.n - 1 and self.is_connected

    def __repr__(self) -> str:
        extra = []
        if self.speeds is not None:
            extra.append("speeds")
        if self.capacities is not None:
            extra.append("capacities")
        return f"Graph({self.spec or 'unnamed'!s}, n={self.n}, m={self.m}{', ' + ', '.join(extra) if extra else ''})"

    def __eq__(self, other) -> bool:
        return (isinstance(other, Graph) and self.n == other.n and np.array_equal(self.u, other.u)
                and np.array_equal(self.v, other.v))

    __hash__ = object.__hash__
