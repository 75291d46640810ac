"""Diffusion (Subramanian and Scherson 1994): Algorithm DIFFUSE and its roundings.

``diffusion`` is the idealised scheme with real-valued loads: every step each node i sends
``P_ij * w_i`` to each neighbour j, i.e. ``w(t+1) = P w(t)`` with a diffusivity matrix P that is
symmetric, stochastic, positive exactly on the edges, with ``P_ii >= 1/2`` (Sec. 2).
"""

from __future__ import annotations

import numpy as np
import scipy.sparse as sp

from ..engine import Param, Protocol, Step, register_protocol

__all__ = ["Diffusion", "default_diffusivity"]


def default_diffusivity(graph) -> np.ndarray:
    """Per-edge diffusion coefficients ``P_uv = 1 / (2 max(d_u, d_v))``.

    Symmetric, and ``P_ii = 1 - sum_j P_ij >= 1/2`` as Subramanian and Scherson require (Sec. 2).
    """
    d = graph.degrees
    return 1.0 / (2.0 * np.maximum(d[graph.u], d[graph.v]))


def diffusion_matrix(graph, alpha: np.ndarray) -> sp.csr_array:
    """The matrix P with off-diagonal entries ``alpha`` on the edges and the diagonal completing rows to 1."""
    n = graph.n
    off = sp.coo_array((np.concatenate([alpha, alpha]), (np.concatenate([graph.u, graph.v]),
                                                         np.concatenate([graph.v, graph.u]))), shape=(n, n))
    diag = 1.0 - np.bincount(graph.u, weights=alpha, minlength=n) - np.bincount(graph.v, weights=alpha, minlength=n)
    return (off + sp.diags_array(diag)).tocsr()


@register_protocol
class Diffusion(Protocol):
    """Continuous diffusion w(t+1) = P w(t) with real-valued loads (Algorithm DIFFUSE).

    Per node i, each step: send ``P_ij * w_i`` to every neighbour j and receive ``P_ji * w_j``; as
    P is symmetric the net flow on edge (i, j) is ``P_ij (w_i - w_j)``.

    References
    ----------
    R. Subramanian, I. D. Scherson, An analysis of diffusive load-balancing, SPAA 1994, Sec. 2.
    """

    name = "diffusion"
    title = "Continuous diffusion (DIFFUSE)"
    paper = "Subramanian, Scherson 1994, Sec. 2"
    model = "flow"
    divisible = True
    exchange_rounds = 1
    params = ()

    def reset(self, graph, loads, rng):
        self._graph = graph
        self.alpha = default_diffusivity(graph)
        self.P = diffusion_matrix(graph, self.alpha)

    def step(self, t, graph, loads):
        flows = self.alpha * (loads[graph.u] - loads[graph.v])
        new = self.P @ loads
        return Step(new, moved=float(np.abs(flows).sum()), messages=2 * graph.m, flows=flows)

    def is_stable(self, graph, loads):
        return bool(np.ptp(loads) <= 1e-12 * max(1.0, float(np.abs(loads).max())))

    # Per-node form: publish (load, degree); send P_ij (w_i - w_j) to each lighter neighbour j,
    # which is the net of the paper's "send P_ij w_i, receive P_ji w_j" (P is symmetric).
    def publish(self, rnd, t, node, view):
        return (view.load, len(view.neighbours))

    def decide(self, t, node, view):
        d = len(view.neighbours)
        sends = {}
        for j, (w_j, d_j) in view.received[0].items():
            diff = view.load - w_j
            if diff > 0:
                sends[j] = diff / (2.0 * max(d, d_j))
        return sends
