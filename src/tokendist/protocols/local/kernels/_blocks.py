"""Blocks of single-port steps in one call (``Protocol.steps``).

Each step is :func:`._stencil.single_port_stencil_step`, the kernel :meth:`step` runs on a torus
or a ring with per-edge coins, so the same coins, matchings and loads.
"""

from __future__ import annotations

import numba

from ._stencil import single_port_stencil_step

__all__ = ["single_port_stencil_steps"]


@numba.njit(cache=True, nogil=True)
def single_port_stencil_steps(indptr, indices, csr_edges, starts, ends, lower, upper, edge_delta, key, bound, threshold,
                              flows, selected, flags, partner, t, k, stop_idle, loads, block,
                              moved):  # pragma: no cover - compiled
    """Up to ``k`` steps from step ``t``: the loads after step ``t + b`` in ``block[b]`` and its tokens
    moved in ``moved[b]``; ``flows`` and ``selected`` end as after the last one. Stops after a step
    that moved nothing when ``stop_idle``. Returns the steps taken."""
    prev = loads
    for b in range(k):
        row = block[b]
        m = single_port_stencil_step(indptr, indices, csr_edges, starts, ends, lower, upper, edge_delta, prev, key,
                                     t + b, bound, threshold, row, flows, selected, flags, partner)
        moved[b] = m
        prev = row
        if stop_idle and m == 0:
            return b + 1
    return k
