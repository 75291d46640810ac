"""The parallel (lazy) rotor-router step in numba (Akbari, Berenbrink, SPAA 2013).

Tested against the per-node rule (:func:`.._rotor_router.rotor_counts`) step by step.
"""

from __future__ import annotations

import numba
import numpy as np

__all__ = ["rotor_step"]


@numba.njit(cache=True, nogil=True)
def rotor_step(indptr, indices, loads, rotor, lazy, maxdeg, out):  # pragma: no cover - compiled
    """One step: every node deals ``x`` tokens round its ``L`` ports from its rotor; returns tokens moved.

    Every node with a neighbour has the same L (2 Delta or Delta): ``x = base L + rem`` by a float
    reciprocal and one correction (no integer division per node).
    """
    n = loads.shape[0]
    out[:] = 0  # (a write-only pass: each node adds its own kept tokens below)
    moved = 0
    L = 2 * maxdeg if lazy else maxdeg
    if L == 0:
        out[:] = loads
        return moved
    inv = 1.0 / L
    stride = 2 if lazy else 1
    for i in range(n):
        a = indptr[i]
        d = indptr[i + 1] - a
        x = loads[i]
        if d == 0:
            out[i] += x
            continue
        base = np.int64(x * inv)
        rem = x - base * L
        if rem >= L:
            base += 1
            rem -= L
        elif rem < 0:
            base -= 1
            rem += L
        r = rotor[i]
        sent = 0
        for k in range(d):
            pos = stride * k - r
            if pos < 0:
                pos += L
            c = base + (1 if pos < rem else 0)
            out[indices[a + k]] += c
            sent += c
        out[i] += x - sent
        moved += sent
        r += rem
        if r >= L:
            r -= L
        rotor[i] = r
    return moved
