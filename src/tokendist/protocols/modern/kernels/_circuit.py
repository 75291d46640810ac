"""The balancing-circuit step in numba (Sauerwald, Sun FOCS 2012; Friedrich, Sauerwald STOC 2009).

Bit for bit the numpy reference (:func:`.._matching.balance_pairs` on the colour class of the
round): every edge of the class averages its two loads, the odd token to ``u`` when the excess
coin (``counter_uniform(key, t, e) < 1/2``, the reference's draw for edge ``e``) or, with
``excess=heavier``, ``x_u >= x_v`` says so. Only the class's edges are visited (the edges sorted
by colour once, at reset), so a round costs about ``m / colours`` edge updates.
"""

from __future__ import annotations

import numba
import numpy as np

from ....kernels._coins import _step_base, _uniform

__all__ = ["circuit_step", "circuit_steps"]


@numba.njit(cache=True, nogil=True)
def circuit_step(edges, uu, vv, random_excess, key, flows, lo, hi, old_lo, old_hi, t, loads,
                 new):  # pragma: no cover - compiled
    """Round over the edges ``edges[lo:hi]`` (one colour class); writes ``new`` and the class's ``flows``.

    ``flows`` holds the flows of the class ``edges[old_lo:old_hi]`` (the previous round's), zero
    elsewhere; they are cleared first. Returns the tokens moved. The arguments that stay the same
    for a run come first, the round's last.
    """
    for k in range(old_lo, old_hi):
        flows[edges[k]] = 0
    new[:] = loads  # the unmatched nodes keep their loads
    base = _step_base(np.uint64(key), np.uint64(t))
    moved = 0
    for k in range(lo, hi):
        e = edges[k]
        a = loads[uu[e]]
        b = loads[vv[e]]
        s = a + b
        half = s // 2
        odd = s - 2 * half
        if random_excess:
            up = 1 if _uniform(base, e) < 0.5 else 0  # drawn for every edge, odd or not: no branch on data
        else:
            up = 1 if a >= b else 0
        f = a - (half + (odd & up))
        flows[e] = f
        new[uu[e]] = a - f
        new[vv[e]] = b + f
        moved += abs(f)
    return moved


@numba.njit(cache=True, nogil=True)
def circuit_steps(edges, uu, vv, random_excess, key, flows, starts, period, old_lo, old_hi, t, k, stop_idle, loads,
                  block, moved, messages):  # pragma: no cover - compiled
    """Up to ``k`` rounds from round ``t``: :func:`circuit_step` on colour class ``(t + b) mod period``
    (edges ``edges[starts[c]:starts[c + 1]]``), the loads after it in ``block[b]``, its tokens moved
    and messages (two per edge of the class) in ``moved[b]`` and ``messages[b]``; ``flows`` ends
    holding the last round's. Stops after a round that moved nothing when ``stop_idle``. Returns
    the rounds taken (``Protocol.steps``)."""
    prev = loads
    for b in range(k):
        c = (t + b) % period
        lo = starts[c]
        hi = starts[c + 1]
        row = block[b]
        m = circuit_step(edges, uu, vv, random_excess, key, flows, lo, hi, old_lo, old_hi, t + b, prev, row)
        old_lo = lo
        old_hi = hi
        moved[b] = m
        messages[b] = 2 * (hi - lo)
        prev = row
        if stop_idle and m == 0:
            return b + 1
    return k
