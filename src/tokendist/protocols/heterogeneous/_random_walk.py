"""The randomized two-phase algorithm of Elsässer, Monien and Schamberger (2006), Section 3.

Phase 1: integer FOS (flows rounded down, as ``fos-floor``) on the real tokens while every node also
runs the real-valued FOS on a copy of the initial loads; that simulation's loads estimate the ideal
loads ``wbar_i = W s_i / sum s``. At the switch point phase 2 starts: with the normalised speeds
``sbar_i = n s_i / sum s`` and ``R = {i : sbar_i < 1/3}``, node i's target is
``what_i = ceil(wbar_i)`` on R and ``ceil(wbar_i) + ceil(2 sbar_i)`` elsewhere (``wbar_i`` the
estimate). A node above its target marks ``w_i - what_i`` of its tokens; a node below it creates
``what_i - w_i`` "negative tokens". Then each step is a main random walk step (MRWS): every marked
and every negative token moves one step of the random walk with transition matrix M (from i to
neighbour j with probability ``c_ij / s_i``, staying with ``M_ii``); a negative token moving i -> j
moves one real token j -> i; a marked and a negative token on the same node annihilate (the marked
token becomes an ordinary token). Phase 2 ends when no marked token is left, i.e. every node holds at
most ``what_i`` tokens (the paper: "less than"; see the docs).

Conservation: the engine sees only real tokens, and they are conserved exactly (every move is a real
transfer across an edge). Negative tokens are bookkeeping: the invariant
``unmarked_i + negative_i = what_i`` holds on every node throughout phase 2, so the real load is
``w_i = what_i - negative_i + marked_i`` and ``negative - marked = sum(what) - W`` stays constant.

The published rule can overdraw: if more negative tokens walk onto a node in one step than it holds
unmarked tokens (possible only when ``what_i`` is small), that node must send more than it holds. This
is reported (``overdraw_events``), not repaired; hence ``may_go_negative``.
"""

from __future__ import annotations

import numpy as np

from ...engine import Param, Step, register_protocol
from ...errors import TokendistError
from ...graphs._model import unsigned_view
from ._rules import COMMON_PARAMS, KERNEL_PARAM, PAPER, HeterogeneousDiffusion
from ._matrix import apply_flows, check_diagonal, edge_coefficients, fos_flows, node_degrees
from ..._random import counter_uniform, stream_key
from ._random_walk_node import node_decide, node_phase_oracle, node_publish
from ._walk_targets import targets
from . import _random_walk_partitioned as _partitioned
from ...kernels._threads import THREADS_PARAM, check_threads, run_parallel
from .kernels._walk_serial import (edge_gap, fos_pair_regular, fos_pair_stencil, fos_pair_step, mrws_step,
                                                 token_index)
from .kernels._walk_cube import fos_pair_cube
from .kernels._walk_threaded import fos_pair_cube_par, fos_pair_par, fos_pair_regular_par, mrws_step_par
from ...kernels._report import instrument_kernels
from ...kernels._rows import sequential_sum

instrument_kernels(globals())  # every run reports which kernel ran each step (tokendist.kernels._report)

__all__ = ["RandomWalk", "walk_tokens", "targets", "token_index", "SWITCH_RULES"]

#: When phase 2 starts. ``error``: the real-valued estimate is within ``switch_tol`` of the ideal
#: loads in the max norm (the condition of the analysis, default tolerance 1/n^2; the simulation
#: evaluates it exactly, standing in for the termination detection the paper cites). ``local``: on
#: the step's graph every edge's weighted estimate difference ``|x_i - x_j|`` is at most ``switch_tol``
#: (a rule the nodes can check locally). ``step``: at step ``switch_step``.
SWITCH_RULES = ("error", "local", "step")

# Capacity 1 everywhere, read-only like a graph's own capacities: one compiled kernel for both.
_NO_CAPS = np.zeros(0)
_NO_CAPS.flags.writeable = False
_EMPTY_F = np.zeros(0)


def walk_tokens(counts: np.ndarray, graph, alpha: np.ndarray, s: np.ndarray, key: int = 0, step: int = 0,
                kind: int = 0, draws: np.ndarray | None = None):
    """One random-walk step by M for ``counts[i]`` tokens on each node i (vectorised over tokens).

    A token on i moves to neighbour j with probability ``c_ij / s_i`` and stays with
    ``M_ii = 1 - sum_j c_ij / s_i``: column i of the column-stochastic M (the paper's footnote 1: M is
    the transition matrix, its stationary distribution the right eigenvector ``s``).

    Token k of node i draws ``u = counter_uniform(key, step, token_index(i, kind, k))`` (``draws``,
    one per token in node order, replaces them in tests). It stays when ``u < M_ii``, else takes
    the first slot whose boundary ``M_ii + cum_k`` exceeds u, ``cum_k`` row i's probabilities summed
    from 0 in slot order (the last boundary pinned to 1): the numba kernel's and the node rule's
    operations, in the same order (a loop over slot positions, vectorised over nodes).

    Returns
    -------
    new_counts : ndarray of int64
        Tokens on each node after the step.
    slot_moves : ndarray of int64, shape (2m,)
        Tokens that moved along each CSR slot (from the slot's row to ``graph.indices[slot]``).
    """
    n = graph.n
    counts = np.asarray(counts, dtype=np.int64)
    total = int(counts.sum())
    slot_moves = np.zeros(graph.indptr[-1], dtype=np.int64)
    if total == 0:
        return counts.copy(), slot_moves
    deg = np.diff(graph.indptr)
    row = np.repeat(np.arange(n), deg)
    p = alpha[graph.csr_edges] / s[row]
    # Row-local running sums, position by position (sequential within each row, as a node adds them).
    cum = np.empty_like(p)
    acc = np.zeros(n)
    for q in range(int(deg.max()) if n else 0):
        has = deg > q
        slot = graph.indptr[:-1][has] + q
        acc[has] = acc[has] + p[slot]
        cum[slot] = acc[has]
    stay = 1.0 - acc
    bound = stay[row] + cum
    src = np.repeat(np.arange(n), counts)
    if draws is None:
        k = np.arange(total) - np.repeat(np.cumsum(counts) - counts, counts)
        draws = counter_uniform(key, step, token_index(src, kind, k))
    u = np.asarray(draws, dtype=np.float64)
    moving = u >= stay[src]
    walkers, uw = src[moving], u[moving]
    # The first slot of the walker's row with a boundary above u; the last slot's boundary is 1.
    slots = graph.indptr[walkers].copy()
    for q in range(int(deg.max()) - 1 if n else 0):
        ok = deg[walkers] - 1 > q
        idx = np.where(ok, graph.indptr[walkers] + q, 0)
        slots += ok & (bound[idx] <= uw)
    slot_moves = np.bincount(slots, minlength=graph.indptr[-1]).astype(np.int64)
    new = np.bincount(src[~moving], minlength=n) + np.bincount(graph.indices[slots], minlength=n)
    return new.astype(np.int64), slot_moves


def _slot_signs(graph) -> np.ndarray:
    """+1 where a CSR slot goes from ``u[e]`` to ``v[e]`` (a positive flow), -1 otherwise."""
    row = np.repeat(np.arange(graph.n), np.diff(graph.indptr))
    return np.where(graph.u[graph.csr_edges] == row, 1, -1)


@register_protocol
class RandomWalk(HeterogeneousDiffusion):
    """Randomized two-phase algorithm: integer FOS, then random walks of marked and negative tokens.

    Phase 1 runs integer FOS while simulating real-valued FOS to estimate the ideal loads; at the
    switch point (``switch``, default: estimate within ``1/n^2`` of the ideal loads) each node
    compares its load with ``what_i`` (``ceil(wbar_i) + ceil(2 sbar_i)``, or ``ceil(wbar_i)`` on slow
    nodes ``sbar_i < 1/3``), marks its excess tokens or creates negative tokens for its deficit, and
    both kinds walk by M and annihilate when they meet, until no marked token is left.

    ``kernel=numba`` (default) runs both phases in the loops of
    :mod:`._heterogeneous_random_walk_kernels` (same loads, counts and coins as the reference);
    ``kernel=numpy`` is the reference. With numba, ``marked`` and ``negative`` are empty arrays
    until phase 2 starts. Phase 1 on a regular graph with one coefficient runs ``fos_pair_regular``,
    ``fos_pair_cube`` on ``hypercube:d`` (d >= 3; :mod:`._heterogeneous_random_walk_cube`), or
    ``fos_pair_stencil`` on a graph with an offset stencil (tori, rings; from the second step on
    the same graph object), the same bits. ``threads=k`` (k > 1, opt-in) runs both phases'
    kernels on k threads (:mod:`._heterogeneous_random_walk_parallel`), with the same loads,
    estimate, counts and trace bit for bit. The walk's coins are counter-based: token k of kind ``kind`` (0 marked,
    1 negative) on node i draws ``counter_uniform(key, t, token_index(i, kind, k))``.

    Per-node form (:mod:`._heterogeneous_random_walk_node`, two exchange rounds): what node i
    does with its load, estimate and walking tokens given its neighbours' messages; the phase of
    each step (the global switch rules and the end of phase 2, left by the paper to termination
    detection) comes from a termination oracle on the engine side.

    References
    ----------
    Elsässer, Monien, Schamberger 2006, Sec. 3 (the algorithm, Theorem 2) and Sec. 4 (the switch).
    """

    name = "random-walk"
    def reference_exact(self, graph) -> bool:
        """The numpy step gives the serial kernels' run bit for bit, report included (its squared
        estimate error summed in node order as they sum it); tokendist.kernels._choice."""
        return self.options["threads"] == 1

    title = "Randomized algorithm: integer FOS, then random walks of marked and negative tokens"
    paper = f"{PAPER}, Sec. 3"
    randomized = True
    may_go_negative = True
    exchange_rounds = 2  # per-node form: (load, degree, estimate), then the token moves
    params = COMMON_PARAMS + (
        Param("switch", str, "error", "when phase 2 starts: error (estimate's max error <= switch_tol), local "
              "(every edge's weighted estimate difference <= switch_tol) or step (at switch_step)", SWITCH_RULES),
        Param("switch_tol", float, 0.0, "tolerance of the switch rule; 0: 1/n^2 (Sec. 3)", minimum=0),
        Param("switch_step", int, 0, "the step at which phase 2 starts with switch=step", minimum=0),
        KERNEL_PARAM,
        THREADS_PARAM,
    )

    def reset(self, graph, loads, rng):
        super().reset(graph, loads, rng)
        n = graph.n
        self._s = np.ascontiguousarray(self._s)  # the numba kernels read it: an array of its own
        self.tol = self.options["switch_tol"] or 1.0 / n**2
        if self.tol < 0 or self.options["switch_step"] < 0:
            raise TokendistError(f"{self.name}: switch_tol and switch_step must be non-negative")
        check_threads(self.name, self.options["threads"])
        self.phase = 1
        self.estimate = loads.astype(np.float64)
        self._total = float(loads.sum())
        self._ssum = float(self._s.sum())
        self.switch_at = None
        self.done_at = None
        self.what = None
        self.series = {"marked": [], "negative": [], "estimate_l2_error": [], "estimate_max_weighted_load": []}
        self.overdraw_events = 0
        self.annihilated = 0
        # The walk's coins: counter_uniform(key, t, token_index(i, kind, k)) (see walk_tokens).
        self._key = stream_key(rng)
        self._oracle = None  # the node form's termination oracle, built on first use
        self.initial_marked = self.initial_negative = 0
        # Numba path: coefficients and row offsets, cached per graph object; scratch buffers.
        self._deg_graph = self._coefs = None
        self._regular = 0  # D when the graph is D-regular with one coefficient (fos_pair_regular)
        self._st_graph = self._st = None  # the graph whose stencil _stencil_of looked up, and the stencil
        self._unit_speeds = bool(np.all(self._s == 1.0))
        self._xw = self._xe = self._outflow = None
        self._walk_bufs = None
        self._load_bufs = None
        ideal = self._total * self._s / self._s.sum()
        sbar = self._s * (n / self._s.sum())
        if self._fast():
            # Empty until phase 2; the ideal loads and sbar are recomputed inside the kernel.
            self.marked = np.zeros(0, dtype=np.int64)
            self.negative = np.zeros(0, dtype=np.int64)
        else:
            self.ideal, self.sbar = ideal, sbar
            self.marked = np.zeros(n, dtype=np.int64)
            self.negative = np.zeros(n, dtype=np.int64)
        e = self.estimate - ideal
        self._max_err = float(np.abs(e).max()) if n else 0.0
        self._est_l2 = float(np.sqrt(np.square(e).sum()))
        self._est_max = float((self.estimate / sbar).max())

    # ------------------------------------------------------------------ phase switch
    def _ready(self, t, graph) -> bool:
        rule = self.options["switch"]
        if rule == "step":
            return t >= self.options["switch_step"]
        if rule == "error":
            if self._fast():
                return self._max_err <= self.tol  # computed by the last phase-1 kernel call
            return float(np.abs(self.estimate - self.ideal).max()) <= self.tol
        if graph.m == 0:
            return True
        if self._fast():
            self._scratch(graph.n)
            return edge_gap(graph.indptr, graph.indices, self.estimate, self._s, self._xe) <= self.tol
        x = self.estimate / self._s
        return float(np.abs(x[graph.u] - x[graph.v]).max()) <= self.tol

    def _prepare(self, t, loads):
        """The preparation step of phase 2: targets, marked and negative tokens (Sec. 3)."""
        self.what, self.slow = targets(self.estimate, self._s)
        self.marked = np.maximum(loads - self.what, 0).astype(np.int64)
        self.negative = np.maximum(self.what - loads, 0).astype(np.int64)
        self.initial_marked, self.initial_negative = int(self.marked.sum()), int(self.negative.sum())
        self.switch_at = t
        self.phase = 2
        if self._fast():
            self._xw = self._xe = None  # the phase-1 scratch is no longer needed

    def _record_estimate(self):
        e = self.estimate - self.ideal
        self._est_l2 = float(np.sqrt(sequential_sum(np.square(e))))  # in node order, as the kernels sum it
        self._est_max = float((self.estimate / self.sbar).max())

    def _record(self):
        self.series["marked"].append(int(self.marked.sum()))
        self.series["negative"].append(int(self.negative.sum()))
        self.series["estimate_l2_error"].append(self._est_l2)
        self.series["estimate_max_weighted_load"].append(self._est_max)

    # ------------------------------------------------------------------ numba path: per-graph state
    def _scratch(self, n):
        """``xw`` (``loads / s``; empty when every speed is 1) and ``xe`` (``estimate / s``)."""
        if self._xe is None or self._xe.shape[0] != n:
            self._xe = np.empty(n)
            self._xw = _EMPTY_F if self._unit_speeds else np.empty(n)

    def _out_buffer(self, loads):
        """The output loads: two own buffers used in turn (Step.loads may be the protocol's buffer;
        the engine copies what it keeps), never the input, so no allocation per step."""
        b = self._load_bufs
        if b is None or b[0].shape != loads.shape:
            b = self._load_bufs = [np.empty_like(loads), np.empty_like(loads)]
        return b[0] if b[0] is not loads else b[1]

    def _graph_state(self, graph):
        """``(a0, inv, deg, caps)``: the coefficients of ``graph`` for the kernels (see ``_coef``).

        Cached per graph object and validated like the reference's ``_alpha`` (the diagonal of M).
        No per-edge array is kept: a scalar on regular graphs, ``1 / (c d_i)`` per node otherwise,
        degrees and the graph's own capacities when it has capacities.
        """
        if graph is self._deg_graph:
            return self._coefs
        c = self.options["c"]
        base = None if self.options["adapt_degrees"] else node_degrees(self._base)
        alpha = edge_coefficients(graph, c, base)
        check_diagonal(graph, alpha, self._s, name=self.name, c=c, allow=self.options["allow_invalid"])
        del alpha  # validation only: the kernels compute each coefficient when they need it
        d = node_degrees(graph) if base is None else base
        if graph.capacities is not None:
            coefs = (0.0, _EMPTY_F, d, graph.capacities)
        else:
            with np.errstate(divide="ignore"):
                inv = 1.0 / (c * d)  # inf on isolated nodes, which have no slot to use it
            if graph.n and np.all(inv == inv[0]):
                coefs = (float(inv[0]), _EMPTY_F, _EMPTY_F, _NO_CAPS)
            else:
                coefs = (0.0, inv, _EMPTY_F, _NO_CAPS)
        # The regular path of phase 1: D slots per row, one coefficient (torus, hypercube).
        d = np.diff(graph.indptr)
        scalar = coefs[1].shape[0] == 0 and coefs[3].shape[0] == 0
        self._regular = int(d[0]) if graph.n and scalar and d[0] > 0 and bool(np.all(d == d[0])) else 0
        self._deg_graph, self._coefs = graph, coefs
        return coefs

    def _stencil_of(self, graph):
        """The offset stencil of ``graph`` for :func:`fos_pair_stencil`, or None.

        Looked up at the second phase-1 step on the same graph object (at the first if the graph
        has already computed it) and kept: a dynamic run (a new graph object every step) never pays
        ``find_stencil``'s pass, which can cost more than a step (about 0.3 s on
        random-regular:1000000,4, which has no stencil). Only stencils with neighbours on both
        sides qualify (the kernel's two offset tuples are non-empty).
        """
        if graph is not self._st_graph:
            # First step on this graph: the regular kernel unless Graph.stencil is already cached.
            self._st_graph, self._st = graph, vars(graph).get("stencil", False)
        elif self._st is False:
            self._st = graph.stencil
        st = self._st
        if st is False or st is None or not (st.lower and st.upper):
            return None
        return st

    # ------------------------------------------------------------------ steps
    def step(self, t, graph, loads):
        if not self._fast():
            return self._step_numpy(t, graph, loads)
        loads = np.ascontiguousarray(loads, dtype=np.int64)
        coefs = self._graph_state(graph)
        if self._outflow is None or self._outflow.shape[0] != graph.n:
            self._outflow = np.empty(graph.n, dtype=np.int64)
        if self.phase == 1 and self._ready(t, graph):
            self._prepare(t, loads)
            if self.marked.sum() == 0:
                self.phase, self.done_at = 3, t
        if self.phase == 1:
            self._scratch(graph.n)
            out = self._out_buffer(loads)
            est = self.estimate
            a0, inv, deg, caps = coefs
            if self._unit_speeds:
                # x = w / s is w itself: the kernel reads the loads, and the estimate ping-pongs
                # between two arrays (no snapshot pass).
                xw, xe, dst, s = loads, est, self._xe, None
            else:
                xw = np.divide(loads, self._s, out=self._xw)
                xe, dst, s = np.divide(est, self._s, out=self._xe), est, self._s
            ix, D, threads = unsigned_view(graph.indices), self._regular, self.options["threads"]
            if threads > 1 and D >= 3 and graph.cube_dimension == D:  # same results bit for bit
                res = run_parallel(fos_pair_cube_par, threads, D, a0, s, self._ssum, self._total, loads, xw, est, xe,
                                   dst, out, self._outflow)
            elif threads > 1 and D:  # same results bit for bit (see _heterogeneous_random_walk_parallel)
                res = run_parallel(fos_pair_regular_par, threads, ix, D, a0, s, self._ssum, self._total, loads, xw,
                                   est, xe, dst, out, self._outflow)
            elif threads > 1:
                res = run_parallel(fos_pair_par, threads, graph.indptr, ix, graph.csr_edges, a0,
                                   inv if inv.shape[0] else None, deg if caps.shape[0] else None,
                                   caps if caps.shape[0] else None, self.options["c"], s, self._ssum, self._total,
                                   loads, xw, est, xe, dst, out, self._outflow)
            elif D >= 3 and graph.cube_dimension == D:  # same results bit for bit
                res = fos_pair_cube(D, a0, s, self._ssum, self._total, loads, xw, est, xe, dst, out, self._outflow)
            elif D and (st := self._stencil_of(graph)) is not None:  # same results bit for bit
                res = fos_pair_stencil(ix, st.starts, st.ends, st.lower, st.upper, a0, s, self._ssum, self._total,
                                       loads, xw, est, xe, dst, out, self._outflow)
            elif D:
                res = fos_pair_regular(ix, D, a0, s, self._ssum, self._total, loads, xw, est, xe, dst, out,
                                       self._outflow)
            else:
                res = fos_pair_step(graph.indptr, ix, graph.csr_edges, a0, inv if inv.shape[0] else None,
                                    deg if caps.shape[0] else None, caps if caps.shape[0] else None, self.options["c"],
                                    s, self._ssum, self._total, loads, xw, est, xe, dst, out, self._outflow)
            moved, self._max_err, sq, self._est_max = res
            if self._unit_speeds:
                self.estimate, self._xe = dst, est
            self._est_l2 = float(np.sqrt(sq))
            self._record()
            return Step(out, moved=int(moved), messages=2 * graph.m, outflow=self._outflow, info={"phase": 1})
        if self.phase == 3:
            self._record()
            self._outflow[:] = 0
            return Step(loads.copy(), moved=0, messages=0, outflow=self._outflow, info={"phase": 3})
        return self._mrws_fast(t, graph, coefs, loads)

    def _mrws_fast(self, t, graph, coefs, loads):
        """One main random walk step in :func:`mrws_step` (same coins and counts as :meth:`_mrws`)."""
        n = graph.n
        b = self._walk_bufs
        walkers = self.initial_marked + self.initial_negative  # annihilation only lowers the count
        maxdeg = int(np.diff(graph.indptr).max()) if n else 0
        threads = self.options["threads"]
        if b is None or b["m"] != graph.m or b["g"].shape[0] < maxdeg:
            # Per-node counts and net real tokens per edge are at most the number of walkers: int32
            # unless there are 2^31 of them. threads > 1: moves per edge direction (2m each) in place
            # of the net flow (see _heterogeneous_random_walk_parallel).
            dt = np.int32 if walkers < 2**31 else np.int64
            b = self._walk_bufs = {"m": graph.m, "new_m": np.empty(n, dt), "new_n": np.empty(n, dt),
                                   "need": np.empty(n, dt), "g": np.empty(max(maxdeg, 1))}
            if threads > 1:
                b["dm"], b["dn"] = np.empty(2 * graph.m, dt), np.empty(2 * graph.m, dt)
            else:
                b["net"] = np.zeros(graph.m, dt)
        out = self._out_buffer(loads)
        if threads > 1:
            moved, messages, overdraws, gone, left_m, left_n = run_parallel(
                mrws_step_par, threads, graph.indptr, unsigned_view(graph.indices), graph.csr_edges, *coefs,
                self.options["c"], self._s, self._key, t, self.marked, self.negative, b["new_m"], b["new_n"], loads,
                out, self._outflow, b["need"], b["dm"], b["dn"], maxdeg)
        else:
            moved, messages, overdraws, gone, left_m, left_n = mrws_step(
                graph.indptr, graph.indices, graph.csr_edges, graph.u, graph.v, *coefs, self.options["c"], self._s,
                self._key, t, self.marked, self.negative, b["new_m"], b["new_n"], loads, out, self._outflow,
                b["need"], b["net"], b["g"])
        self.overdraw_events += int(overdraws)
        self.annihilated += int(gone)
        if left_m == 0:
            self.phase, self.done_at = 3, t + 1
        self._record()
        return Step(out, moved=int(moved), messages=int(messages), outflow=self._outflow,
                    info={"phase": 2, "marked": int(left_m), "negative": int(left_n)})

    # ------------------------------------------------------------------ numpy reference
    def _step_numpy(self, t, graph, loads):
        alpha = self._alpha(graph)
        if self.phase == 1 and self._ready(t, graph):
            self._prepare(t, loads)
            if self.marked.sum() == 0:
                self.phase, self.done_at = 3, t
        if self.phase == 1:
            # Integer FOS on the tokens and real FOS on the estimate, over the same edges.
            y = np.trunc(fos_flows(graph, alpha, self._s, loads))
            self.estimate = apply_flows(graph, self.estimate, fos_flows(graph, alpha, self._s, self.estimate))
            self._record_estimate()
            new = apply_flows(graph, loads, y)
            self._record()
            return Step(new, moved=int(np.abs(y).sum()), messages=2 * graph.m, flows=y, info={"phase": 1})
        if self.phase == 3:
            self._record()
            return Step(loads.copy(), moved=0, messages=0, flows=np.zeros(graph.m), info={"phase": 3})
        return self._mrws(t, graph, alpha, loads)

    def _mrws(self, t, graph, alpha, loads):
        """One main random walk step: every marked and negative token walks once, then annihilation."""
        new_marked, marked_moves = walk_tokens(self.marked, graph, alpha, self._s, self._key, t, 0)
        new_negative, negative_moves = walk_tokens(self.negative, graph, alpha, self._s, self._key, t, 1)
        # Real tokens: a marked token i -> j moves a token i -> j; a negative token i -> j moves one j -> i.
        sign = _slot_signs(graph)
        flows = np.bincount(graph.csr_edges, weights=sign * (marked_moves - negative_moves),
                            minlength=graph.m)
        flows = np.rint(flows).astype(np.int64)
        row = np.repeat(np.arange(graph.n), np.diff(graph.indptr))
        # Real tokens each node must send: its marked tokens leaving plus one per negative token arriving.
        need = np.bincount(row, weights=marked_moves, minlength=graph.n) + np.bincount(
            graph.indices, weights=negative_moves, minlength=graph.n)
        self.overdraw_events += int(np.count_nonzero(need > loads))
        gone = np.minimum(new_marked, new_negative)
        self.annihilated += int(gone.sum())
        self.marked = new_marked - gone
        self.negative = new_negative - gone
        new = apply_flows(graph, loads, flows)
        if self.marked.sum() == 0:
            self.phase, self.done_at = 3, t + 1
        self._record()
        return Step(new, moved=int(np.abs(flows).sum()), messages=int(marked_moves.sum() + 2 * negative_moves.sum()),
                    flows=flows, info={"phase": 2, "marked": int(self.marked.sum()),
                                       "negative": int(self.negative.sum())})

    def is_stable(self, graph, loads):
        return self.phase == 3

    # Partitioned form (tokendist.engine.mpi): phase 1 in the serial kernel on a rank's local
    # graph, phase 2's tokens walked by the rank owning their node, one hop per step, the moves
    # across a cut edge sent to the other end's rank (:mod:`._random_walk_partitioned`).
    partitioned_setup = _partitioned.walk_setup
    partitioned_step = _partitioned.walk_step
    partitioned_is_stable = _partitioned.walk_is_stable
    partitioned_finish = _partitioned.walk_finish

    # ------------------------------------------------------------------ per-node form
    # See :mod:`._heterogeneous_random_walk_node` (what one node does; the termination oracle).
    def publish(self, rnd, t, node, view):
        return node_publish(self, rnd, t, node, view)

    def decide(self, t, node, view):
        return node_decide(self, t, node, view)

    def _node_phase(self, t):
        return node_phase_oracle(self, t)

    def report(self):
        return {
            "phase": self.phase, "switch_step": self.switch_at, "done_step": self.done_at,
            "switch_rule": self.options["switch"], "switch_tol": self.tol,
            "initial_marked": self.initial_marked, "initial_negative": self.initial_negative,
            "marked": int(self.marked.sum()), "negative": int(self.negative.sum()),
            "annihilated": self.annihilated, "overdraw_events": self.overdraw_events,
            "slow_nodes": None if self.what is None else int(self.slow.sum()),
            "targets_total": None if self.what is None else int(self.what.sum()),
            "series": self.series,
        }
