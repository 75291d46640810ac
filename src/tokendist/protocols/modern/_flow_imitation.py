"""Flow imitation (Akbari, Berenbrink, Sauerwald, PODC 2012): a discrete process that follows a continuous one.

A continuous process (divisible load) runs alongside; each edge keeps its cumulative continuous
flow ``F_e`` and its cumulative discrete flow ``D_e`` and sends, every step, the whole tokens that
bring ``D_e`` to ``F_e`` rounded towards zero, so that ``|F_e - D_e| < 1`` on every edge.
"""

from __future__ import annotations

import numpy as np

from ..._random import stream_key
from ...engine import Param, Protocol, Step, register_protocol
from ...errors import TokendistError
from ...graphs import edge_colouring
from ...graphs._model import unsigned_view
from ...graphs._stencil import lower_edge_runs
from ...engine._cycles import NO_TABLE
from ...kernels._report import block_kernel_ready, instrument_kernels, kernel_label
from ...kernels._rows import RowOrder
from ._common import edge_coefficients, matrix_param
from ._matching import random_matching
from .kernels._flow_imitation import (FOS, MATCHED, SOS, flow_imitation_stencil_step, flow_imitation_step,
                                     flow_imitation_step_uniform)
from .kernels._flow_imitation import flow_imitation_stencil_steps as _flow_imitation_stencil_steps

instrument_kernels(globals())  # runs report which kernel ran each step

__all__ = ["FlowImitation"]

_STENCIL_VARIANT = kernel_label(flow_imitation_stencil_step)

_PROCESSES = ("fos", "sos", "circuit", "random-matching")
#: float64 adds integers exactly while every partial sum stays below this: the numpy step then takes
#: its cheaper forms (the tests set it to 0 to compare them with the plain ones).
_EXACT_SUMS = 2**53
_GUARDS = ("on", "off")


class _EdgeOrder(RowOrder):
    """The reference step's view of a graph: :class:`RowOrder` (exact int64 sums per CSR slot) and
    the edge ends as ``intp`` (numpy converts int32 indices on every gather and bincount)."""

    def __init__(self, graph):
        super().__init__(graph)
        self.m = graph.m
        self.ends = np.stack((graph.u, graph.v)).astype(np.intp)
        self.u, self.v = self.ends


@register_protocol
class FlowImitation(Protocol):
    """Flow imitation: every edge sends whole tokens so that its cumulative flow tracks a continuous process's.

    Notes
    -----
    The rule (Akbari, Berenbrink, Sauerwald, "A simple approach for adapting continuous load balancing
    processes to discrete settings", PODC 2012; as specified here; the paper's text was not
    consulted): run the continuous process C from the same start; let ``F_e(t)``
    be C's cumulative flow over edge e after t steps and ``D_e(t)`` the discrete one. In step t every
    edge sends ``D_e(t) - D_e(t-1)`` tokens with ``D_e(t) = trunc(F_e(t))`` (rounded towards zero),
    hence ``|F_e - D_e| < 1`` and every discrete load is within ``deg(i)`` of the continuous load
    (speeds: of ``s_i`` times the continuous balanced share). Claim: once C is balanced, the maximum
    load minus the average is at most ``2d`` (unit tokens, d the maximum degree), on tori,
    hypercubes and random regular graphs alike.

    ``process``: ``fos`` (default; first-order diffusion, ``P_ij`` from ``matrix``, with speeds the
    flow ``alpha_ij (xi_i / s_i - xi_j / s_j)`` with ``alpha_ij = min(s_i, s_j) P_ij``), ``sos``
    (second-order: ``f(t) = (beta - 1) f(t-1) + beta alpha (xi_i/s_i - xi_j/s_j)``, ``beta``),
    ``circuit`` (continuous balancing circuit over the colour classes of an edge colouring),
    ``random-matching`` (a fresh random matching per round, edge-coin drawing). ``guard=on``
    (default): a node never sends more than it holds; the edges it cannot pay stay behind their
    continuous flow for a step (the report counts the tokens held back: ``|F_e - D_e|`` may then
    exceed 1 for a while). ``guard=off``: the published rule, which may overdraw (needs
    ``allow_infeasible``).

    References
    ----------
    H. Akbari, P. Berenbrink, T. Sauerwald, A simple approach for adapting continuous load balancing
    processes to discrete settings, PODC 2012 (Distributed Computing 29, 2016).

    Examples
    --------
    >>> import tokendist as td
    >>> r = td.simulate("torus:8x8", "flow-imitation", "point:6400", seed=1, max_steps=600)
    >>> r.tokens, int(r.loads.max() - 100) <= 2 * 4
    (6400, True)
    """

    name = "flow-imitation"
    uses_speeds = True
    exact_load_limit = 2**53  # the continuous process runs in float64
    static_reason = "the continuous process it imitates runs on the network of the start, with one cumulative flow per edge"
    title = "Flow imitation of a continuous process"
    paper = "Akbari, Berenbrink, Sauerwald, PODC 2012"
    model = "flow"
    params = (Param("process", str, "fos", "the continuous process imitated", _PROCESSES),
              matrix_param("degree"),
              Param("beta", float, 1.5, "SOS parameter beta (process=sos), 0 < beta < 2"),
              Param("guard", str, "on", "on: never send more than a node holds; off: the published rule "
                    "(may overdraw, needs allow_infeasible)", _GUARDS),
              Param("kernel", str, "numba", "numba (one pass in edge order) or numpy (the reference step)",
                    ("numba", "numpy")))

    def reset(self, graph, loads, rng):
        beta = self.options["beta"]
        if not 0 < beta < 2:
            raise TokendistError(f"{self.name}: beta={beta}: SOS needs 0 < beta < 2")
        self._graph = graph
        s = graph.speeds
        self._speeds = np.ones(graph.n) if s is None else np.asarray(s, dtype=float)
        alpha = edge_coefficients(graph, self.options["matrix"])
        if s is not None and graph.m:
            alpha = alpha * np.minimum(self._speeds[graph.u], self._speeds[graph.v])
        # One value when every P_ij is the same (tori, hypercubes, max-degree, uniform:W): 8 bytes
        # per edge less, and the same products (a scalar broadcast is the same multiplication).
        self._alpha = alpha[0] if alpha.size and bool(np.all(alpha == alpha[0])) else alpha
        # D, F and xi side by side in one buffer, so that the state key is one copy (state_key). Two
        # such buffers: the stencil kernel reads one and writes the next step's state into the other.
        m, n = graph.m, graph.n
        self._bufs = np.zeros((2, 8 * (2 * m + n)), dtype=np.uint8)
        self._views = tuple((b[:8 * m].view(np.int64), b[8 * m:16 * m].view(np.float64), b[16 * m:].view(np.float64))
                            for b in self._bufs)
        self._cur = 0
        # D (see the property): cumulative discrete flow u -> v; F: cumulative continuous flow u -> v;
        # xi: the continuous process, run alongside
        self.D, self.F, self.xi = self._views[0]
        self.xi[:] = loads
        # D = trunc(F) on every edge (exactly: each step that leaves an edge behind its continuous flow
        # clears it, each that pays every edge in full sets it): the stencil kernel may run, and the
        # state key leaves D out.
        self._d_is_trunc = True
        self._d_stale = False  # True: the stencil kernel ran, D (= trunc(F)) is not written yet
        self._without_d = slice(8 * m, None)  # F and xi in a state buffer
        proc = self.options["process"]
        self._prev = np.zeros(graph.m) if proc == "sos" else None  # SOS: the previous step's flow
        self._key = stream_key(rng)
        self._kernel_state(graph)
        if proc == "circuit":
            self._colours = edge_colouring(graph) if graph.m else np.zeros(0, dtype=np.int64)
            self.period = int(self._colours.max()) + 1 if graph.m else 1
        self._messages = 2 * m
        self.held_back = 0
        self.max_gap = 0.0
        self._order = None  # the numpy step's _EdgeOrder (exact int64 row sums), made at its first step

    @property
    def D(self) -> np.ndarray:
        """The cumulative discrete flow per edge, ``u -> v``.

        The stencil kernel does not write it while every edge's ``D_e`` equals ``trunc(F_e)`` (it then
        follows from ``F``; on a large torus writing it would be a sixth more memory traffic a step); it
        is brought up to date here, and before any step that reads it.
        """
        if self._d_stale:
            np.copyto(self._D, np.trunc(self.F), casting="unsafe")  # trunc(F_e), as an int64 conversion
            self._d_stale = False
        return self._D

    @D.setter
    def D(self, value):
        self._D = value
        self._d_stale = False

    def _kernel_state(self, graph):
        # The compiled step's inputs: each node's group of edges (u = i), scratch per node (left zeroed).
        # It relies on the edges being sorted by (u, v) with u < v (the Graph invariant; checked,
        # since the trusted constructor does not check it); otherwise the reference step runs.
        n, m = graph.n, graph.m
        u = graph.u
        self._compiled = self.options["kernel"] == "numba" and (
            m == 0 or bool(np.all(u[:-1] <= u[1:]) and np.all(u < graph.v)))
        if not self._compiled:
            return
        self._ustart = np.searchsorted(u, np.arange(n + 1)).astype(np.uint64)
        self._out = np.empty(n, dtype=np.int64)
        self._outflow = np.empty(n if self.options["guard"] == "off" else 1, dtype=np.int64)
        self._step_outflow = None if self.options["guard"] == "on" else self._outflow  # (Step.outflow)
        self._B = np.zeros(n)
        self._recv = np.zeros(n, dtype=np.int64)
        self._spent = np.zeros(n, dtype=np.int64)
        alpha = np.atleast_1d(np.asarray(self._alpha, dtype=float))
        self._alpha_arr = alpha if alpha.size else np.zeros(1)
        self._dummy_mask = np.zeros(1, dtype=np.bool_)
        self._dummy_f = np.zeros(1)
        # Offset stencil (tori, rings), FOS or SOS, one P_ij, no speeds: the pull kernel, while D = trunc(F).
        self._stencil_args = None
        if (self.options["process"] in ("fos", "sos") and graph.speeds is None and np.ndim(self._alpha) == 0
                and graph.stencil is not None):
            st = graph.stencil
            starts, ends, delta = lower_edge_runs(st, graph.csr_edges)
            if starts.size:
                sos = self.options["process"] == "sos"
                guard = self.options["guard"] == "on"
                # The kernel's arguments but the step's own (t > 0, loads, new), made once: a step on a
                # small torus is a few microseconds of kernel, and building them cost as much. One
                # tuple per state buffer read (the step writes the other); SOS's flows alternate alike.
                fixed = (self._ustart, graph.indptr, unsigned_view(graph.indices), unsigned_view(graph.csr_edges),
                         starts, ends, st.lower, st.upper, delta, sos, float(self.options["beta"]),
                         float(self._alpha), guard, not guard, self._outflow)
                prevs = (self._prev, np.zeros(m)) if sos else (self._dummy_f, self._dummy_f)
                self._stencil_args = tuple(
                    fixed + (self._views[k][2], self._views[1 - k][2], self._views[k][1], self._views[1 - k][1],
                             prevs[k], prevs[1 - k]) for k in (0, 1))
                self._prevs = prevs

    def _continuous_flow(self, t, graph) -> np.ndarray:
        proc = self.options["process"]
        # (xi / 1.0 is xi, bit for bit: no division without speeds)
        pot = self.xi if graph.speeds is None else self.xi / self._speeds
        if proc in ("fos", "sos"):
            ends = self._order.ends  # (u, v) as intp, gathered in one call
            pot = pot[ends]
            f = self._alpha * (pot[0] - pot[1])
            if proc == "sos":
                if t > 0:
                    beta = self.options["beta"]
                    f = (beta - 1.0) * self._prev + beta * f
                self._prev[:] = f  # (in place: the compiled step's buffers are these arrays)
            return f
        matched = (self._colours == t % self.period) if proc == "circuit" else random_matching(graph, self._key, t)
        su, sv = self._speeds[graph.u], self._speeds[graph.v]
        total = self.xi[graph.u] + self.xi[graph.v]
        # a matched pair ends with loads proportional to its speeds: xi_u' = (xi_u + xi_v) s_u / (s_u + s_v)
        return np.where(matched, self.xi[graph.u] - total * su / (su + sv), 0.0)

    def step(self, t, graph, loads):
        if graph is self._graph and self._compiled:
            loads = np.ascontiguousarray(loads, dtype=np.int64)
            new = self._out if self._out is not loads else np.empty_like(loads)
            if self._d_is_trunc and self._stencil_args is not None:
                step = self._stencil_step(t, loads, new)
                if step is not None:
                    return step
            return self._compiled_step(t, graph, loads, new)
        loads = np.asarray(loads, dtype=np.int64)
        order = self._order
        if order is None or order.graph is not graph:
            order = self._order = _EdgeOrder(graph)
        n, m = order.n, order.m
        f = self._continuous_flow(t, graph)
        xi = self.xi  # xi - div f, in place
        np.subtract(xi, np.bincount(order.u, f, n), out=xi)
        np.add(xi, np.bincount(order.v, f, n), out=xi)
        self.F += f
        whole = np.trunc(self.F)  # D(t) of the rule
        send = whole.astype(np.int64) - self.D
        size = np.abs(send)
        biggest = int(size.max()) if m else 0
        guard = self.options["guard"] == "on"
        # A node sends at most degree * biggest tokens: when that is within the smallest load, nobody
        # owes more than it holds (the guard then changes nothing, and the per-slot sums are not needed).
        exact = biggest * order.degree < _EXACT_SUMS  # the float64 sums per node below are then exact integers
        held = self.held_back
        if not biggest and _EXACT_SUMS:  # nothing to send (most steps, once the process has settled)
            gap = self.F - whole
            new = loads.copy()
        elif m and guard and biggest * order.degree > int(loads.min()) or not exact:
            out = order.sent(send)  # per CSR slot, what the slot's node sends over it (negative: receives)
            if guard:
                send, out = self._guarded(graph, loads, send, out)
                size = np.abs(send)
            self.D += send
            gap = self.F - self.D
            new = loads - order.sums(out)  # int64 sums: exact
        else:
            self.D += send  # = trunc(F): F - D is F - trunc(F)
            gap = self.F - whole
            sendf = send.astype(np.float64)  # (bincount's weights are float64: converted once)
            new = loads + (np.bincount(order.v, sendf, n) - np.bincount(order.u, sendf, n)).astype(np.int64)
        # D = trunc(F) again unless the guard held tokens back (only on an edge it did not pay in full)
        self._d_is_trunc = self.held_back == held
        if m:
            self.max_gap = max(self.max_gap, float(np.abs(gap).max()))
        return Step(new, moved=int(size.sum()), messages=2 * m, flows=send)

    def _compiled_step(self, t, graph, loads, new):
        proc = self.options["process"]
        mode = {"fos": FOS, "sos": SOS}.get(proc, MATCHED)
        if proc == "circuit":
            mask = self._colours == t % self.period
        elif proc == "random-matching":
            mask = random_matching(graph, self._key, t)
        else:
            mask = self._dummy_mask
        has_speeds = graph.speeds is not None
        guard = self.options["guard"] == "on"
        speeds = self._speeds if has_speeds or mode == MATCHED else self._dummy_f
        scratch = (self._B, self._recv, self._spent)
        if mode != MATCHED and not has_speeds and np.ndim(self._alpha) == 0:
            moved, held, gap = flow_imitation_step_uniform(
                self._ustart, unsigned_view(graph.v), mode == SOS, t > 0, float(self.options["beta"]),
                float(self._alpha), self.xi, self.F, self.D, self._prev if mode == SOS else self._dummy_f, loads,
                guard, new, not guard, self._outflow, *scratch)
        else:
            moved, held, gap = flow_imitation_step(
                self._ustart, unsigned_view(graph.v), mode, t > 0, float(self.options["beta"]), self._alpha_arr,
                np.ndim(self._alpha) == 0, has_speeds, speeds, mask, self.xi, self.F, self.D,
                self._prev if mode == SOS else self._dummy_f, loads, guard, new, not guard, self._outflow, *scratch)
        self._out = loads
        self.held_back += int(held)
        # Every edge paid in full this step: D = trunc(F) on every edge again, the stencil kernel may resume.
        self._d_is_trunc = held == 0
        if graph.m:
            self.max_gap = max(self.max_gap, float(gap))
        # guard=off may overdraw: the outflow lets the engine count the infeasible steps as it does
        # from the reference's flows; guard=on never overdraws (the engine checks the new loads).
        return Step(new, moved=int(moved), messages=self._messages, outflow=self._step_outflow)

    def _stencil_step(self, t, loads, new):
        # The pull kernel on the stencil, while D = trunc(F): it reads the state buffer in use and writes
        # the next state into the other one. None when some node owes more than it holds: the kernel
        # has then changed nothing, and the general kernel takes the step.
        cur = self._cur
        moved, binding, gap = flow_imitation_stencil_step(*self._stencil_args[cur], t > 0, loads, new)
        if binding:
            return None
        cur = self._cur = 1 - cur
        self._D, self.F, self.xi = self._views[cur]
        self._d_stale = True  # (this buffer's D is an older state's: brought up to date when read)
        if self._prev is not None:  # SOS: this step's flows, written beside the new state
            self._prev = self._prevs[cur]
        self._out = loads
        if gap > self.max_gap:  # (max(max_gap, gap), without the call)
            self.max_gap = gap
        return Step(new, moved=int(moved), messages=self._messages, outflow=self._step_outflow)

    steps_find_cycles = True

    def steps(self, t, k, graph, loads, block, moved, messages, stop_idle, seen=None):
        """Up to ``k`` steps of the stencil kernel in one call (:meth:`Protocol.steps`), with the cycle
        check on F and xi (:meth:`state_key` while ``D = trunc(F)``). None where :meth:`step` takes
        another kernel (no stencil, speeds, ``D`` behind ``trunc(F)``, the numpy reference), with
        ``guard=off`` (its steps report their outflow, which the block's sign check does not see)
        or while a small run would compile the block kernel. The block ends before a step the
        stencil kernel cannot take (:func:`.kernels._flow_imitation.flow_imitation_stencil_steps`)."""
        if (graph is not self._graph or not self._compiled or self._stencil_args is None
                or not self._d_is_trunc or self._step_outflow is not None):
            return None
        cur = self._cur
        d, f, xi = self._views[cur]
        if not (self._D is d and self.F is f and self.xi is xi):
            return None
        table = NO_TABLE if seen is None else seen.arrays()
        skip = self._without_d
        args = (*self._stencil_args, self._bufs[0, skip], self._bufs[1, skip], cur, t, k, stop_idle, *table, loads,
                block, moved, messages, self._messages)
        if not block_kernel_ready(_flow_imitation_stencil_steps, args):
            return None
        done, cur, gap = _flow_imitation_stencil_steps(*args)
        if done:  # (as after `done` calls of _stencil_step)
            self._cur = cur
            self._D, self.F, self.xi = self._views[cur]
            self._d_stale = True
            if self._prev is not None:
                self._prev = self._prevs[cur]
            if gap > self.max_gap:
                self.max_gap = gap
        return done, _STENCIL_VARIANT

    def _guarded(self, graph, loads, send, out):
        over = np.flatnonzero(self._order.sums(np.maximum(out, 0)) > loads)
        if over.size == 0:
            return send, out
        send = send.copy()
        for i in over:  # rare: a node whose continuous load is below its degree; pay edges in CSR order
            budget = int(loads[i])
            for e in graph.csr_edges[graph.indptr[i]:graph.indptr[i + 1]]:
                owed = send[e] if graph.u[e] == i else -send[e]
                if owed <= 0:
                    continue
                pay = min(owed, budget)
                budget -= pay
                self.held_back += int(owed - pay)
                send[e] = pay if graph.u[e] == i else -pay
        return send, self._order.sent(send)

    def state_key(self):
        # The bytes of D, F and xi: the buffer in use while they are its views (see reset), no copy (the
        # engine hashes its bytes at once: engine/_cycles.py).
        # While D = trunc(F) on every edge, D follows from F and the key is F and xi only: a third less
        # for the engine to hash each step, and as exact (it is shorter than any key with D, so it
        # never equals one; and within each form equal keys are equal states).
        cur = self._cur
        d, f, xi = self._views[cur]
        if self._D is d and self.F is f and self.xi is xi:
            buf = self._bufs[cur]  # (its D is written whenever D is not trunc(F))
            return buf[self._without_d] if self._d_is_trunc else buf
        short = np.array_equal(self.D, np.trunc(self.F))
        return (self.F, self.xi) if short else (self.D, self.F, self.xi)  # (their bytes one after another)

    def report(self):
        return {"process": self.options["process"], "held_back": self.held_back,
                "max_abs_flow_gap": self.max_gap, "guard": self.options["guard"]}
