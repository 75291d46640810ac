"""The stratified randomized diffusion step in numba (Shiraga, arXiv:1802.06532, Sec. 3).

Bit for bit the numpy reference :meth:`.._stratified.StratifiedDiffusion.step`: node ``i`` with
``x`` tokens sends to the neighbour of CSR slot ``s`` (column ``col`` of its row) the tokens whose
stratified draw falls in ``[c[i, col], c[i, col + 1])``, that is ``below(c[i, col + 1]) -
below(c[i, col])`` with ``below(c) = floor(c x) + [U_k < frac(c x)]``, ``k = floor(c x)`` and
``U_k = counter_uniform(key, t, i * 2^32 + k)``: the reference's draw for the token at the
boundary. A boundary shared by two consecutive columns (the row's intervals are adjacent) is
computed once; the result does not depend on it, since ``below`` is a pure function.
"""

from __future__ import annotations

import math

import numba
import numpy as np

from ....kernels._coins import _step_base, _uniform

__all__ = ["stratified_step", "stratified_steps"]

_LOW32 = np.uint64(0xFFFFFFFF)
_S32 = np.uint64(32)


@numba.njit(cache=True, nogil=True)
def _below(c, x, node_hi, base):  # pragma: no cover - compiled
    # The reference's _below for one boundary: B = c x in float64, k = floor(B), one draw at k.
    B = c * np.float64(x)
    kf = math.floor(B)
    frac = B - kf
    k = np.int64(kf)
    if k < x:
        # the comparison added as 0 or 1, not branched on: it is a coin flip, a branch would mispredict
        return k + (_uniform(base, node_hi | (np.uint64(k) & _LOW32)) < frac)
    return k


@numba.njit(cache=True, nogil=True)
def stratified_step(indptr, indices, col, c, key, t, loads, new):  # pragma: no cover - compiled
    """One step: writes ``new``; returns the tokens moved (to neighbours, not kept).

    The arguments that stay the same for a run come first, the step's (``t``, ``loads``, ``new``) last.
    """
    n = loads.shape[0]
    base = _step_base(np.uint64(key), np.uint64(t))
    new[:] = loads
    moved = 0
    for i in range(n):
        x = loads[i]
        if x == 0:
            continue  # below(c) = 0 for every boundary: nothing moves, nothing is drawn
        node_hi = np.uint64(i) << _S32
        row = c[i]
        last_col = -2
        last_val = 0
        out = 0
        for s in range(indptr[i], indptr[i + 1]):
            k = col[s]
            # (unsigned column indices: no negative-index wrap per read)
            lo = last_val if k == last_col else _below(row[np.uint64(k)], x, node_hi, base)
            hi = _below(row[np.uint64(k + 1)], x, node_hi, base)
            last_col = k + 1
            last_val = hi
            sent = hi - lo
            new[indices[s]] += sent  # (added even when 0: a branch on it mispredicted, 8% of the step)
            out += sent
        new[i] -= out
        moved += out
    return moved


@numba.njit(cache=True, nogil=True)
def stratified_steps(indptr, indices, col, c, key, t, k, stop_idle, loads, block, moved, messages,
                     msg):  # pragma: no cover - compiled
    """Up to ``k`` steps from step ``t``: :func:`stratified_step` on each, the loads after step ``t + b``
    in ``block[b]``, its tokens moved in ``moved[b]`` and ``msg`` in ``messages[b]``; stops after a
    step that moved nothing when ``stop_idle``. Returns the steps taken (``Protocol.steps``)."""
    prev = loads
    for b in range(k):
        row = block[b]
        m = stratified_step(indptr, indices, col, c, key, t + b, prev, row)
        moved[b] = m
        messages[b] = msg
        prev = row
        if stop_idle and m == 0:
            return b + 1
    return k
