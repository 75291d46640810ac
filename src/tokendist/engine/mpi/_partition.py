"""Which rank owns which node: contiguous node ranges (the default) or a METIS partition.

Contiguous ranges keep the structure of graphs whose node numbering follows their geometry (a
torus's rows, a hypercube's subcubes: the cut is a few rows, or the edges of a few dimensions).
METIS (through ``pymetis``) minimises the edge cut of irregular graphs (random regular graphs,
trees). Both are deterministic: the same graph and ``k`` give the same owners on every rank and in
every run, and the results of a run do not depend on the partition at all (only its speed does).
"""

from __future__ import annotations

import numpy as np

from ...errors import TokendistError

__all__ = ["PARTITIONS", "partition", "edge_cut"]

#: The partition methods ``--partition`` accepts.
PARTITIONS = ("contiguous", "metis")


def partition(graph, k: int, method: str = "contiguous") -> np.ndarray:
    """The owning rank (0 .. k-1) of every node of ``graph``.

    Parameters
    ----------
    graph : Graph
        The whole graph (every rank builds it from the same spec and seed).
    k : int
        Number of ranks.
    method : str
        ``contiguous``: rank r owns nodes ``[r n / k, (r + 1) n / k)``; ``metis``: METIS k-way
        partition of the adjacency (``pymetis.part_graph``), which is deterministic (METIS's
        default seed).

    Returns
    -------
    ndarray of int32, shape (n,)
    """
    if method not in PARTITIONS:
        raise TokendistError(f"unknown partition {method!r}; choose one of {', '.join(PARTITIONS)}")
    if not isinstance(k, int) or k < 1:
        raise TokendistError(f"the number of ranks must be a positive integer, got {k!r}")
    n = graph.n
    if k == 1:
        return np.zeros(n, dtype=np.int32)
    if method == "contiguous":
        # Node i belongs to the rank whose range [r n // k, (r + 1) n // k) holds it.
        bounds = (np.arange(1, k, dtype=np.int64) * n) // k
        return np.searchsorted(bounds, np.arange(n, dtype=np.int64), side="right").astype(np.int32)
    try:
        import pymetis  # an optional dependency, needed for this method only
    except ImportError:
        raise TokendistError("--partition metis needs pymetis (pip install 'tokendist[mpi]')") from None
    if graph.m == 0:
        return partition(graph, k, "contiguous")
    adjacency = pymetis.CSRAdjacency(np.asarray(graph.indptr, dtype=np.int64), np.asarray(graph.indices, dtype=np.int64))
    _, membership = pymetis.part_graph(k, adjacency)
    owner = np.asarray(membership, dtype=np.int32)
    return owner


def edge_cut(graph, owner: np.ndarray) -> int:
    """The number of edges whose ends belong to different ranks."""
    return int(np.count_nonzero(owner[graph.u] != owner[graph.v]))
