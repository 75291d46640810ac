"""Balancing over matchings: the random matching model and the balancing circuit.

Every matched pair (u, v) averages its loads; when ``x_u + x_v`` is odd the excess token goes to
one end, chosen by a fair coin (Friedrich, Sauerwald STOC 2009; Sauerwald, Sun FOCS 2012;
Berenbrink et al. 2025). The random matching model draws a fresh random matching every round;
the balancing circuit cycles through the colour classes of a proper edge colouring.
"""

from __future__ import annotations

import numpy as np

from ..._random import CounterDraws, counter_uniform, mix_index, stream_key
from ...engine import Param, Protocol, Step, register_protocol
from ...errors import TokendistError
from ...graphs import edge_colouring
from ...graphs._model import unsigned_view
from ...kernels._report import block_kernel_ready, instrument_kernels, kernel_label
from .kernels._circuit import circuit_step
from .kernels._circuit import circuit_steps as _circuit_steps
from .kernels._matching import matching_step
from .kernels._matching import matching_steps as _matching_steps

instrument_kernels(globals())  # runs report which kernel ran each step

__all__ = ["RandomMatching", "BalancingCircuit", "random_matching", "balance_pairs"]

_DRAWINGS = ("edge-coin", "active-passive")
_EXCESS = ("random", "heavier")
_TAG_MATCH, _TAG_ACTIVE, _TAG_PICK, _TAG_COIN = 1, 2, 3, 4
#: What a round of each kernel reports as its variant (RunResult.variants), blocks of rounds too.
_MATCHING_VARIANT, _CIRCUIT_VARIANT = kernel_label(matching_step), kernel_label(circuit_step)
#: Up to this many edges the kernel reads each edge's index mix from a table (8 bytes an edge, 512 kB
#: at most: in cache) instead of computing it every round.
_MIX_TABLE_EDGES = 1 << 16


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
    mask = np.zeros(m, dtype=bool)
    if drawing == "edge-coin":
        p = 1.0 / (4 * graph.max_degree) if p is None else p
        _, edges = edge_coin_matchings(graph, _coins(key, _TAG_MATCH, t, m)[None, :] < p)
        mask[edges] = True
        return mask
    chooser, target = active_passive_pairs(graph, _coins(key, _TAG_ACTIVE, t, n), _coins(key, _TAG_PICK, t, n))
    mask[graph.edge_index(np.minimum(chooser, target), np.maximum(chooser, target))] = True
    return mask


def edge_coin_matchings(graph, candidates: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The edge-coin matchings of a block of rounds: ``(rounds, edges)`` of the matched edges.

    ``candidates`` is a boolean ``(rounds, m)`` array, row b the candidate edges of the block's round
    b. A candidate is matched when no other candidate of its round touches either end. The pairs come
    sorted by round, then by edge.
    """
    # (flat indices split by row: a 2-d np.nonzero costs four times as much on a (64, 512) block)
    rounds, edges = np.divmod(np.flatnonzero(candidates), candidates.shape[1])
    # Node i of round b is counted at b n + i: one bincount counts the candidates at every node of every round.
    at_u = rounds * graph.n + graph.u[edges]
    at_v = rounds * graph.n + graph.v[edges]
    count = np.bincount(at_u, minlength=candidates.shape[0] * graph.n)
    count += np.bincount(at_v, minlength=count.size)
    alone = (count[at_u] == 1) & (count[at_v] == 1)
    return rounds[alone], edges[alone]


def active_passive_pairs(graph, active_u: np.ndarray, pick_u: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The active-passive matching of one round from its node draws: ``(chooser, target)`` per matched edge.

    Node i is active when ``active_u[i] < 1/2`` and picks its neighbour in CSR slot
    ``floor(pick_u[i] d_i)``; an active node's pick is matched when the target is passive and was
    picked by nobody else.
    """
    n = graph.n
    active = active_u < 0.5
    deg = np.diff(graph.indptr)
    pick_slot = graph.indptr[:-1] + np.minimum((pick_u * deg).astype(np.int64), np.maximum(deg - 1, 0))
    chooser = np.flatnonzero(active & (deg > 0))
    target = graph.indices[pick_slot[chooser]]
    ok = ~active[target]
    chooser, target = chooser[ok], target[ok]
    picked = np.bincount(target, minlength=n)
    keep = picked[target] == 1
    return chooser[keep], target[keep]


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


def _block_size(m: int) -> int:
    # Rounds drawn at once by the references: 64, fewer on a large graph (at most ~2^15 draws a block).
    return max(1, min(64, (1 << 15) // max(m, 1)))


class _EdgeCoinRounds:
    """The edge-coin matchings of consecutive rounds with their excess coins, a block of rounds at a time.

    A matching does not depend on the loads, so the reference draws ``block`` rounds at once (the
    same draws as :func:`random_matching`, :class:`tokendist._random.CounterDraws`): a round then
    costs a few numpy calls on a small graph instead of some thirty. Rounds may be asked for in any
    order.
    """

    def __init__(self, graph, key: int, p: float, coins: bool):
        self.graph, self.p = graph, p
        self.block = _block_size(graph.m)
        every_edge = np.arange(graph.m, dtype=np.uint64)
        self.match = CounterDraws(_tag_key(key, _TAG_MATCH), every_edge, self.block)
        self.coin = CounterDraws(_tag_key(key, _TAG_COIN), every_edge, self.block) if coins else None
        self.first = None
        self._alone = None

    def at(self, t: int):
        """``(edges, u ends, v ends, up_to_u)`` of round t: its matched edges (increasing), their ends
        and, with coins, where the odd token goes (None without)."""
        if self.first is None or not self.first <= t < self.first + self.block:
            self._fill(t)
        a, b = self.starts[t - self.first], self.starts[t - self.first + 1]
        return self.edges[a:b], self.ends_u[a:b], self.ends_v[a:b], (None if self.up is None else self.up[a:b])

    def nodes_at(self, t: int):
        """Round t per node (with coins only): ``(edges, u ends, partner, odd_here)``, the matched
        edges and their u ends as :meth:`at`, each node's matched neighbour (itself when unmatched)
        and whether it takes its pair's odd token."""
        if self.first is None or not self.first <= t < self.first + self.block:
            self._fill(t)
        b = t - self.first
        lo, hi = self.starts[b], self.starts[b + 1]
        return self.edges[lo:hi], self.ends_u[lo:hi], self.partner[b], self.odd_here[b]

    def _fill(self, first: int) -> None:
        rounds, self.edges = edge_coin_matchings(self.graph, self.match.rows(first) < self.p)
        self.ends_u, self.ends_v = self.graph.u[self.edges], self.graph.v[self.edges]
        self.starts = np.searchsorted(rounds, np.arange(self.block + 1)).tolist()  # (Python ints: slices)
        # (the coins of the matched edges only: the same bits as rows(first)[rounds, edges])
        self.up = None if self.coin is None else self.coin.pairs(first, rounds, self.edges) < 0.5
        if self.up is not None:  # the block's rounds per node, for _MatchingBase._balance_nodes
            if self._alone is None:  # every node its own partner, in every round of a block
                self._alone = np.tile(np.arange(self.graph.n), (self.block, 1))
            self.partner = self._alone.copy()
            self.partner[rounds, self.ends_u], self.partner[rounds, self.ends_v] = self.ends_v, self.ends_u
            self.odd_here = np.zeros((self.block, self.graph.n), dtype=np.bool_)
            self.odd_here[rounds, self.ends_u], self.odd_here[rounds, self.ends_v] = self.up, ~self.up
        self.first = first


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

    def _balance(self, graph, loads, edges, ends_u, ends_v, up_to_u):
        """The reference step on the round's matched ``edges`` (ends ``graph.u[edges]``,
        ``graph.v[edges]``), as :meth:`_step` with the mask of those edges: every pair averages, the
        odd token to ``u`` where ``up_to_u`` (None: where ``u`` was the heavier end)."""
        loads = np.asarray(loads, dtype=np.int64)
        a, b = loads[ends_u], loads[ends_v]
        s = a + b
        if up_to_u is None:
            up_to_u = a >= b
        new_u = (s >> 1) + (s & up_to_u)  # floor(s / 2), + (s mod 2) where the odd token goes to u (s & True = s & 1)
        sent = a - new_u
        new = loads.copy()
        new[ends_u] = new_u  # a matching: every node in at most one pair
        new[ends_v] = s - new_u
        flows = np.zeros(graph.m, dtype=np.int64)
        flows[edges] = sent
        return Step(new, moved=int(np.abs(sent).sum()), messages=2 * len(edges), flows=flows)

    @staticmethod
    def _balance_nodes(loads, partner, odd_here, edges, ends_u, flows):
        """:meth:`_balance` per node, with the odd token's end given (``excess=random``).

        ``partner`` is each node's matched neighbour (the node itself when unmatched: its pair sum
        ``2 x`` is even, so it keeps ``x``), ``odd_here`` whether the node takes its pair's odd
        token. With ``s`` the pair's sum a node's new load is ``floor(s / 2) + (s mod 2 where
        odd_here)``, which is ``floor((s + odd_here) / 2)``, and what it sent is its old load minus
        the new one: nine whole-array calls a round, against some fifteen per-edge gathers and
        scatters of :meth:`_balance` (a small run's step is their overhead). ``flows`` must be zero
        off ``edges``; it is returned filled.
        """
        if loads.dtype != np.int64:
            loads = loads.astype(np.int64)
        other = loads[partner]
        if not loads.size or np.max(loads) < 2**62:  # (loads are never negative here) 2 x + 1 fits int64
            new = loads + other
            new += odd_here
            new >>= 1
        else:
            # An unmatched node's pair sum 2x wraps past 2**63 for x >= 2**62 (it came out as -x):
            # floor((x + y + o) / 2) as the halves plus the half of the low bits, which cannot wrap.
            new = (loads >> 1) + (other >> 1) + (((loads & 1) + (other & 1) + odd_here) >> 1)
        sent = (loads - new)[ends_u]
        flows[edges] = sent
        return Step(new, moved=int(np.abs(sent).sum()), messages=2 * len(edges), flows=flows)


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
    offered (``drawing``; as specified here, since the procedures' exact constants were not
    consulted): ``edge-coin`` (default: candidate edges with probability ``1/(4 Delta)``,
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
        self._draws = None  # the reference's draws, made at its first step
        self._per_node = None  # the same, when its rounds are balanced per node (_balance_nodes)
        if self.options["kernel"] == "numba":
            self._out = np.empty(graph.n, dtype=np.int64)
            self._count = np.zeros(graph.n, dtype=np.int64)
            self._mask = np.zeros(graph.m, dtype=np.bool_)
            # each edge's own part of its draws (matching_step), while the table is small (in cache)
            self._mixed = mix_index(np.arange(graph.m)) if graph.m <= _MIX_TABLE_EDGES else np.zeros(0, np.uint64)
            # The reference's default p, the same float, once (max_degree is a pass over the degrees).
            self._p_default = 1.0 / (4 * graph.max_degree) if graph.m else None
        # The edge-coin kernel's arguments that stay the same for the run, made once (a step is a few
        # microseconds of kernel; building them, the keys' big-int arithmetic included, cost as much).
        self._fast = None
        if self.options["kernel"] == "numba" and self.options["drawing"] == "edge-coin" and graph.m:
            p = self.options["p"] or self._p_default  # (p=0 means the default)
            self._fast = (unsigned_view(graph.u), unsigned_view(graph.v), True, float(p),
                          _tag_key(self._key, _TAG_MATCH), self._mixed, self._mask, self.options["excess"] == "random",
                          _tag_key(self._key, _TAG_COIN), self._count)

    def step(self, t, graph, loads):
        fast = self._fast
        if fast is not None and graph is self._graph:  # the default: edge-coin drawing, in numba
            loads = np.ascontiguousarray(loads, dtype=np.int64)
            new = self._out if self._out is not loads else np.empty_like(loads)
            # A fresh flows array: the engine reads it during the step, and a caller may keep a Step.
            flows = np.empty(graph.u.shape[0], dtype=np.int64)
            moved, matched = matching_step(*fast, t, loads, new, flows)
            self._out = loads  # the engine's previous loads: next step's output buffer
            return Step(new, moved=int(moved), messages=2 * int(matched), flows=flows)
        rounds = self._per_node
        if rounds is not None and graph is self._graph:  # the reference, edge-coin rounds, odd token at random
            edges, ends_u, partner, odd_here = rounds.nodes_at(t)
            return self._balance_nodes(loads, partner, odd_here, edges, ends_u, np.zeros(graph.m, dtype=np.int64))
        p = self.options["p"] or None
        if self.options["kernel"] == "numpy" or graph is not self._graph or graph.m == 0:
            if graph is self._graph and graph.m:
                return self._reference_step(t, graph, loads, p)
            return self._step(t, graph, loads, random_matching(graph, self._key, t, self.options["drawing"], p))
        loads = np.ascontiguousarray(loads, dtype=np.int64)
        draw = self.options["drawing"] == "edge-coin"
        # active-passive: the reference draws the mask (node coins, then an edge lookup), the kernel balances
        mask = self._mask if draw else random_matching(graph, self._key, t, self.options["drawing"], p)
        p = self._p_default if p is None else p  # the reference's default, the same float
        new = self._out if self._out is not loads else np.empty_like(loads)
        # A fresh flows array: the engine reads it during the step, and a caller may keep a Step.
        flows = np.empty(graph.m, dtype=np.int64)
        moved, matched = matching_step(unsigned_view(graph.u), unsigned_view(graph.v), draw, float(p),
                                       _tag_key(self._key, _TAG_MATCH), self._mixed, mask,
                                       self.options["excess"] == "random", _tag_key(self._key, _TAG_COIN),
                                       self._count, t, loads, new, flows)
        self._out = loads  # the engine's previous loads: next step's output buffer
        return Step(new, moved=int(moved), messages=2 * int(matched), flows=flows)

    def steps(self, t, k, graph, loads, block, moved, messages, stop_idle):
        """Up to ``k`` rounds of the edge-coin kernel in one call (:meth:`Protocol.steps`): the kernel
        of :meth:`step` on each, so the same draws and loads. Declined for a negative load: only from
        loads >= 0 is every pair's exchange feasible (each end keeps the floor or the ceiling of the
        mean), which the engine's block check takes for granted instead of reading the flows."""
        fast = self._fast
        if fast is None or graph is not self._graph or np.minimum.reduce(loads) < 0:
            return None
        flows = self.__dict__.get("_block_flows")
        if flows is None:
            flows = self._block_flows = np.empty(graph.m, dtype=np.int64)  # (scratch: no block reads it)
        args = (*fast, t, k, stop_idle, loads, block, flows, moved, messages)
        if not block_kernel_ready(_matching_steps, args):
            return None
        return _matching_steps(*args), _MATCHING_VARIANT

    def _reference_step(self, t, graph, loads, p):
        """The numpy reference on the graph of the start: :meth:`_step` on :func:`random_matching`'s
        round, with the draws made a block of rounds at a time."""
        random = self.options["excess"] == "random"
        if self._draws is None:
            block, every_node = _block_size(graph.m), np.arange(graph.n, dtype=np.uint64)
            self._draws = (_EdgeCoinRounds(graph, self._key, 1.0 / (4 * graph.max_degree) if p is None else p, random)
                           if self.options["drawing"] == "edge-coin" else
                           (CounterDraws(_tag_key(self._key, _TAG_ACTIVE), every_node, block),
                            CounterDraws(_tag_key(self._key, _TAG_PICK), every_node, block),
                            CounterDraws(_tag_key(self._key, _TAG_COIN), np.arange(graph.m, dtype=np.uint64), block)))
        if self.options["drawing"] == "edge-coin":
            if random:
                self._per_node = self._draws  # (step() takes this path from now on)
                return self.step(t, graph, loads)
            return self._balance(graph, loads, *self._draws.at(t))
        active, pick, coin = self._draws
        chooser, target = active_passive_pairs(graph, active.at(t), pick.at(t))
        edges = graph.edge_index(np.minimum(chooser, target), np.maximum(chooser, target))
        up_to_u = coin.at(t)[edges] < 0.5 if random else None
        return self._balance(graph, loads, edges, graph.u[edges], graph.v[edges], up_to_u)


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
        self._classes = None  # the reference's colour classes and coins, made at its first step
        if self.options["kernel"] == "numba":
            # The edges sorted by colour (increasing edge order within a class), and where each class starts.
            idx = np.int32 if graph.m < 2**31 else np.int64
            self._by_colour = np.argsort(self.colours, kind="stable").astype(idx)
            self._class_start = np.searchsorted(self.colours[self._by_colour], np.arange(self.period + 1))
            self._out = np.empty(graph.n, dtype=np.int64)
            self._flows = np.zeros(graph.m, dtype=np.int64)
            self._written = (0, 0)  # the bounds of the class whose flows are in self._flows (none yet)
            # Per class, once: its bounds in _by_colour as Python ints and its messages (two per edge);
            # and the kernel's arguments that stay the same for the run (a round is a microsecond or
            # two of kernel: looking these up every step cost several times that).
            bounds = self._class_start.tolist()
            self._rounds = [((bounds[c], bounds[c + 1]), 2 * (bounds[c + 1] - bounds[c])) for c in range(self.period)]
            self._fixed = (unsigned_view(self._by_colour), unsigned_view(graph.u), unsigned_view(graph.v),
                           self.options["excess"] == "random", _tag_key(self._key, _TAG_COIN), self._flows)

    @staticmethod
    def _class_nodes(graph, edges):
        """A colour class for the reference: its edges and ends, each node's partner, the edge at each
        matched node (0 elsewhere: its coin is not read), whether the node is the edge's v end, and a
        flows buffer that only this class writes (so it is zero off the class)."""
        ends_u, ends_v = graph.u[edges], graph.v[edges]
        partner = np.arange(graph.n)
        partner[ends_u], partner[ends_v] = ends_v, ends_u
        edge_at = np.zeros(graph.n, dtype=np.int64)
        edge_at[ends_u], edge_at[ends_v] = edges, edges
        at_v = np.zeros(graph.n, dtype=np.bool_)
        at_v[ends_v] = True
        return edges, ends_u, ends_v, partner, edge_at, at_v, np.zeros(graph.m, dtype=np.int64)

    def _odd_block(self, first: int) -> None:
        """Whether each node takes its pair's odd token, for the block of rounds from ``first``.

        A node takes it where its edge's coin is < 1/2 at a u end, >= 1/2 at a v end (the coins of
        :meth:`_excess_to_u`, drawn for each node's own edge only: :meth:`CounterDraws.pairs`)."""
        block, n = self._coin.block, self._graph.n
        classes = [self._classes[c] for c in (np.arange(first, first + block) % self.period).tolist()]
        edge_at = np.stack([cls[4] for cls in classes])
        at_v = np.stack([cls[5] for cls in classes])
        coins = self._coin.pairs(first, np.repeat(np.arange(block), n), edge_at.reshape(-1)).reshape(block, n)
        self._odd = (coins < 0.5) ^ at_v
        self._odd_first = first

    def step(self, t, graph, loads):
        if self.options["kernel"] == "numpy" or graph is not self._graph:
            if graph is not self._graph:
                return self._step(t, graph, loads, self.colours == (t % self.period))
            if self._classes is None:
                self._classes = [self._class_nodes(graph, e) for e in
                                 (np.flatnonzero(self.colours == c) for c in range(self.period))]
                self._coin = CounterDraws(_tag_key(self._key, _TAG_COIN), np.arange(graph.m, dtype=np.uint64),
                                          _block_size(graph.m))
                self._odd_first = None
            # Round t's matching is the colour class t mod period; the same coins as _excess_to_u's.
            edges, ends_u, ends_v, partner, edge_at, at_v, flows = self._classes[t % self.period]
            if self.options["excess"] == "random":
                first = self._odd_first
                if first is None or not first <= t < first + self._coin.block:
                    self._odd_block(t)
                    first = t
                return self._balance_nodes(loads, partner, self._odd[t - first], edges, ends_u, flows)
            return self._balance(graph, loads, edges, ends_u, ends_v, None)
        loads = np.ascontiguousarray(loads, dtype=np.int64)
        bounds, messages = self._rounds[t % self.period]  # round t: the colour class t mod period
        new = self._out if self._out is not loads else np.empty_like(loads)
        # the previous round's flows are cleared in the kernel: only a class's edges are touched
        moved = circuit_step(*self._fixed, *bounds, *self._written, t, loads, new)
        self._written = bounds
        self._out = loads
        # The flows buffer is reused: the engine reads it during the step (feasibility, single-port check).
        return Step(new, moved=int(moved), messages=messages, flows=self._flows)

    def steps(self, t, k, graph, loads, block, moved, messages, stop_idle):
        """Up to ``k`` rounds of the numba kernel in one call (:meth:`Protocol.steps`): the kernel of
        :meth:`step` on each round's colour class, the flows buffer left as after the last round.
        Declined for a negative load (see :meth:`RandomMatching.steps`)."""
        if self.options["kernel"] == "numpy" or graph is not self._graph or np.minimum.reduce(loads) < 0:
            return None
        args = (*self._fixed, self._class_start, self.period, *self._written, t, k, stop_idle, loads, block, moved,
                messages)
        if not block_kernel_ready(_circuit_steps, args):
            return None
        done = _circuit_steps(*args)
        self._written = self._rounds[(t + done - 1) % self.period][0]  # the class whose flows are in self._flows
        return done, _CIRCUIT_VARIANT
