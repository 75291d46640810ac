"""Partitioned steps of the rounded diffusion schemes (``--backend mpi``; :mod:`tokendist.engine.mpi`).

Each rank applies the numpy rule per edge (:func:`~._rules.rounded_flows`) to the edges of its
local graph with the whole graph's ``P_ij``, orientation and the coins of the global edge ids:
the flows are integers, so the owned loads and outflows are the kernel's exactly.

``diffusion-oriented`` off a biconnected graph (Subramanian and Scherson 1994, Sec. 4, Case 2)
runs the rule on the supergraph H, whose added edges a-b join two neighbours of a cut vertex c.
The single-process kernel moves the tokens of an added edge from a to b directly (c forwards
them within the iteration, its own load unchanged) and counts them twice in the load moved (two
hops). Node a's new load therefore reads ``load[b]``, two hops away in G. A rank keeps its part of
H with the same owners (:class:`RelayHalo`), whose ghosts are its neighbours in H, and one more
neighbour exchange per step, across the added edges only, brings the loads of the far ends. The
second hop of each relayed transfer is reported in ``Step.info["relayed"]`` by the rank owning
its sender, so that the executor's load moved is the kernel's token-hop count. The step itself
is ``_RoundedDiffusion.partitioned_step`` (:mod:`._rules`), on G's local graph or, with a relay
halo, on H's.
"""

from __future__ import annotations

import numpy as np

from ...engine.mpi import LocalPart
from ...errors import TokendistError
from ...graphs import Graph

__all__ = ["RelayHalo", "relay_halo"]


class RelayHalo:
    """A rank's part of the supergraph H (Case 2): the local edges of H and the loads they read.

    Attributes
    ----------
    part : LocalPart
        The rank's part of H (same owners as the executor's part of G): the local graph the rule
        runs on. Its own exchange is not used.
    far : LocalPart
        The rank's part of the graph of the added edges alone: its exchange carries the loads across
        the added edges only (those two hops away in G), not again the ghosts of G, which the
        executor's exchange has refreshed.
    in_h, far_in_h : ndarray of int64
        The local id in H's part of every local node of G's part and of the added edges' part (both
        subsets: every edge of G or added is an edge of H).
    virtual : ndarray of bool
        Per local edge of H: an added edge (relayed over its cut vertex).
    """

    def __init__(self, part, h, relay):
        added = np.flatnonzero(relay >= 0)
        # A subset of H's edges in H's order: still sorted with u < v (the trusted constructor applies).
        between = Graph(h.n, h.u[added], h.v[added], spec=f"{h.spec} (added edges)", base_edges=added)
        self.part = LocalPart(part.comm, h, part.owner)
        self.far = LocalPart(part.comm, between, part.owner)
        self.in_h = np.searchsorted(self.part.nodes, part.nodes)
        self.far_in_h = np.searchsorted(self.part.nodes, self.far.nodes)
        self.virtual = relay[self.part.edges] >= 0

    def loads(self, part, loads):
        """The loads of H's local nodes: G's local loads, then one exchange across the added edges (collective)."""
        w = np.empty(self.part.nodes.size, dtype=loads.dtype)
        w[self.in_h] = loads
        far = w[self.far_in_h]  # the owned entries are set; the exchange overwrites the ghosts'
        before = self.far.bytes_exchanged
        self.far.exchange(far)
        w[self.far_in_h] = far
        part.bytes_exchanged += self.far.bytes_exchanged - before  # counted in the run's halo volume
        return w

    def relayed(self, flows) -> int:
        """Tokens of added edges sent by this rank's nodes: the second hop of each relayed transfer."""
        g, v = self.part.graph, self.virtual
        fv = flows[v]
        sender_owned = np.where(fv > 0, self.part.is_owned[g.u[v]], self.part.is_owned[g.v[v]])
        return int(np.abs(fv[sender_owned]).sum())

    def free(self) -> None:
        """Release the communicators of both parts (collective)."""
        self.part.free()
        self.far.free()


def relay_halo(protocol, part) -> RelayHalo | None:
    """The relay halo of ``diffusion-oriented`` off a biconnected graph, else None (collective).

    ``protocol``: a rounded diffusion after ``reset`` (its ``h`` and ``relay``); ``part``: the
    executor's part of G.
    """
    h = getattr(protocol, "h", part.global_graph)
    if h is part.global_graph:
        return None
    if protocol.options["kernel"] != "numba":
        # The numpy reference counts the net flow per real edge as moved and checks feasibility on
        # it (the relay's forwarding included): not the kernels' figures, which the ranks follow.
        raise TokendistError(f"{protocol.name} cannot run partitioned yet with kernel=numpy on a graph that is not "
                             "biconnected: use kernel=numba (the default)")
    return RelayHalo(part, h, protocol.relay)
