"""The random matching model's step in numba (Sauerwald, Sun FOCS 2012; Friedrich, Sauerwald STOC 2009).

Bit for bit the numpy reference :meth:`.._matching.RandomMatching.step`. With the ``edge-coin``
drawing the matching is drawn here, from the reference's counter-based draws: edge ``e`` is a
candidate when ``counter_uniform(match_key, t, e) < p``, and a candidate joins the matching when
no other candidate touches either end. Every matched edge then averages its loads, the odd token
to ``u`` when ``counter_uniform(coin_key, t, e) < 1/2`` (``excess=random``) or when
``x_u >= x_v`` (``excess=heavier``), as :func:`.._matching.balance_pairs`. The other drawing
(``active-passive``) hands its mask in (``draw=False``).
"""

from __future__ import annotations

import numba
import numpy as np

from ....kernels._coins import _splitmix64, _step_base

__all__ = ["matching_step", "matching_steps"]

_S11 = np.uint64(11)
_TO_UNIT = 1.0 / (1 << 53)


@numba.njit(cache=True, nogil=True)
def matching_step(uu, vv, draw, p, match_key, mixed, mask, random_excess, coin_key, count, t, loads, new,
                  flows):  # pragma: no cover - compiled
    """One round: writes ``new`` and every edge's ``flows`` (0 off the matching); returns (moved, matched).

    ``draw``: draw the edge-coin matching into ``mask`` (scratch of m booleans); else ``mask`` is
    the round's matching. ``mixed[e]`` is edge ``e``'s own part of its draw
    (:func:`tokendist._random.mix_index`, made once a run; empty: computed here): a draw is then one
    SplitMix64 mix, not two, the same bits as ``_uniform(base, e)``. ``count`` is scratch of n integers. The arguments
    that stay the same for a run come first, the step's (``t``, ``loads``, ``new``, ``flows``) last.
    """
    m = uu.shape[0]
    tabled = mixed.shape[0] > 0
    if draw:
        count[:] = 0
        mbase = _step_base(np.uint64(match_key), np.uint64(t))
        for e in range(m):
            mix = mixed[e] if tabled else _splitmix64(np.uint64(e))
            c = np.float64(_splitmix64(mbase ^ mix) >> _S11) * _TO_UNIT < p
            mask[e] = c
            if c:
                count[uu[e]] += 1
                count[vv[e]] += 1
    new[:] = loads  # the unmatched nodes keep their loads
    cbase = _step_base(np.uint64(coin_key), np.uint64(t))
    moved = 0
    matched = 0
    for e in range(m):
        f = 0
        if mask[e]:
            a = uu[e]
            b = vv[e]
            if not draw or (count[a] == 1 and count[b] == 1):
                xa = loads[a]
                xb = loads[b]
                s = xa + xb
                half = s // 2
                odd = s - 2 * half
                if random_excess:
                    mix = mixed[e] if tabled else _splitmix64(np.uint64(e))
                    up = 1 if np.float64(_splitmix64(cbase ^ mix) >> _S11) * _TO_UNIT < 0.5 else 0
                else:
                    up = 1 if xa >= xb else 0
                f = xa - (half + (odd & up))
                new[a] = xa - f
                new[b] = xb + f
                moved += abs(f)
                matched += 1
        flows[e] = f
    return moved, matched


@numba.njit(cache=True, nogil=True)
def matching_steps(uu, vv, draw, p, match_key, mixed, mask, random_excess, coin_key, count, t, k, stop_idle, loads,
                   block, flows, moved, messages):  # pragma: no cover - compiled
    """Up to ``k`` rounds from round ``t``: :func:`matching_step` on each, the loads after round ``t + b``
    in ``block[b]``, its tokens moved and messages (two per matched edge) in ``moved[b]`` and
    ``messages[b]`` (``flows``: scratch of m integers); stops after a round that moved nothing when
    ``stop_idle``. Returns the rounds taken (``Protocol.steps``)."""
    prev = loads
    for b in range(k):
        row = block[b]
        m, matched = matching_step(uu, vv, draw, p, match_key, mixed, mask, random_excess, coin_key, count, t + b,
                                   prev, row, flows)
        moved[b] = m
        messages[b] = 2 * matched
        prev = row
        if stop_idle and m == 0:
            return b + 1
    return k
