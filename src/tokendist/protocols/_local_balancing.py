"""Local load balancing of Ghosh, Leighton, Maggs, Muthukrishnan, Plaxton, Rajaraman, Richa,
Tarjan and Zuckerman (1995): the multi-port and single-port algorithms and their variants.
"""

from __future__ import annotations

import numba
import numpy as np

from ..engine import Param, Protocol, Step, register_protocol

__all__ = ["MultiPort"]


@numba.njit(cache=True, nogil=True)
def _multi_port_kernel(indptr, indices, loads, threshold, out):
    """One multi-port step, per node over its CSR row; returns tokens moved.

    Branch-free update (see ../shared/PERFORMANCE.md): node i gains one token from every
    neighbour at least ``threshold`` heavier and loses one to every neighbour at least
    ``threshold`` lighter.
    """
    moved = 0
    for i in range(loads.shape[0]):
        wi = loads[i]
        delta = 0
        for k in range(indptr[i], indptr[i + 1]):
            diff = wi - loads[indices[k]]
            s = np.int64(diff >= threshold) - np.int64(diff <= -threshold)
            delta -= s
            moved += s if s > 0 else 0
        out[i] = wi + delta
    return moved


def multi_port_flows(graph, loads, threshold: int) -> np.ndarray:
    """Reference (plain numpy) per-edge flows of one multi-port step: +1 from u to v, -1 back."""
    diff = loads[graph.u] - loads[graph.v]
    return (diff >= threshold).astype(np.int64) - (diff <= -threshold).astype(np.int64)


@register_protocol
class MultiPort(Protocol):
    """Multi-port local balancing: one token crosses every edge whose ends differ by >= 2d + 1.

    Per node u, each step: for every neighbour v with ``w(u) >= w(v) + 2d + 1`` at the start of the
    step, send one token to v (d = maximum degree of the graph). The paper proves the final state
    is locally balanced within 2d (differences across every edge at most 2d).

    References
    ----------
    B. Ghosh et al., Tight analyses of two local load balancing algorithms, CMU-CS-95-131, Sec. 3.
    """

    name = "multi-port"
    title = "Multi-port threshold (2d + 1)"
    paper = "Ghosh et al. 1995, Sec. 3"
    model = "multi-port"
    exchange_rounds = 1
    params = (Param("threshold", int, 0, "difference that moves a token; 0 means 2d + 1 (the paper's rule)"),
              Param("kernel", str, "numba", "numba (fast) or numpy (reference)", ("numba", "numpy")))

    def reset(self, graph, loads, rng):
        t = self.options["threshold"]
        self.threshold = int(t) if t > 0 else 2 * graph.max_degree + 1
        self._out = np.empty(graph.n, dtype=np.int64)

    def step(self, t, graph, loads):
        if self.options["kernel"] == "numpy":
            flows = multi_port_flows(graph, loads, self.threshold)
            new = loads - np.bincount(graph.u, weights=flows, minlength=graph.n).astype(np.int64) \
                + np.bincount(graph.v, weights=flows, minlength=graph.n).astype(np.int64)
            return Step(new, moved=int(np.abs(flows).sum()), messages=2 * graph.m, flows=flows)
        out = self._out if self._out is not loads else np.empty_like(loads)
        moved = _multi_port_kernel(graph.indptr, graph.indices, loads, self.threshold, out)
        self._out = loads  # ping-pong buffers: the engine copies nothing
        return Step(out, moved=int(moved), messages=2 * graph.m)

    def is_stable(self, graph, loads):
        return bool(graph.m == 0 or np.abs(loads[graph.u] - loads[graph.v]).max() < self.threshold)

    # Per-node form: exchange loads with every neighbour, then send one token to each neighbour
    # at least 2d + 1 lighter.
    def publish(self, rnd, t, node, view):
        return int(view.load)

    def decide(self, t, node, view):
        return {j: 1 for j, w in view.received[0].items() if view.load - w >= self.threshold}
