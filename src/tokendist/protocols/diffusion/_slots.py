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

_add_reduce = np.add.reduce


class SlotRounding:
    """The numpy step of a rounded rule per CSR slot of H: :func:`._rules.rounded_flows` without scatters.

    The rule is :func:`._rules.rounded_flows`'s, read from each end of an edge: slot ``s`` of row ``i``
    (neighbour ``j``) gets ``d = load[i] - load[j]`` and the signed rounded amount ``f`` of
    ``P_ij d``: what ``i`` sends over the slot (``f < 0``: what it receives). Each edge is computed
    at both ends, with its one coin: the same amount. A row's slots then add up to what its node
    sends and receives, so no ``np.add.at`` is needed; the sums are in int64 (exact). Everything
    that does not change between steps (the slot's row, ``P_ij``, its fraction, the orientation,
    the coins' counters) is laid out per slot once, at construction. Used while the loads span less
    than 2**62, so that ``d`` and the integer arithmetic below stay within int64;
    :func:`._rules.rounded_flows` serves the rest.

    On a D-regular graph the slots are a ``(D, n)`` table, column ``i`` the slots of row ``i`` in CSR
    order: ``load[i]`` is then ``loads`` itself (broadcast), and a row's sum adds D rows of n
    numbers (long inner loops; an ``(n, D)`` table runs numpy's loops n times over D numbers).
    Elsewhere they are one array in CSR order, summed per row with ``np.add.reduceat``.
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
        # The slots' layout: position -> CSR slot (the (D, n) table read row by row, or CSR order).
        slot = np.arange(2 * m).reshape(n, self.regular).T.ravel() if self.regular else np.arange(2 * m)
        shape = (self.regular, n) if self.regular else (2 * m,)
        self.near = h.indices.astype(np.int64)[slot].reshape(shape)
        if not self.regular:
            self.row = row
            self.starts = h.indptr[:-1][deg > 0].astype(np.int64)
            self.nonempty = deg > 0
        self.edge = edges[slot]  # the edge of every position (its coin's counter)
        ratio = coefficient_ratios(alpha)[self.edge] if m else np.zeros((0, 2), dtype=np.int64)
        a = np.abs(alpha)[self.edge]
        if m and bool(np.all(ratio == ratio[0])):  # one P for all edges (torus, hypercube, uniform:W)
            ratio, a = ratio[:1], a[:1]
            shape = (1,) * len(shape)
        self.num, self.den, self.p = (x.reshape(shape) for x in (ratio[:, 0], ratio[:, 1], a))
        self.unit = bool(np.all(self.num == 1))  # every P_ij = 1/den (the default matrix's 1/(2 max(d_i, d_j)))
        #: den - 1: the carry that rounds up (_unit_flows); one number when there is one P_ij.
        self.top = np.int64(self.den.flat[0] - 1) if self.den.size == 1 else self.den - 1
        # One P_ij = 1/2^k (a torus's 1/8): a shift, cheaper than integer division.
        self.shift = int(self.den.flat[0]).bit_length() - 1 if self.unit and self.den.size == 1 else -1
        if self.shift >= 0 and 1 << self.shift != int(self.den.flat[0]):
            self.shift = -1
        #: Loads in [0, narrow) make the sign of d its top ``shift`` bits (_unit_flows); 0: never.
        self.narrow = 1 << (63 - self.shift) if self.shift > 0 else 0
        self.sign_shift = np.uint64(64 - self.shift) if self.shift > 0 else None
        # The per-edge flows the Step reports: each edge's position in the row of its end u.
        at_u = row[slot] == h.u[self.edge]
        self.edge_slot = np.empty(m, dtype=np.int64)
        self.edge_slot[self.edge[at_u]] = np.flatnonzero(at_u)
        self.coins = None
        self.coin_fraction = rounding == "random" and coin == "fraction"
        if rounding == "random":
            # One coin per edge and step, counter_uniform(key, t, e): both of its slots read it.
            self.coins = CounterDraws(key, np.arange(m), block=max(1, min(64, self.COIN_FLOATS // max(1, m))))
            self.p_edge, self.top_edge = np.empty(m), np.empty(m, dtype=np.int64)
            self.p_edge[self.edge] = np.broadcast_to(self.p, self.near.shape).ravel()
            self.top_edge[self.edge] = np.broadcast_to(self.den - 1, self.near.shape).ravel()
            if self.p.size == 1:  # (a number: the block's comparison and product run faster)
                self.p_edge, self.top_edge = self.p.flat[0], self.top
            self.edge_table = self.edge.reshape(self.near.shape)
            self.heads_first = None
        if rounding == "oriented":
            # Slot s of row i rounds up when its edge points from i to j and i sends (d > 0), or
            # from j to i and i receives: along[s] == (d > 0).
            self.along = ((orient[edges] > 0) == (row < h.indices))[slot].reshape(self.near.shape)
            # The unit fractions' carry, one for both signs of d (see _unit_flows).
            self.carry = (self.den - 1) * self.along

        #: The rounding of one step: in place of d, the signed amounts (``_unit_flows`` or ``_flows``).
        self.rounded = self._unit_flows if self.unit and not self.coin_fraction else self._flows

    def row_sums(self, x):
        """Per node, the sum of its slots' integers (int64, exact)."""
        if self.regular:
            return _add_reduce(x, 0)
        out = np.zeros(self.n, dtype=np.int64)
        out[self.nonempty] = np.add.reduceat(x, self.starts)
        return out

    def step(self, t, loads, top: int = 1 << 63):
        """``(new loads, outflow, per-edge flows)`` of one step (loads spanning less than 2**62; ``top``:
        their largest when none is negative, else at least 2**63)."""
        # d = load[i] - load[j] per slot, written over the gathered neighbours' loads.
        near = loads.take(self.near)
        d = np.subtract(loads if self.regular else loads.take(self.row), near, out=near)
        f = self.rounded(t, d, top < self.narrow)  # what the slot's row node sends over it (negative: receives)
        if self.regular:
            return loads - _add_reduce(f, 0), _add_reduce(np.maximum(f, 0), 0), f.reshape(-1).take(self.edge_slot)
        return loads - self.row_sums(f), self.row_sums(np.maximum(f, 0)), f.take(self.edge_slot)

    def _unit_flows(self, t, d, narrow=False):
        """The signed rounded amounts when every ``P_ij = 1/den``, in place of ``d``.

        ``floor((d + c) / den)`` with a carry ``0 <= c < den``: for ``d >= 0`` the rule's own
        ``floor((d + c) / den)`` (``c = den - 1`` rounds up, ``c = 0`` down), and for ``d < 0``
        ``floor((d + den - 1 - c') / den) = -floor((|d| + c') / den)``, ``c'`` the carry ``|d|`` has:
        so a slot carries ``c`` when ``d >= 0`` and ``den - 1 - c`` when ``d < 0``, that is
        ``c ^ (den - 1)`` for ``c`` in ``{0, den - 1}`` (``d >> 63`` is -1 for ``d < 0``, else 0;
        ``d = 0`` gives 0 whatever the carry). The orientation's carry flips with the sign of ``d``
        by itself (``along`` is whether ``d > 0`` rounds up). A power-of-two den shifts (an
        arithmetic shift floors).
        """
        if self.rounding == "oriented":
            d += self.carry
        else:
            top = self.top
            if narrow:  # den = 2^k and |d| < 2^(63 - k): d's top k bits are its sign's, den - 1 or 0
                flip = np.right_shift(d.view(np.uint64), self.sign_shift).view(np.int64)
            else:
                flip = np.right_shift(d, 63)
                flip &= top  # the carry when d < 0 for a rule that rounds |d| down
            if self.rounding == "ceil":
                flip ^= top
            elif self.rounding == "random":
                flip ^= self._head_carries(t)
            d += flip
        if self.shift >= 0:
            return np.right_shift(d, self.shift, out=d)
        return np.floor_divide(d, self.den, out=d)

    def _head_carries(self, t):
        """Per slot, ``den - 1`` where the edge's coin of step ``t`` shows HEAD (``counter_uniform <
        P_ij``: round up), else 0. The coins do not depend on the loads: drawn and turned into each
        edge's carry for a block of steps at once, one draw per edge."""
        first, coins = self.heads_first, self.coins
        if first is None or not first <= t < first + coins.block:
            self.heads_block = (coins.rows(t) < self.p_edge) * self.top_edge  # (block, m)
            self.heads_first = first = t
        return self.heads_block[t - first].take(self.edge_table)

    def _flows(self, t, d, narrow=False):
        """The signed rounded amounts in general: ``floor(|d| num / den)``, its remainder, and the rule's
        rounding (Sec. 4's four rules), with the sign of ``d``."""
        ad = np.abs(d)
        if self.unit:
            fl = ad // self.den
            rem = ad - fl * self.den
        else:
            # As ad = a den + b: no product above ad (as _rules.exact_amounts).
            a = ad // self.den
            fl, rem = np.divmod((ad - a * self.den) * self.num, self.den)
            fl += a * self.num
        # Round up: which remainders become a whole token.
        if self.rounding != "floor":
            up = rem != 0
            if self.rounding == "random":
                coins = self.coins.at(t).take(self.edge).reshape(d.shape)
                up &= coins < (rem / self.den if self.coin_fraction else self.p)
            elif self.rounding == "oriented":
                up &= self.along == (d > 0)
            fl += up
        return np.negative(fl, out=fl, where=d < 0)
