"""The rounded diffusion rules' numpy step per CSR slot (Subramanian and Scherson 1994, Sec. 4).

The edge-wise reference (:func:`._rules.rounded_flows`) computes each edge's flow once and
scatters it to both ends with ``np.add.at``. On a small graph a step then costs mostly numpy's
per-call overhead, and a small run takes this numpy step instead of compiling kernels
(:mod:`tokendist.kernels._choice`). :class:`SlotRounding` gives the same numbers with fewer,
cheaper calls: each edge is worked out at both of its ends (one CSR slot each), so that a node's
slots add up to what it sends and receives without a scatter.
"""

from __future__ import annotations

import numpy as np

from ..._random import CounterDraws
from ._diffusivity import coefficient_ratios

__all__ = ["SlotRounding"]


class SlotRounding:
    """The numpy step of a rounded rule per CSR slot of H: :func:`._rules.rounded_flows` without scatters.

    The rule is :func:`._rules.rounded_flows`'s, read from each end of an edge: slot ``s`` of row ``i``
    (neighbour ``j``) gets ``d = load[i] - load[j]`` and the rounded amount of ``P_ij |d|``, which
    ``i`` sends when ``d > 0`` and receives when ``d < 0`` (each edge is computed at both ends, with
    its own coin: the same amount). A row's slots then add up to what its node sends and receives,
    so no ``np.add.at`` is needed; the sums are in int64 (exact). Everything that does not change
    between steps (the slot's row, ``P_ij``, its fraction, the orientation, the coins' counters)
    is laid out per slot once, at reset. Used while the loads span less than 2**62, so that ``d``
    and the integer arithmetic below stay within int64; :func:`._rules.rounded_flows` serves the rest.
    """

    #: Steps of coins drawn at once, at most this many floats in a block (CounterDraws).
    COIN_FLOATS = 1 << 17

    def __init__(self, h, alpha, rounding: str, coin: str, orient, key: int):
        n, m = h.n, h.m
        deg = np.diff(h.indptr.astype(np.int64))
        edges = h.csr_edges.astype(np.int64)
        self.n, self.rounding = n, rounding
        self.regular = int(deg[0]) if n and int(deg.min()) == int(deg.max()) else 0
        row = np.repeat(np.arange(n), deg)
        self.row, self.near = row, h.indices.astype(np.int64)
        if self.regular:
            self.near = self.near.reshape(n, self.regular)  # (loads[:, None] then stands for loads[row])
        else:
            self.starts = h.indptr[:-1][deg > 0].astype(np.int64)
            self.nonempty = deg > 0
        ratio = coefficient_ratios(alpha)[edges] if m else np.zeros((0, 2), dtype=np.int64)
        a = np.abs(alpha)[edges]
        if m and bool(np.all(ratio == ratio[0])):  # one P for all edges (torus, hypercube, uniform:W)
            ratio, a = ratio[:1], a[:1]
        self.num, self.den, self.p = ratio[:, 0], ratio[:, 1], a
        self.unit = bool(np.all(self.num == 1))  # every P_ij = 1/den (the default matrix's 1/(2 max(d_i, d_j)))
        # One P_ij = 1/2^k (a torus's 1/8): a shift, cheaper than integer division.
        self.shift = int(self.den[0]).bit_length() - 1 if self.unit and self.den.size == 1 else -1
        if self.shift >= 0 and 1 << self.shift != int(self.den[0]):
            self.shift = -1
        if self.regular:
            shape = (n, self.regular) if self.den.size > 1 else (1, 1)
            self.num, self.den, self.p = (x.reshape(shape) for x in (self.num, self.den, self.p))
            self.ones = np.ones(self.regular, dtype=np.int64)
        # The per-edge flows the Step reports: each edge's slot in the row of its end u.
        at_u = row == h.u[edges]
        self.edge_slot = np.empty(m, dtype=np.int64)
        self.edge_slot[edges[at_u]] = np.flatnonzero(at_u)
        self.coins = None
        if rounding == "random":
            self.coin_fraction = coin == "fraction"
            self.coins = CounterDraws(key, edges, block=max(1, min(64, self.COIN_FLOATS // max(1, 2 * m))))
        if rounding == "oriented":
            # Slot s of row i rounds up when its edge points from i to j and i sends (d > 0), or
            # from j to i and i receives: along[s] == (d > 0).
            along = (orient[edges] > 0) == (row < h.indices)
            self.along = along.reshape(self.near.shape)

    def row_sums(self, x):
        """Per node, the sum of its slots' integers (int64, exact)."""
        if self.regular:
            return x @ self.ones  # (an integer product: exact, and one call for the whole (n, D) table)
        out = np.zeros(self.n, dtype=np.int64)
        out[self.nonempty] = np.add.reduceat(x, self.starts)
        return out

    def step(self, t, loads):
        """``(new loads, outflow, per-edge flows)`` of one step (loads spanning less than 2**62)."""
        if self.regular:
            d = loads[:, None] - loads[self.near]
        else:
            d = loads[self.row] - loads[self.near]
        ad = np.abs(d)
        if self.unit and not (self.rounding == "random" and self.coin_fraction):
            amount = self._unit_amounts(t, d, ad)
        else:
            amount = self._amounts(t, d, ad)
        sent = amount * (d > 0)  # what the slot's row node sends; amount - sent it receives
        gain = amount - 2 * sent  # received - sent on the slot
        new = loads + self.row_sums(gain)
        return new, self.row_sums(sent), -gain.reshape(-1)[self.edge_slot]

    def _unit_amounts(self, t, d, ad):
        """The rounded amounts when every ``P_ij = 1/den``: ``floor(ad / den)``, and the ceiling as
        ``floor((ad + den - 1) / den)`` (no remainder needed); a power-of-two den shifts."""
        if self.rounding == "floor":
            x = ad
        elif self.rounding == "ceil":
            x = ad + (self.den - 1)
        else:  # round up where the edge's coin shows HEAD (random), or along the orientation
            up = self.coins.at(t).reshape(d.shape) < self.p if self.rounding == "random" else self.along == (d > 0)
            x = ad + up * (self.den - 1)
        return x >> self.shift if self.shift >= 0 else x // self.den

    def _amounts(self, t, d, ad):
        """The rounded amounts in general: ``floor(ad num / den)``, its remainder, and the rule's rounding."""
        if self.unit:
            fl = ad // self.den
            rem = ad - fl * self.den
        else:
            # As ad = a den + b: no product above ad (as _rules.exact_amounts).
            a = ad // self.den
            fl, rem = np.divmod((ad - a * self.den) * self.num, self.den)
            fl += a * self.num
        # Round up: which remainders become a whole token (Sec. 4's four rules).
        if self.rounding == "floor":
            return fl
        up = rem != 0
        if self.rounding == "random":
            coins = self.coins.at(t).reshape(d.shape)
            up &= coins < (rem / self.den if self.coin_fraction else self.p)
        elif self.rounding == "oriented":
            up &= self.along == (d > 0)
        return fl + up
