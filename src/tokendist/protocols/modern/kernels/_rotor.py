"""The parallel (lazy) rotor-router step in numba (Akbari, Berenbrink, SPAA 2013).

Tested against the per-node rule (:func:`.._rotor_router.rotor_counts`) step by step.
"""

from __future__ import annotations

import numba
import numpy as np

from ....kernels._divide import divmod_by

__all__ = ["rotor_step", "rotor_stencil_step"]

_U = np.uint64


@numba.njit(cache=True, nogil=True)
def rotor_step(indptr, indices, lazy, maxdeg, rotor, loads, out):  # pragma: no cover - compiled
    """One step: every node deals ``x`` tokens round its ``L`` ports from its rotor; returns tokens moved.

    Every node with a neighbour has the same L (2 Delta or Delta): ``x = base L + rem`` by a float
    reciprocal and one correction (no integer division per node). The arguments that stay the same
    for a run come first, then the rotors (updated in place) and the step's loads and output.
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
        base, rem = divmod_by(x, L, inv)
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


@numba.njit(cache=True, nogil=True, inline="always")
def _deal(x, r, L, inv):
    """``x = base L + rem`` by a float reciprocal and one correction; the rotor after dealing: ``(base, rem, r')``."""
    base, rem = divmod_by(x, L, inv)
    r += rem
    if r >= L:
        r -= L
    return base, rem, r


@numba.njit(cache=True, nogil=True)
def rotor_stencil_step(indptr, indices, lazy, maxdeg, starts, ends, offsets, rotor, loads, out):  # pragma: no cover
    """:func:`rotor_step` on a regular graph with an offset stencil (tori, rings): same counts, same rotors.

    The nodes of the runs ``[starts[r], ends[r])`` send port ``k``'s tokens to ``i + offsets[k]``
    (a tuple: unrolled, no index reads, branch-free port test); the others read their CSR rows.
    """
    n = loads.shape[0]
    out[:] = 0
    L = 2 * maxdeg if lazy else maxdeg
    inv = 1.0 / L
    stride = 2 if lazy else 1
    moved = 0
    nruns = starts.shape[0]
    i0 = 0
    for q in range(nruns + 1):
        i1 = starts[q] if q < nruns else n
        for i in range(i0, i1):
            a = indptr[i]
            x = loads[i]
            r = rotor[i]
            base, rem, rotor[i] = _deal(x, r, L, inv)
            sent = 0
            for k in range(indptr[i + 1] - a):
                pos = stride * k - r
                pos += L & (pos >> 63)  # (stride k - r) mod L
                c = base + np.int64(pos < rem)
                out[indices[a + k]] += c
                sent += c
            out[i] += x - sent
            moved += sent
        if q == nruns:
            break
        i0 = ends[q]
        for i in range(starts[q], i0):
            ui = _U(i)
            x = loads[ui]
            r = rotor[ui]
            base, rem, rotor[ui] = _deal(x, r, L, inv)
            sent = 0
            for k in range(len(offsets)):
                pos = stride * k - r
                pos += L & (pos >> 63)
                c = base + np.int64(pos < rem)
                out[_U(i + offsets[k])] += c
                sent += c
            out[ui] += x - sent
            moved += sent
    return moved
