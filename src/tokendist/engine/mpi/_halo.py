"""One rank's part of the graph: its own nodes, ghost copies of their neighbours, the halo exchange.

A rank owns a set of nodes (:mod:`._partition`). Its *local graph* holds every edge with at least
one owned end, and the nodes of those edges: the owned nodes and their *ghosts* (neighbours owned
by other ranks). Local node ids follow the global ids' order, so the CSR row of an owned node
lists its neighbours in the same order as the whole graph's row does: a kernel that sums over a row
adds the same floats in the same order, and a rule keyed by the global edge id
(``Graph.base_edges`` of the local graph) draws the same coins.

After every update of the owned loads, :meth:`LocalPart.exchange` copies each owned value to the
ranks that keep it as a ghost: one ``Neighbor_alltoallv`` on a distributed graph topology whose
neighbours are exactly the ranks that share a cut edge, on numpy buffers (no pickling). Both ends
of a cut edge list the values in increasing global id, so no index travels with them.
"""

from __future__ import annotations

import numpy as np

from ...graphs import Graph

__all__ = ["LocalPart"]


class LocalPart:
    """The local graph, the ghost layout and the collectives of one rank.

    Attributes
    ----------
    graph : Graph
        The local graph (owned nodes and ghosts; ``base_edges``: the global id of each edge).
    nodes : ndarray of int64
        Global id of each local node (increasing).
    edges : ndarray of int64
        Global id of each local edge (increasing).
    owned : ndarray of int64
        Local ids of the owned nodes (increasing); ``owned_global`` their global ids;
        ``owned_sel`` the same selection as a slice when they are consecutive.
    edge_owned : ndarray of bool
        The local edges this rank counts as its own (those whose lower end ``u`` it owns): every
        global edge is counted by exactly one rank.
    global_graph : Graph
        The whole graph.
    bytes_exchanged : int
        Bytes this rank sent in halo exchanges so far (the measured communication volume).
    """

    def __init__(self, comm, graph: Graph, owner: np.ndarray):
        from mpi4py import MPI  # optional dependency; the caller checked that it imports

        self._MPI = MPI
        self.comm = comm
        self.rank = comm.Get_rank()
        self.size = comm.Get_size()
        self.global_graph = graph
        self.owner = owner
        rank = self.rank
        gu, gv = graph.u, graph.v
        mine_u = owner[gu] == rank
        mine_v = owner[gv] == rank
        self.edges = np.flatnonzero(mine_u | mine_v).astype(np.int64)
        self.owned_global = np.flatnonzero(owner == rank).astype(np.int64)
        eu, ev = gu[self.edges].astype(np.int64), gv[self.edges].astype(np.int64)
        present = np.zeros(graph.n, dtype=bool)  # O(n) flags rather than a sort or hash of 2 m ids
        present[self.owned_global] = True
        present[eu] = True
        present[ev] = True
        self.nodes = np.flatnonzero(present).astype(np.int64)
        lu = np.searchsorted(self.nodes, eu)
        lv = np.searchsorted(self.nodes, ev)
        # A monotone relabelling keeps u < v and the (u, v) order: the trusted constructor applies.
        self.graph = Graph(self.nodes.size, lu, lv, spec=f"{graph.spec} (rank {rank})", base_edges=self.edges)
        self.owned = np.searchsorted(self.nodes, self.owned_global)
        # A slice when the owned nodes are consecutive local ids (contiguous ranges on a torus or
        # hypercube): reading them is then a view, not a gather of n / K values per use.
        first = int(self.owned[0]) if self.owned.size else 0
        consecutive = self.owned.size == 0 or int(self.owned[-1]) - first + 1 == self.owned.size
        self.owned_sel = slice(first, first + self.owned.size) if consecutive else self.owned
        self.is_owned = np.zeros(self.nodes.size, dtype=bool)
        self.is_owned[self.owned] = True
        self.edge_owned = mine_u[self.edges]
        self.bytes_exchanged = 0
        self._setup_halo(eu, ev, lu, lv)

    # ------------------------------------------------------------------ halo
    def _setup_halo(self, eu, ev, lu, lv):
        rank, owner = self.rank, self.owner
        ou, ov = owner[eu], owner[ev]
        cut = ou != ov
        # Ghosts to receive: the other end of each cut edge, grouped by owner, by global id.
        ghost_local = np.where(ou[cut] == rank, lv[cut], lu[cut])
        ghost_owner = np.where(ou[cut] == rank, ov[cut], ou[cut])
        # Owned values to send: the owned end of each cut edge, grouped by the other end's owner.
        send_local = np.where(ou[cut] == rank, lu[cut], lv[cut])
        recv_pairs = np.unique(np.stack([ghost_owner.astype(np.int64), self.nodes[ghost_local]]), axis=1)
        send_pairs = np.unique(np.stack([ghost_owner.astype(np.int64), self.nodes[send_local]]), axis=1)
        self.neighbours = np.unique(recv_pairs[0]).astype(np.int32)
        self.recv_index = np.searchsorted(self.nodes, recv_pairs[1])
        self.send_index = np.searchsorted(self.nodes, send_pairs[1])
        k = self.neighbours
        self.recv_counts = np.array([np.count_nonzero(recv_pairs[0] == q) for q in k], dtype=np.int64)
        self.send_counts = np.array([np.count_nonzero(send_pairs[0] == q) for q in k], dtype=np.int64)
        self.recv_displs = np.concatenate([[0], np.cumsum(self.recv_counts)[:-1]]).astype(np.int64)
        self.send_displs = np.concatenate([[0], np.cumsum(self.send_counts)[:-1]]).astype(np.int64)
        ranks = self.neighbours.tolist()
        # The neighbour relation is symmetric (a cut edge is cut for both ends): sources = destinations.
        self.topology = self.comm.Create_dist_graph_adjacent(ranks, ranks, reorder=False)

    def exchange(self, values: np.ndarray) -> np.ndarray:
        """Overwrite the ghost entries of ``values`` (one per local node) with their owners' values.

        Collective over the ranks; numpy buffers only (``Neighbor_alltoallv``). Returns ``values``.
        """
        send = np.ascontiguousarray(values[self.send_index])
        recv = np.empty(self.recv_index.size, dtype=values.dtype)
        if self.neighbours.size:
            self.topology.Neighbor_alltoallv([send, (self.send_counts, self.send_displs)],
                                             [recv, (self.recv_counts, self.recv_displs)])
            self.bytes_exchanged += send.nbytes
        values[self.recv_index] = recv
        return values

    def gather_indexed(self, ids: np.ndarray, values: np.ndarray, size: int) -> np.ndarray | None:
        """An array of ``size`` entries on rank 0 assembled from every rank's ``values[i]`` at ``ids[i]``.

        The ranks' ``ids`` together must cover ``0 .. size - 1`` once (each entry from one rank).
        Collective; None on the other ranks. ``values`` may have trailing dimensions.
        """
        values = np.ascontiguousarray(values)
        ids = np.ascontiguousarray(ids, dtype=np.int64)
        counts = np.array(self.comm.allgather(int(ids.size)), dtype=np.int64)
        displs = np.concatenate([[0], np.cumsum(counts)[:-1]]).astype(np.int64)
        row = int(np.prod(values.shape[1:], dtype=np.int64))
        if self.rank != 0:
            self.comm.Gatherv(ids, None, root=0)
            self.comm.Gatherv(values.reshape(-1), None, root=0)
            return None
        all_ids = np.empty(int(counts.sum()), dtype=np.int64)
        self.comm.Gatherv(ids, [all_ids, (counts, displs)], root=0)
        buf = np.empty((int(counts.sum()),) + values.shape[1:], dtype=values.dtype)
        self.comm.Gatherv(values.reshape(-1), [buf.reshape(-1), (counts * row, displs * row)], root=0)
        full = np.empty((size,) + values.shape[1:], dtype=values.dtype)
        full[all_ids] = buf
        return full

    def gather_edges(self, values: np.ndarray) -> np.ndarray | None:
        """The per-edge ``values`` (one per local edge) of the whole graph, in global edge order.

        Each global edge is taken from the rank that counts it (``edge_owned``). Collective; the
        whole array on rank 0, None on the others.
        """
        values = np.asarray(values)
        return self.gather_indexed(self.edges[self.edge_owned], values[self.edge_owned], self.global_graph.m)

    def gather_nodes(self, values: np.ndarray) -> np.ndarray | None:
        """The per-node ``values`` (one per local node) of the whole graph, by global id, on rank 0.

        Each node is taken from its owner. Collective; None on the other ranks.
        """
        return self.gather_indexed(self.owned_global, np.asarray(values)[self.owned], self.global_graph.n)

    def exchange_cut_edges(self, values: np.ndarray) -> np.ndarray:
        """The other rank's entry of ``values`` (one per local edge) on every cut edge (collective).

        Returns a copy of ``values`` in which each cut edge holds the value the rank owning its
        other end computed (numpy buffers, one ``Neighbor_alltoallv``): for per-edge decisions that
        only the sending end can take.
        """
        if not hasattr(self, "_cut_index"):
            owner = self.owner
            gu, gv = self.global_graph.u[self.edges], self.global_graph.v[self.edges]
            other = np.where(self.is_owned[self.graph.u], owner[gv], owner[gu]).astype(np.int64)
            cut = np.flatnonzero(other != self.rank)
            # Grouped by the other rank, by global edge id within a group: the order both sides use.
            order = np.lexsort((self.edges[cut], other[cut]))
            self._cut_index = cut[order]
            counts = np.array([np.count_nonzero(other[cut] == q) for q in self.neighbours], dtype=np.int64)
            self._cut_counts = counts
            self._cut_displs = np.concatenate([[0], np.cumsum(counts)[:-1]]).astype(np.int64)
        out = np.array(values, copy=True)
        send = np.ascontiguousarray(values[self._cut_index])
        recv = np.empty_like(send)
        if self.neighbours.size:
            spec = (self._cut_counts, self._cut_displs)
            self.topology.Neighbor_alltoallv([send, spec], [recv, spec])
            self.bytes_exchanged += send.nbytes
        out[self._cut_index] = recv
        return out

    # ------------------------------------------------------------------ reductions
    def allreduce(self, value, op: str = "sum"):
        """A global ``sum``, ``max``, ``min``, ``and`` or ``or`` of one number per rank (collective).

        On a one-element numpy buffer (no pickling): an int or bool stays exact (int64), a float
        is a float64.
        """
        if op in ("and", "or"):
            out = self.allreduce_array(np.array([int(bool(value))], dtype=np.int64), "min" if op == "and" else "max")
            return bool(out[0])
        kind = np.asarray(value).dtype.kind
        buf = np.array([value], dtype=np.float64 if kind == "f" else np.int64)
        return self.allreduce_array(buf, op)[0].item()

    def allreduce_array(self, values: np.ndarray, op: str = "sum") -> np.ndarray:
        """Element-wise global reduction of a small numpy array (one call for several figures)."""
        MPI = self._MPI
        values = np.ascontiguousarray(values)
        out = np.empty_like(values)
        self.comm.Allreduce(values, out, op={"sum": MPI.SUM, "max": MPI.MAX, "min": MPI.MIN}[op])
        return out

    def free(self) -> None:
        """Release the distributed graph communicator."""
        if self.topology is not None:
            self.topology.Free()
            self.topology = None
