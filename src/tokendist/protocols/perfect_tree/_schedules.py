"""Adversarial message schedules for ``perfect-tree`` (delay functions for the executor).

A schedule is a callable ``delay(src, dst, now, message) -> int >= 1``; the executor still keeps
channels FIFO with at most one delivery per channel per time unit. The strategies:

``race``
    Phase 1 ends with two adjacent nodes that each received from every other neighbour; the paper
    handles the case where "the two last nodes try to send to each other at once" (S1.2). This
    adversary picks the edge ``(a, b)`` whose two sides have the closest convergecast heights
    ``h`` (the time a side's endpoint is ready under unit delays), and delays the subtree messages
    *into* the endpoint of the lower side by ``1 + |h_a - h_b|``, so that ``a`` and ``b`` reach S1.2
    in the same time unit and both try to reserve the link. Where that side is a leaf (stars), its
    own message across the edge is slowed instead, so that it is still in flight when the other
    end tries. Every other message takes 1.
``race-slow``
    ``race``, and the subtree message across the race edge takes ``max_delay``: the loser of the
    reservation finds the link busy for a long time.
``slow-links``
    Every directed channel gets a fixed delay drawn once from the seed in ``1..max_delay``.
``slow-tokens``
    Control messages take 1, token messages ``max_delay``: Phase 3 starts while deep nodes are
    still in Phase 2 (the overlap the docs discuss).
"""

from __future__ import annotations

import numpy as np

__all__ = ["ADVERSARIES", "adversarial_schedule", "race_edge"]

ADVERSARIES = ("race", "race-slow", "slow-links", "slow-tokens")


def _side_heights(tree) -> dict:
    """``h[(a, b)]``: unit-delay time at which ``a`` has heard from all its neighbours but ``b``."""
    nbrs = [tree.neighbours(i).tolist() for i in range(tree.n)]
    memo: dict = {}

    def h(a, b):
        # Iterative post-order to avoid deep recursion on long paths.
        stack = [(a, b, False)]
        while stack:
            x, y, expanded = stack.pop()
            if (x, y) in memo:
                continue
            kids = [c for c in nbrs[x] if c != y]
            if expanded or not kids:
                memo[(x, y)] = 0 if not kids else max(memo[(c, x)] + 1 for c in kids)
                continue
            stack.append((x, y, True))
            stack.extend((c, x, False) for c in kids if (c, x) not in memo)
        return memo[(a, b)]

    return {(int(a), int(b)): (h(int(a), int(b)), h(int(b), int(a))) for a, b in zip(tree.u, tree.v)}


def race_edge(tree):
    """The edge ``(a, b)`` the ``race`` adversary targets and the two side heights."""
    heights = _side_heights(tree)

    def key(item):
        (a, b), (ha, hb) = item
        both_inner = min(ha, hb) > 0 or ha == hb
        return (not both_inner, abs(ha - hb), a, b)

    (a, b), (ha, hb) = min(heights.items(), key=key)
    return a, b, ha, hb


def adversarial_schedule(tree, strategy: str, max_delay: int, rng: np.random.Generator):
    """The delay function of one adversarial strategy on ``tree`` (see the module docstring)."""
    if strategy == "slow-links":
        table = {}
        for a, b in zip(tree.u.tolist(), tree.v.tolist()):
            table[(a, b)] = int(rng.integers(1, max_delay + 1))
            table[(b, a)] = int(rng.integers(1, max_delay + 1))
        return lambda src, dst, now, message: table[(src, dst)]
    if strategy == "slow-tokens":
        return lambda src, dst, now, message: max_delay if message[0].endswith("token") else 1
    if tree.m == 0:
        return lambda src, dst, now, message: 1
    a, b, ha, hb = race_edge(tree)
    low, high = (a, b) if ha <= hb else (b, a)
    gap = abs(ha - hb)
    low_is_leaf = min(ha, hb) == 0 and gap > 0
    slow = max_delay if strategy == "race-slow" else None

    def delay(src, dst, now, message):
        if message[0] != "phase1-subtree":
            return 1
        if {src, dst} == {a, b}:
            if low_is_leaf and src == low:
                return max(slow or 1, gap + 1)
            return slow or 1
        if dst == low and not low_is_leaf:
            return 1 + gap
        return 1

    return delay
