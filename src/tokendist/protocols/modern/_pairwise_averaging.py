"""Random pairwise averaging (Berenbrink, Friedetzky, Kaaser, Kling, IPDPS 2019, arXiv:1808.05389).

One interaction per step: a uniformly random pair of nodes (on the complete graph; a uniformly
random edge on another graph) balances its loads, floor and ceiling of their mean.
"""

from __future__ import annotations

import numpy as np

from ..._random import CounterDraws, counter_uniform_scalar, stream_key
from ...engine import Param, Protocol, Step, register_protocol
from ...graphs._model import unsigned_view
from ...kernels._report import block_kernel_ready, instrument_kernels, kernel_label
from .kernels._pairwise import pairwise_step
from .kernels._pairwise import pairwise_steps as _pairwise_steps

instrument_kernels(globals())  # runs report which kernel ran each step

__all__ = ["PairwiseAveraging"]

_EXCESS = ("random", "heavier")
#: What a step of the kernel reports as its variant (RunResult.variants), blocks of steps too.
_STEP_VARIANT = kernel_label(pairwise_step)


@register_protocol
class PairwiseAveraging(Protocol):
    """Random pairwise averaging: one uniformly random pair (edge) per step balances to floor/ceil of its mean.

    Notes
    -----
    The rule (Berenbrink, Friedetzky, Kaaser, Kling, "Tight & simple load balancing", IPDPS 2019,
    arXiv:1808.05389; as specified here): in each step one pair {u, v} of nodes is drawn
    uniformly at random and the two loads become ``ceil((x_u + x_v)/2)`` and ``floor((x_u + x_v)/2)``.
    Claim: on the complete graph the discrepancy is at most 1 (perfect balance within one token)
    after ``O(n log n + n log Delta)`` interactions w.h.p., Delta the initial discrepancy. On another
    graph the pair is a uniformly random edge (the sequential "random edge" model; the claim is for
    the complete graph). ``excess``: who receives the ceiling when the sum is odd, a fair coin
    (``random``, default) or the end that was heavier (``heavier``). One interaction per step, so a
    step costs O(n) (the copy of the loads), not O(m).

    Step t draws its edge as ``floor(U m)`` and its coin from ``counter_uniform(key, t, .)``.
    ``kernel=numba`` (default) makes the interaction in numba (:mod:`.kernels._pairwise`), the same
    draws, the same loads bit for bit; ``kernel=numpy`` the reference.

    References
    ----------
    P. Berenbrink, T. Friedetzky, D. Kaaser, P. Kling, Tight & simple load balancing, IPDPS 2019,
    arXiv:1808.05389.

    Examples
    --------
    >>> import tokendist as td
    >>> r = td.simulate("complete:16", "pairwise-averaging", "point:160", seed=1, max_steps=2000,
    ...                 until_discrepancy=1)
    >>> r.tokens, int(r.loads.max() - r.loads.min()) <= 1
    (160, True)
    """

    name = "pairwise-averaging"
    static_reason = "the protocol is defined on the complete graph: one random pair of all nodes per step"
    title = "Random pairwise averaging (one pair per step)"
    paper = "Berenbrink, Friedetzky, Kaaser, Kling, IPDPS 2019 (arXiv:1808.05389)"
    model = "single-port"
    randomized = True
    params = (Param("excess", str, "random", "the odd token to a random end or to the heavier one", _EXCESS),
              Param("kernel", str, "numba", "numba (one call per interaction) or numpy (the reference step)",
                    ("numba", "numpy")))

    def reset(self, graph, loads, rng):
        self._key = stream_key(rng)
        self._u, self._v = graph.u, graph.v
        self._graph = graph
        self._out = np.empty(graph.n, dtype=np.int64)
        self._outflow = np.zeros(graph.n, dtype=np.int64)
        self._last = np.zeros(2, dtype=np.int64)  # the nodes of the previous interaction (nonzero outflow)
        # The kernel's arguments that stay the same for the run, made once: a step is a microsecond of
        # kernel, and looking them up every step cost more than that.
        self._fast = None
        if self.options["kernel"] == "numba" and graph.m:
            self._fast = (unsigned_view(graph.u), unsigned_view(graph.v), self.options["excess"] == "random",
                          self._key, self._outflow, self._last)
        self._draws = None  # the reference's draws, made at its first step

    def steps(self, t, k, graph, loads, block, moved, messages, stop_idle):
        """Up to ``k`` interactions of the numba kernel in one call (:meth:`Protocol.steps`): the
        kernel of :meth:`step` on each, its outflow and last pair updated as step by step. Declined
        for a negative load: only from loads >= 0 is every interaction feasible (each end keeps the
        floor or the ceiling of the pair's mean), which the engine's block check takes for granted."""
        fast = self._fast
        if fast is None or graph is not self._graph or np.minimum.reduce(loads) < 0:
            return None
        args = (*fast, t, k, stop_idle, loads, block, moved, messages)
        if not block_kernel_ready(_pairwise_steps, args):
            return None
        return _pairwise_steps(*args), _STEP_VARIANT

    def pair(self, t, graph, draw: float | None = None) -> int:
        """The edge of step ``t`` (``draw``: its draw ``counter_uniform(key, t, 0)`` when already made)."""
        u = counter_uniform_scalar(self._key, t, 0) if draw is None else draw
        return min(int(u * graph.m), graph.m - 1)

    def step(self, t, graph, loads):
        fast = self._fast
        if fast is not None and graph is self._graph:
            loads = np.ascontiguousarray(loads, dtype=np.int64)
            new = self._out if self._out is not loads else np.empty_like(loads)
            moved = pairwise_step(*fast, t, loads, new)
            self._out = loads  # the engine's previous loads: next step's output buffer
            # The outflow buffer is reused: the engine reads it during the step (feasibility).
            return Step(new, moved=int(moved), messages=2, outflow=self._outflow)
        new = np.array(loads, dtype=np.int64, copy=True)
        if graph.m == 0:
            return Step(new)
        if graph is self._graph:
            if self._draws is None:  # step t's two draws (edge, coin), 256 steps at a time: the same numbers
                self._draws = CounterDraws(self._key, np.arange(2), block=256)
                self._ends_list = (graph.u.tolist(), graph.v.tolist())
            draw, coin = self._draws.at(t).tolist()
            e = self.pair(t, graph, draw)
            a, b = self._ends_list[0][e], self._ends_list[1][e]
        else:
            e = self.pair(t, graph)
            a, b = int(graph.u[e]), int(graph.v[e])
            coin = counter_uniform_scalar(self._key, t, 1) if self.options["excess"] == "random" else None
        xa, xb = int(new[a]), int(new[b])
        s = xa + xb
        lo, hi = s // 2, s - s // 2
        if self.options["excess"] == "random":
            a_hi = coin < 0.5
        else:
            a_hi = xa >= xb
        new[a], new[b] = (hi, lo) if a_hi else (lo, hi)
        moved = abs(xa - int(new[a]))
        outflow = np.zeros(graph.n, dtype=np.int64)
        outflow[a] = max(xa - int(new[a]), 0)
        outflow[b] = max(xb - int(new[b]), 0)
        return Step(new, moved=moved, messages=2, outflow=outflow)
