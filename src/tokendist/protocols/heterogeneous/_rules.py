"""FOS and SOS on heterogeneous and dynamic networks (Elsässer, Monien, Schamberger 2006, Sec. 2-3).

Registered protocols:

* ``fos`` -- First Order Scheme with real-valued (divisible) load, equation (3): ``w^k = M w^{k-1}``,
  ``M = I - L S^{-1}``.
* ``sos`` -- Second Order Scheme with real-valued load, equation (4): ``w^1 = M w^0``,
  ``w^k = beta M w^{k-1} + (1 - beta) w^{k-2}``, ``beta = 2 / (1 + sqrt(1 - gamma^2))`` (Lemma 1).
* ``fos-floor`` -- integer FOS of [22] as Section 1 and 4 describe it: every edge carries the integer
  part of its FOS flow, rounded towards zero (``floor`` of the flow's size, in the flow's direction).
* ``sos-iou`` -- integer SOS with an "I owe you" account per edge (Sec. 3, [22]); ``ideal`` chooses
  the idealised process the IOUs track (:mod:`._heterogeneous_sos_readings`).
* ``random-walk`` -- the randomized two-phase algorithm of Section 3
  (:mod:`tokendist.protocols.heterogeneous._random_walk`).

Common parameters: the constant ``c`` of ``c_ij = 1/(c max(d_i, d_j))`` (the paper: ``c in (1, 2]``;
default 2, which with speeds ``>= 1`` gives ``M_ii >= 1/2``, so ``gamma = mu_2``); ``speed_scale``
(how the given speeds enter M, see :data:`SPEED_SCALES`; default ``raw``); ``adapt_degrees`` (recompute
``d_i`` on every step's graph, as Section 4 does on dynamic networks; default true);
``allow_invalid`` (run even when M has a negative diagonal; default false: refuse with an error).
``fos``, ``fos-floor``, ``sos`` and ``sos-iou`` also take ``threads`` (default 1; k > 1 runs the
numba step on k threads, same results: :mod:`._heterogeneous_parallel`; ``sos-iou`` on a torus or
ring: :mod:`._heterogeneous_stencil_parallel`; on ``hypercube:d``, ``d >= 13``:
:mod:`._heterogeneous_sos_cube_parallel`). ``sos-iou`` and ``fos-floor`` default to ``auto``:
on a graph of at least :data:`AUTO_MIN_NODES` nodes, in a process that allows threads (the
``tokendist`` command; a program after ``tokendist.allow_auto_threads()``), they time their serial
and threaded kernels, which give the same bits, on the run's own steps and run the faster
(:mod:`._measured_choice`): ``sos-iou`` its stencil kernels on tori and rings, its cube kernels
on hypercubes and its CSR kernels elsewhere, ``fos-floor`` its CSR kernels on graphs without a
stencil. The serial kernel elsewhere.

All schemes accept a different graph every step (``dynamic = True``): edge failures keep the base
graph's nodes and speeds; mobility builds a new disc graph. Per-edge state (SOS flows, IOUs) is
carried by node pair; an edge that disappears drops its state (counted in ``report()``).
"""

from __future__ import annotations

import math
from functools import partial

import numba
import numpy as np

from ...engine import Param, Protocol, Step, register_protocol
from ...errors import TokendistError
from ...graphs._stencil import lower_edge_runs
from .kernels._serial import (COEF_EDGE, COEF_NODE, COEF_SCALAR, fos_floor_step, fos_real_step, node_alpha_sums,
                              sos_iou_step, sos_real_step)
from .kernels._stencil import fos_floor_stencil, fos_real_stencil, sos_iou_stencil, sos_real_stencil
from .kernels._stencil import sos_iou_stencil_steps as _sos_iou_stencil_steps
from .kernels._sos_cube import (SOS_CUBE_MIN_DIMENSION, flows_from_cube, flows_to_cube, sos_iou_cube,
                                      sos_real_cube)
from .kernels._threaded import (AUTO_THREADS_PARAM, SOS_BLOCK, THREADS_PARAM, block_edge_starts, check_threads,
                                      fos_floor_step_par, fos_real_step_par, run_blocks, run_rows, sos_iou_step_par,
                                      sos_real_step_par, use_threads)
from ...kernels._choice import AUTO, AUTO_MIN_NODES, MeasuredChoice, auto_threads_allowed, auto_threads_param
from .kernels._stencil_threaded import STENCIL_CHUNKS_PER_THREAD, sos_iou_stencil_par, stencil_chunks
from .kernels._sos_cube_threaded import cube_chunk_bits, sos_iou_cube_par
from ._node import fos_node_flows, node_publish, shadow_publish, sos_iou_node_sends, sos_node_flows
from ._sos_readings import IDEAL_READINGS, fold_dropped_ious, shadow_step, shadow_update
from ._edge_state import StatePair, actual_ious as _actual_ious, carry as _carry, sent_flows as _sent_flows
from . import _partitioned
from ._partitioned import partitioned_coefs as _partitioned_coefs
from ._matrix import (SPEED_SCALES, EdgeIndex, apply_flows, check_diagonal, diffusion_norm, edge_coefficients,
                      fos_flows, node_degrees, raise_on_negative_diagonal, regular_flow_sums, regular_slot_tables,
                      scaled_speeds, sos_beta)
from ...engine._cycles import NO_TABLE
from ...kernels._report import block_kernel_ready, instrument_kernels, kernel_label
from ...kernels._rows import RowOrder, sequential_sum

instrument_kernels(globals())  # every run reports which kernel ran each step (tokendist.kernels._report)
_SOS_IOU_STENCIL = kernel_label(sos_iou_stencil)  # (what a step of it reports: in blocks too)

__all__ = ["FOS", "SOS", "FOSFloor", "SOSIOU", "HeterogeneousDiffusion", "COMMON_PARAMS", "KERNEL_PARAM"]

PAPER = "Elsässer, Monien, Schamberger 2006"

COMMON_PARAMS = (
    Param("c", float, 2.0, "constant c of c_ij = 1/(c max(d_i, d_j)); the paper takes c in (1, 2]"),
    Param("speed_scale", str, "raw", "speeds in M: raw (as given), min (divide by the smallest: s_i >= 1 as "
          "Sec. 2 assumes) or mean (n s_i / sum s)", SPEED_SCALES),
    Param("adapt_degrees", bool, True, "recompute d_i on every step's graph (Sec. 4); false: base-graph degrees"),
    Param("allow_invalid", bool, False, "run even if M = I - L S^-1 has a negative diagonal entry"),
)

#: The step kernel of fos, fos-floor, sos and sos-iou: ``numba`` (fused loops over CSR or the edge
#: list, :mod:`._heterogeneous_kernels`) or ``numpy`` (edge gathers and bincount: the reference).
KERNEL_PARAM = Param("kernel", str, "numba", "numba (fused per-node CSR loop) or numpy (edge gathers and "
                     "bincount, the reference)", ("numba", "numpy"))

_EMPTY = np.zeros(0)
_NO_BYTES = np.zeros(0, dtype=np.uint8)
#: float64 adds integers exactly while the partial sums stay below this: sos-iou's numpy step then
_EXACT_SUMS = 2**53  # takes its cheaper forms (the tests set it to 0 to compare them with the plain ones)


class HeterogeneousDiffusion(Protocol):
    """Shared machinery: speeds, coefficients of each step's graph, the validity check of M."""

    model = "flow"
    dynamic = True
    paper = f"{PAPER}, Sec. 2"
    params = COMMON_PARAMS
    uses_speeds = True
    # The integer schemes round flows computed in float64 from w_i / s_i with real speeds: the
    # rule's result for loads that float64 holds exactly, a range declared so that larger loads are refused.
    exact_load_limit = 2**53

    def __init__(self, **params):
        super().__init__(**params)
        c = self.options["c"]
        if not c > 0:
            raise TokendistError(f"{self.name}: c must be positive, got {c}")

    def check_graph(self, graph) -> None:
        super().check_graph(graph)
        s = scaled_speeds(graph, self.options["speed_scale"])
        alpha = edge_coefficients(graph, self.options["c"])
        check_diagonal(graph, alpha, s, name=self.name, c=self.options["c"], allow=self.options["allow_invalid"])

    def reset(self, graph, loads, rng):
        self._base = graph
        s = scaled_speeds(graph, self.options["speed_scale"])
        # Every speed 1 (no speeds given): x = w / s is w itself, no buffer (see the kernels), and
        # s is one value broadcast to n nodes (read-only; 8 bytes instead of 8 n, which on a torus
        # is 4 of the 64 bytes per edge that the design allows for graph plus state).
        self._unit = bool(np.all(s == 1.0))
        self._s = np.broadcast_to(np.float64(1.0), s.shape) if self._unit else s
        self._base_deg_arr = None  # computed on first use (adapt_degrees=false, capacities, per-node form)
        self._cache_graph = None
        self._cache_alpha = None
        self._rng = rng
        self._coef_graph = None
        self._coef_val = None
        self._xbuf = None
        self._flowbuf = None
        self._rows_graph = self._rows = None  # the numpy step of fos and sos (_real_flow_step)
        self._row_tables = None
        self._stencil_graph = None
        self._stencil_val = None
        self._chunks_graph = None  # sos-iou's threaded stencil kernel (see SOSIOU._stencil_chunks)
        self._chunks_val = None
        #: threads=auto (sos-iou, fos-floor): serial against threaded kernel, timed (see _race).
        self.kernel_choice = MeasuredChoice()

    def _base_deg(self) -> np.ndarray:
        if self._base_deg_arr is None:
            self._base_deg_arr = node_degrees(self._base)
        return self._base_deg_arr

    @property
    def _base_degrees(self) -> np.ndarray:
        """``d_i`` of the base graph (what ``adapt_degrees=false`` uses), built when first asked for."""
        return self._base_deg()

    def _alpha(self, graph) -> np.ndarray:
        """Coefficients of ``graph`` (cached while the graph object stays the same), validated."""
        if graph is self._cache_graph:
            return self._cache_alpha
        degrees = None if self.options["adapt_degrees"] else self._base_deg()
        alpha = edge_coefficients(graph, self.options["c"], degrees)
        check_diagonal(graph, alpha, self._s, name=self.name, c=self.options["c"],
                       allow=self.options["allow_invalid"])
        self._cache_graph, self._cache_alpha = graph, alpha
        return alpha

    def _fast(self) -> bool:
        return self.options.get("kernel", "numpy") == "numba"

    def _kernel_coefs(self, graph):
        """``(mode, a0, inv, alpha)`` of ``graph`` for the kernels, validated; cached per graph object.

        No per-edge array unless the graph has capacities: ``c_ij = min(inv_i, inv_j)`` with
        ``inv_i = 1 / (c d_i)`` (the same bits as ``1 / (c max(d_i, d_j))``), and a single scalar
        when all ``inv_i`` are equal (regular graphs). See :mod:`._heterogeneous_kernels`.
        """
        if graph is self._coef_graph:
            return self._coef_val
        if graph.capacities is not None:
            val = (COEF_EDGE, 0.0, _EMPTY, self._alpha(graph))
        else:
            c = self.options["c"]
            d = node_degrees(graph) if self.options["adapt_degrees"] else self._base_deg()
            with np.errstate(divide="ignore"):
                inv = 1.0 / (c * d)  # inf on isolated nodes, which have no edge to use it
            if graph.n and np.all(inv == inv[0]):
                val = (COEF_SCALAR, float(inv[0]), _EMPTY, _EMPTY)
            else:
                val = (COEF_NODE, 0.0, inv, _EMPTY)
            total = np.empty(graph.n)
            node_alpha_sums(graph.indptr, graph.indices, val[0], val[1], val[2], _EMPTY, graph.csr_edges, total)
            raise_on_negative_diagonal(1.0 - total / self._s, self._s, name=self.name, c=c,
                                       allow=self.options["allow_invalid"])
        self._coef_graph, self._coef_val = graph, val
        return val

    def _stencil_runs(self, graph, mode, edges=False):
        """The offset-stencil runs for the serial kernels, or None (cached per graph object).

        Only with the numba kernel on one thread and scalar coefficients (a regular graph without
        capacities: ``COEF_SCALAR``) and when ``graph.stencil`` exists (a torus or ring). Returns
        ``(starts, ends, lower, upper)``, or with ``edges`` (the SOS kernels) the runs trimmed to
        where the lower edge ids are the running counter plus constants
        (:func:`~tokendist.graphs._stencil.lower_edge_runs`): ``(starts, ends, lower, upper,
        edge_delta)``. Same results as the CSR kernels, bit for bit.
        """
        if mode != COEF_SCALAR or use_threads(self.name, self.options.get("threads", 1)):
            return None
        if graph is not self._stencil_graph:
            st = graph.stencil
            val = None
            if st is not None:
                val = (st.starts, st.ends, st.lower, st.upper)
                if edges:
                    starts, ends, edge_delta = lower_edge_runs(st, graph.csr_edges)
                    val = (starts, ends, st.lower, st.upper, edge_delta) if starts.shape[0] else None
            self._stencil_graph, self._stencil_val = graph, val
        return self._stencil_val

    def _real_flow_step(self, graph, loads, y) -> Step:
        """The numpy step of a real-valued flow scheme (``fos``, ``sos``): ``w - div y`` and what each
        node sends, added as the serial kernels add them, so the same bits (:mod:`tokendist.kernels._rows`).

        Row ``i`` of the kernels sums the flows ``y_e`` of its lower slots (edges ``(j, i)``, ``j < i``,
        flowing in) then of its upper slots (flowing out), each from 0.0 in CSR order, and the
        positive parts the same way; ``w_i + (in - out)``; the load moved adds the rows in order.
        """
        if self._rows_graph is not graph:
            self._rows_graph, self._rows = graph, RowOrder(graph)
            self._row_tables = regular_slot_tables(graph, self._rows)
        rows = self._rows
        if self._row_tables is not None:
            return self._real_flow_step_regular(graph, loads, y)
        ys = y[graph.csr_edges]
        low = rows.lower
        inn, outs = rows.sums(np.where(low, ys, 0.0)), rows.sums(np.where(low, 0.0, ys))
        sent = rows.sums(np.where(low, 0.0, np.maximum(ys, 0.0))) + rows.sums(np.where(low, np.maximum(-ys, 0.0), 0.0))
        new = np.asarray(loads, dtype=np.float64) + (inn - outs)
        return Step(new, moved=sequential_sum(sent), messages=2 * graph.m, flows=y, outflow=sent)

    def _real_flow_step_regular(self, graph, loads, y) -> Step:
        """:meth:`_real_flow_step` on a regular graph, its sums from one table (:func:`regular_flow_sums`)."""
        change, sent = regular_flow_sums(self._row_tables, y)
        new = np.asarray(loads, dtype=np.float64) + change  # moved: sequential_sum, without np.cumsum's wrapper
        return Step(new, moved=float(np.add.accumulate(sent)[-1]), messages=2 * graph.m, flows=y, outflow=sent)

    def _x(self, loads):
        """``w / s`` for the kernels: ``loads`` itself when every speed is 1, else a reused buffer."""
        if self._unit:
            return loads
        if self._xbuf is None or self._xbuf.shape[0] != loads.shape[0]:
            self._xbuf = np.empty(loads.shape[0])
        return np.divide(loads, self._s, out=self._xbuf)

    def _outflow_buffer(self, n, dtype):
        """The per-node outflow buffer, reused from step to step (the engine reads it at once)."""
        b = self._flowbuf
        if b is None or b.shape[0] != n or b.dtype != dtype:
            b = self._flowbuf = np.empty(n, dtype)
        return b

    def _race(self, graph, serial, threaded):
        """``serial()``; with ``threads=auto`` on a graph of at least :data:`AUTO_MIN_NODES` nodes,
        where threads are allowed, the faster now of ``serial()`` and ``threaded(k)`` on the
        machine's k numba threads (:class:`._measured_choice.MeasuredChoice`). The two must give
        the same results bit for bit."""
        k = numba.config.NUMBA_NUM_THREADS
        if not (self._may_race(graph) and auto_threads_allowed()):
            return serial()

        def run_threaded():
            numba.set_num_threads(k)
            return threaded(k)

        return self.kernel_choice.run(serial, run_threaded)

    def _may_race(self, graph) -> bool:
        """Whether :meth:`_race` can run anything but ``serial()`` on ``graph`` (fixed for a run)."""
        return (self.options.get("threads") == AUTO and numba.config.NUMBA_NUM_THREADS > 1
                and graph.n >= AUTO_MIN_NODES)

    def _kernel_args(self, graph):
        mode, a0, inv, alpha = self._kernel_coefs(graph)
        return graph.indptr, graph.indices, mode, a0, inv, alpha

    def _weighted(self, loads):
        return loads / self._s

    def _balanced(self, loads) -> bool:
        x = self._weighted(loads)
        return bool(np.ptp(x) <= 1e-12 * max(1.0, float(np.abs(x).max())))

    # Per-node form (fos, fos-floor; sos and sos-iou build on it, _heterogeneous_node.py): publish
    # (w_i / s_i, d_i), d_i of the step's graph as the kernels take it; node i sends the FOS flow
    # c_ij (w_i/s_i - w_j/s_j) to every neighbour j with a positive flow. Same formula as the
    # kernel, so the floats agree bit for bit.
    def publish(self, rnd, t, node, view):
        return node_publish(self, node, view)

    def _node_flows(self, node, view):
        """The FOS flow out of ``node`` to each neighbour where it is positive (one node's rule)."""
        return {j: y for j, y in fos_node_flows(self, node, view).items() if y > 0}


@register_protocol
class FOS(HeterogeneousDiffusion):
    """First Order Scheme with real-valued load on heterogeneous networks (equation (3)).

    Per node i, each step: send ``c_ij (w_i/s_i - w_j/s_j)`` to every neighbour j where this is
    positive. The loads converge to ``W s_i / sum_j s_j`` (equation (2)) at the rate of the diffusion
    norm ``gamma`` of M (Lemma 1). Never overdraws when ``M_ii >= 0`` (checked).

    References
    ----------
    R. Elsässer, B. Monien, S. Schamberger, Distributing unit size workload packages in heterogeneous
    networks, JGAA 10(1), 2006, Sec. 2, eq. (3).
    """

    name = "fos"
    title = "First Order Scheme, heterogeneous (real-valued)"
    divisible = True
    exchange_rounds = 1

    params = COMMON_PARAMS + (KERNEL_PARAM, THREADS_PARAM)

    def __init__(self, **params):
        super().__init__(**params)
        check_threads(self.name, self.options["threads"])

    def step(self, t, graph, loads):
        if self._fast():
            loads = np.ascontiguousarray(loads, dtype=np.float64)
            ip, ind, mode, a0, inv, alpha = self._kernel_args(graph)
            # A fresh output array each step: the engine keeps it as the next input (no ping-pong pair).
            out, outflow = np.empty(graph.n), self._outflow_buffer(graph.n, np.float64)
            runs = self._stencil_runs(graph, mode)
            if runs is not None:
                moved = fos_real_stencil(ip, ind, *runs, a0, self._x(loads), loads, out, outflow)
            else:
                args = (ip, ind, graph.csr_edges, mode, a0, inv, alpha, self._x(loads), loads, out, outflow)
                if use_threads(self.name, self.options["threads"]):
                    moved = run_rows(fos_real_step_par, *args)
                else:
                    moved = fos_real_step(*args)
            return Step(out, moved=float(moved), messages=2 * graph.m, outflow=outflow)
        alpha = self._alpha(graph)
        return self._real_flow_step(graph, loads, fos_flows(graph, alpha, self._s, loads))

    def reference_exact(self, graph) -> bool:
        """The numpy step gives the serial kernels' run bit for bit (tokendist.kernels._choice)."""
        return self.options["threads"] in (1, AUTO)

    def is_stable(self, graph, loads):
        return self._balanced(loads)

    # Partitioned form (tokendist.engine.mpi): the serial CSR kernel on one rank's local graph
    # with the whole graph's coefficients (c_ij = min(inv_i, inv_j), inv_i = 1/(c d_i) of the
    # whole graph's degrees): an owned row adds the same floats in the same order as the
    # single-process kernel, so the owned loads and outflows agree bit for bit.
    def partitioned_setup(self, part):
        self._part_coefs = _partitioned_coefs(self, part)

    def partitioned_step(self, t, part, loads):
        """One step on a rank's local graph; the owned entries of the result are the kernel's."""
        g = part.graph
        loads = np.ascontiguousarray(loads, dtype=np.float64)
        mode, a0, inv, alpha, s = self._part_coefs
        out, outflow = np.empty(g.n), np.empty(g.n)
        x = loads if self._unit else loads / s
        fos_real_step(g.indptr, g.indices, g.csr_edges, mode, a0, inv, alpha, x, loads, out, outflow)
        return Step(out, messages=2 * part.global_graph.m, outflow=outflow)

    def partitioned_is_stable(self, part, loads):
        x = (loads if self._unit else loads / self._part_coefs[4])[part.owned]
        hi, lo, top = part.allreduce_array(np.array([x.max(initial=-np.inf), -x.min(initial=np.inf),
                                                     np.abs(x).max(initial=0.0)]), "max")
        return bool(hi - (-lo) <= 1e-12 * max(1.0, float(top)))

    def decide(self, t, node, view):
        return self._node_flows(node, view)


@register_protocol
class FOSFloor(HeterogeneousDiffusion):
    """Integer FOS: each edge carries its FOS flow rounded down to an integer (Sec. 1, Sec. 4; [22]).

    Per node i, each step: send ``floor(c_ij (w_i/s_i - w_j/s_j))`` tokens to every neighbour j where
    the flow is positive (so a flow is rounded towards zero, never reversed). Stops at a fixed point
    where every edge's flow is below one token: the rounding error the randomized algorithm removes.

    References
    ----------
    Elsässer, Monien, Schamberger 2006, Sec. 1 (the discretization of [22]) and Sec. 4 (phase 1).
    """

    name = "fos-floor"
    title = "Integer First Order Scheme (flows rounded down)"
    paper = f"{PAPER}, Sec. 1 and 4"
    exchange_rounds = 1

    params = COMMON_PARAMS + (KERNEL_PARAM, auto_threads_param(
        "on a graph of at least 2^18 nodes without an offset stencil (a torus's serial stencil kernel stays), time "
        "the serial and the threaded kernels on the run's own steps and run the faster"))

    def __init__(self, **params):
        super().__init__(**params)
        check_threads(self.name, self.options["threads"])

    def step(self, t, graph, loads):
        if self._fast():
            loads = np.ascontiguousarray(loads, dtype=np.int64)
            ip, ind, mode, a0, inv, alpha = self._kernel_args(graph)
            out, outflow = np.empty(graph.n, np.int64), self._outflow_buffer(graph.n, np.int64)
            runs = self._stencil_runs(graph, mode)
            if runs is not None:
                moved = fos_floor_stencil(ip, ind, *runs, a0, self._x(loads), loads, out, outflow)
            else:
                args = (ip, ind, graph.csr_edges, mode, a0, inv, alpha, self._x(loads), loads, out, outflow)
                if use_threads(self.name, self.options["threads"]):
                    moved = run_rows(fos_floor_step_par, *args)
                else:  # threads=auto may race the threaded kernel: integers, the same bits
                    moved = self._race(graph, lambda: fos_floor_step(*args),
                                       lambda k: run_rows(fos_floor_step_par, *args))
            return Step(out, moved=int(moved), messages=2 * graph.m, outflow=outflow)
        alpha = self._alpha(graph)
        y = np.trunc(fos_flows(graph, alpha, self._s, loads))
        return Step(apply_flows(graph, loads, y), moved=int(np.abs(y).sum()), messages=2 * graph.m, flows=y)

    def is_stable(self, graph, loads):
        alpha = self._alpha(graph)
        return bool(np.all(np.abs(fos_flows(graph, alpha, self._s, loads)) < 1.0))

    # Partitioned form (tokendist.engine.mpi): as FOS.partitioned_step, with the floor kernel
    # (integer flows: the owned loads and outflows are exact).
    def partitioned_setup(self, part):
        self._part_coefs = _partitioned_coefs(self, part)

    def partitioned_step(self, t, part, loads):
        """One step on a rank's local graph; the owned entries of the result are the kernel's."""
        g = part.graph
        loads = np.ascontiguousarray(loads, dtype=np.int64)
        mode, a0, inv, alpha, s = self._part_coefs
        out, outflow = np.empty(g.n, np.int64), np.empty(g.n, np.int64)
        x = loads if self._unit else loads / s
        fos_floor_step(g.indptr, g.indices, g.csr_edges, mode, a0, inv, alpha, x, loads, out, outflow)
        return Step(out, messages=2 * part.global_graph.m, outflow=outflow)

    def partitioned_is_stable(self, part, loads):
        g = part.graph
        mode, a0, inv, alpha, s = self._part_coefs
        whole = self._alpha(part.global_graph)[part.edges]
        x = loads / s
        return part.allreduce(bool(np.all(np.abs(whole * (x[g.u] - x[g.v])) < 1.0)), "and")

    def decide(self, t, node, view):
        return {j: int(np.floor(y)) for j, y in self._node_flows(node, view).items() if y >= 1.0}


class _SecondOrder(HeterogeneousDiffusion):
    """beta from gamma of the base graph's M (Lemma 1) unless given; per-edge flow memory.

    Per-node form (:mod:`._heterogeneous_node`): one exchange round publishing ``(w_i / s_i, d_i)``
    as ``fos`` does; each node keeps its own view of every edge's previous SOS flow (and, for
    ``sos-iou``, of its IOU) in ``view.memory``.
    """

    exchange_rounds = 1

    params = COMMON_PARAMS + (
        Param("beta", float, 0.0, "SOS parameter beta; 0: 2/(1 + sqrt(1 - gamma^2)) with gamma of M (Lemma 1)"),
        KERNEL_PARAM, THREADS_PARAM,
    )

    def __init__(self, **params):
        super().__init__(**params)
        check_threads(self.name, self.options["threads"])

    def _parallel(self, graph):
        """``(SOS_BLOCK, first edge of each block)`` when ``threads > 1`` (cached per graph), else None."""
        if not use_threads(self.name, self.options["threads"]):
            return None
        return self._blocks(graph)

    def _blocks(self, graph):
        """``(SOS_BLOCK, first edge of each block)`` of ``graph`` for the threaded kernels (cached per graph)."""
        if self._eblock_graph is not graph:
            self._eblock = block_edge_starts(graph.u, graph.n, SOS_BLOCK)
            self._eblock_graph = graph
        return SOS_BLOCK, self._eblock

    def reset(self, graph, loads, rng):
        super().reset(graph, loads, rng)
        self._eblock_graph = self._eblock = None
        beta = self.options["beta"]
        if beta == 0.0:
            alpha = self._alpha(graph)
            if self._fast():
                # The kernels need no per-edge coefficients: do not keep these m values.
                self._cache_graph = self._cache_alpha = None
            # Only gamma is needed: dense below DENSE_LIMIT nodes, deflated Lanczos above (O(m) a step).
            self.spectrum = diffusion_norm(graph, alpha, self._s)
            del alpha
            beta = sos_beta(self.spectrum["gamma"])
        else:
            self.spectrum = None
            if not 0.0 < beta < 2.0:
                raise TokendistError(f"{self.name}: beta must be in (0, 2), got {beta}")
        self.beta = float(beta)
        self._k = 0
        self._keys = None
        self._prev = None
        self._flow_graph = None  # the graph of the reference step's _prev (and sos-iou's _iou)
        self._state_graph = None
        self.dropped = 0.0
        self._net = None  # sos-iou's numpy step: integer sends applied per CSR slot (RowOrder.net)
        self._index = None  # the numpy steps' EdgeIndex of the graph of _sos_flow
        self._plan_graph = self._plan = None  # sos-iou's kernel for the graph (_kernel_plan)

    def _cube_dimension(self, graph, mode):
        """``d`` when the step runs a hypercube kernel (:mod:`._heterogeneous_sos_cube`), else None.

        Serial numba path, scalar coefficients, ``hypercube:d`` with ``d`` at least
        :data:`SOS_CUBE_MIN_DIMENSION`. The per-edge state is then kept by dimension (2-D arrays).
        """
        if mode != COEF_SCALAR or use_threads(self.name, self.options["threads"]):
            return None
        d = graph.cube_dimension
        return d if d is not None and d >= SOS_CUBE_MIN_DIMENSION else None

    def _carry_state(self, graph, values):
        """``values`` (per edge of the previous step's graph) on ``graph``; free when the graph is unchanged."""
        if values is None:
            return np.zeros(graph.m)
        if graph is self._state_graph:
            return values
        # The previous graph's keys only now, when the graph changed (static runs never build them).
        out, dropped = _carry(self._state_graph.edge_keys, values, graph)
        self.dropped += dropped
        return out if out is not values else values.copy()

    def _sos_flow(self, graph, loads, out=None):
        """``y^k = beta F(w^{k-1}) + (beta - 1) y^{k-1}`` (``y^1 = F(w^0)``): the flow form of eq. (4).

        ``out``: where to write ``y^k`` (default: a new array).
        """
        if self._index is None or self._index.graph is not graph:
            self._index = EdgeIndex(graph, self._alpha(graph))
        # x = w / s (w itself when every speed is 1 and w is real: dividing by 1.0 changes no bit)
        f = self._index.fos_flows(loads if self._unit and loads.dtype == np.float64 else loads / self._s)
        if self._k == 0:
            y = f
            if out is not None:
                out[:] = f
                y = out
        else:
            if graph is self._flow_graph:  # the same graph as last step: the same edges, nothing to map
                prev = self._prev
            else:
                prev, dropped = _carry(self._keys, self._prev, graph)
                self.dropped += dropped
            y = np.add(self.beta * f, (self.beta - 1.0) * prev, out=out)
        self._k += 1
        return y

    def _remember(self, graph, y):
        self._keys = graph.edge_keys
        self._prev = y
        self._flow_graph = graph

    def state_key(self):
        # The flows themselves, not a copy: the engine hashes the array's bytes at once (engine/_cycles.py).
        return b"" if self._prev is None else self._prev


@register_protocol
class SOS(_SecondOrder):
    """Second Order Scheme with real-valued load on heterogeneous networks (equation (4)).

    ``w^1 = M w^0``, ``w^k = beta M w^{k-1} + (1 - beta) w^{k-2}``, run in flow form: the flow on
    edge e is ``y_e^k = beta c_e (w_u/s_u - w_v/s_v) + (beta - 1) y_e^{k-1}``, so
    ``w^k = w^{k-1} - div y^k`` equals eq. (4) on a static graph. The outgoing flow of a node can
    exceed its load (Sec. 2): loads may go negative (``may_go_negative``).

    Per node i, each step: publish ``(w_i/s_i, d_i)``; for every neighbour j compute the FOS flow
    ``f_ij = c_ij (w_i/s_i - w_j/s_j)`` and the SOS flow ``y_ij = beta f_ij + (beta - 1) yhat_ij``
    (``y_ij = f_ij`` in the first step; ``yhat_ij`` the flow i computed on the edge last step, 0 on
    a new edge); send ``y_ij`` where it is positive; remember ``yhat_ij = y_ij``.

    References
    ----------
    Elsässer, Monien, Schamberger 2006, Sec. 2, eq. (4), Lemma 1.
    """

    name = "sos"
    title = "Second Order Scheme, heterogeneous (real-valued)"
    divisible = True
    may_go_negative = True

    def step(self, t, graph, loads):
        if self._fast():
            loads = np.ascontiguousarray(loads, dtype=np.float64)
            mode, a0, inv, alpha = self._kernel_coefs(graph)
            out, outflow = np.empty(graph.n), self._outflow_buffer(graph.n, np.float64)
            first = self._k == 0
            runs = self._stencil_runs(graph, mode, edges=True)
            d = self._cube_dimension(graph, mode)
            if d is not None:  # same results bit for bit, the state by dimension
                flow = self._cube_state(graph, d)
                moved = sos_real_cube(d, a0, self.beta, first, self._x(loads), loads, flow, out, outflow)
            elif runs is not None:
                flow = self._carry_state(graph, self._edge_flows())
                moved = sos_real_stencil(graph.indptr, graph.indices, graph.csr_edges, *runs, a0, self.beta, first,
                                         self._x(loads), loads, flow, out, outflow)
            else:
                flow = self._carry_state(graph, self._edge_flows())
                args = (graph.indptr, graph.indices, graph.csr_edges, mode, a0, inv, alpha, self.beta, first,
                        self._x(loads), loads, flow, out, outflow)
                par = self._parallel(graph)
                moved = sos_real_step(*args) if par is None else run_blocks(sos_real_step_par, *args, *par)
            self._k += 1
            self._state_graph = graph
            self._prev = flow
            return Step(out, moved=float(moved), messages=2 * graph.m, outflow=outflow)
        y = self._sos_flow(graph, loads)
        self._remember(graph, y)
        return self._real_flow_step(graph, loads, y)

    def reference_exact(self, graph) -> bool:
        """The numpy step gives the serial kernels' run bit for bit (tokendist.kernels._choice)."""
        return self.options["threads"] in (1, AUTO)

    def _edge_flows(self):
        """Last step's flows in edge order (None before the first step), whatever layout they are kept in."""
        prev = self._prev
        if prev is not None and prev.ndim == 2:  # by dimension (the cube kernel)
            return flows_from_cube(self._state_graph, prev)
        return prev

    def _cube_state(self, graph, d):
        """Last step's flows in the ``(d, n / 2)`` layout of :func:`sos_real_cube` (moved on a change of layout)."""
        prev = self._prev
        if prev is None:
            return np.zeros((d, graph.n // 2))
        if prev.ndim == 2 and graph is self._state_graph:
            return prev
        return flows_to_cube(graph, d, self._carry_state(graph, self._edge_flows()))

    def decide(self, t, node, view):
        return sos_node_flows(self, node, view)

    # Partitioned form (tokendist.engine.mpi): the serial CSR kernel on a rank's local graph, the
    # flow of every local edge (cut edges too) kept by the rank (:mod:`._partitioned`).
    partitioned_setup = _partitioned.sos_setup
    partitioned_step = _partitioned.sos_step
    partitioned_is_stable = _partitioned.sos_is_stable
    partitioned_state_key = _partitioned.sos_state_key

    def is_stable(self, graph, loads):
        return self._balanced(loads) and (self._prev is None or float(np.abs(self._prev).max(initial=0)) < 1e-12)

    def report(self):
        return {"beta": self.beta, **({} if self.spectrum is None else {"gamma": self.spectrum["gamma"],
                                                                "gamma_method": self.spectrum.get("method", "dense")}),
                "flow_dropped_with_edges": self.dropped}


@register_protocol
class SOSIOU(_SecondOrder):
    """Integer SOS with an "I owe you" (IOU) account per edge (Sec. 3, Theorem 1; [22]).

    Per edge e and step k: an idealised SOS flow ``y_e^k``, the amount owed ``o = y_e^k +
    IOU_e^{k-1}``, and the sender transfers the integer part of ``o`` (rounded towards zero). A node
    whose integer transfers add up to more than it holds pays each of them in proportion, rounded
    down (``overdraw=iou``, default), so it never goes negative; what is not paid stays owed:
    ``IOU_e^k = o - sent``, i.e. the IOU is the total ideal flow minus the total real flow on the
    edge, the paper's definition. Each such node-step is a negative-load event (the idealised
    integer SOS would have overdrawn there). ``overdraw=allow`` pays in full and lets loads go
    negative (run with ``allow_infeasible``).

    Which idealised process ``y`` is (``ideal``; :mod:`._heterogeneous_sos_readings`,
    ``docs/guide/sos-iou-readings.md``): ``shadow`` (default) ``y^k = beta F(w'^{k-1}) + (beta - 1)
    y^{k-1}`` of a real-valued SOS process on its own divisible loads ``w'`` (``w'^0 = w^0``,
    ``w'^k = w'^{k-1} - div y^k``), the paper's "idealized scheme"; ``sent`` ``y^k = beta F(w^{k-1})
    + (beta - 1) sent^{k-1}`` (eq. (5) on the real loads); ``driven`` ``y^k = beta F(w^{k-1}) +
    (beta - 1) y^{k-1}`` (momentum on the previous ideal flow). ``F_e(w) = c_e (w_u/s_u - w_v/s_v)``;
    ``y^1 = F`` of the first step's loads. ``kernel=numba`` runs every reading on the kernels:
    ``shadow`` feeds them ``w' / s``, ``sent`` keeps the flow sent as their momentum state.

    Per node i, each step: publish ``(w_i/s_i, d_i)`` (``shadow``: ``(w'_i/s_i, d_i)``, after giving
    back to ``w'_i`` the IOUs of edges gone this step); for every neighbour j, settle last step's
    account ``IOU_ij = o_ij - (sent_ij - got_ij)`` (``got_ij``: the tokens that arrived from j,
    ``view.delivered``), compute ``y_ij`` as the reading says, ``o_ij = y_ij + IOU_ij`` and
    ``t_ij = trunc(o_ij)``; send ``t_ij`` tokens where positive, or, if they add up to
    ``T_i > w_i`` and ``overdraw=iou``, ``floor(t_ij w_i / T_i)`` each; ``shadow``: ``w'_i`` loses
    ``sum_j y_ij``. Node j holds the negated values of the same edge. See
    :mod:`._heterogeneous_node`.

    References
    ----------
    Elsässer, Monien, Schamberger 2006, Sec. 3 and Theorem 1; Muthukrishnan, Ghosh, Schultz 1998.
    """

    name = "sos-iou"
    title = "Integer Second Order Scheme with IOUs"
    paper = f"{PAPER}, Sec. 3"
    params = tuple(AUTO_THREADS_PARAM if p is THREADS_PARAM else p for p in _SecondOrder.params) + (
        Param("overdraw", str, "iou", "iou: pay at most the tokens held, owe the rest; allow: pay in full",
              ("iou", "allow")),
        Param("ideal", str, "shadow", "which idealised SOS process the IOUs track (docs/guide/sos-iou-readings.md): "
              "shadow (real-valued SOS on its own divisible loads, run alongside: the paper's text), sent "
              "(momentum on the flow actually sent: eq. (5) of Theorem 1's proof) or driven (momentum on the "
              "previous ideal flow, driven by the integer loads)", IDEAL_READINGS),
    )

    def reset(self, graph, loads, rng):
        super().reset(graph, loads, rng)
        self._iou = None
        self._exc_bits = None
        #: ideal=shadow: the idealised real-valued SOS process's own loads w' (w'^0 = w^0).
        self._shadow = np.array(loads, dtype=np.float64) if self.options["ideal"] == "shadow" else None
        self._ref_graph = None  # the reference path's previous graph (ideal=shadow folds its dropped IOUs)
        self._state = StatePair()  # the numpy step's state, [y | IOU | w'] side by side
        self.iou_returned = 0.0
        #: Which variant ran the last step: ``numba`` (the kernels) or ``numpy`` (the reference).
        self.path = None
        self.events = 0
        self.event_steps = 0
        self.iou_series: list[float] = []
        self.iou_max = 0.0
        # steps(): its key buffer, the step whose state that buffer holds, its per-step outputs
        self._block_key, self._block_key_at, self._block_out = None, -1, None

    # The fast kernel may keep the amounts owed o (all paid in full) instead of the IOUs
    # o - trunc(o), to save a pass (see sos_iou_step); ``_iou`` always gives the IOUs.
    # The cube kernel keeps them, and the flows, by dimension (2-D); ``_iou`` is in edge order.
    @property
    def _iou(self):
        raw = self._iou_raw
        if raw is None:
            return raw
        iou = _actual_ious(raw, True, self._has_exc, self._exc_bits) if self._owed_stored else raw
        return flows_from_cube(self._state_graph, iou) if iou.ndim == 2 else iou

    @_iou.setter
    def _iou(self, values):
        self._iou_raw = values
        self._owed_stored = False
        self._has_exc = False
        if getattr(self, "_exc_bits", None) is not None:
            self._exc_bits[:] = 0

    def _cube_dimension(self, graph, mode):
        """``d`` when the step runs a hypercube kernel, else None.

        As for ``sos``, but with ``threads=k`` too where :func:`cube_chunk_bits` can cut the cube
        (``d`` at least 13): the threaded cube kernel (:mod:`._heterogeneous_sos_cube_parallel`)
        keeps the state by dimension as the serial one does.
        """
        if mode != COEF_SCALAR:
            return None
        d = graph.cube_dimension
        if d is None or d < SOS_CUBE_MIN_DIMENSION:
            return None
        threads = self.options["threads"]
        if use_threads(self.name, threads) and not cube_chunk_bits(d, threads):
            return None  # too small to cut: the threaded row blocks
        return d

    def _stencil_chunks(self, graph, mode, threads):
        """The arguments of :func:`sos_iou_stencil_par` on ``threads`` threads, or None.

        Scalar coefficients and ``graph.stencil`` as for the serial stencil kernel; the nodes cut
        into :data:`STENCIL_CHUNKS_PER_THREAD` ``* threads`` ranges (cached per graph object).
        """
        if mode != COEF_SCALAR or graph.stencil is None:
            return None
        if self._chunks_graph is not graph:
            st = graph.stencil
            starts, ends, edge_delta = lower_edge_runs(st, graph.csr_edges)
            val = None
            if starts.shape[0]:
                val = stencil_chunks(starts, ends, st.lower, st.upper, edge_delta, graph.indptr, graph.indices, graph.u,
                                     STENCIL_CHUNKS_PER_THREAD * threads)
            self._chunks_graph, self._chunks_val = graph, val
        return self._chunks_val

    def _fast_step(self, graph, loads, x=None, keep_sent=False):
        """One step on the numba kernels; ``x`` replaces ``w / s`` in the flows (ideal=shadow: ``w' / s``).

        ``keep_sent`` (ideal=sent): the kernels read their momentum from the state they keep as
        ``yhat``; afterwards that state becomes the flow actually sent, ``o - IOU^k`` with
        ``o = y + IOU^{k-1}`` the amount owed (exact: see :func:`_sent_flows`).
        """
        loads = np.ascontiguousarray(loads, dtype=np.int64)
        run_kernel, d = self._plan if graph is self._plan_graph else self._kernel_plan(graph)
        out = np.zeros(graph.n, np.int64)  # zeros: the kernel adds load corrections into it
        # What each node owes, then (in place) what it sent: the outflow.
        outflow = self._outflow_buffer(graph.n, np.float64)
        first = self._k == 0
        prev = self._prev
        by_dim = prev is not None and prev.ndim == 2  # kept by the cube kernel
        if by_dim and d is not None and graph is self._state_graph:
            yhat, iou = prev, self._iou_raw
        else:
            if by_dim:
                self._prev = flows_from_cube(self._state_graph, prev)
            if self._owed_stored and (by_dim or d is not None or graph is not self._state_graph):
                # The IOUs themselves (no exception bit) before they change layout or graph.
                self._iou = self._iou
            yhat, iou = self._carry_state(graph, self._prev), self._carry_state(graph, self._iou_raw)
            if d is not None:
                yhat, iou = flows_to_cube(graph, d, yhat), flows_to_cube(graph, d, iou)
        bits = self._exc_bits
        if bits is None or bits.shape[0] != (graph.m + 7) // 8:
            bits = self._exc_bits = np.zeros((graph.m + 7) // 8, np.uint8)  # m / 8 bytes
        iou_before = _actual_ious(iou, self._owed_stored, self._has_exc, bits) if keep_sent else None
        res = run_kernel(self.beta, first, self._owed_stored, self._has_exc, bits, self.options["overdraw"] == "iou",
                         self._x(loads) if x is None else x, loads, yhat, iou, out, outflow)
        moved, short, units, biggest, self._has_exc = res
        self._owed_stored = True
        self._k += 1
        if short:
            self.events += int(short)
            self.event_steps += 1
        self._state_graph = graph
        self._prev, self._iou_raw = yhat, iou
        if keep_sent:
            self._prev = _sent_flows(yhat, iou_before, _actual_ious(iou, True, self._has_exc, bits))
        units = float(units)
        self.iou_series.append(units)
        if graph.m:
            self.iou_max = max(self.iou_max, float(biggest))
        return Step(out, moved=int(moved), messages=2 * graph.m, outflow=outflow, info={"iou_units": units})

    def _kernel_plan(self, graph):
        """``(run, d)``: ``run(*tail)`` runs the step's kernel on ``graph`` (``tail``: its arguments from
        ``beta`` on), ``d`` the cube's dimension for a cube kernel, else None. The serial kernel; with
        ``threads=k`` the threaded one; with ``threads=auto`` the faster of the two (:meth:`_race`): the
        same bits. Chosen once per graph object, so that a step makes no look-up but the call."""
        mode, a0, inv, alpha = self._kernel_coefs(graph)
        d = self._cube_dimension(graph, mode)
        runs = self._stencil_runs(graph, mode, edges=True)
        threads = self.options["threads"]
        chunks = self._stencil_chunks(graph, mode, threads) if use_threads(self.name, threads) else None
        csr = (graph.indptr, graph.indices, graph.csr_edges)
        if d is not None:  # same results bit for bit, the state by dimension
            serial = partial(sos_iou_cube, d, a0)

            def threaded(k, *tail):
                q = cube_chunk_bits(d, k)
                return run_blocks(sos_iou_cube_par, d, q, a0, *tail) if q else serial(*tail)
        elif runs is not None or chunks is not None:  # a torus or ring: same results bit for bit
            serial = None if runs is None else partial(sos_iou_stencil, *csr, *runs, a0)

            def threaded(k, *tail):  # (chunks not None: the graph has runs)
                return run_blocks(sos_iou_stencil_par, *csr, *self._stencil_chunks(graph, mode, k), a0, *tail)
        else:  # CSR rows; threaded: row blocks
            serial = partial(sos_iou_step, *csr, mode, a0, inv, alpha)

            def threaded(k, *tail):
                return run_blocks(sos_iou_step_par, *csr, mode, a0, inv, alpha, *tail, *self._blocks(graph))
        if use_threads(self.name, threads):
            def run(*tail):
                use_threads(self.name, threads)  # numba's thread count, set every step as before
                return threaded(threads, *tail)
        elif self._may_race(graph):
            def run(*tail):
                return self._race(graph, partial(serial, *tail), lambda k: threaded(k, *tail))
        else:
            run = serial
        self._plan_graph, self._plan = graph, (run, d)
        return self._plan

    def step(self, t, graph, loads):
        ideal = self.options["ideal"]
        if self._fast():
            self.path = "numba"
            if ideal != "shadow":
                return self._fast_step(graph, loads, keep_sent=ideal == "sent")
            # The kernels of reading driven, fed the shadow's x' = w' / s: their yhat is the shadow's own SOS flow.
            if self._state_graph is not None and graph is not self._state_graph:
                self.iou_returned += fold_dropped_ious(self._shadow, self._state_graph, self._iou, graph)
            x = self._shadow if self._unit else np.ascontiguousarray(self._shadow / self._s)  # (w' is ours)
            step = self._fast_step(graph, loads, x=x)
            if self._prev.ndim == 2:  # by dimension (the cube kernel)
                shadow_update(graph.u, graph.v, flows_from_cube(graph, self._prev), self._shadow)
            else:  # w' - div y and, while the engine reads state_key (small graphs), [y | IOU | w'] for it
                key = self._state.next(2 * graph.m + graph.n) if self._state.wanted else _EMPTY
                shadow_step(graph.u, graph.v, self._prev, self._shadow, self._iou_raw, self._has_exc, self._exc_bits,
                            key)
                self._state.views = (self._prev, self._iou_raw, self._shadow) if key.size else None
            return step
        self.path = "numpy"  # the reference
        same = graph is self._ref_graph  # the same graph as last step: no edge came or went
        m = graph.m  # this step's y, IOUs and shadow loads go side by side into one buffer (state_key)
        state = self._state.next(2 * m + (graph.n if ideal == "shadow" else 0))
        if ideal == "shadow":
            if self._ref_graph is not None and not same:
                self.iou_returned += fold_dropped_ious(self._shadow, self._ref_graph, self._iou, graph)
            yhat = self._sos_flow(graph, self._shadow, out=state[:m])
        else:  # driven and sent: the flow from the integer loads; _prev holds the momentum term
            yhat = self._sos_flow(graph, loads, out=state[:m])
        if same:
            iou = self._iou
        else:
            iou, dropped = _carry(self._keys, self._iou, graph)
            self.dropped += dropped
        owed = yhat + iou
        send = np.trunc(owed)
        degree = self._index.degree
        size = np.abs(send)
        biggest = size.max() if m else 0.0
        shorted = False
        # At most degree * biggest tokens leave a node: within the smallest load (< 2**53), nobody is short.
        if not (m and biggest * degree <= int(loads.min()) < _EXACT_SUMS):
            out = (np.bincount(graph.u, weights=np.maximum(send, 0), minlength=graph.n)
                   + np.bincount(graph.v, weights=np.maximum(-send, 0), minlength=graph.n))
            short = out > loads
            if short.any():
                shorted = True
                self.events += int(short.sum())
                self.event_steps += 1
                if self.options["overdraw"] == "iou":
                    # Pay each outgoing edge of a short node in proportion to what it is owed, rounded
                    # down: floor(|t| w / T), evaluated as (|t| w) / T (exact while |t| w < 2**53).
                    sender = np.where(send > 0, graph.u, graph.v)
                    pays = short[sender]
                    prop = np.floor((np.abs(send) * loads[sender]) / np.where(pays, out[sender], 1.0))
                    send = np.where(pays, np.sign(send) * prop, send)
                    size = np.abs(send)
                    biggest = size.max()
        new_iou = np.subtract(owed, send, out=state[m:2 * m])
        self._keys = graph.edge_keys
        self._ref_graph = graph
        if ideal == "sent":  # next step's momentum is the flow actually sent (eq. (5) on the real loads)
            np.copyto(yhat, send)
        self._prev = yhat
        self._flow_graph = graph
        self._iou = new_iou
        if ideal == "shadow":
            self._shadow = np.add(self._shadow, self._index.net(yhat), out=state[2 * m:])  # (apply_flows)
        self._state.views = (self._prev, self._iou_raw, self._shadow)
        iou_size = np.abs(new_iou)
        # Every edge paid in full, every IOU is owed - trunc(owed), a fraction: no whole unit owed.
        units = (float(np.floor(iou_size).sum()) if shorted or not (math.isfinite(biggest) and _EXACT_SUMS)
                 else 0.0)
        self.iou_series.append(units)
        if new_iou.size:
            self.iou_max = max(self.iou_max, float(iou_size.max()))
        flows = send.astype(np.int64)
        # Integer sums in float64 are exact while every partial sum stays below 2**53.
        moved = int(size.sum()) if biggest * m < _EXACT_SUMS else int(np.abs(flows).sum())
        if loads.dtype != np.int64:
            new = apply_flows(graph, loads, flows)
        elif not biggest and _EXACT_SUMS:  # nothing sent (most steps, once the run has settled)
            new = loads.copy()
        elif biggest * degree < _EXACT_SUMS:
            new = loads + self._index.net(send).astype(np.int64)
        else:  # exact int64 sums per CSR slot
            if self._net is None or self._net.graph is not graph:
                self._net = RowOrder(graph)
            new = loads + self._net.net(flows)
        return Step(new, moved=moved, messages=2 * m, flows=flows, info={"iou_units": units})

    steps_find_cycles = True

    def steps(self, t, k, graph, loads, block, moved, messages, stop_idle, seen=None):
        """Up to ``k`` steps in one call (:meth:`Protocol.steps`): the serial stencil kernel and the
        shadow update of :meth:`step`, with the cycle check on the state's bytes
        (:func:`.kernels._stencil.sos_iou_stencil_steps`).

        Only where :meth:`step` runs exactly that: ``kernel=numba``, ``ideal=shadow``, unit speeds,
        a torus or ring, one thread (no ``threads=auto`` race), and ``overdraw=iou`` from loads
        >= 0: a node then pays at most what it holds and the new loads stay >= 0, so the block's
        check (the sign of the loads) finds what the outflow the step reports would. Else None,
        as while a small run would compile the block kernel.
        """
        if (not self._fast() or self.options["ideal"] != "shadow" or self.options["overdraw"] != "iou"
                or not self._unit or graph.m == 0 or loads.min() < 0):
            return None
        run, d = self._plan if graph is self._plan_graph else self._kernel_plan(graph)
        if d is not None or not (isinstance(run, partial) and run.func is sos_iou_stencil):
            return None
        if self._prev is None:
            if self._k:
                return None
            yhat, iou = np.zeros(graph.m), np.zeros(graph.m)
        elif graph is self._state_graph and self._prev.ndim == 1:
            yhat, iou = self._prev, self._iou_raw
        else:
            return None
        bits = self._exc_bits
        if bits is None or bits.shape[0] != (graph.m + 7) // 8:
            bits = np.zeros((graph.m + 7) // 8, np.uint8)
        size = 2 * graph.m + graph.n
        if self._block_key is None or self._block_key.shape[0] != size:
            self._block_key = np.empty(size)
        if self._prev is None:
            state = _NO_BYTES
        elif self._block_key_at == self._k:  # (the key the last block wrote: this state's)
            state = self._block_key.view(np.uint8)
        else:  # (state_key()'s bytes)
            state = np.concatenate((self._prev, self._iou, self._shadow)).view(np.uint8)
        if self._block_out is None or self._block_out[0].shape[0] != k:
            self._block_out = (np.empty(k), np.empty(k, dtype=np.int64))
        units, shorts = self._block_out
        table = NO_TABLE if seen is None else seen.arrays()
        args = (*run.args, self.beta, self._k == 0, self._owed_stored, self._has_exc, bits, graph.u, graph.v,
                self._shadow, yhat, iou, self._outflow_buffer(graph.n, np.float64), state, self._block_key, t, k,
                stop_idle, *table, loads, block, moved, messages, 2 * graph.m, units, shorts)
        if not block_kernel_ready(_sos_iou_stencil_steps, args):
            return None
        done, has_exc, top = _sos_iou_stencil_steps(*args)
        if done:  # (as after `done` calls of step: _fast_step's bookkeeping)
            self.path = "numba"
            self._exc_bits = bits
            self._owed_stored, self._has_exc = True, bool(has_exc)
            self._k += done
            self._block_key_at = self._k
            self._state_graph = graph
            self._prev, self._iou_raw = yhat, iou
            self._state.views = None  # (state_key: the arrays themselves, not a buffer of an older step)
            short = shorts[:done]
            self.events += int(short.sum())
            self.event_steps += int(np.count_nonzero(short))
            self.iou_series.extend(units[:done].tolist())
            self.iou_max = max(self.iou_max, float(top))
        return done, _SOS_IOU_STENCIL

    def publish(self, rnd, t, node, view):
        if self.options["ideal"] == "shadow":
            return shadow_publish(self, node, view)
        return node_publish(self, node, view)

    def decide(self, t, node, view):
        return sos_iou_node_sends(self, node, view)

    # Partitioned form (tokendist.engine.mpi): the reference rule on a rank's local graph, the
    # flows and IOUs of every local edge kept by the rank, short nodes paid in two phases.
    partitioned_setup = _partitioned.sos_iou_setup
    partitioned_step = _partitioned.sos_iou_step
    partitioned_is_stable = _partitioned.sos_iou_is_stable
    partitioned_state_key = _partitioned.sos_iou_state_key
    partitioned_finish = _partitioned.sos_iou_finish

    def state_key(self):
        self._state.wanted = True  # (the kernel path writes the key from now on: shadow_step)
        if self._prev is None:
            return b""
        # The bytes of prev, the IOUs, the shadow loads: the buffer that holds them side by side, if current.
        # The engine hashes the array's bytes at once (engine/_cycles.py): the buffer itself, no copy.
        views = self._state.views
        if views is not None and self._prev is views[0] and self._iou_raw is views[1] and self._shadow is views[2]:
            return self._state.current
        parts = (self._prev, self._iou) if self._shadow is None else (self._prev, self._iou, self._shadow)
        if all(p.ndim == 1 and p.dtype == np.float64 for p in parts):
            return np.concatenate(parts)
        return parts  # (their bytes one after another: the same key as the buffer's)

    def report(self):
        iou = np.zeros(0) if self._iou is None else self._iou
        return {"beta": self.beta, **({} if self.spectrum is None else {"gamma": self.spectrum["gamma"],
                                                                "gamma_method": self.spectrum.get("method", "dense")}),
                "ideal": self.options["ideal"],
                **({} if self._shadow is None else {"iou_returned_with_edges": self.iou_returned}),
                "iou_total": float(np.abs(iou).sum()), "iou_units": float(np.floor(np.abs(iou)).sum()),
                "iou_max_ever": self.iou_max, "negative_load_events": self.events,
                "steps_with_negative_load_events": self.event_steps,
                "iou_units_series": self.iou_series, "flow_dropped_with_edges": self.dropped}


from . import _random_walk as _heterogeneous_random_walk  # noqa: E402,F401  (registers random-walk)
