"""Conversions at the boundary: networkx and scipy graphs into :class:`Graph`."""

from __future__ import annotations

import numpy as np

from ..errors import TokendistError
from ._model import Graph

__all__ = ["from_networkx", "from_scipy"]


def from_networkx(g, *, spec: str = "networkx") -> Graph:
    """Convert a ``networkx.Graph``; nodes are relabelled 0..n-1 in their iteration order.

    Directed graphs and multigraphs are refused: the papers' networks are simple and undirected.
    """
    import networkx as nx

    if g.is_directed() or g.is_multigraph():
        raise TokendistError("tokendist graphs are simple and undirected; convert with nx.Graph(g)")
    index = {node: i for i, node in enumerate(g.nodes())}
    edges = np.array([(index[a], index[b]) for a, b in g.edges()], dtype=np.int64).reshape(-1, 2)
    pos = None
    if g.number_of_nodes() and all("pos" in d for _, d in g.nodes(data=True)):
        pos = np.array([g.nodes[x]["pos"] for x in g.nodes()], dtype=float)
    return Graph.from_edges(max(len(index), 1), edges, spec=spec, positions=pos)


def from_scipy(a, *, spec: str = "scipy") -> Graph:
    """Convert a symmetric scipy sparse adjacency matrix (the diagonal must be zero)."""
    import scipy.sparse as sp

    a = sp.coo_array(a)
    if a.shape[0] != a.shape[1]:
        raise TokendistError("adjacency matrix must be square")
    keep = a.row < a.col
    return Graph.from_edges(a.shape[0], np.stack([a.row[keep], a.col[keep]], axis=1), spec=spec)
