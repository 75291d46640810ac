"""The random pairwise averaging step in numba (Berenbrink, Friedetzky, Kaaser, Kling, IPDPS 2019).

Bit for bit the numpy reference :meth:`.._pairwise_averaging.PairwiseAveraging.step`: step ``t``'s
edge is ``min(floor(counter_uniform(key, t, 0) m), m - 1)``, its two loads become the floor and
the ceiling of their mean, the ceiling to ``u`` when ``counter_uniform(key, t, 1) < 1/2``
(``excess=random``) or when ``x_u >= x_v`` (``excess=heavier``). The step is one interaction: the
kernel saves the reference's Python work and its two arrays per step, the copy of the loads stays.
"""

from __future__ import annotations

import numba
import numpy as np

from ....kernels._coins import _step_base, _uniform

__all__ = ["pairwise_step", "pairwise_steps"]


@numba.njit(cache=True, nogil=True)
def pairwise_step(uu, vv, random_excess, key, outflow, last, t, loads, new):  # pragma: no cover - compiled
    """One interaction: writes ``new`` and ``outflow``; returns the tokens moved.

    ``outflow`` is zero but at the two nodes in ``last`` (the previous interaction's), which are
    cleared first and replaced by this step's two nodes. The arguments that stay the same for a run
    come first, the step's (``t``, ``loads``, ``new``) last.
    """
    m = uu.shape[0]
    outflow[last[0]] = 0
    outflow[last[1]] = 0
    new[:] = loads
    base = _step_base(np.uint64(key), np.uint64(t))
    e = np.int64(_uniform(base, 0) * m)
    if e > m - 1:
        e = m - 1
    a = uu[e]
    b = vv[e]
    xa = loads[a]
    xb = loads[b]
    s = xa + xb
    lo = s // 2
    hi = s - lo
    if random_excess:
        a_hi = _uniform(base, 1) < 0.5
    else:
        a_hi = xa >= xb
    na = hi if a_hi else lo
    nb = lo if a_hi else hi
    new[a] = na
    new[b] = nb
    outflow[a] = max(xa - na, 0)
    outflow[b] = max(xb - nb, 0)
    last[0] = a
    last[1] = b
    return abs(xa - na)


@numba.njit(cache=True, nogil=True)
def pairwise_steps(uu, vv, random_excess, key, outflow, last, t, k, stop_idle, loads, block, moved,
                   messages):  # pragma: no cover - compiled
    """Up to ``k`` interactions from step ``t``: :func:`pairwise_step` on each, the loads after step
    ``t + b`` in ``block[b]``, its tokens moved in ``moved[b]`` and its two messages in
    ``messages[b]``; ``outflow`` and ``last`` end as after the last one. Stops after a step that
    moved nothing when ``stop_idle``. Returns the steps taken (``Protocol.steps``)."""
    prev = loads
    for b in range(k):
        row = block[b]
        m = pairwise_step(uu, vv, random_excess, key, outflow, last, t + b, prev, row)
        moved[b] = m
        messages[b] = 2
        prev = row
        if stop_idle and m == 0:
            return b + 1
    return k
