"""The halo layout of every rank, checked in one process (no MPI job needed).

For random graphs, rank counts and both partitions: the owned nodes of the ranks partition the
nodes, an owned node's local row is its whole-graph row (same neighbours, same order), every
edge is counted by exactly one rank, and what rank q sends to rank r is, value for value, what r
expects for its ghosts owned by q (the pairing ``Neighbor_alltoallv`` relies on).
"""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

pytest.importorskip("mpi4py")

from tokendist.engine.mpi import LocalPart, partition  # noqa: E402
from tokendist.graphs import make_graph  # noqa: E402


class _Topology:
    def Free(self):
        pass


class FakeComm:
    """The two calls LocalPart makes while it builds its layout."""

    def __init__(self, rank, size):
        self.rank, self.size = rank, size

    def Get_rank(self):
        return self.rank

    def Get_size(self):
        return self.size

    def Create_dist_graph_adjacent(self, sources, destinations, reorder=False):
        assert list(sources) == list(destinations)
        return _Topology()


def blocks(index, counts, displs, neighbours):
    return {int(q): index[d:d + c] for q, c, d in zip(neighbours, counts, displs)}


@settings(max_examples=25, deadline=None)
@given(spec=st.sampled_from(["torus:5x6", "hypercube:4", "random-regular:24,3", "random-tree:25", "path:9",
                             "grid:4x5", "complete:6"]),
       k=st.integers(1, 5), method=st.sampled_from(["contiguous", "metis"]))
def test_halo_layout_pairs_every_ghost_with_its_owner(spec, k, method):
    g = make_graph(spec, seed=3)
    owner = partition(g, k, method)
    parts = [LocalPart(FakeComm(r, k), g, owner) for r in range(k)]
    owned = np.concatenate([p.owned_global for p in parts])
    assert np.array_equal(np.sort(owned), np.arange(g.n))  # every node owned once
    counted = np.concatenate([p.edges[p.edge_owned] for p in parts])
    assert np.array_equal(np.sort(counted), np.arange(g.m))  # every edge counted once
    for p in parts:
        lg = p.graph
        assert np.array_equal(p.nodes[p.owned], p.owned_global)
        assert np.array_equal(lg.base_edges, p.edges)
        for i, gi in zip(p.owned.tolist(), p.owned_global.tolist()):
            local_row = p.nodes[lg.indices[lg.indptr[i]:lg.indptr[i + 1]]]
            assert np.array_equal(local_row, g.indices[g.indptr[gi]:g.indptr[gi + 1]])
            assert np.array_equal(p.edges[lg.csr_edges[lg.indptr[i]:lg.indptr[i + 1]]],
                                  g.csr_edges[g.indptr[gi]:g.indptr[gi + 1]])
        ghosts = np.flatnonzero(~p.is_owned)
        assert np.array_equal(np.sort(p.recv_index), ghosts)  # every ghost received exactly once
        assert np.all(owner[p.nodes[ghosts]] != p.rank)
        assert np.all(p.is_owned[p.send_index])
        if isinstance(p.owned_sel, slice):
            assert np.array_equal(np.arange(p.nodes.size)[p.owned_sel], p.owned)
    for p in parts:
        recv = blocks(p.recv_index, p.recv_counts, p.recv_displs, p.neighbours)
        for q, idx in recv.items():
            sent = blocks(parts[q].send_index, parts[q].send_counts, parts[q].send_displs, parts[q].neighbours)
            assert np.array_equal(p.nodes[idx], parts[q].nodes[sent[p.rank]])
            assert np.all(owner[p.nodes[idx]] == q)
