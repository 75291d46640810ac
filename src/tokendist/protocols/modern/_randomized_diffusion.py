"""Vertex-based randomized diffusion (Berenbrink, Cooper, Friedetzky, Friedrich, Sauerwald 2011/2015).

Every node splits its tokens evenly over its Delta + 1 slots (its neighbours and itself, padded with
self-slots up to Delta + 1 on a non-regular graph) and sends the remaining ``x mod (Delta + 1)``
tokens to distinct slots drawn uniformly at random without replacement.
"""

from __future__ import annotations

import numpy as np

from ..._random import CounterDraws, counter_uniform, counter_uniform_scalar, mix_index, stream_key
from ...engine import Param, Protocol, Step, register_protocol
from ...kernels._report import instrument_kernels, kernel_label
from ._common import stateless_steps
from .kernels._randomized_diffusion import randomized_diffusion_step
from .kernels._randomized_diffusion import randomized_diffusion_steps as _randomized_diffusion_steps

instrument_kernels(globals())  # runs report which kernel ran each step

__all__ = ["RandomizedDiffusion", "slot_table"]

_add_reduce, _max_reduce = np.add.reduce, np.maximum.reduce
_NARROW = np.uint64(1 << 62)  # (loads below: x + S - 1 fits int64 for any S up to 2**62)
_DENOMINATORS = ("max-degree+1", "2max-degree")
#: Up to this many slots (n S) the kernel reads each slot's index mix from a table (8 bytes a slot,
#: 512 kB at most: in cache) instead of computing it every step.
_MIX_TABLE_SLOTS = 1 << 16
#: What a step of the kernel reports as its variant (RunResult.variants), blocks of steps too.
_STEP_VARIANT = kernel_label(randomized_diffusion_step)


def slot_table(graph, slots: int) -> np.ndarray:
    """``(n, slots)`` table: the neighbours of each node in CSR order, then ``-1`` (the node itself)."""
    table = np.full((graph.n, slots), -1, dtype=np.int64)
    rows = np.repeat(np.arange(graph.n), np.diff(graph.indptr))
    k = np.arange(graph.indptr[-1]) - graph.indptr[rows]
    table[rows, k] = graph.indices
    return table


def slot_sources(table: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """``(sources, neighbour_slots)`` of a :func:`slot_table`: per slot (i, s), the flat position of the
    share that node i receives over it, and the flat positions of the slots that lead to a neighbour.

    Over a slot towards neighbour j, i receives what j gives over its own slot towards i; over a
    self-slot, i keeps its own share. Every share arrives over exactly one slot: ``sources`` is a
    permutation of the ``n * slots`` positions.
    """
    n, S = table.shape
    out = np.flatnonzero(table >= 0)  # i's slots towards its neighbours, in CSR order
    i, j = out // S, table.ravel()[out]
    key = i * n + j
    order = np.argsort(key)
    back = order[np.searchsorted(key, j * n + i, sorter=order)]  # the slot (j -> i) of every slot (i -> j)
    sources = np.arange(n * S)
    sources[out] = out[back]
    return sources.reshape(n, S), out


def slot_ranks(u: np.ndarray) -> np.ndarray:
    """The rank of each slot's draw within its node: ``u`` is ``(..., slots)``; rank 0 is the smallest
    draw, ties by slot number (the order of a stable sort)."""
    return np.moveaxis(_ranks_along_first(np.moveaxis(u, -1, 0)), 0, -1)


def _ranks_along_first(cols: np.ndarray) -> np.ndarray:
    """:func:`slot_ranks` with the slots along the first axis: ``cols`` is ``(slots, ...)``."""
    S = cols.shape[0]
    if S > 8:
        return np.argsort(np.argsort(cols, axis=0, kind="stable"), axis=0, kind="stable")
    # Few slots: compare every pair of slots over all nodes at once (S (S - 1) / 2 comparisons of
    # whole columns), much cheaper than sorting many short rows; the same ranks. Slot j starts at
    # the S - 1 - j later slots it would precede and loses one for each that comes before it.
    rank = np.empty(cols.shape, dtype=np.int8)
    for j in range(S):
        rank[j] = S - 1 - j
    for s in range(1, S):
        for j in range(s):
            j_first = (cols[j] <= cols[s]).view(np.int8)  # j < s: on a tie, the lower slot comes first
            rank[s] += j_first
            rank[j] -= j_first
    return rank


def excess_slots(key: int, t: int, n: int, slots: int, remainder: np.ndarray) -> np.ndarray:
    """Boolean ``(n, slots)``: for each node, ``remainder`` distinct slots drawn uniformly at random.

    Slot s of node i draws ``U = counter_uniform(key, t, i * slots + s)``; the ``remainder`` slots with
    the smallest U (ties by slot number) are chosen: a uniform subset, the same in the per-node rule.
    """
    u = counter_uniform(key, t, np.arange(n * slots, dtype=np.uint64)).reshape(n, slots)
    return slot_ranks(u) < remainder[:, None]


class _SlotRanks:
    """:func:`slot_ranks` of the draws of :func:`excess_slots`, for a block of steps at a time.

    The ranks do not depend on the loads, so the reference computes them for ``block`` consecutive
    steps at once (:class:`tokendist._random.CounterDraws`); steps may come in any order. The draws
    are drawn slot by slot (index ``i * slots + s`` at ``[s, i]``), the layout the step reads.
    """

    def __init__(self, key: int, n: int, slots: int):
        self.shape = (slots, n)
        self.block = max(1, min(64, (1 << 16) // max(n * slots, 1)))  # (at most ~2^16 draws a block)
        index = np.arange(n, dtype=np.uint64) * np.uint64(slots) + np.arange(slots, dtype=np.uint64)[:, None]
        self.draws = CounterDraws(key, index.ravel(), self.block)
        self.first = None

    def at(self, t: int) -> np.ndarray:
        """``slots - 1 - rank`` of step t's draws, slot by slot: ``(slots, n)`` int64 (the rank is
        slot_ranks', transposed)."""
        if self.first is None or not self.first <= t < self.first + self.block:
            u = self.draws.rows(t).reshape(self.block, *self.shape)
            ranks = _ranks_along_first(u.transpose(1, 0, 2))  # (slots, block, n)
            ranks = np.subtract(self.shape[0] - 1, ranks, dtype=ranks.dtype)
            self.ranks = np.ascontiguousarray(ranks.transpose(1, 0, 2), dtype=np.int64)
            self.first = t
        return self.ranks[t - self.first]


@register_protocol
class RandomizedDiffusion(Protocol):
    """Randomized diffusion: floor(x/(Delta+1)) to every slot, the x mod (Delta+1) excess to random distinct slots.

    Notes
    -----
    The rule (Berenbrink, Cooper, Friedetzky, Friedrich, Sauerwald, "Randomized diffusion for
    indivisible loads", SODA 2011 / JCSS 81(1) 2015, as the abstract states it; the body of
    the paper was not consulted): every vertex distributes its tokens as evenly as
    possible among its neighbours and itself, ``floor(x_i / (d + 1))`` each; the ``x_i mod (d + 1)``
    excess tokens go to distinct slots (neighbours or itself) chosen uniformly at random without
    replacement. In expectation that is ``x P`` with ``P_ij = 1/(d + 1)``; loads are never negative
    (the point of the vertex-based scheme) and no history is kept. On a graph that is not regular
    every node has Delta + 1 slots, the missing ones self-slots (``P_ij = 1/(Delta + 1)``, symmetric).
    ``denominator=2max-degree`` uses 2 Delta slots (the lazy walk ``P_ij = 1/(2 Delta)``).

    Claims (abstract): after as many steps as the continuous process needs, the discrepancy is
    bounded in terms of the second largest eigenvalue and the refined local divergence; on tori and
    constant-degree expanders this is an exponential improvement over Rabani, Sinclair, Wanka's
    deterministic rounding down (``diffusion-floor`` with ``matrix=uniform:1/(d+1)``), on hypercubes
    a polynomial one. ``tokendist reproduce randomized-diffusion`` measures both side by side as a
    trend over sizes.

    The random choice of slot s of node i at step t is the counter-based draw
    ``counter_uniform(key, t, i * slots + s)`` (one key per run from its seed): the vectorised rule
    and the per-node rule draw the same subset. ``kernel=numba`` (default) runs the step in numba
    (:mod:`.kernels._randomized_diffusion`), the same draws, the same loads bit for bit;
    ``kernel=numpy`` the vectorised reference.

    References
    ----------
    P. Berenbrink, C. Cooper, T. Friedetzky, T. Friedrich, T. Sauerwald, Randomized diffusion for
    indivisible loads, SODA 2011; J. Comput. Syst. Sci. 81(1):159-185, 2015.

    Examples
    --------
    >>> import tokendist as td
    >>> r = td.simulate("hypercube:6", "randomized-diffusion", "point:6400", seed=1, max_steps=200)
    >>> r.tokens, int(r.loads.min()) >= 0
    (6400, True)
    """

    name = "randomized-diffusion"
    static_reason = "the shares floor(x/(d+1)) use the degrees of the start; the analysis (BCFFS 2011) is for a fixed graph and a changing one is not implemented"
    title = "Vertex-based randomized diffusion"
    paper = "Berenbrink, Cooper, Friedetzky, Friedrich, Sauerwald, SODA 2011 / JCSS 81(1) 2015"
    model = "flow"
    randomized = True
    exchange_rounds = 1
    keeps_balance = False  # x mod (Delta + 1) tokens still move at random
    params = (Param("denominator", str, "max-degree+1", "slots per node: max-degree+1 (the paper's d + 1) or "
                    "2max-degree (lazy)", _DENOMINATORS),
              Param("kernel", str, "numba", "numba (one pass over the nodes) or numpy (the reference step)",
                    ("numba", "numpy")))

    def reset(self, graph, loads, rng):
        self._graph = graph
        D = graph.max_degree
        self.slots = D + 1 if self.options["denominator"] == "max-degree+1" else max(2 * D, 1)
        self._table = slot_table(graph, self.slots)
        self._key = stream_key(rng)
        self._out = np.empty(graph.n, dtype=np.int64)
        # The kernel's arguments that stay the same for the run, made once (see step); with each slot's
        # own part of its draws in a table while it is small (one SplitMix64 a draw instead of two).
        size = graph.n * self.slots
        mixed = mix_index(np.arange(size)) if size <= _MIX_TABLE_SLOTS else np.zeros(0, dtype=np.uint64)
        self._fast = ((self._table, mixed, self._key, np.empty(self.slots), np.empty(self.slots, dtype=np.int64),
                       np.empty(self.slots, dtype=np.uint64)) if self.options["kernel"] == "numba" else None)
        self._messages = 2 * graph.m
        self._ranks = None  # the reference's draws and slot sources, made at its first step

    def step(self, t, graph, loads):
        fast = self._fast
        if fast is not None and graph is self._graph:
            loads = np.ascontiguousarray(loads, dtype=np.int64)
            new = self._out if self._out is not loads else np.empty_like(loads)
            moved = randomized_diffusion_step(*fast, t, loads, new)
            self._out = loads  # the engine's previous loads: next step's output buffer
            return Step(new, moved=int(moved), messages=self._messages)
        loads = np.asarray(loads, dtype=np.int64)
        n, S = graph.n, self.slots
        if graph is not self._graph:
            q, r = np.divmod(loads, S)
            give = q[:, None] + excess_slots(self._key, t, n, S, r)
            to_other = self._table >= 0
            sent = np.where(to_other, give, 0)
            new = loads - sent.sum(axis=1)
            new += np.bincount(self._table[to_other], weights=sent[to_other], minlength=n).astype(np.int64)
            return Step(new, moved=int(sent.sum()), messages=2 * graph.m)
        if self._ranks is None:
            self._ranks = _SlotRanks(self._key, n, S)
            sources, out = slot_sources(self._table)
            # Slot by slot, (slots, n): share s of node i at s n + i (numpy sums long rows faster).
            self._sources = ((sources % S) * n + sources // S).T.copy()
            self._to_neighbour = (self._table >= 0).T.ravel().astype(np.int64)
            # On a regular graph the first D slots of every node lead to its neighbours, the others
            # to itself: the tokens moved are the sum of the first D rows.
            D = graph.max_degree
            self._neighbour_rows = D if bool(np.all(self._table[:, :D] >= 0) and np.all(self._table[:, D:] < 0)) else 0
        # Every slot's share: q = x // S, plus one in the r = x mod S slots of smallest draw
        # (excess_slots, ranked a block ahead), in one division: (x + S - 1 - rank) // S is q + 1
        # where rank < r and q elsewhere (r + S - 1 - rank reaches S exactly when rank <= r - 1).
        # The sum stays in int64 while no load is negative or within S of 2**63 (one maximum of the
        # loads' bits as unsigned numbers, where a negative load is huge); else q and r apart.
        above = self._ranks.at(t)  # S - 1 - rank
        if _max_reduce(loads.view(np.uint64)) < _NARROW:
            give = np.add(above, loads)
            give = np.floor_divide(give, S, out=give)
        else:
            q, r = np.divmod(loads, S)
            give = q + (above > S - 1 - r)  # (rank < r)
        # What arrives over each slot (slot_sources): the new load in exact integer sums.
        flat = give.reshape(-1)
        new = _add_reduce(flat.take(self._sources), 0)
        D = self._neighbour_rows
        moved = int(_add_reduce(give[:D], None)) if D else int(flat @ self._to_neighbour)
        return Step(new, moved, 2 * graph.m)

    def steps(self, t, k, graph, loads, block, moved, messages, stop_idle):
        """Up to ``k`` steps of the numba kernel in one call (:meth:`Protocol.steps`): the kernel of
        :meth:`step` on each, so the same draws and loads; the rule has no state between steps."""
        return stateless_steps(self, _randomized_diffusion_steps, _STEP_VARIANT, t, k, graph, loads, block, moved,
                               messages, stop_idle)

    # Per-node form: the node's load and its own counter-based coins.
    def publish(self, rnd, t, node, view):
        return int(view.load)

    def decide(self, t, node, view):
        S = self.slots
        x = int(view.load)
        q, r = divmod(x, S)
        u = [counter_uniform_scalar(self._key, t, node * S + s) for s in range(S)]
        chosen = set(sorted(range(S), key=lambda s: (u[s], s))[:r])
        row = self._table[node]
        return {int(row[s]): q + (s in chosen) for s in range(S) if row[s] >= 0 and q + (s in chosen)}
