"""Blocks of steps of the rounded diffusion's stencil kernel in one call (``Protocol.steps``).

Each step is :func:`._serial.rounded_stencil_step`, the kernel :meth:`step` runs on a torus or a
ring, so the same coins and loads. A block stops *before* a step it cannot take as the step by
step run would: the loads span 2**29 or more (the step is then redone on the general path) or a
node sends more than it holds (the engine then reports that step from the outflow); the run
takes that step one at a time.
"""

from __future__ import annotations

import numba
import numpy as np

from ._serial import rounded_stencil_step

__all__ = ["rounded_stencil_steps"]


@numba.njit(cache=True, nogil=True)
def rounded_stencil_steps(indices, csr_edges, p, q, along, heads, mode, key, degree, starts, ends, lower, upper, ebase,
                          outflow, t, k, stop_idle, loads, block, moved, lows):  # pragma: no cover - compiled
    """Up to ``k`` steps from step ``t``: the loads after step ``t + b`` in ``block[b]``, its tokens moved
    in ``moved[b]`` and its lowest load in ``lows[b]``. Stops after a step that moved nothing when
    ``stop_idle``, and before a step whose loads span too much or that sends more than a node
    holds. Returns the steps taken."""
    prev = loads
    for b in range(k):
        row = block[b]
        m, low, narrow = rounded_stencil_step(indices, csr_edges, p, q, along, heads, prev, mode, key,
                                              np.uint64(t + b), degree, starts, ends, lower, upper, ebase,
                                              row, outflow)
        if not narrow:
            return b
        for i in range(prev.shape[0]):
            if outflow[i] > prev[i]:
                return b
        moved[b] = m
        lows[b] = low
        prev = row
        if stop_idle and m == 0:
            return b + 1
    return k
