"""The vertex-based randomized diffusion step in numba (Berenbrink, Cooper, Friedetzky, Friedrich,
Sauerwald, SODA 2011 / JCSS 81(1) 2015).

Bit for bit the numpy reference :meth:`.._randomized_diffusion.RandomizedDiffusion.step`: node
``i`` with ``x = q S + r`` tokens gives ``q`` to each of its ``S`` slots and one more to the ``r``
slots with the smallest draws ``counter_uniform(key, t, i * S + s)`` (ties by slot number, as the
reference's stable argsort); slot ``s`` sends to ``table[i, s]``, or keeps the tokens when it is
``-1``. A node with ``r = 0`` draws nothing (the reference's draws for it choose nothing).
"""

from __future__ import annotations

import numba
import numpy as np

from ....kernels._coins import _step_base, _uniform

__all__ = ["randomized_diffusion_step"]

#: Up to this many slots the draws are sorted by insertion; above, by numpy's stable sort.
_INSERTION_SLOTS = 24


@numba.njit(cache=True, nogil=True)
def randomized_diffusion_step(table, loads, key, t, new, u, extra, order):  # pragma: no cover - compiled
    """One step: writes ``new``; returns the tokens moved (to neighbours, not kept).

    ``u`` (float64), ``extra`` and ``order`` (int64) are scratch arrays of ``S`` entries.
    """
    n, S = table.shape
    base = _step_base(np.uint64(key), np.uint64(t))
    new[:] = loads
    moved = 0
    for i in range(n):
        x = loads[i]
        q = x // S
        r = x - q * S
        extra[:] = 0
        if r > 0:
            first = np.uint64(i) * np.uint64(S)
            for s in range(S):
                u[s] = _uniform(base, first + np.uint64(s))
            if S <= _INSERTION_SLOTS:
                # insertion sort of the slots by their draws; a strict comparison keeps equal draws
                # in slot order (the reference's stable argsort)
                for s in range(S):
                    us = u[s]
                    z = s
                    while z > 0 and u[order[z - 1]] > us:
                        order[z] = order[z - 1]
                        z -= 1
                    order[z] = s
            else:
                order[:] = np.argsort(u, kind="mergesort")  # stable: ties by slot number
            for z in range(r):
                extra[order[z]] = 1
        out = 0
        for s in range(S):
            j = table[i, s]
            if j >= 0:
                give = q + extra[s]
                if give != 0:
                    new[j] += give
                    out += give
        new[i] -= out
        moved += out
    return moved
