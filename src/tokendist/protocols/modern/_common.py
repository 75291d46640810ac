"""Shared pieces of the modern family: the diffusion matrices the papers use, flows to loads.

Kept inside the family (not imported from the classic diffusion package) so that the family
depends only on the public engine and graph layers.
"""

from __future__ import annotations

from fractions import Fraction

import numpy as np

from ...engine import Param
from ...errors import TokendistError
from ...kernels._report import block_kernel_ready

__all__ = ["MATRICES", "matrix_param", "edge_coefficients", "apply_flows", "continuous_fos_step", "slot_rows",
           "stateless_steps"]

#: Diffusion matrices: ``degree`` P_ij = 1/(2 max(d_i, d_j)) (lazy: P_ii >= 1/2; on a d-regular graph
#: the lazy random walk 1/(2d) of Friedrich, Gairing, Sauerwald), ``max-degree`` P_ij = 1/(Delta + 1)
#: (the matrix of Rabani, Sinclair, Wanka and of Berenbrink et al. 2011), ``uniform:W`` P_ij = W.
MATRICES = "degree | max-degree | uniform:W"


def matrix_param(default: str = "degree") -> Param:
    return Param("matrix", str, default, f"diffusion matrix P: {MATRICES}")


def edge_coefficients(graph, spec: str) -> np.ndarray:
    """Per-edge ``P_uv`` for ``spec`` (one of :data:`MATRICES`); a one-line error when P is not stochastic."""
    d = graph.degrees
    if graph.m == 0:
        return np.zeros(0)
    if spec == "degree":
        alpha = 1.0 / (2.0 * np.maximum(d[graph.u], d[graph.v]))
    elif spec == "max-degree":
        alpha = np.full(graph.m, 1.0 / (graph.max_degree + 1))
    elif spec.startswith("uniform:"):
        try:
            w = float(Fraction(spec.split(":", 1)[1].strip()))
        except (ValueError, ZeroDivisionError):
            raise TokendistError(f"matrix {spec!r}: expected uniform:W with W a number such as 0.2 or 1/5") from None
        if not 0 < w <= 1.0 / graph.max_degree:
            raise TokendistError(f"matrix {spec!r}: need 0 < W <= 1/Delta = 1/{graph.max_degree} (rows must sum to 1)")
        alpha = np.full(graph.m, w)
    else:
        raise TokendistError(f"unknown matrix {spec!r} (expected {MATRICES})")
    return alpha


def slot_rows(graph) -> np.ndarray:
    """The row (sending node) of every CSR slot."""
    return np.repeat(np.arange(graph.n, dtype=np.int64), np.diff(graph.indptr))


def apply_flows(graph, loads: np.ndarray, flows: np.ndarray) -> np.ndarray:
    """Loads after the signed per-edge ``flows`` (positive from ``u`` to ``v``)."""
    n = graph.n
    out = np.bincount(graph.v, weights=flows, minlength=n) - np.bincount(graph.u, weights=flows, minlength=n)
    if np.issubdtype(loads.dtype, np.integer):
        return loads + np.rint(out).astype(np.int64)
    return loads + out


def continuous_fos_step(graph, alpha: np.ndarray, xi: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """One step of continuous first-order diffusion: ``(xi P, per-edge flow u -> v)``."""
    flow = alpha * (xi[graph.u] - xi[graph.v])
    return apply_flows(graph, xi, flow), flow


def stateless_steps(protocol, kernel, variant, t, k, graph, loads, block, moved, messages, stop_idle):
    """:meth:`Protocol.steps <tokendist.engine.Protocol.steps>` of a rule with no state between steps.

    ``kernel(*protocol._fast, t, k, stop_idle, loads, block, moved, messages, protocol._messages)`` is
    the protocol's block kernel (a loop over the kernel :meth:`step` calls, so the same draws and
    loads); ``variant`` the step kernel's label. None (the run goes step by step) when the numpy
    reference was chosen, on another graph than at reset, or while a small run avoids compiling a
    kernel that is not cached.
    """
    fast = protocol._fast
    if fast is None or graph is not protocol._graph:
        return None
    args = (*fast, t, k, stop_idle, loads, block, moved, messages, protocol._messages)
    if not block_kernel_ready(kernel, args):
        return None
    return kernel(*args), variant
