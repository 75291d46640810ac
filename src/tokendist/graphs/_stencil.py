"""Offset stencils: runs of nodes whose neighbours sit at fixed distances (tori, rings).

On a torus every node away from the wrap-around seams has the neighbours ``i - W, i - 1,
i + 1, i + W``; a kernel that knows this needs no CSR index per neighbour and reads the loads in
a few contiguous streams, which LLVM turns into SIMD code. Measured on ``torus:1000x1000``, a
numba neighbour sum over the CSR rows took 3.5-4.1 ns per edge, the same sum over the stencil's
runs (offsets as a tuple, so that their number is a compile-time constant) 0.8-1.1
(docs/design/engine.md, "Offset stencils", gives the procedure).

:func:`find_stencil` finds the most common offset pattern of a regular graph and the maximal runs
of consecutive nodes that follow it. Because CSR rows list neighbours in increasing order and the
offsets are sorted, a node in a run visits its neighbours in exactly its CSR order, so a kernel
that walks the runs with offsets and every other node with its CSR row does the same arithmetic
in the same order as the pure-CSR kernel: same results, bit for bit. Nodes outside the runs (the
seams) keep their CSR rows.

Kernels with per-edge data also need the edge id of each slot. :func:`affine_edge_runs` cuts the
runs where those ids stop being ``base + U i`` (``U`` upper offsets), and :func:`lower_edge_runs`
keeps the rows whose lower slots sit at one constant distance from the row's first upper edge.
"""

from __future__ import annotations

from dataclasses import dataclass

import numba
import numpy as np

from ._interpreted import run_kernel

__all__ = ["Stencil", "find_stencil", "affine_edge_runs", "lower_edge_runs"]

#: Largest degree a stencil is looked for at: the offsets become a tuple, whose length numba
#: compiles into every kernel (one compiled kernel per degree).
MAX_STENCIL_DEGREE = 8

#: By default a stencil is used only when its runs cover at least this share of the nodes (else
#: the run bookkeeping buys nothing: random graphs, hypercubes, complete graphs).
MIN_COVERAGE = 0.5


@dataclass(frozen=True)
class Stencil:
    """Runs ``[starts[r], ends[r])`` of nodes whose neighbours are ``i + o`` for ``o`` in the offsets.

    Attributes
    ----------
    starts, ends : ndarray of int64
        The runs, ascending and disjoint; a node ``i`` with ``starts[r] <= i < ends[r]`` has
        exactly the neighbours ``i + lower[k]`` then ``i + upper[k]``, in its CSR row's order.
    lower : tuple of int
        The negative offsets, ascending (the row's neighbours ``j < i``); never empty.
    upper : tuple of int
        The positive offsets, ascending (``j > i``); never empty.
    covered : int
        Number of nodes in the runs.
    """

    starts: np.ndarray
    ends: np.ndarray
    lower: tuple
    upper: tuple
    covered: int

    @property
    def offsets(self) -> tuple:
        """All offsets in CSR order: ``lower + upper``."""
        return self.lower + self.upper

    @property
    def degree(self) -> int:
        return len(self.lower) + len(self.upper)


@numba.njit(cache=True, nogil=True)
def _matching_runs(indices, degree, pattern, starts, ends):
    # One pass over the rows of D slots: the maximal runs of rows equal to i + pattern.
    n = indices.shape[0] // degree
    runs = 0
    inside = False
    for i in range(n):
        match = True
        for k in range(degree):
            if np.int64(indices[degree * i + k]) - i != pattern[k]:
                match = False
                break
        if match and not inside:
            starts[runs] = i
            inside = True
        elif not match and inside:
            ends[runs] = i
            runs += 1
            inside = False
    if inside:
        ends[runs] = n
        runs += 1
    return runs


def find_stencil(graph, min_coverage: float = MIN_COVERAGE) -> Stencil | None:
    """The offset stencil of ``graph``, or None when it has none worth using.

    Only regular graphs of degree 1 to :data:`MAX_STENCIL_DEGREE` qualify (their CSR rows are
    ``D`` slots each). The candidate patterns are the most frequent among 64 evenly spaced nodes;
    the one whose runs cover the most nodes wins, and is returned if it covers at least
    ``min_coverage`` of them.

    Examples
    --------
    >>> from tokendist.graphs import make_graph
    >>> s = find_stencil(make_graph("torus:8x8"))
    >>> s.lower, s.upper, s.covered
    ((-8, -1), (1, 8), 36)
    >>> find_stencil(make_graph("hypercube:6")) is None
    True
    """
    n = graph.n
    if n == 0 or graph.m == 0:
        return None
    # Regular iff the row pointers step by D (not ``graph.degrees``: no n-sized array kept).
    indptr = graph.indptr
    degree = int(indptr[1] - indptr[0])
    if degree > MAX_STENCIL_DEGREE or int(indptr[-1]) != degree * n or not np.all(np.diff(indptr) == degree):
        return None
    indices = graph.indices
    rows = indices.reshape(n, degree)
    samples = np.unique(np.linspace(0, n - 1, num=min(n, 64)).astype(np.int64))
    candidates, counts = np.unique(rows[samples].astype(np.int64) - samples[:, None], axis=0, return_counts=True)
    # A pattern that covers half the nodes shows up in many of the samples: only the three most
    # frequent are measured, and (unless forced) only if seen twice. On a random regular graph
    # every sample has its own pattern, and measuring all 64 took 0.35 s at n = 10^6.
    order = np.argsort(-counts, kind="stable")[:3]
    if min_coverage > 0:
        order = order[counts[order] >= 2]
    best = None
    for pattern in candidates[order]:
        if np.any(np.diff(pattern) <= 0) or pattern[0] >= 0 or pattern[-1] <= 0:
            # Strictly ascending always holds for sorted rows; a pattern with offsets on one side
            # only fits the first or last nodes of the numbering, never a stencil, and kernels
            # index ``lower[k]`` and ``upper[k]``: neither tuple may be empty.
            continue
        starts = np.empty(n // 2 + 1, dtype=np.int64)
        ends = np.empty(n // 2 + 1, dtype=np.int64)
        runs = run_kernel(_matching_runs, n + graph.m, indices, degree, np.ascontiguousarray(pattern), starts, ends)
        covered = int((ends[:runs] - starts[:runs]).sum())
        if best is None or covered > best[0]:
            best = (covered, pattern, starts[:runs].copy(), ends[:runs].copy())
    if best is None or best[0] < min_coverage * n or best[0] == 0:
        return None
    covered, pattern, starts, ends = best
    lower = tuple(int(o) for o in pattern if o < 0)
    upper = tuple(int(o) for o in pattern if o > 0)
    return Stencil(starts=starts, ends=ends, lower=lower, upper=upper, covered=covered)


def affine_edge_runs(stencil: Stencil, csr_edges):
    """The stencil's runs cut where the edge ids of the slots stop being affine: ``(starts, ends, ebase)``.

    In each returned run ``[starts[r], ends[r])`` the edge of slot ``k`` of row ``i`` is
    ``csr_edges[D * i + k] == ebase[r, k] + U * i`` (``D = stencil.degree``, ``U =
    len(stencil.upper)``): edges are sorted by ``(u, v)``, so a row's upper slots are consecutive
    edges, and a lower slot's edge is an upper slot of ``i + lower[k]``, affine while that node
    stays in one run. The cuts are found from ``csr_edges`` itself, so the identity holds by
    construction. O(n D) numpy, once per graph.

    Examples
    --------
    >>> from tokendist.graphs import make_graph
    >>> g = make_graph("torus:6x6")
    >>> s = find_stencil(g, min_coverage=0.0)  # forced: so small a torus has none by default
    >>> starts, ends, ebase = affine_edge_runs(s, g.csr_edges)
    >>> bool(all((g.csr_edges.reshape(-1, 4)[i] == ebase[r] + 2 * i).all()
    ...          for r in range(len(starts)) for i in range(starts[r], ends[r])))
    True
    """
    D = stencil.degree
    nu = len(stencil.upper)
    lengths = stencil.ends - stencil.starts
    if lengths.sum() == 0:
        return np.zeros(0, np.int64), np.zeros(0, np.int64), np.zeros((0, D), np.int64)
    # The nodes of all runs, ascending (a ramp per run without a Python loop over runs).
    first = np.repeat(stencil.starts - np.concatenate(([0], np.cumsum(lengths)[:-1])), lengths)
    nodes = first + np.arange(lengths.sum(), dtype=np.int64)
    b = np.asarray(csr_edges).reshape(-1, D)[nodes].astype(np.int64) - nu * nodes[:, None]
    cut = np.ones(nodes.size, dtype=bool)
    cut[1:] = (np.diff(nodes) != 1) | np.any(b[1:] != b[:-1], axis=1)
    at = np.flatnonzero(cut)
    starts = nodes[at]
    ends = np.append(nodes[at[1:] - 1] + 1, nodes[-1] + 1)
    return starts, ends, np.ascontiguousarray(b[at])


def lower_edge_runs(stencil: Stencil, csr_edges):
    """The rows whose lower edge ids are the row's first upper edge plus one ``delta``: ``(starts, ends, delta)``.

    Row ``i`` of a run has ``U = len(upper)`` upper slots, the edges ``e_i, e_i + 1, ...`` (the
    running counter of the CSR kernels). Its lower slot ``k`` is the edge ``(i + lower[k], i)``,
    whose id is ``e_i + delta[k]`` with one ``delta`` for all rows only where the rows
    ``i + lower[k]`` have ``U`` upper slots too. Not so on the first row of a torus run: its left
    neighbour is a seam node with three upper slots (torus:6x6: the edge (12, 13) is 30, (13, 14)
    is 33, so row 13 has ``delta = (-11, -3)``, row 14 ``(-11, -2)``); nor on the first run, whose
    neighbours ``i - W`` are the seam row. So ``delta`` is the pattern of the most rows among the
    runs of :func:`affine_edge_runs` (in which every row has its run's pattern), and the result
    is those runs that have it, touching ones joined; the rows left out keep their CSR rows (the
    same results either way). On ``torus:W x H`` this drops the first row of each run and all of
    the first run but its last row. The SOS kernels use it: they keep the running counter, so
    they need one offset per lower slot, not a base per slot and run.

    Returns int64 arrays and a tuple of ``len(lower)`` ints (a tuple: a compile-time constant
    length, unrolled loops, as ``lower`` and ``upper``).

    Examples
    --------
    >>> from tokendist.graphs import make_graph
    >>> g = make_graph("torus:6x6")
    >>> lower_edge_runs(find_stencil(g, min_coverage=0.0), g.csr_edges)
    (array([14, 20, 26]), array([17, 23, 29]), (-11, -2))
    """
    nl = len(stencil.lower)
    starts, ends, ebase = affine_edge_runs(stencil, csr_edges)
    if starts.shape[0] == 0:
        return np.zeros(0, np.int64), np.zeros(0, np.int64), ()
    patterns, which = np.unique(ebase[:, :nl] - ebase[:, nl:nl + 1], axis=0, return_inverse=True)
    which = which.ravel()
    best = int(np.bincount(which, weights=ends - starts).argmax())
    keep = which == best
    starts, ends = starts[keep], ends[keep]
    joined = starts[1:] == ends[:-1]
    return (starts[np.concatenate(([True], ~joined))], ends[np.concatenate((~joined, [True]))],
            tuple(int(v) for v in patterns[best]))
