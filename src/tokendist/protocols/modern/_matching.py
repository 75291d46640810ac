"""Balancing over matchings: the random matching model and the balancing circuit.

Every matched pair (u, v) averages its loads; when ``x_u + x_v`` is odd the excess token goes to
one end, chosen by a fair coin (Friedrich, Sauerwald STOC 2009; Sauerwald, Sun FOCS 2012;
Berenbrink et al. 2025). The random matching model draws a fresh random matching every round;
the balancing circuit cycles through the colour classes of a proper edge colouring.
"""

from __future__ import annotations

import numpy as np

from ..._random import counter_uniform, stream_key
from ...engine import Param, Protocol, Step, register_protocol
from ...errors import TokendistError
from ...graphs import edge_colouring
from ...graphs._model import unsigned_view
from ...kernels._report import instrument_kernels
from .kernels._circuit import circuit_step
from .kernels._matching import matching_step

instrument_kernels(globals())  # runs report which kernel ran each step

__all__ = ["RandomMatching", "BalancingCircuit", "random_matching", "balance_pairs"]

_DRAWINGS = ("edge-coin", "active-passive")
_EXCESS = ("random", "heavier")
_TAG_MATCH, _TAG_ACTIVE, _TAG_PICK, _TAG_COIN = 1, 2, 3, 4


def _tag_key(key: int, tag: int) -> int:
    # One counter-based stream per use (tag), so that the matching and the excess coins are independent.
    return key ^ (tag * 0x9E3779B97F4A7C15 & ((1 << 63) - 1))


def _coins(key: int, tag: int, t: int, count: int) -> np.ndarray:
    return counter_uniform(_tag_key(key, tag), t, np.arange(count, dtype=np.uint64))


def random_matching(graph, key: int, t: int, drawing: str = "edge-coin", p: float | None = None) -> np.ndarray:
    """Boolean mask of the edges in round ``t``'s random matching.

    ``edge-coin``: every edge is a candidate with probability ``p`` (default ``1/(4 Delta)``); the
    candidates that touch no other candidate form the matching (the distributed procedure of Ghosh
    et al. used in the random matching model). ``active-passive``: every node is active with
    probability 1/2 and an active node picks a uniformly random neighbour; an edge (active, passive)
    joins the matching when the passive end was picked by that active node only.
    """
    n, m = graph.n, graph.m
    if m == 0:
        return np.zeros(0, dtype=bool)
    if drawing == "edge-coin":
        p = 1.0 / (4 * graph.max_degree) if p is None else p
        cand = _coins(key, _TAG_MATCH, t, m) < p
        count = np.bincount(graph.u[cand], minlength=n) + np.bincount(graph.v[cand], minlength=n)
        return cand & (count[graph.u] == 1) & (count[graph.v] == 1)
    active = _coins(key, _TAG_ACTIVE, t, n) < 0.5
    deg = np.diff(graph.indptr)
    pick_slot = graph.indptr[:-1] + np.minimum((_coins(key, _TAG_PICK, t, n) * deg).astype(np.int64),
                                               np.maximum(deg - 1, 0))
    chooser = np.flatnonzero(active & (deg > 0))
    target = graph.indices[pick_slot[chooser]]
    ok = ~active[target]
    chooser, target = chooser[ok], target[ok]
    picked = np.bincount(target, minlength=n)
    keep = picked[target] == 1
    chooser, target = chooser[keep], target[keep]
    mask = np.zeros(m, dtype=bool)
    mask[graph.edge_index(np.minimum(chooser, target), np.maximum(chooser, target))] = True
    return mask


def balance_pairs(graph, loads, matched: np.ndarray, up_to_u: np.ndarray) -> np.ndarray:
    """Signed flows (u -> v) that average every matched edge; an odd excess goes to ``u`` where ``up_to_u``."""
    e = np.flatnonzero(matched)
    a, b = loads[graph.u[e]], loads[graph.v[e]]
    s = a + b
    half, odd = np.divmod(s, 2)
    new_u = half + (odd & up_to_u[e])
    flows = np.zeros(graph.m, dtype=np.int64)
    flows[e] = a - new_u
    return flows


class _MatchingBase(Protocol):
    model = "single-port"
    randomized = True

    def _excess_to_u(self, graph, loads, t):
        if self.options["excess"] == "random":
            return _coins(self._key, _TAG_COIN, t, graph.m) < 0.5
        return loads[graph.u] >= loads[graph.v]  # deterministic: the excess stays with the heavier end

    def _step(self, t, graph, loads, matched):
        loads = np.asarray(loads, dtype=np.int64)
        flows = balance_pairs(graph, loads, matched, self._excess_to_u(graph, loads, t))
        new = loads - np.bincount(graph.u, weights=flows, minlength=graph.n).astype(np.int64) \
            + np.bincount(graph.v, weights=flows, minlength=graph.n).astype(np.int64)
        return Step(new, moved=int(np.abs(flows).sum()), messages=2 * int(matched.sum()), flows=flows)


@register_protocol
class RandomMatching(_MatchingBase):
    """Random matching model: every round a fresh random matching; matched pairs average, excess to a random end.

    Notes
    -----
    The rule (Friedrich, Sauerwald STOC 2009; Sauerwald, Sun FOCS 2012, arXiv:1201.2715, the random
    matching model; Berenbrink, Elsaesser, Friedetzky, Hosseinpour, Kaaser, Kling, Sauerwald 2025,
    arXiv:2510.15473): in round t a random matching M(t) is drawn; for every {u, v} in M(t) the two
    loads become ``floor((x_u + x_v)/2)`` and ``ceil((x_u + x_v)/2)``, the end receiving the ceiling
    chosen by a fair coin. Claims: the discrepancy is a constant w.h.p. after the rounds the
    continuous process needs (Sauerwald, Sun: on regular graphs; the 2025 paper: discrepancy at most
    3 on arbitrary graphs). The papers draw the matching by a simple distributed procedure; two are
    offered (``drawing``; the issue's statement of the papers, since the procedures' exact constants
    could not be read here): ``edge-coin`` (default: candidate edges with probability ``1/(4 Delta)``,
    kept when isolated) and ``active-passive``. ``excess=heavier`` keeps the odd token at the end
    that was heavier (deterministic rounding, for comparison). ``kernel=numba`` (default) draws the
    edge-coin matching and balances it in numba (:mod:`.kernels._matching`), the same draws, the
    same loads and flows bit for bit; ``kernel=numpy`` the reference.

    References
    ----------
    T. Friedrich, T. Sauerwald, Near-perfect load balancing by randomized rounding, STOC 2009.
    T. Sauerwald, H. Sun, Tight bounds for randomized load balancing on arbitrary network topologies,
    FOCS 2012, arXiv:1201.2715. P. Berenbrink et al., arXiv:2510.15473, 2025.

    Examples
    --------
    >>> import tokendist as td
    >>> r = td.simulate("torus:8x8", "random-matching", "point:640", seed=1, max_steps=3000)
    >>> r.tokens, int(r.loads.max() - r.loads.min()) <= 3
    (640, True)
    """

    name = "random-matching"
    static_reason = "matchings are drawn on the edges of the start; the analysis (Sauerwald, Sun 2012) is for a fixed graph and a changing one is not implemented"
    title = "Random matching model (randomized rounding)"
    paper = "Sauerwald, Sun FOCS 2012 (arXiv:1201.2715); Berenbrink et al. 2025 (arXiv:2510.15473)"
    params = (Param("drawing", str, "edge-coin", "how a round's random matching is drawn", _DRAWINGS),
              Param("p", float, 0.0, "edge-coin candidate probability; 0 means 1/(4 Delta)"),
              Param("excess", str, "random", "the odd token goes to a random end or stays with the heavier one",
                    _EXCESS),
              Param("kernel", str, "numba", "numba (draws and balances in two passes over the edges) or numpy (the "
                    "reference step)", ("numba", "numpy")))

    def reset(self, graph, loads, rng):
        if not 0 <= self.options["p"] <= 1:
            raise TokendistError(f"{self.name}: p={self.options['p']}: a probability in [0, 1] (0: 1/(4 Delta))")
        self._key = stream_key(rng)
        self._graph = graph
        if self.options["kernel"] == "numba":
            self._out = np.empty(graph.n, dtype=np.int64)
            self._count = np.zeros(graph.n, dtype=np.int64)
            self._mask = np.zeros(graph.m, dtype=np.bool_)
            # The reference's default p, the same float, once (max_degree is a pass over the degrees).
            self._p_default = 1.0 / (4 * graph.max_degree) if graph.m else None

    def step(self, t, graph, loads):
        p = self.options["p"] or None
        if self.options["kernel"] == "numpy" or graph is not self._graph or graph.m == 0:
            return self._step(t, graph, loads, random_matching(graph, self._key, t, self.options["drawing"], p))
        loads = np.ascontiguousarray(loads, dtype=np.int64)
        draw = self.options["drawing"] == "edge-coin"
        # active-passive: the reference draws the mask (node coins, then an edge lookup), the kernel balances
        mask = self._mask if draw else random_matching(graph, self._key, t, self.options["drawing"], p)
        p = self._p_default if p is None else p  # the reference's default, the same float
        new = self._out if self._out is not loads else np.empty_like(loads)
        # A fresh flows array: the engine reads it during the step, and a caller may keep a Step.
        flows = np.empty(graph.m, dtype=np.int64)
        moved, matched = matching_step(unsigned_view(graph.u), unsigned_view(graph.v), loads, draw, float(p),
                                       _tag_key(self._key, _TAG_MATCH), mask, self.options["excess"] == "random",
                                       _tag_key(self._key, _TAG_COIN), t, self._count, new, flows)
        self._out = loads  # the engine's previous loads: next step's output buffer
        return Step(new, moved=int(moved), messages=2 * int(matched), flows=flows)


@register_protocol
class BalancingCircuit(_MatchingBase):
    """Balancing circuit: the colour classes of an edge colouring in turn; matched pairs average, excess at random.

    Notes
    -----
    The rule (Friedrich, Sauerwald STOC 2009; Sauerwald, Sun FOCS 2012, the balancing circuit model):
    the edges are split into matchings M_1 .. M_c (here the colour classes of a proper edge
    colouring, Delta colours on bipartite graphs, at most Delta + 1 otherwise) and round t uses
    M_{(t mod c) + 1}; matched pairs average as in the random matching model, the odd token to an
    end chosen by a fair coin (``excess=heavier``: kept by the heavier end). Claims as for the
    random matching model (constant discrepancy after the continuous process's balancing time).

    References
    ----------
    T. Sauerwald, H. Sun, Tight bounds for randomized load balancing on arbitrary network topologies,
    FOCS 2012, arXiv:1201.2715.

    Examples
    --------
    >>> import tokendist as td
    >>> r = td.simulate("hypercube:6", "balancing-circuit", "point:640", seed=1, max_steps=60)
    >>> r.tokens, int(r.loads.max() - r.loads.min()) <= 3
    (640, True)
    """

    name = "balancing-circuit"
    static_reason = "the periodic matchings are the colour classes of an edge colouring of the start"
    title = "Balancing circuit (periodic matchings, randomized rounding)"
    paper = "Sauerwald, Sun FOCS 2012 (arXiv:1201.2715); Friedrich, Sauerwald STOC 2009"
    params = (Param("excess", str, "random", "the odd token goes to a random end or stays with the heavier one",
                    _EXCESS),
              Param("kernel", str, "numba", "numba (visits the round's colour class only) or numpy (the reference "
                    "step)", ("numba", "numpy")))

    def reset(self, graph, loads, rng):
        self._key = stream_key(rng)
        self.colours = edge_colouring(graph) if graph.m else np.zeros(0, dtype=np.int64)
        self.period = int(self.colours.max()) + 1 if graph.m else 1
        self._graph = graph
        if self.options["kernel"] == "numba":
            # The edges sorted by colour (increasing edge order within a class), and where each class starts.
            idx = np.int32 if graph.m < 2**31 else np.int64
            self._by_colour = np.argsort(self.colours, kind="stable").astype(idx)
            self._class_start = np.searchsorted(self.colours[self._by_colour], np.arange(self.period + 1))
            self._out = np.empty(graph.n, dtype=np.int64)
            self._flows = np.zeros(graph.m, dtype=np.int64)
            self._written = -1  # the class whose flows are in self._flows

    def step(self, t, graph, loads):
        if self.options["kernel"] == "numpy" or graph is not self._graph:
            return self._step(t, graph, loads, self.colours == (t % self.period))
        loads = np.ascontiguousarray(loads, dtype=np.int64)
        c = t % self.period
        lo, hi = int(self._class_start[c]), int(self._class_start[c + 1])
        # the previous round's flows are cleared in the kernel: only a class's edges are touched
        w = self._written
        w0, w1 = (int(self._class_start[w]), int(self._class_start[w + 1])) if w >= 0 else (0, 0)
        new = self._out if self._out is not loads else np.empty_like(loads)
        moved = circuit_step(unsigned_view(self._by_colour), lo, hi, w0, w1, unsigned_view(graph.u),
                             unsigned_view(graph.v), loads, self.options["excess"] == "random",
                             _tag_key(self._key, _TAG_COIN), t, new, self._flows)
        self._written = c
        self._out = loads
        # The flows buffer is reused: the engine reads it during the step (feasibility, single-port check).
        return Step(new, moved=int(moved), messages=2 * (hi - lo), flows=self._flows)
