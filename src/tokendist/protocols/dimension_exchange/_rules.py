"""Dimension exchange on an edge colouring: THRESHOLD-2, THRESHOLD-1 and DISCREPANCY-1.

M. E. Houle, A. Symvonis, D. R. Wood, Dimension-exchange algorithms for token distribution on
tree-connected architectures, J. Parallel Distrib. Comput. 64 (2004) 591-605.

Every protocol here follows Algorithm DIMENSION-EXCHANGE (Sec. 1.1): at step ``t`` the edges of
colour ``(colour_start + t) mod chi`` are active; the two ends of an active edge exchange their
loads and at most one token crosses it. Single-port, synchronous, deterministic. The colouring
(parameter ``colouring``), the colour of step 0 (``colour_start``) and, for the tree protocols on
a graph that is not a tree, the spanning tree (``spanning_tree``) are parameters.

The schedule is in :mod:`._dimension_exchange_schedule`, the kernels (numba, numpy and a naive
reference) in :mod:`._dimension_exchange_kernels`, the worst-case initial distributions in
:mod:`._dimension_exchange_init`.
"""

from __future__ import annotations

import numpy as np

from ...engine import Param, Protocol, Step, register_protocol
from ...errors import TokendistError
from . import _worst_case as _dimension_exchange_init  # noqa: F401  (registers the worst-case distributions)
from .kernels._serial import (LM_KEEP, LM_MAX, LM_SET, THRESHOLD1, THRESHOLD1_PLUS, THRESHOLD2,
                                          NodeColourStep, colour_step_numba)
from ._schedule import SPANNING_TREES, make_schedule
from . import _partitioned
from .kernels._serial import _NO_HALTED, _NO_MAX
from .kernels._serial import discrepancy1_steps as _discrepancy1_steps
from .kernels._serial import threshold1_steps as _threshold1_steps
from ...engine._cycles import _SAFE, HIT, MOVED, NO_TABLE, seen_before
from ...kernels._report import block_kernel_ready, instrument_kernels, kernel_label

instrument_kernels(globals())  # every run reports which kernel ran each step (tokendist.kernels._report)

__all__ = ["Threshold2", "Threshold1", "Discrepancy1"]

_NO_ARRAY = np.zeros(0, dtype=np.int64)  # (discrepancy1's state_key before the first B-phase)
_NO_BYTES = np.zeros(0, dtype=np.uint8)
_VARIANT = kernel_label(colour_step_numba)  # (what a step of the numba kernel reports, in blocks too)

_COMMON = (
    Param("colouring", str, "auto", "edge colouring: auto (Delta colours on trees and bipartite graphs, "
          "Misra-Gries otherwise), tree, bipartite, misra-gries, greedy, or file:PATH (one colour per edge)"),
    Param("colour_start", int, 0, "the colour active at step 0 (stable distributions depend on it)", minimum=0),
    Param("kernel", str, "numba", "numba (fast) or numpy (whole-array reference)", ("numba", "numpy")),
)
# Default bfs, as for DISCREPANCY-1 and the perfect tree: every tree protocol runs on any connected
# graph with its default parameters, so `compare` and `run` need no per-protocol override.
_SPANNING = Param("spanning_tree", str, "bfs", "on a graph that is not a tree: run on this spanning tree "
                  "(bfs from node 0, or min-diameter); none refuses non-trees", SPANNING_TREES)


class _DimensionExchange(Protocol):
    """Shared machinery: schedule, buffers, the vectorised step and the per-node rule."""

    model = "single-port"
    requires = frozenset({"connected", "colouring"})
    static_reason = ("the schedule is an edge colouring (of a spanning tree for the tree protocols) of the network "
                     "fixed at the start (Sec. 1.1)")
    exchange_rounds = 1
    #: Whether the protocol runs on a tree (the graph itself or a spanning tree of it).
    needs_tree = False

    def check_graph(self, graph) -> None:
        if not graph.is_connected:
            raise TokendistError(f"{self.name} needs a connected graph; {graph.spec or 'this graph'} is not connected")
        if self.needs_tree and not graph.is_tree and self.options.get("spanning_tree", "none") == "none":
            raise TokendistError(f"{self.name} runs on trees; {graph.spec or 'this graph'} is not one "
                                 "(pass spanning_tree=bfs or spanning_tree=min-diameter)")

    def reset(self, graph, loads, rng):
        self.sched = make_schedule(graph, colouring=self.options["colouring"],
                                   colour_start=self.options["colour_start"],
                                   spanning=self.options.get("spanning_tree", "none"), need_tree=self.needs_tree)
        self.period = self.sched.chi
        self.n = graph.n
        self._buf = np.empty_like(loads)
        # One int8 per edge: a step moves at most one token across an edge. Only the active colour
        # class is written (and the previous one cleared), so the engine still gets every step's
        # flows -- feasibility and, with check=True, the single-port model -- at O(m / chi) a step.
        self._flows = np.zeros(graph.m, dtype=np.int8)
        self._prev = (0, 0)
        # Each colour's range of the schedule, as Python ints, and the path: looked up once per run
        # (a 256-node step's kernel takes about a microsecond; the step's Python is most of its cost).
        offsets = self.sched.offsets.tolist()
        self._ranges = [(offsets[c], offsets[c + 1]) for c in range(self.period)]
        self._reference = self.options["kernel"] == "numpy"
        self._spanning = self.sched.graph is not graph
        self._numpy = None  # the numpy step's per-colour constants (NodeColourStep), made on its first step
        self._all_matchings = None  # (_matchings)

    def _rule(self, t, loads) -> int:
        raise NotImplementedError

    def _local_max(self):
        """DISCREPANCY-1's localMax array (None: the rule does not read it)."""
        return None

    def _lm_mode(self) -> int:
        """What the fused kernel does to localMax before the step (``LM_KEEP``, ``LM_MAX``, ``LM_SET``)."""
        return LM_KEEP

    def _halted(self):
        """The halted nodes, or None when none is halted (the kernel then reads no flags)."""
        return None

    def _after(self, t, loads) -> None:
        """Bookkeeping that needs localMax as updated for step ``t`` (DISCREPANCY-1)."""

    def step(self, t, graph, loads):
        rule = self._rule(t, loads)
        if self._reference:
            # colour_step_numpy's rule per node, its per-colour constants made once per run (a
            # small run's step is a few microseconds of numpy calls: kernels._serial.NodeColourStep).
            stepper = self._numpy
            if stepper is None:
                stepper = self._numpy = NodeColourStep(self.sched, self.n, graph.m, loads.dtype)
            new, flows, moved, messages = stepper.step(loads, (self.sched.start + t) % self.period, rule,
                                                       self._local_max(), self._halted())
            self._after(t, loads)
            return Step(new, moved=moved, messages=messages, flows=flows)
        active = self._ranges[(self.sched.start + t) % self.period]  # (sched.active(t))
        out = self._buf if self._buf is not loads else np.empty_like(loads)
        moved = colour_step_numba(loads, out, self.sched, t, self._prev, rule, self._local_max(), self._halted(),
                                  self._flows, self._lm_mode(), active)
        self._after(t, loads)
        self._prev = active
        self._buf = loads  # ping-pong buffers: the engine keeps what it needs
        lo, hi = active
        return Step(out, moved, 2 * (hi - lo), self._flows)

    def _matchings(self) -> bool:
        """Whether every colour class of the schedule is a matching (made once per run): the blocks
        of steps take it for granted; a step on a class that is not one shows in its flows, step by step."""
        if self._all_matchings is None:
            sched = self.sched
            colour = np.repeat(np.arange(sched.chi, dtype=np.int64), np.diff(sched.offsets))
            ends = np.concatenate([sched.run_u[sched.eid], sched.run_v[sched.eid]]).astype(np.int64)
            keys = np.concatenate([colour, colour]) * self.n + ends
            self._all_matchings = bool(np.unique(keys).size == keys.size)
        return self._all_matchings

    def _tree_edges_equal(self, loads) -> bool:
        # The tree spans every node of the (connected) graph, so its edges are all level exactly
        # when all loads are equal: two reductions rather than two gathers and a comparison. The
        # engine asks after every step that moved nothing (a third of DISCREPANCY-1's), when the
        # loads mostly differ: two that differ answer at once.
        if loads.size > 1 and loads[0] != loads[-1]:
            return False
        return bool(loads.size == 0 or loads.max() == loads.min())

    def report(self) -> dict:
        s = self.sched
        return {"chi": s.chi, "colour_start": s.start, "round_steps": s.chi, "phase_steps": s.chi * s.graph.n,
                "schedule_edges": int(s.graph.m), "on_spanning_tree": self._spanning}

    # ---------------------------------------------------------------- per-node form
    def contacts(self, t, node, neighbours):
        w = int(self.sched.partner[node, self.sched.colour_at(t)])
        return np.array([], dtype=np.int64) if w == node else np.array([w], dtype=np.int64)

    def publish(self, rnd, t, node, view):
        return int(view.load)

    def _sends(self, t, node, view, load_other) -> bool:
        raise NotImplementedError

    def decide(self, t, node, view):
        if len(view.contacts) == 0:
            return {}
        w = int(view.contacts[0])
        return {w: 1} if self._sends(t, node, view, view.received[0][w]) else {}


@register_protocol
class Threshold2(_DimensionExchange):
    """THRESHOLD-2: across the active edge one token goes from the heavier end if the ends differ by >= 2.

    Per node v at step t (Sec. 2): if v has an edge vw of the active colour, exchange loads with w;
    if ``load(v) >= load(w) + 2`` send one token to w. Any connected graph. It always reaches a
    stable distribution (Lemma 3), in which every edge has discrepancy at most 1 (Lemma 4), so
    the final discrepancy is at most the diameter, and the distance distribution attains it
    (Theorem 5). Single-port, deterministic.
    """

    name = "threshold2"
    title = "THRESHOLD-2 (dimension exchange)"
    paper = "Houle, Symvonis, Wood 2004, Sec. 2-3"
    params = _COMMON

    def _rule(self, t, loads):
        return THRESHOLD2

    def is_stable(self, graph, loads):
        # Lemma 4: stable iff every edge has discrepancy at most 1; then no token ever moves.
        return bool(graph.m == 0 or np.abs(loads[graph.u] - loads[graph.v]).max() <= 1)

    def _sends(self, t, node, view, lw):
        return view.load >= lw + 2

    # Partitioned form (tokendist.engine.mpi): the active edges with an owned end (:mod:`._partitioned`).
    partitioned_setup = _partitioned.de_setup
    partitioned_step = _partitioned.de_step
    partitioned_is_stable = _partitioned.threshold2_is_stable


@register_protocol
class Threshold1(_DimensionExchange):
    """THRESHOLD-1: across the active edge one token goes from the heavier end if the ends differ at all.

    Per node v at step t (Sec. 2): if v has an edge vw of the active colour, exchange loads; if
    ``load(v) >= load(w) + 1`` send one token to w. Tokens on a difference-1 edge circulate along
    the observer tour (Sec. 4.2). On a tree the run reaches a stable distribution (Lemma 8) of
    discrepancy at most MSD(T) (Theorem 12), at most the bound of Theorem 16. On any other
    connected graph it runs on a spanning tree (``spanning_tree``, default bfs). Single-port,
    deterministic.
    """

    name = "threshold1"
    title = "THRESHOLD-1 (dimension exchange on a tree)"
    paper = "Houle, Symvonis, Wood 2004, Sec. 2, 4"
    params = _COMMON + (_SPANNING,)
    needs_tree = True

    def _rule(self, t, loads):
        return THRESHOLD1

    def is_stable(self, graph, loads):
        # A difference-1 edge moves a token whenever it is active: no token moves only if all equal.
        return self._tree_edges_equal(loads)

    def _sends(self, t, node, view, lw):
        return view.load >= lw + 1

    steps_find_cycles = True

    def steps(self, t, k, graph, loads, block, moved, messages, stop_idle, seen=None):
        """Up to ``k`` steps of the numba kernel in one call (:meth:`Protocol.steps`,
        :func:`.kernels._serial.threshold1_steps`), with the cycle check on the loads (no state).

        None with ``kernel=numpy``, while a small run would compile the block kernel, and from a
        negative load: from loads >= 0 every exchange is feasible (a node sends only to a lighter
        one), which the block's check (the sign of the loads) takes for granted; a step's flows
        tell the engine otherwise.
        """
        if self._reference or loads.min() < 0 or not self._matchings():
            return None
        sched = self.sched
        table = NO_TABLE if seen is None else seen.arrays()
        plo, phi = self._prev
        args = (sched.run_u, sched.run_v, sched.eid, sched.offsets, sched.start, self._flows, plo, phi, _NO_MAX,
                _NO_HALTED, t, k, stop_idle, *table, loads, block, moved, messages)
        if not block_kernel_ready(_threshold1_steps, args):
            return None
        done, plo, phi = _threshold1_steps(*args)
        self._prev = (int(plo), int(phi))  # (the flows buffer holds the last step's: step() clears them)
        return done, _VARIANT


    # Partitioned form (tokendist.engine.mpi): the active tree edges with an owned end (:mod:`._partitioned`).
    partitioned_setup = _partitioned.de_setup
    partitioned_step = _partitioned.de_step
    partitioned_is_stable = _partitioned.tree_is_stable


@register_protocol
class Discrepancy1(_DimensionExchange):
    """DISCREPANCY-1: cycles of an A-phase (THRESHOLD-1, recording localMax) and a B-phase (THRESHOLD-1 PLUS).

    Per node v (Sec. 5), each cycle: ``localMax(v) <- load(v)``; A-phase: ``chi n`` steps of
    THRESHOLD-1, after each ``localMax(v) <- max(localMax(v), load(v))``; B-phase: ``chi n`` steps
    of THRESHOLD-1 PLUS, which sends over a difference-1 edge only if ``load(v) != localMax(v)``.
    Each node knows n. Theorem 18: the discrepancy is at most 1 within ``2 (Delta_0 - 1) chi n``
    steps. Local termination (end of Sec. 5): a node whose localMax did not change over
    ``stop_cycles`` consecutive cycles stops; ``termination=record`` (default) only records when
    each node would stop, ``termination=halt`` makes it stop (a halted node exchanges with no one).
    The rule is not safe: a node can stop while the discrepancy is large, and honouring it can end
    the run above discrepancy 1 (docs/protocols/dimension-exchange.md gives an 8-node example ending at 4);
    Theorem 18 is about the algorithm run without halting.
    On a graph that is not a tree it runs on a spanning tree (``spanning_tree``, default bfs).
    """

    name = "discrepancy1"
    title = "DISCREPANCY-1 (dimension exchange on a tree, discrepancy <= 1)"
    paper = "Houle, Symvonis, Wood 2004, Sec. 5"
    params = _COMMON + (
        Param("spanning_tree", str, "bfs", "on a graph that is not a tree: bfs (from node 0) or min-diameter "
              "spanning tree; none refuses non-trees", SPANNING_TREES),
        Param("termination", str, "record", "record: note when each node's local rule says stop; halt: stop it",
              ("record", "halt")),
        Param("stop_cycles", int, 2, "a node stops when localMax is equal in this many consecutive cycles "
              "(the paper: two consecutive applications)", minimum=1),
    )
    needs_tree = True

    def reset(self, graph, loads, rng):
        super().reset(graph, loads, rng)
        if self.options["stop_cycles"] < 2:
            raise TokendistError("discrepancy1: stop_cycles must be at least 2")
        n_tree = self.sched.graph.n
        self.A = self.sched.chi * n_tree
        self.L = 2 * self.A
        self.lm = np.asarray(loads, dtype=np.int64).copy()
        self.prev_lm = None
        self.same = np.zeros(graph.n, dtype=np.int64)
        self.pending = np.zeros(graph.n, dtype=bool)
        self.halted = np.zeros(graph.n, dtype=np.bool_)
        self._any_halted = False
        self._mode = LM_KEEP
        self.stop_step = np.full(graph.n, -1, dtype=np.int64)
        self.stop_discrepancy = np.full(graph.n, -1, dtype=np.int64)
        self.cycles = []
        self._next = 0
        self._state_bytes = None  # (_scratch)

    def _advance(self, t, loads):
        """Update localMax and the termination bookkeeping from the loads at the start of step t.

        With the numba kernel the localMax update itself (``localMax <- load`` at a cycle's start,
        ``max(localMax, load)`` in the A-phase) is fused into the kernel's copy of the loads
        (``self._mode``); :meth:`_after` then does what reads the updated localMax.
        """
        pos = t % self.L
        fused = not self._reference
        self._mode = LM_KEEP
        if pos == 0:
            disc = int(loads.max() - loads.min())
            if t > 0:
                self.cycles[-1]["end_discrepancy"] = disc
                stopping = self.pending & (self.stop_step < 0)
                self.stop_step[stopping] = t
                self.stop_discrepancy[stopping] = disc
                self.pending[:] = False
                if self.options["termination"] == "halt":
                    self.halted |= stopping
                    self._any_halted = bool(self.halted.any())
            self.cycles.append({"cycle": t // self.L, "start_step": t, "start_discrepancy": disc})
            if fused:
                self._mode = LM_SET
            else:
                self.lm = np.asarray(loads, dtype=np.int64).copy()
        elif pos <= self.A:
            if fused:
                self._mode = LM_MAX
            else:
                np.maximum(self.lm, loads, out=self.lm)

    def _after(self, t, loads):
        if t % self.L == self.A:
            self.cycles[-1]["b_start_discrepancy"] = int(loads.max() - loads.min())
            if self.lm.size <= 64:
                self.cycles[-1]["local_max"] = self.lm.tolist()
            if self.prev_lm is not None:
                k = self.options["stop_cycles"] - 1
                self.same = np.where(self.lm == self.prev_lm, np.minimum(self.same + 1, k), 0)
                self.pending = self.same >= k
            self.prev_lm = self.lm.copy()

    def _rule(self, t, loads):
        self._advance(t, loads)
        return THRESHOLD1 if t % self.L < self.A else THRESHOLD1_PLUS

    def _local_max(self):
        return self.lm

    def _lm_mode(self):
        return self._mode

    def _halted(self):
        return self.halted if self._any_halted else None

    def is_stable(self, graph, loads):
        g = self.sched.graph
        if g.m == 0:
            return True
        if not self._any_halted:  # (no node halted: THRESHOLD-1's test)
            return self._tree_edges_equal(loads)
        diff = loads[g.u] != loads[g.v]
        return bool(not np.any(diff & ~(self.halted[g.u] | self.halted[g.v])))

    def state_key(self):
        # The position in the cycle and every node's bookkeeping (not the recorded stop times): the
        # arrays themselves, whose bytes the engine hashes one after another (engine/_cycles.py).
        prev = _NO_ARRAY if self.prev_lm is None else self.prev_lm
        return (np.array([self._next % self.L], dtype=np.int64), self.lm, prev, self.same, self.halted,
                self.pending)

    def step(self, t, graph, loads):
        out = super().step(t, graph, loads)
        self._next = t + 1
        return out

    steps_find_cycles = True

    def steps(self, t, k, graph, loads, block, moved, messages, stop_idle, seen=None):
        """Up to ``k`` steps in one call (:meth:`Protocol.steps`): within a phase the numba kernel
        (:func:`.kernels._serial.discrepancy1_steps`), the first step of each phase through
        :meth:`step` (its bookkeeping: cycles, localMax, termination), each with the cycle check.

        None with ``kernel=numpy``, while a small run would compile the block kernel, from a
        negative load or on a schedule whose colour classes are not matchings (as
        :meth:`Threshold1.steps`).
        """
        if self._reference or loads.min() < 0 or not self._matchings():
            return None
        table = NO_TABLE if seen is None else seen.arrays()
        if not block_kernel_ready(_discrepancy1_steps, self._kernel_args(t, 1, stop_idle, table, loads, block, moved,
                                                                          messages)):
            return None
        if seen is not None and not block_kernel_ready(seen_before, (*table, _NO_BYTES, _NO_BYTES, 0)):
            return None
        info = table[2]
        A, L = self.A, self.L
        b = 0
        prev = loads
        while b < k:
            s = t + b
            pos = s % L
            if pos == 0 or pos == A:  # a phase starts: this step through step()
                if seen is not None and s % seen.period == 0 and seen.seen(prev, self.state_key(), s):
                    break
                buf = self._buf
                out = self.step(s, graph, prev)
                block[b] = out.loads
                self._buf = buf if buf is not prev else np.empty_like(buf)  # (never a row of the block)
                moved[b], messages[b] = out.moved, out.messages
                b += 1
                if seen is not None:  # (add_moved's rule)
                    if not -_SAFE < int(info[MOVED]) + out.moved < _SAFE:
                        break
                    info[MOVED] += out.moved
                if stop_idle and out.moved == 0:
                    break
            else:
                end = min(k, b + ((A if pos < A else L) - pos))  # (up to the next phase's start)
                done, plo, phi = _discrepancy1_steps(*self._kernel_args(s, end - b, stop_idle, table, prev,
                                                                        block[b:end], moved[b:end], messages[b:end]))
                self._prev = (int(plo), int(phi))
                self._next = s + done
                b += done
                # (a state seen before, the totals' limit, an idle step: the engine takes it from here)
                if b < end or info[HIT] != -1 or (stop_idle and moved[b - 1] == 0):
                    break
            prev = block[b - 1]
        return b, _VARIANT

    def _kernel_args(self, s, k, stop_idle, table, loads, block, moved, messages):
        """The arguments of :func:`.kernels._serial.discrepancy1_steps` for up to ``k`` steps from
        step ``s`` (within one phase)."""
        sched, A = self.sched, self.A
        a_phase = s % self.L < A
        plo, phi = self._prev
        return (sched.run_u, sched.run_v, sched.eid, sched.offsets, sched.start, self._flows, plo, phi,
                THRESHOLD1 if a_phase else THRESHOLD1_PLUS, LM_MAX if a_phase else LM_KEEP, self.lm,
                self.halted, self._any_halted, self.L,  # (halted: part of the state's bytes either way)
                _NO_ARRAY if self.prev_lm is None else self.prev_lm, self.same, self.pending, self._scratch(), s, k,
                stop_idle, *table, loads, block, moved, messages)

    def _scratch(self):
        # The bytes of state_key() for the block kernel's cycle check (their length: the state's).
        size = 8 + 8 * (3 * self.n - (self.prev_lm is None) * self.n) + 2 * self.n
        if self._state_bytes is None or self._state_bytes.size != size:
            self._state_bytes = np.empty(size, dtype=np.uint8)
        return self._state_bytes

    # Partitioned form (tokendist.engine.mpi): localMax and the bookkeeping of the local nodes,
    # discrepancies reduced over the ranks (:mod:`._partitioned`).
    partitioned_setup = _partitioned.d1_setup
    partitioned_step = _partitioned.d1_step
    partitioned_is_stable = _partitioned.d1_is_stable
    partitioned_state_key = _partitioned.d1_state_key
    partitioned_finish = _partitioned.d1_finish

    def report(self) -> dict:
        out = super().report()
        stopped = self.stop_step >= 0
        unsafe = stopped & (self.stop_discrepancy > 1)
        term = {
            "mode": self.options["termination"], "stop_cycles": self.options["stop_cycles"],
            "nodes_stopped": int(stopped.sum()), "nodes": int(self.stop_step.size),
            "first_stop_step": int(self.stop_step[stopped].min()) if stopped.any() else None,
            "last_stop_step": int(self.stop_step[stopped].max()) if stopped.all() else None,
            "discrepancy_at_first_stop": int(self.stop_discrepancy[stopped][np.argmin(self.stop_step[stopped])])
            if stopped.any() else None,
            "unsafe_stops": int(unsafe.sum()),
            "safe": bool(not unsafe.any()),
        }
        if self.stop_step.size <= 64:
            term["stop_step"] = [int(x) if x >= 0 else None for x in self.stop_step]
        out.update({"cycle_steps": self.L, "a_phase_steps": self.A, "cycles": self.cycles[-50:], "termination": term})
        return out

    # ---------------------------------------------------------------- per-node form
    def publish(self, rnd, t, node, view):
        mem = view.memory
        if not mem:
            mem.update(lm=int(view.load), prev=None, same=0, pending=False, halted=False)
        pos = t % self.L
        if pos == 0:
            if t > 0 and mem["pending"]:
                mem["pending"] = False
                if self.options["termination"] == "halt":
                    mem["halted"] = True
            mem["lm"] = int(view.load)
        elif pos <= self.A:
            mem["lm"] = max(mem["lm"], int(view.load))
        if pos == self.A:
            if mem["prev"] is not None:
                k = self.options["stop_cycles"] - 1
                mem["same"] = min(mem["same"] + 1, k) if mem["lm"] == mem["prev"] else 0
                mem["pending"] = mem["same"] >= k and not mem.get("stopped", False)
                if mem["pending"]:
                    mem["stopped"] = True
            mem["prev"] = mem["lm"]
        return (int(view.load), bool(mem["halted"]))

    def decide(self, t, node, view):
        if len(view.contacts) == 0:
            return {}
        w = int(view.contacts[0])
        lw, other_halted = view.received[0][w]
        if view.memory["halted"] or other_halted:
            return {}
        lv = view.load
        if t % self.L < self.A:
            send = lv >= lw + 1
        else:
            send = lv >= lw + 2 or (lv == lw + 1 and lv != view.memory["lm"])
        return {w: 1} if send else {}
