"""The parallel (lazy) rotor-router step in numba (Akbari, Berenbrink, SPAA 2013).

Tested against the per-node rule (:func:`.._rotor_router.rotor_counts`) step by step.
"""

from __future__ import annotations

import numba
import numpy as np

from ....engine._cycles import PERIOD, add_moved, seen_before
from ....kernels._divide import divmod_by

__all__ = ["rotor_step", "rotor_stencil_step", "rotor_steps", "rotor_stencil_steps"]

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


# Blocks of steps (Protocol.steps, engine/_batch.py): each a loop over one step kernel above, with
# the engine's cycle check before each step at a period boundary (engine/_cycles.py seen_before: the
# key of the loads and of the rotors' bytes, the protocol's state_key). Arguments: the step kernel's
# fixed ones, the rotors, the first step t, at most k steps, stop_idle, the cycle table (keys,
# visits, info), the loads before step t, the (k, n) block the loads after each step go to, the
# per-step tokens moved and messages, the messages of a step. Return the steps done; a state seen
# before ends the block before its step.

@numba.njit(cache=True, nogil=True)
def rotor_steps(indptr, indices, lazy, maxdeg, rotor, t, k, stop_idle, keys, visits, info, loads, block, moved,
                messages, msg):  # pragma: no cover - compiled
    """Up to ``k`` steps of :func:`rotor_step` (the block comment above)."""
    state = rotor.view(np.uint8)
    period = info[PERIOD]
    prev = loads
    for b in range(k):
        if period > 0 and (t + b) % period == 0 and seen_before(keys, visits, info, prev.view(np.uint8), state, t + b):
            return b
        row = block[b]
        m = rotor_step(indptr, indices, lazy, maxdeg, rotor, prev, row)
        moved[b] = m
        messages[b] = msg
        prev = row
        if not add_moved(info, m) or (stop_idle and m == 0):
            return b + 1
    return k


@numba.njit(cache=True, nogil=True)
def rotor_stencil_steps(indptr, indices, lazy, maxdeg, starts, ends, offsets, rotor, t, k, stop_idle, keys, visits,
                        info, loads, block, moved, messages, msg):  # pragma: no cover - compiled
    """Up to ``k`` steps of :func:`rotor_stencil_step` (the block comment above)."""
    state = rotor.view(np.uint8)
    period = info[PERIOD]
    prev = loads
    for b in range(k):
        if period > 0 and (t + b) % period == 0 and seen_before(keys, visits, info, prev.view(np.uint8), state, t + b):
            return b
        row = block[b]
        m = rotor_stencil_step(indptr, indices, lazy, maxdeg, starts, ends, offsets, rotor, prev, row)
        moved[b] = m
        messages[b] = msg
        prev = row
        if not add_moved(info, m) or (stop_idle and m == 0):
            return b + 1
    return k
