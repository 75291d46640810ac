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

from ....kernels._coins import _splitmix64, _step_base, _uniform
from ....kernels._divide import divmod_by

__all__ = ["randomized_diffusion_step", "randomized_diffusion_steps"]

#: Up to this many slots a slot's rank is counted by comparisons; above, numpy's stable sort.
_COUNT_SLOTS = 32
_S11 = np.uint64(11)
#: divmod_by is exact for loads of magnitude below this.
_EXACT = 2**53


@numba.njit(cache=True, nogil=True)
def randomized_diffusion_step(table, mixed, key, u, extra, bits, t, loads, new):  # pragma: no cover - compiled
    """One step: writes ``new``; returns the tokens moved (to neighbours, not kept).

    ``mixed[i * S + s]`` is slot ``(i, s)``'s own part of its draw (:func:`tokendist._random.mix_index`,
    made once a run; empty: computed here), so that a draw is one SplitMix64 mix, not two.
    ``u`` (float64), ``extra`` (int64) and ``bits`` (uint64) are scratch arrays of ``S`` entries.
    The arguments that stay the same for a run come first, the step's (``t``, ``loads``, ``new``) last.
    """
    if table.shape[1] > _COUNT_SLOTS:
        return _step_sorted(table, loads, key, t, new, u, extra)
    n, S = table.shape
    base = _step_base(np.uint64(key), np.uint64(t))
    tabled = mixed.shape[0] > 0
    inv = 1.0 / S
    new[:] = loads
    moved = 0
    for i in range(n):
        x = loads[i]
        if -_EXACT < x < _EXACT:  # (every load of a run that does not approach 2**53)
            q, r = divmod_by(x, S, inv)  # a multiplication: a 64-bit division costs tens of cycles
        else:
            q = x // S
            r = x - q * S
        out = 0
        if r > 0:
            first = np.uint64(i) * np.uint64(S)
            for s in range(S):
                # The draw's 53 bits: the draw is these times 2^-53, exactly, so they compare as the
                # draws do (ties included), without the conversion to float.
                slot = first + np.uint64(s)
                bits[s] = _splitmix64(base ^ (mixed[slot] if tabled else _splitmix64(slot))) >> _S11
            for s in range(S):
                # rank of slot s: the slots with a smaller draw, or an equal one and a smaller number
                # (the reference's stable argsort); counted without branches, the draws being coin flips
                bs = bits[s]
                rank = 0
                for z in range(S):
                    bz = bits[z]
                    rank += (bz < bs) | ((bz == bs) & (z < s))
                j = table[i, s]
                if j >= 0:
                    give = q + (rank < r)
                    new[j] += give
                    out += give
        else:
            for s in range(S):
                j = table[i, s]
                if j >= 0:
                    new[j] += q
                    out += q
        new[i] -= out
        moved += out
    return moved


@numba.njit(cache=True, nogil=True)
def _step_sorted(table, loads, key, t, new, u, extra):  # pragma: no cover - compiled
    # Many slots (a star's centre, a complete graph): the r smallest draws by numpy's stable sort.
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
            order = np.argsort(u, kind="mergesort")  # stable: ties by slot number
            for z in range(r):
                extra[order[z]] = 1
        out = 0
        for s in range(S):
            j = table[i, s]
            if j >= 0:
                give = q + extra[s]
                new[j] += give
                out += give
        new[i] -= out
        moved += out
    return moved


@numba.njit(cache=True, nogil=True)
def randomized_diffusion_steps(table, mixed, key, u, extra, bits, t, k, stop_idle, loads, block, moved, messages,
                               msg):  # pragma: no cover - compiled
    """Up to ``k`` steps from step ``t``: :func:`randomized_diffusion_step` on each, the loads after step
    ``t + b`` in ``block[b]``, its tokens moved in ``moved[b]`` and ``msg`` in ``messages[b]``; stops
    after a step that moved nothing when ``stop_idle``. Returns the steps taken
    (``Protocol.steps``: one call for a block of steps of a small graph)."""
    prev = loads
    for b in range(k):
        row = block[b]
        m = randomized_diffusion_step(table, mixed, key, u, extra, bits, t + b, prev, row)
        moved[b] = m
        messages[b] = msg
        prev = row
        if stop_idle and m == 0:
            return b + 1
    return k
