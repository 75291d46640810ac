"""Local load balancing of Ghosh, Leighton, Maggs, Muthukrishnan, Plaxton, Rajaraman, Richa,
Tarjan and Zuckerman (1995): the multi-port and single-port algorithms and their variants.

* ``multi-port`` (Sec. 1.1, Sec. 3.2): one token crosses every edge whose ends differ by >= 2d + 1.
* ``single-port`` (Sec. 1.1, Sec. 3.1): a random matching (candidates with probability 1/(4d),
  candidates touching another candidate dropped), one token from the heavier to the lighter end.
* ``ds`` (Sec. 5): the dynamic synchronous multi-port algorithm with per-neighbour load estimates.
* ``async-multi-port`` (Sec. 5, last paragraph, after Aiello et al. [2]): the same rule on the
  message-passing executor, at most two messages in transit per edge, an adversary choosing delays.

d is always the maximum degree of the (base) graph, as in the paper. The numba kernels of one step
are in ``_local_balancing_kernels``; the plain numpy references stay here (``kernel=numpy``).
"""

from __future__ import annotations

from collections import deque

import copy
import functools

import numpy as np

from ..._random import counter_uniform, counter_uniform_scalar, stream_key
from ...engine import MessageExecutor, Param, Protocol, Step, register_protocol
from ...errors import TokendistError
from ...graphs._model import unsigned_view
from ...graphs._stencil import lower_edge_runs
from .kernels._serial import (BLOCK, INT32_MAX, INT32_MIN, coin_bound, ds_step, ds_step_indexed, multi_port_rows,
                                       ds_step_nodes, ds_step_nodes_stencil, multi_port_step, multi_port_step_regular,
                                       multi_port_step_stencil, single_port_counter_step, single_port_geometric_step)
from .kernels._stencil import single_port_stencil_step
from . import _blocks, _partitioned
from ._matching_blocks import MatchingBlocks
from .kernels._threaded import (EDGE_BLOCK, ds_step_nodes_par, multi_port_step_par,
                                        multi_port_step_regular_par, run_parallel, single_port_counter_step_par)
from ...kernels._threads import THREADS_PARAM, check_threads, run_rows, use_threads
from ...kernels._report import instrument_kernels

instrument_kernels(globals())  # every run reports which kernel ran each step (tokendist.kernels._report)

__all__ = ["MultiPort", "SinglePort", "DynamicSynchronous", "AsyncMultiPort", "multi_port_flows",
           "single_port_flows", "single_port_selection_probability"]


# ---------------------------------------------------------------------------------------------------
# multi-port
# ---------------------------------------------------------------------------------------------------
def multi_port_flows(graph, loads, threshold: int) -> np.ndarray:
    """Reference (plain numpy) per-edge flows of one multi-port step: +1 from u to v, -1 back."""
    diff = loads[graph.u] - loads[graph.v]
    return (diff >= threshold).astype(np.int64) - (diff <= -threshold).astype(np.int64)


def _apply_flows(graph, loads, flows) -> np.ndarray:
    return (loads - np.bincount(graph.u, weights=flows, minlength=graph.n).astype(np.int64)
            + np.bincount(graph.v, weights=flows, minlength=graph.n).astype(np.int64))


def _flows_and_outflow(graph, loads, flows):
    """``(loads after flows, tokens each node sent)`` for signed integer per-edge ``flows``."""
    pos, neg = np.maximum(flows, 0), np.maximum(-flows, 0)
    outflow = (np.bincount(graph.u, weights=pos, minlength=graph.n)
               + np.bincount(graph.v, weights=neg, minlength=graph.n)).astype(np.int64)
    return _apply_flows(graph, loads, flows), outflow


def _regular_degree(graph) -> int:
    """D if every node of ``graph`` has degree D >= 1 (the kernels' rows of D slots), else 0."""
    deg = graph.degrees
    return int(deg[0]) if graph.n and deg[0] > 0 and deg.min() == deg.max() else 0


def _stencil_of(graph, degree: int, threads: int, kernel: str):
    """``graph.stencil`` when a serial numba row kernel will use it (a regular graph), else None.

    Looked up once per reset (the ``_stencil`` kernels walk its runs without CSR indices; see
    ``_local_balancing_kernels``); a step on another graph object (dynamics) does not use it, so
    dynamic runs compute no stencil for their step graphs. ``threads > 1`` keeps the parallel
    row kernels (a parallel stencil kernel compiled in about 17 s per type signature here: too
    much compile time for an opt-in path; docs/protocols/local.md, "Performance").
    """
    if degree == 0 or threads > 1 or kernel != "numba":
        return None
    return graph.stencil


@register_protocol
class MultiPort(Protocol):
    """Multi-port local balancing: one token crosses every edge whose ends differ by >= 2d + 1.

    Per node u, each step: for every neighbour v with ``w(u) >= w(v) + 2d + 1`` at the start of the
    step, send one token to v (d = maximum degree of the graph; Sec. 1.1). Deterministic,
    multi-port, needs nothing of the graph. Theorem 3.2: balances to within O(d^2 log n / alpha)
    in O(Delta / alpha) steps; every fixed point is locally balanced within 2d (Sec. 4.3).

    References
    ----------
    B. Ghosh et al., Tight analyses of two local load balancing algorithms, CMU-CS-95-131, Sec. 1.1, 3.2.

    Notes
    -----
    On a regular graph the step is a row loop with rows of d slots (``multi_port_step_regular``),
    on a torus or ring walking its offset stencil (``multi_port_step_stencil``: no index reads,
    SIMD; serial steps), otherwise an edge scan. ``threads=k`` (k > 1) runs a row loop on k numba threads
    (:mod:`._local_balancing_parallel`): same loads and tokens moved, bit for bit.
    """

    name = "multi-port"
    title = "Multi-port threshold (2d + 1)"
    paper = "Ghosh et al. 1995, Sec. 3.2"
    model = "multi-port"
    # The rule is per edge and per step; on a dynamic network it applies to the edges that are up
    # (d stays the base graph's maximum degree, as in the paper). step() reads every index from the
    # step graph and uses the reset graph's stencil only for that graph object.
    dynamic = True
    exchange_rounds = 1
    params = (Param("threshold", int, 0, "difference that moves a token; 0 means 2d + 1 (the paper's rule)",
                    minimum=0),
              Param("kernel", str, "numba", "numba (fast) or numpy (reference)", ("numba", "numpy")),
              THREADS_PARAM)

    def __init__(self, **params):
        super().__init__(**params)
        check_threads(self.name, self.options["threads"])

    def reset(self, graph, loads, rng):
        t = self.options["threshold"]
        self.threshold = int(t) if t > 0 else 2 * graph.max_degree + 1
        self._out = np.empty(graph.n, dtype=np.int64)
        self._graph = graph
        self._degree = _regular_degree(graph)
        self._stencil = _stencil_of(graph, self._degree, self.options["threads"], self.options["kernel"])

    def step(self, t, graph, loads):
        if self.options["kernel"] == "numpy":
            flows = multi_port_flows(graph, loads, self.threshold)
            return Step(_apply_flows(graph, loads, flows), moved=int(np.abs(flows).sum()), messages=2 * graph.m,
                        flows=flows)
        out = self._out if self._out is not loads else np.empty_like(loads)
        threads = self.options["threads"]
        # A step graph other than the reset one (dynamics) may not be regular: look again.
        degree = self._degree if graph is self._graph else _regular_degree(graph)
        if degree > 0:
            # Rows of D slots (constant trip count, unsigned indices): faster than the edge scan.
            args = (unsigned_view(graph.indices), degree, loads, self.threshold, out)
            st = self._stencil if graph is self._graph else None
            if use_threads(self.name, threads):
                moved = run_parallel(multi_port_step_regular_par, threads, *args)
            elif st is not None:
                # Offset stencil (a torus): the runs read no indices and vectorise; same results.
                moved = multi_port_step_stencil(args[0], degree, st.starts, st.ends, st.lower, st.upper, loads,
                                                self.threshold, out)
            else:
                moved = multi_port_step_regular(*args)
        elif use_threads(self.name, threads):
            # Rows over threads: the per-node CSR form of the same rule (_local_balancing_parallel).
            moved = run_rows(multi_port_step_par, graph.indptr, graph.indices, loads, self.threshold, out)
        else:
            moved = multi_port_step(graph.u, graph.v, loads, self.threshold, out)
        self._out = loads  # ping-pong buffers: the engine copies nothing
        return Step(out, moved=int(moved), messages=2 * graph.m)

    def is_stable(self, graph, loads):
        return bool(graph.m == 0 or np.abs(loads[graph.u] - loads[graph.v]).max() < self.threshold)

    def report(self):
        return {"threshold": self.threshold}

    # Partitioned form (tokendist.engine.mpi): the same per-edge rule on one rank's local graph
    # (its nodes, their ghosts, the edges at its nodes); the threshold is the whole graph's 2d + 1.
    def partitioned_step(self, t, part, loads):
        """One step on ``part.graph`` (a rank's local graph): new loads and outflow per local node.

        Only the owned entries are meaningful (a ghost misses the edges at its other ranks).
        """
        g = part.graph
        if self.options["kernel"] == "numpy":
            new, outflow = _flows_and_outflow(g, loads, multi_port_flows(g, loads, self.threshold))
        else:
            new, outflow = np.empty_like(loads), np.zeros(g.n, dtype=np.int64)
            multi_port_rows(g.indptr, g.indices, part.owned, loads, self.threshold, new, outflow)
        return Step(new, messages=2 * part.global_graph.m, outflow=outflow)

    def partitioned_is_stable(self, part, loads):
        g = part.graph
        return part.allreduce(g.m == 0 or np.abs(loads[g.u] - loads[g.v]).max() < self.threshold, "and")

    # Per-node form: exchange loads with every neighbour, then send one token to each neighbour
    # at least 2d + 1 lighter.
    def publish(self, rnd, t, node, view):
        return int(view.load)

    def decide(self, t, node, view):
        return {j: 1 for j, w in view.received[0].items() if view.load - w >= self.threshold}


# ---------------------------------------------------------------------------------------------------
# single-port
# ---------------------------------------------------------------------------------------------------
def single_port_matching(graph, key: int, t: int, p: float, coins: str = "per-edge") -> np.ndarray:
    """Reference (plain numpy): the boolean mask of the edges in step t's random matching (Sec. 1.1)."""
    if coins == "geometric":
        cand = geometric_candidates(graph.m, key, t, p)
    else:
        cand = counter_uniform(key, t, np.arange(graph.m)) < p
    count = np.bincount(graph.u[cand], minlength=graph.n) + np.bincount(graph.v[cand], minlength=graph.n)
    return cand & (count[graph.u] == 1) & (count[graph.v] == 1)


def geometric_candidates(m: int, key: int, t: int, p: float) -> np.ndarray:
    """Reference (numpy): the candidate mask of step t drawn by geometric skipping (see the kernel)."""
    mask = np.zeros(m, dtype=bool)
    if p <= 0 or m == 0:
        return mask
    pos, j, chunk = -1, 0, max(16, int(2 * m * p) + 16)
    while True:
        r = counter_uniform(key, t, np.arange(j, j + chunk))
        gaps = np.zeros(chunk) if p >= 1 else np.floor(np.log1p(-r) / np.log1p(-p))
        gaps = np.minimum(gaps, m + 1).astype(np.int64)
        steps = np.cumsum(gaps + 1) + pos
        inside = steps[steps < m]
        mask[inside] = True
        if inside.size < chunk:
            return mask
        pos, j = int(steps[-1]), j + chunk


def single_port_flows(graph, loads, key: int, t: int, p: float, threshold: int = 1) -> np.ndarray:
    """Reference (plain numpy) per-edge flows of one single-port step."""
    matched = single_port_matching(graph, key, t, p)
    diff = loads[graph.u] - loads[graph.v]
    s = (diff >= threshold).astype(np.int64) - (diff <= -threshold).astype(np.int64)
    return np.where(matched, s, 0)


def single_port_selection_probability(graph, p: float | None = None) -> np.ndarray:
    """Exact probability that each edge is in the matching: ``p (1 - p)^(deg u + deg v - 2)``.

    An edge is kept iff it is a candidate (probability p) and none of the other
    ``deg(u) + deg(v) - 2`` edges at its ends is one, all independent. Lemma 3.2 ([14]) states this
    is at least 1/(8d) for p = 1/(4d).
    """
    if p is None:
        p = 1.0 / (4 * max(graph.max_degree, 1))
    d = graph.degrees
    return p * (1.0 - p) ** (d[graph.u] + d[graph.v] - 2)


@register_protocol
class SinglePort(Protocol):
    """Single-port local balancing on a random matching (Sec. 1.1, Sec. 3.1; Ghosh-Muthukrishnan [14]).

    Each step: every edge is a candidate independently with probability 1/(4d) (d = maximum
    degree); every candidate (u, v) for which another candidate (u, x) or (y, v) exists is removed;
    the remaining candidates form a matching M. For each (u, v) in M: if u and v hold the same
    number of tokens nothing is sent, otherwise one token goes from the heavier to the lighter node.

    Randomised (one counter-based coin per edge and step, shared by the kernel and the per-node
    form), single-port. Theorem 3.1: balances to within O(d log n / alpha) in O(d Delta / alpha)
    steps w.h.p. As a token also crosses edges whose ends differ by exactly 1, the rule has no
    fixed point short of perfect balance: it reaches local balance within 1 but need not stay there
    (``threshold=2`` is the variant that stops).

    References
    ----------
    B. Ghosh et al., Tight analyses of two local load balancing algorithms, CMU-CS-95-131, Sec. 1.1, 3.1.

    Notes
    -----
    ``threads=k`` (k > 1, per-edge coins) draws the coins, collects the candidates and resolves the
    matching on k numba threads; the per-node candidate count stays serial. Same matchings, loads,
    flows and reports, bit for bit (:mod:`._local_balancing_parallel`). ``coins=geometric`` is serial.
    """

    name = "single-port"
    title = "Single-port random matching"
    paper = "Ghosh et al. 1995, Sec. 3.1"
    model = "single-port"
    randomized = True
    dynamic = True
    exchange_rounds = 2
    params = (Param("probability", float, 0.0, "candidate probability of an edge; 0 means 1/(4d) (the paper's)",
                    minimum=0, maximum=1),
              Param("threshold", int, 1, "smallest difference that moves a token; 1 is the paper's rule "
                                          "(any difference)", minimum=1),
              Param("kernel", str, "numba", "numba (fast) or numpy (reference)", ("numba", "numpy")),
              Param("flows", bool, True, "return per-edge flows so that the engine can check the matching "
                                         "(false: faster, loads only)"),
              Param("coins", str, "per-edge", "per-edge: one counter draw per edge; geometric: draw the gaps "
                                              "between candidates (~m/(4d) draws; same distribution, other coins)",
                    ("per-edge", "geometric")),
              THREADS_PARAM)

    def __init__(self, **params):
        super().__init__(**params)
        check_threads(self.name, self.options["threads"])

    def reset(self, graph, loads, rng):
        d = max(graph.max_degree, 1)
        p = float(self.options["probability"])
        if not 0.0 <= p <= 1.0:
            raise TokendistError(f"single-port: probability must be in [0, 1], got {p}")
        self.p = p if p > 0 else 1.0 / (4 * d)
        self.threshold = int(self.options["threshold"])
        if self.threshold < 1:
            raise TokendistError("single-port: threshold must be at least 1")
        self.key = stream_key(rng)
        self._graph = graph
        # How often each edge was in the matching (the Lemma 3.2 report); int32, widened in step()
        # before it could overflow.
        self._selected = np.zeros(graph.m, dtype=np.int32)
        self._steps = 0
        self._out = np.empty(graph.n, dtype=np.int64)
        self._flows = np.zeros(graph.m, dtype=np.int8)  # one token at most: int8 (1 byte per edge)
        self._count = np.zeros(graph.n, dtype=np.uint8)  # saturating candidate count per node
        self._bound = coin_bound(self.p)
        # Candidate buffers (edge, lower end, upper end) sized for ~m p candidates with a wide margin
        # and grown if a step ever needs more (never past m + BLOCK, which always suffices).
        mp_ = graph.m * self.p
        self._alloc_candidates(min(int(mp_ + 8 * np.sqrt(mp_)) + 2 * BLOCK, graph.m + BLOCK))
        self._ncand = 0
        self._geo_cache = (None, None)  # (t, candidate mask) for the per-node form
        self._draws = None  # the numpy step's coins and matchings (MatchingBlocks), made at its first step
        self._words = self._per_block = None  # allocated by the first threads > 1 step
        # On a torus or ring, the serial per-edge coins take the stencil kernel
        # (_local_balancing_stencil: three streaming passes instead of one pass per candidate).
        self._edge_runs = None
        if (self.options["kernel"] == "numba" and self.options["coins"] == "per-edge"
                and not use_threads(self.name, self.options["threads"]) and graph.stencil is not None):
            runs = lower_edge_runs(graph.stencil, graph.csr_edges)
            if runs[0].shape[0]:
                self._edge_runs = runs
                self._flags = np.empty(graph.m, dtype=np.uint8)  # the step's candidate flags
                self._partner = np.empty(graph.n, dtype=np.int32 if graph.n <= INT32_MAX else np.int64)
                # The stencil kernel's per-graph arguments, looked up once: on a 256-node torus the
                # kernel takes a few microseconds, and the property reads and views cost as much.
                st = graph.stencil
                self._stencil_head = (graph.indptr, unsigned_view(graph.indices), graph.csr_edges, *runs[:2],
                                      st.lower, st.upper, runs[2])
        self._flows_dense = False  # flows written on every edge (stencil kernel): clear before a sparse kernel
        self._reference = self.options["kernel"] == "numpy"
        self._messages = 4 * graph.m  # per step: loads, then candidate counts, both ways on every edge

    def _live_step(self, t, graph, loads) -> Step:
        """One step on a dynamic network's step graph: the random matching among the edges that are up.

        A base edge keeps its coin (the counter is its base index), so a failed edge is simply never a
        candidate; p stays 1/(4d) with d the base graph's maximum degree (Sec. 1.1). A step graph with
        no map to the base graph (mobility) numbers its own edges.
        """
        base = graph.base_edges is not None and graph.n == self._graph.n
        ids = graph.base_edges if base else np.arange(graph.m)
        if self.options["coins"] == "geometric":
            cand = geometric_candidates(self._graph.m if base else graph.m, self.key, t, self.p)[ids]
        else:
            cand = counter_uniform(self.key, t, ids) < self.p
        count = np.bincount(graph.u[cand], minlength=graph.n) + np.bincount(graph.v[cand], minlength=graph.n)
        matched = cand & (count[graph.u] == 1) & (count[graph.v] == 1)
        if base:
            self._selected[ids[matched]] += 1
        diff = loads[graph.u] - loads[graph.v]
        s = (diff >= self.threshold).astype(np.int64) - (diff <= -self.threshold).astype(np.int64)
        flows = np.where(matched, s, 0)
        return Step(_apply_flows(graph, loads, flows), moved=int(np.abs(flows).sum()), messages=4 * graph.m,
                    flows=flows)

    def step(self, t, graph, loads):
        self._steps += 1
        if graph is not self._graph:
            return self._live_step(t, graph, loads)
        if self._reference:
            return self._numpy_step(t, graph, loads)
        if self._steps >= INT32_MAX and self._selected.dtype == np.int32:
            self._selected = self._selected.astype(np.int64)
        out = self._out if self._out is not loads else np.empty_like(loads)
        if self._edge_runs is not None:
            moved = single_port_stencil_step(*self._stencil_head, loads, self.key, t, self._bound, self.threshold, out,
                                             self._flows, self._selected, self._flags, self._partner)
            self._ncand = 0
            self._flows_dense = True
            self._out = loads
            return Step(out, int(moved), self._messages, self._flows.copy() if self.options["flows"] else None)
        coins = self.options["coins"]
        if self._flows_dense:
            self._flows[:] = 0  # the sparse kernels clear only their last step's candidates
            self._flows_dense = False
        threads = self.options["threads"]
        extra = ()
        if coins == "geometric":
            # The gaps are drawn one after the other (each candidate's position is the sum of the
            # gaps before it): serial whatever ``threads`` says; the step draws only ~m p numbers.
            kernel, coin = single_port_geometric_step, self.p
        elif use_threads(self.name, threads):
            kernel, coin = functools.partial(run_parallel, single_port_counter_step_par, threads), self._bound
            if self._words is None:  # scratch of the parallel kernel: a bit per edge, a number per edge block
                self._words = np.zeros(16 * -(-graph.m // BLOCK), dtype=np.uint64)
                self._per_block = np.zeros(max(1, -(-graph.m // EDGE_BLOCK)), dtype=np.int64)
            extra = (self._words, self._per_block)
        else:
            kernel, coin = single_port_counter_step, self._bound
        while True:
            moved, ncand = kernel(graph.u, graph.v, loads, self.key, t, coin, self.threshold, out, self._flows,
                                  self._count, self._cands, self._ca, self._cb, self._ncand, self._selected, *extra)
            if moved >= 0:
                break
            # Candidate buffers full (flows already cleared, nothing else written): grow, redo.
            self._ncand = 0
            self._alloc_candidates(min(2 * self._cands.size, graph.m + BLOCK))
        self._ncand = ncand
        self._out = loads
        flows = self._flows.copy() if self.options["flows"] else None
        return Step(out, moved=int(moved), messages=4 * graph.m, flows=flows)

    # Blocks of steps of the stencil kernel in one call (Protocol.steps; ._blocks).
    steps = _blocks.single_port_steps

    def _numpy_step(self, t, graph, loads) -> Step:
        """The reference step on the reset graph: :func:`single_port_flows`'s rule, worked on the
        step's candidates only (about ``m p`` edges) instead of on every edge; with per-edge coins,
        on the matchings of a block of steps worked out at once (:class:`._matching_blocks.MatchingBlocks`)."""
        if self.options["coins"] == "geometric":
            cand = np.flatnonzero(geometric_candidates(graph.m, self.key, t, self.p))
            a, b = graph.u[cand], graph.v[cand]
            count = np.bincount(np.concatenate((a, b)), minlength=graph.n)
            keep = (count[a] == 1) & (count[b] == 1)  # matched: no other candidate at either end
            e, a, b = cand[keep], a[keep], b[keep]
        else:
            if self._draws is None:  # the coins counter_uniform(key, t, e) and their matchings, a block at a time
                self._draws = MatchingBlocks(graph, self.key, self.p)
            e, a, b = self._draws.at(t)
        self._selected[e] += 1
        diff = loads.take(a) - loads.take(b)
        if self.threshold == 1:
            s = np.sign(diff)  # (the rule below, for threshold 1: one call)
        else:
            s = (diff >= self.threshold).astype(np.int64) - (diff <= -self.threshold).astype(np.int64)
        flows = np.zeros(graph.m, dtype=np.int64)
        flows[e] = s
        new = loads.astype(np.int64)  # (a copy)
        # A matching: every node is on one matched edge at most, so plain (unbuffered) updates add right.
        new[a] -= s
        new[b] += s
        return Step(new, moved=int(np.count_nonzero(s)), messages=4 * graph.m, flows=flows)  # (|s| <= 1)

    def _alloc_candidates(self, size):
        g = self._graph
        self._cands = np.zeros(size, dtype=np.int32 if g.m <= INT32_MAX else np.int64)
        self._ca = np.zeros(size, dtype=g.u.dtype)
        self._cb = np.zeros(size, dtype=g.u.dtype)

    def is_stable(self, graph, loads):
        # With threshold 1 only a state with equal loads across every edge is a fixed point.
        return bool(graph.m == 0 or np.abs(loads[graph.u] - loads[graph.v]).max() < self.threshold)

    def report(self):
        g = self._graph
        d = max(g.max_degree, 1)
        exact = single_port_selection_probability(g, self.p)
        out = {"candidate_probability": self.p, "lemma_3_2_bound_1_over_8d": 1.0 / (8 * d)}
        if g.m:
            out.update({"selection_probability_min": float(exact.min()),
                        "selection_probability_max": float(exact.max()),
                        "lemma_3_2_holds": bool(exact.min() >= 1.0 / (8 * d))})
            if self._steps:
                rate = self._selected / self._steps
                out.update({"observed_selection_rate_min": float(rate.min()),
                            "observed_selection_rate_mean": float(rate.mean()),
                            "observed_selection_rate_max": float(rate.max()),
                            "expected_selection_rate_mean": float(exact.mean())})
        return out

    # Partitioned form (tokendist.engine.mpi): the coin of edge e is counter_uniform(key, t, e)
    # with e the global edge id, so every rank flips the coins of its edges as the whole-graph
    # kernel does; a node's candidate count needs all its edges, which its owner has: the counts
    # of the ghosts come from their owners by a second halo exchange.
    #: Per-edge arrays summed over the ranks at the end of a partitioned run (each rank counts its own edges).
    partitioned_edge_sums = ("_selected",)

    def partitioned_refusal(self) -> str | None:
        if self.options["coins"] == "geometric":
            return ("coins=geometric draws the gaps between candidates one after the other over the whole edge "
                    "list; use coins=per-edge")
        return None

    def partitioned_step(self, t, part, loads):
        """One step on a rank's local graph; the owned entries of the result are the kernel's."""
        self._steps += 1
        g = part.graph
        cand = counter_uniform(self.key, t, part.edges) < self.p
        count = (np.bincount(g.u[cand], minlength=g.n) + np.bincount(g.v[cand], minlength=g.n)).astype(np.int64)
        part.exchange(count)
        matched = cand & (count[g.u] == 1) & (count[g.v] == 1)
        self._selected[part.edges[matched & part.edge_owned]] += 1
        diff = loads[g.u] - loads[g.v]
        s = (diff >= self.threshold).astype(np.int64) - (diff <= -self.threshold).astype(np.int64)
        new, outflow = _flows_and_outflow(g, loads, np.where(matched, s, 0))
        return Step(new, messages=4 * part.global_graph.m, outflow=outflow)

    def partitioned_is_stable(self, part, loads):
        g = part.graph
        return part.allreduce(g.m == 0 or np.abs(loads[g.u] - loads[g.v]).max() < self.threshold, "and")

    def selection_counts(self) -> np.ndarray:
        """How often each edge was in the matching so far (for statistical tests)."""
        return self._selected.copy()

    # Per-node form. The coin of edge e = (a, b), a < b, is counter_uniform(key, t, e); its owner a
    # flips it. Round 0: send my load and the set of my owned edges that are candidates. Round 1:
    # send how many candidate edges touch me. Decide: keep edge (me, j) iff it is a candidate and
    # both of us counted exactly one; the heavier end sends one token.
    def _owned_candidates(self, t, node):
        g = self._graph
        lo, hi = g.indptr[node], g.indptr[node + 1]
        if self.options["coins"] == "geometric":
            # Every node can replay the shared gap sequence (a pure function of key and t); the
            # cache only saves recomputing it for each node of the same process.
            if self._geo_cache[0] != t:
                self._geo_cache = (t, geometric_candidates(g.m, self.key, t, self.p))
            mask = self._geo_cache[1]
            coin = lambda e: bool(mask[e])  # noqa: E731
        else:
            coin = lambda e: counter_uniform_scalar(self.key, t, e) < self.p  # noqa: E731
        out = []
        for j, e in zip(g.indices[lo:hi].tolist(), g.csr_edges[lo:hi].tolist()):
            if j > node and coin(e):
                out.append(j)
        return frozenset(out)

    def _candidates(self, t, node, view):
        own = self._owned_candidates(t, node)
        return {j for j, (_, flagged) in view.received[0].items() if (j in own) or (j < node and node in flagged)}

    def publish(self, rnd, t, node, view):
        if rnd == 0:
            return (int(view.load), self._owned_candidates(t, node))
        return len(self._candidates(t, node, view))

    def decide(self, t, node, view):
        cands = self._candidates(t, node, view)
        if len(cands) != 1:
            return {}
        (j,) = cands
        if view.received[1][j] != 1:
            return {}
        return {j: 1} if view.load - view.received[0][j][0] >= self.threshold else {}


# ---------------------------------------------------------------------------------------------------
# ds: dynamic synchronous (Sec. 5)
# ---------------------------------------------------------------------------------------------------
ESTIMATES = ("exact", "zero", "random", "max")


def initial_estimates(graph, loads, how: str, rng) -> tuple[np.ndarray, np.ndarray]:
    """Initial estimates ``(e^u(v), e^v(u))`` per edge of ``graph`` (Sec. 5: "arbitrary").

    ``exact``: the true initial loads; ``zero``: 0; ``random``: independent uniform integers in
    ``[0, max load]``; ``max``: every node believes every neighbour holds the maximum initial load.
    All are non-negative, so a node sends a token only when it holds more than 12d (>= d) tokens
    and DS never overdraws.
    """
    m = graph.m
    if how == "exact":
        return loads[graph.v].astype(np.int64), loads[graph.u].astype(np.int64)
    if how == "zero":
        return np.zeros(m, np.int64), np.zeros(m, np.int64)
    top = int(loads.max()) if loads.size else 0
    if how == "random":
        return rng.integers(0, top + 1, size=m), rng.integers(0, top + 1, size=m)
    if how == "max":
        return np.full(m, top, np.int64), np.full(m, top, np.int64)
    raise TokendistError(f"unknown estimates {how!r}; choose from {', '.join(ESTIMATES)}")


@register_protocol
class DynamicSynchronous(Protocol):
    """DS, the dynamic synchronous multi-port algorithm with load estimates (Sec. 5).

    Every node u keeps an estimate e^u(v) of the load of each neighbour v (initially arbitrary:
    parameter ``estimates``). Each step, for each *live* neighbour v: (1) if ``w(u) - e^u(v) > 12d``
    u sends v a message with w(u) and a token, otherwise a message with w(u) only; (2) for each
    message received from a live neighbour v, u sets e^u(v) to the load the message carries and
    adds the token if there is one. Loads in the messages are those at the start of the step.
    Estimates live on the base graph's edges, so an edge that is down keeps its stale estimates.

    Deterministic, multi-port (a token may cross an edge in both directions in one step), dynamic.
    Theorem 5.1: if the live edges have edge expansion alpha every step, DS balances to within
    O(d^2 log n / alpha) in O(Delta / alpha) steps, for arbitrary initial estimates.

    References
    ----------
    B. Ghosh et al., CMU-CS-95-131, Sec. 5; W. Aiello et al., STOC 1993 [2].

    Notes
    -----
    ``threads=k`` (k > 1) runs the steps with per-node estimates (static networks, after the first
    step) on k numba threads; same loads, tokens moved and outflows, bit for bit. Steps with
    per-edge estimates (``estimates=random`` before the first step, dynamic networks) stay serial.
    On a torus or ring the serial per-node steps walk its offset stencil (``ds_step_nodes_stencil``):
    no index reads, SIMD, same results.
    """

    name = "ds"
    title = "DS: dynamic synchronous multi-port with estimates"
    paper = "Ghosh et al. 1995, Sec. 5"
    model = "multi-port"
    dynamic = True
    exchange_rounds = 1
    params = (Param("threshold", int, 0, "send when w(u) - e^u(v) exceeds this; 0 means 12d (the paper's)",
                    minimum=0),
              Param("estimates", str, "exact", "initial estimates e^u(v) (the paper: arbitrary)", ESTIMATES),
              Param("kernel", str, "numba", "numba (fast) or numpy (reference)", ("numba", "numpy")),
              THREADS_PARAM)

    def __init__(self, **params):
        super().__init__(**params)
        check_threads(self.name, self.options["threads"])

    def reset(self, graph, loads, rng):
        self._base = graph
        self.d = max(graph.max_degree, 1)
        t = self.options["threshold"]
        self.threshold = int(t) if t > 0 else 12 * self.d
        loads = np.asarray(loads)
        how = self.options["estimates"]
        # The per-node form starts from the same arbitrary estimates: keep what regenerates them
        # (the initial loads for ``exact``, a copy of the generator for ``random``) rather than a
        # second copy of the 2m estimates.
        rng0 = copy.deepcopy(rng) if how == "random" else None
        small = loads.size == 0 or (loads.min() >= INT32_MIN and loads.max() <= INT32_MAX)
        top = int(loads.max()) if loads.size else 0
        # ``exact`` needs the initial loads, ``random`` and ``max`` only their maximum.
        self._loads0 = loads.astype(np.int32 if small else np.int64) if how == "exact" else np.array([top])
        self._rng0 = rng0
        self._est0 = None
        # Two representations of the same estimates. Per node (``_prev``, n values, int32 while
        # they fit): every e^u(v) is the load v had at the start of the previous step, which holds
        # after any step on the whole base graph and initially for ``exact``, ``zero`` and ``max``. Per edge
        # (``_est_u``/``_est_v``, 2m values): arbitrary (``random``) initial estimates, and stale
        # ones after a step on a dynamic subgraph; int32 while every value fits.
        self._prev = self._next = self._est_u = self._est_v = None
        if how == "random":
            self._set_edge_estimates(*initial_estimates(graph, loads, how, rng))
        elif how == "exact":
            self._set_node_estimates(loads.astype(np.int64))
        else:
            self._set_node_estimates(np.full(graph.n, top if how == "max" else 0, dtype=np.int64))
        self._out = np.empty(graph.n, dtype=np.int64)
        # Rows of D slots when the graph is D-regular (the node kernel then reads no indptr).
        self._degree = _regular_degree(graph)
        self._stencil = _stencil_of(graph, self._degree, self.options["threads"], self.options["kernel"])
        # What each node sends, for the engine's feasibility check; allocated on first need (a
        # step that could overdraw, or per-edge estimates); a zero-size placeholder until then.
        self._outflow = np.zeros(0, dtype=np.int32)

    def _safe(self) -> bool:
        """True if no node can send more than it holds this step (per-node estimates only)."""
        return self._prev_nonneg and self.threshold >= self._base.max_degree - 1

    def _set_node_estimates(self, prev):
        # int32 while every value fits (widened after a step on a load that does not). ``_next``
        # receives the step's loads while the rows still read ``_prev``; the two then swap.
        small = prev.size == 0 or (prev.min() >= INT32_MIN and prev.max() <= INT32_MAX)
        self._prev = prev.astype(np.int32) if small else prev
        self._next = np.empty_like(self._prev)
        self._prev_nonneg = bool(prev.size == 0 or prev.min() >= 0)
        self._est_u = self._est_v = None

    def _set_edge_estimates(self, est_u, est_v, wide=False):
        small = not wide and all(a.size == 0 or (a.min() >= INT32_MIN and a.max() <= INT32_MAX) for a in (est_u, est_v))
        dtype = np.int32 if small else np.int64
        self._est_u = np.asarray(est_u, dtype=dtype)
        self._est_v = np.asarray(est_v, dtype=dtype)
        self._prev = self._next = None

    def _to_edges(self):
        """Switch to the per-edge representation (before a step on a subgraph, or the numpy reference)."""
        if self._prev is not None:
            g = self._base
            self._set_edge_estimates(self._prev[g.v], self._prev[g.u])

    @property
    def est_u(self) -> np.ndarray:
        """``e^u(v)`` per edge (u, v) of the base graph."""
        return self._prev[self._base.v] if self._prev is not None else self._est_u

    @property
    def est_v(self) -> np.ndarray:
        """``e^v(u)`` per edge (u, v) of the base graph."""
        return self._prev[self._base.u] if self._prev is not None else self._est_v

    def _initial_estimates(self):
        """The initial estimates ``(e^u(v), e^v(u))`` of this run, regenerated on first use."""
        if self._est0 is None:
            self._est0 = initial_estimates(self._base, self._loads0.astype(np.int64), self.options["estimates"],
                                           copy.deepcopy(self._rng0))
        return self._est0

    def _base_index(self, graph):
        """Base-graph edge of each edge of ``graph``; None when ``graph`` is the base graph."""
        if graph is self._base:
            return None
        if graph.base_edges is not None:
            return graph.base_edges
        if graph.m == self._base.m and np.array_equal(graph.u, self._base.u) and np.array_equal(graph.v,
                                                                                                self._base.v):
            return None
        idx = self._base.edge_index(graph.u, graph.v)
        if (idx < 0).any():
            e = int(np.flatnonzero(idx < 0)[0])
            # Sec. 5: the live edges of each step are a subset of one network's (failing edges);
            # a node's estimate of a neighbour it has never been linked to does not exist.
            raise TokendistError(f"ds: a step's graph has the edge ({int(graph.u[e])}, {int(graph.v[e])}), which is "
                                 "not in the base graph; ds runs on failing edges of one network "
                                 "(--edge-failure), not on mobility")
        return idx

    def step(self, t, graph, loads):
        b = self._base_index(graph)
        if self.options["kernel"] == "numpy":
            self._to_edges()
            return self._step_numpy(graph, loads, np.arange(graph.m) if b is None else b)
        out = self._out if self._out is not loads else np.empty_like(loads)
        if self._outflow.size != graph.n and not (b is None and self._prev is not None and self._safe()):
            self._outflow = np.zeros(graph.n, dtype=np.int32)
        if b is None and self._prev is not None:
            # Every estimate is >= min(prev): if that is >= 0 and the threshold >= d - 1, a node sends
            # only when it holds more than d - 1 tokens, so at least as many as its sends: no step
            # can overdraw and the engine needs no outflow (it still checks the sign of the loads).
            safe = self._safe()
            args = (graph.indptr, unsigned_view(graph.indices), self._degree, loads, self.threshold, self._prev,
                    self._next, out, None if safe else self._outflow)
            st = self._stencil if graph is self._base else None
            stencil_args = None if st is None else (args[1], self._degree, st.starts, st.ends, st.lower, st.upper,
                                                     *args[3:])
            if use_threads(self.name, self.options["threads"]):
                moved, flag = run_parallel(ds_step_nodes_par, self.options["threads"], *args)
            elif st is not None:
                # Offset stencil (a torus): the runs read no indices and vectorise; same results.
                moved, flag = ds_step_nodes_stencil(*stencil_args)
            else:
                moved, flag = ds_step_nodes(*args)
            self._prev, self._next = self._next, self._prev
            # The kernel flags a load below 0 or above INT32_MAX (rare): only then look at the loads.
            self._prev_nonneg = not flag or bool(loads.min() >= 0)
            if flag and self._prev.dtype == np.int32 and (loads.min() < INT32_MIN or loads.max() > INT32_MAX):
                # A load past int32 was truncated in the new prev: widen both buffers.
                self._prev = np.array(loads, dtype=np.int64)
                self._next = np.empty_like(self._prev)
            self._out = loads  # ping-pong buffers
            return Step(out, moved=int(moved), messages=2 * graph.m, outflow=None if safe else self._outflow)
        else:
            self._to_edges()
            while True:
                if b is None:
                    moved = ds_step(graph.u, graph.v, loads, self.threshold, self._est_u, self._est_v, out,
                                    self._outflow)
                else:
                    moved = ds_step_indexed(graph.u, graph.v, b, loads, self.threshold, self._est_u, self._est_v,
                                            out, self._outflow)
                if moved >= 0:
                    break
                # A load outside int32 (nothing was written): widen the estimates and redo the step.
                self._set_edge_estimates(self._est_u, self._est_v, wide=True)
            if b is None:
                # Every estimate was just refreshed with the start-of-step loads: back to n values.
                self._set_node_estimates(np.array(loads, dtype=np.int64))
        self._out = loads  # ping-pong buffers
        return Step(out, moved=int(moved), messages=2 * graph.m, outflow=self._outflow)

    def _step_numpy(self, graph, loads, b):
        """Reference (plain numpy, per-edge flows) of one DS step."""
        wu, wv = loads[graph.u], loads[graph.v]
        send_uv = (wu - self.est_u[b] > self.threshold).astype(np.int64)
        send_vu = (wv - self.est_v[b] > self.threshold).astype(np.int64)
        flows = send_uv - send_vu
        new = (loads - np.bincount(graph.u, weights=send_uv, minlength=graph.n).astype(np.int64)
               + np.bincount(graph.v, weights=send_uv, minlength=graph.n).astype(np.int64)
               - np.bincount(graph.v, weights=send_vu, minlength=graph.n).astype(np.int64)
               + np.bincount(graph.u, weights=send_vu, minlength=graph.n).astype(np.int64))
        # (2): the message from v carries w(v) at the start of the step.
        if self._est_u.dtype == np.int32 and loads.size and (loads.min() < INT32_MIN or loads.max() > INT32_MAX):
            self._set_edge_estimates(self._est_u, self._est_v, wide=True)
        self._est_u[b] = wv
        self._est_v[b] = wu
        return Step(new, moved=int(send_uv.sum() + send_vu.sum()), messages=2 * graph.m, flows=flows)

    def is_stable(self, graph, loads):
        g = self._base
        if g.m == 0:
            return True
        wu, wv = loads[g.u], loads[g.v]
        return bool(np.array_equal(self.est_u, wv) and np.array_equal(self.est_v, wu)
                    and np.abs(wu - wv).max() <= self.threshold)

    def state_key(self):
        # The per-edge estimates as int64 whichever representation holds them, so that equal
        # states give equal keys.
        return self.est_u.astype(np.int64).tobytes() + self.est_v.astype(np.int64).tobytes()

    def report(self):
        return {"threshold": self.threshold, "estimates": self.options["estimates"]}

    # Partitioned form (tokendist.engine.mpi): both estimates of every local edge kept by the rank.
    partitioned_setup = _partitioned.ds_setup
    partitioned_step = _partitioned.ds_step
    partitioned_is_stable = _partitioned.ds_is_stable
    partitioned_state_key = _partitioned.ds_state_key

    # Per-node form: publish my load; send a token to each contact j with w - e(j) > 12d; then
    # replace e(j) by the load j published.
    def publish(self, rnd, t, node, view):
        return int(view.load)

    def decide(self, t, node, view):
        est = view.memory.get("est")
        if est is None:
            g = self._base
            lo, hi = g.indptr[node], g.indptr[node + 1]
            est = {}
            for j, e in zip(g.indices[lo:hi].tolist(), g.csr_edges[lo:hi].tolist()):
                est0 = self._initial_estimates()
                est[j] = int(est0[0][e] if g.u[e] == node else est0[1][e])
            view.memory["est"] = est
        sends = {j: 1 for j in view.received[0] if view.load - est[j] > self.threshold}
        for j, w in view.received[0].items():
            est[j] = int(w)
        return sends


# ---------------------------------------------------------------------------------------------------
# async-multi-port: the asynchronous variant on the message-passing executor (Sec. 5)
# ---------------------------------------------------------------------------------------------------
SCHEDULES = ("sync", "random", "slow-tokens", "slow-edges")


class _AsyncNode:
    """Per-node handler of ``async-multi-port``.

    On each edge the two ends play ping-pong: each starts by sending one message, and every message
    received from v is answered by exactly one message to v. So exactly two messages are in transit
    on every edge at any time, possibly both in one direction (the paper's model, Sec. 1.1). A
    message carries the sender's load when it is sent and, if ``w(u) - e^u(v) > threshold``, one
    token; on receipt, ``e^u(v)`` becomes the carried load.
    """

    __slots__ = ("threshold", "est", "in_flight", "peer_flight")

    def __init__(self, threshold: int, est: dict):
        self.threshold = threshold
        self.est = est  # neighbour -> e^u(v)
        # neighbour -> deque of loads carried by my messages still in transit (a channel is FIFO,
        # so a delivery is always the oldest); one deque per neighbour, made once.
        self.in_flight = {j: deque() for j in est}
        # neighbour -> that neighbour's in_flight deque of its messages to me (linked by the protocol's
        # reset once every handler exists): the receiver retires the record of what it received.
        self.peer_flight: dict = {}

    def _send(self, ctx, j):
        w = int(ctx.load)
        token = 1 if w - self.est[j] > self.threshold else 0
        self.in_flight[j].append(w)
        ctx.send(j, ("load", w, token), token)

    def start(self, ctx):
        for j in ctx.neighbours.tolist():
            self._send(ctx, j)

    def receive(self, ctx, src, message, tokens):
        self.est[src] = message[1]
        flight = self.peer_flight[src]
        if flight:  # empty when the sender runs on another MPI rank, whose executor pops its record
            flight.popleft()
        self._send(ctx, src)


@register_protocol
class AsyncMultiPort(Protocol):
    """The asynchronous multi-port algorithm (Sec. 5, after [2]) on the message-passing executor.

    Each node u keeps an estimate e^u(v) per neighbour (initially ``estimates``). On every edge
    exactly two messages are in transit at all times: each end sends one at time 0 and answers
    every message it receives with one message. A message from u to v carries w(u) and, when
    ``w(u) - e^u(v) > 12d``, one token; on receipt v sets e^v(u) to the carried load. An adversary
    chooses the delays (``schedule``): ``sync`` (1), ``random`` (uniform 1..max_delay),
    ``slow-tokens`` (messages with a token take max_delay, others 1), ``slow-edges`` (a random half
    of the edges always take max_delay). The executor adds FIFO order and at most one delivery per
    channel per time unit.

    One engine step is one time unit of the executor; ``in_transit`` counts tokens in flight.

    References
    ----------
    B. Ghosh et al., CMU-CS-95-131, Sec. 5; W. Aiello et al., STOC 1993 [2].
    """

    static_reason = ("messages travel on the links of the start with adversarial delays (Sec. 5); a link "
                     "failing under a message in transit is not part of the model")
    name = "async-multi-port"
    title = "Asynchronous multi-port (DS on message passing)"
    paper = "Ghosh et al. 1995, Sec. 5"
    model = "message"
    params = (Param("threshold", int, 0, "send when w(u) - e^u(v) exceeds this; 0 means 12d", minimum=0),
              Param("estimates", str, "exact", "initial estimates e^u(v)", ESTIMATES),
              Param("schedule", str, "random", "the adversary choosing message delays", SCHEDULES),
              Param("max_delay", int, 3, "largest delay of the random and slow schedules", minimum=1,
                    maximum=10**9))

    # The random schedules draw from the seed; and the executor's state (messages in flight) is not
    # in the loads, so the engine's cycle detection must stay off even under the sync schedule.
    randomized = True
    # Without injection, step(t) only runs the executor to time t + 1: the engine may drive it.
    event_driven = True

    def reset(self, graph, loads, rng):
        self._graph = graph
        self.d = max(graph.max_degree, 1)
        t = self.options["threshold"]
        self.threshold = int(t) if t > 0 else 12 * self.d
        est_u, est_v = initial_estimates(graph, np.asarray(loads), self.options["estimates"], rng)
        handlers = []
        for i in range(graph.n):
            lo, hi = graph.indptr[i], graph.indptr[i + 1]
            est = {}
            for j, e in zip(graph.indices[lo:hi].tolist(), graph.csr_edges[lo:hi].tolist()):
                est[j] = int(est_u[e] if graph.u[e] == i else est_v[e])
            handlers.append(_AsyncNode(self.threshold, est))
        for i, h in enumerate(handlers):
            h.peer_flight = {j: handlers[j].in_flight[i] for j in h.est}
        self._handlers = handlers
        max_delay = int(self.options["max_delay"])
        if max_delay < 1:
            raise TokendistError("async-multi-port: max_delay must be at least 1")
        schedule = self.options["schedule"]
        if schedule == "sync":
            delay = "sync"
        elif schedule == "random":
            delay = "async"  # the executor's: int(rng.integers(1, max_delay + 1)) per message, drawn in blocks
        elif schedule == "slow-tokens":
            # Adversary: the messages that carry a token are the slow ones.
            def delay(src, dst, now, message):
                return max_delay if message[2] else 1
        else:
            slow = rng.random(graph.m) < 0.5
            eidx = {}
            for e in range(graph.m):
                eidx[(int(graph.u[e]), int(graph.v[e]))] = bool(slow[e])

            def delay(src, dst, now, message):
                return max_delay if eidx[(min(src, dst), max(src, dst))] else 1
        self.executor = MessageExecutor(graph, handlers, np.asarray(loads, dtype=np.int64), schedule=delay, rng=rng,
                                        max_delay=max_delay)
        self._moved = 0
        self._messages = 0
        self._last = np.asarray(loads, dtype=np.int64).copy()

    def step(self, t, graph, loads):
        ex = self.executor
        if self._last is not None and not np.array_equal(loads, self._last):
            # Tokens injected or consumed between steps (engine ``injection``): the nodes' holdings
            # change by the same amounts inside the executor.
            delta = np.asarray(loads, dtype=np.int64) - self._last
            ex.loads += delta
            ex.total += delta.sum()
        ex.run(until=t + 1)
        moved, messages = ex.tokens_moved - self._moved, ex.messages - self._messages
        self._moved, self._messages = ex.tokens_moved, ex.messages
        self._last = ex.loads.copy()
        return Step(self._last.copy(), moved=int(moved), messages=int(messages), in_transit=int(ex.in_transit))

    def is_stable(self, graph, loads):
        """No token in flight, every message in flight carries its sender's current load, and no edge
        differs by more than the threshold: then every future decision sees exact loads and sends nothing."""
        ex = self.executor
        if ex.in_transit:
            return False
        w = ex.loads
        for i, h in enumerate(self._handlers):
            for q in h.in_flight.values():
                if any(x != w[i] for x in q):
                    return False
        g = self._graph
        return bool(g.m == 0 or np.abs(w[g.u] - w[g.v]).max() <= self.threshold)

    def messages_in_transit_per_edge(self) -> np.ndarray:
        """Messages in transit on each edge now (the model allows at most two)."""
        g = self._graph
        out = np.zeros(g.m, dtype=np.int64)
        for i, h in enumerate(self._handlers):
            for j, q in h.in_flight.items():
                out[int(g.edge_index(i, j))] += len(q)
        return out

    def report(self):
        return {"threshold": self.threshold, "schedule": self.options["schedule"],
                **{f"executor_{k}": v for k, v in self.executor.stats().items() if k != "messages_by_kind"}}
