"""The random matchings of ``single-port`` for a block of steps at once (its numpy reference step).

The matching of step t (Ghosh et al. 1995, Sec. 1.1: every edge is a candidate with probability
p, by its counter-based coin ``counter_uniform(key, t, e) < p``; a candidate stays when no other
candidate touches either of its ends) depends on the coins of step t only, never on the loads. A
small run takes the numpy step instead of compiling the kernels (:mod:`tokendist.kernels._choice`),
and there a step costs numpy's per-call overhead far more than arithmetic: :class:`MatchingBlocks`
works the matchings of a block of consecutive steps out in one go (the same coins, drawn by
:class:`tokendist._random.CounterDraws`, the same rule), and the step itself only moves the tokens.
"""

from __future__ import annotations

import numpy as np

from ..._random import CounterDraws

__all__ = ["MatchingBlocks"]


class MatchingBlocks:
    """The matched edges of each step of ``single-port`` (per-edge coins), a block of steps at a time.

    Parameters
    ----------
    graph : Graph
    key : int
        The run's coin key (``counter_uniform(key, t, e)`` is edge e's coin at step t).
    p : float
        The candidate probability.
    """

    def __init__(self, graph, key: int, p: float):
        m = graph.m
        self.n, self.p = graph.n, p
        self.u, self.v = graph.u.astype(np.int64), graph.v.astype(np.int64)
        # At most 2^17 coins in a block (as the step before drew them) and 2^22 (step, node) counts, 64 steps.
        block = max(1, min(64, (1 << 17) // max(m, 1), (1 << 22) // max(graph.n, 1)))
        self.draws = CounterDraws(key, np.arange(m), block=block)
        self.first = None

    def at(self, t: int):
        """``(e, a, b)``: step t's matched edges in increasing order and their ends ``u[e]``, ``v[e]``."""
        first = self.first
        if first is None or not first <= t < first + self.draws.block:
            self._fill(t)
            first = t
        lo, hi = self.bounds[t - first], self.bounds[t - first + 1]
        return self.e[lo:hi], self.a[lo:hi], self.b[lo:hi]

    def _fill(self, first: int) -> None:
        block, n = self.draws.block, self.n
        # Candidates of the block's steps, step by step and in each step by edge.
        step, e = np.nonzero(self.draws.rows(first) < self.p)
        a, b = self.u[e], self.v[e]
        # How many candidates touch each (step, node): a candidate is matched when it is its ends' only one.
        at_a, at_b = step * n + a, step * n + b
        count = np.bincount(np.concatenate((at_a, at_b)), minlength=block * n)
        keep = (count[at_a] == 1) & (count[at_b] == 1)
        step, self.e, self.a, self.b = step[keep], e[keep], a[keep], b[keep]
        self.bounds = np.searchsorted(step, np.arange(block + 1)).tolist()  # step k: bounds[k]:bounds[k + 1]
        self.first = first
