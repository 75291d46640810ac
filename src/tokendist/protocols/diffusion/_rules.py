"""Diffusion (Subramanian and Scherson 1994): Algorithm DIFFUSE and its four roundings.

``diffusion`` is the idealised scheme with real-valued loads (Sec. 2, Figure 2): every iteration
each node i broadcasts ``load[i]`` and, for every neighbour j with ``load[i] > load[j]``, sends
``P_ij (load[i] - load[j])`` tasks to j; with P symmetric and stochastic that is ``l(t+1) = P l(t)``.

Sec. 4 replaces line (7) for indivisible tasks in four ways, each registered under its own name:

* ``diffusion-floor``: send ``floor(P_ij (load[i] - load[j]))`` (Figure 3: may stop unbalanced);
* ``diffusion-ceil``: send ``ceil(P_ij (load[i] - load[j]))`` (Figure 4: may oscillate; "a
  processor may not have enough tasks for all its neighbors", so it may overdraw);
* ``diffusion-random``: flip a biased coin, HEAD with probability ``P_ij``: HEAD sends the ceiling,
  TAIL the floor (the OCR reads the probability as ``P_ij``; ``coin=fraction`` uses the fractional
  part of ``P_ij (load[i] - load[j])`` instead, the reading suggested by the paper's intuition);
* ``diffusion-oriented``: fix an acyclic orientation with a unique source and sink joined by an
  edge; send the ceiling along the edge's direction and the floor against it. On a graph that is
  not biconnected, balance on the supergraph H that chains the neighbours of every cut vertex in
  a cycle, each added edge simulated over the two real edges through its cut vertex (Case 2).

Every rounding keeps line (6): only the heavier end of an edge sends. A product
``P_ij (load[i] - load[j])`` within 1e-9 (relative) of an integer counts as that integer, so that a
floating-point P such as 1/3 rounds as the exact rational would.
"""

from __future__ import annotations

import functools
from fractions import Fraction

import numba
import numpy as np

from ..._random import counter_uniform, counter_uniform_scalar, stream_key
from ...engine import Param, Protocol, Step, register_protocol
from ...errors import TokendistError
from ...graphs import biconnected_supergraph, is_biconnected, orientation_sources_sinks, st_orientation
from ...graphs._model import unsigned_view
from ...graphs._stencil import affine_edge_runs
from .kernels._serial import (COIN_BLOCK, RANDOM_FRACTION, counter_uniform_nb, diffuse_stencil_step,
                                 diffuse_step, reciprocal, rounded_stencil_step, rounded_step)
from .kernels._threaded import diffuse_step_parallel, rounded_step_parallel, run_parallel
from ...kernels._choice import AUTO, AUTO_MIN_NODES, MeasuredChoice, auto_threads_allowed, auto_threads_param
from ._partitioned import relay_halo
from .._exact_sums import apply_edge_flows
from ._slots import SlotRounding
from ._diffusivity import (MATRIX_SPECS, coefficient_ratios, default_diffusivity, diagonal, diffusion_matrix,
                           diffusivity)
from ...kernels._report import block_kernel_ready, instrument_kernels, kernel_label
from .kernels._blocks import rounded_stencil_steps as _rounded_stencil_steps
from ...kernels._rows import RowOrder, sequential_sum

instrument_kernels(globals())  # every run reports which kernel ran each step (tokendist.kernels._report)

__all__ = ["Diffusion", "DiffusionFloor", "DiffusionCeil", "DiffusionRandom", "DiffusionOriented",
           "default_diffusivity", "rounded_flows", "ROUNDINGS"]

#: Rounding modes of the kernels (Sec. 4, in the paper's order).
ROUNDINGS = ("floor", "ceil", "random", "oriented")
_FLOOR, _CEIL, _RANDOM, _ORIENTED = range(4)
_COINS = ("pij", "fraction")
_MASK64 = (1 << 64) - 1
#: What a step of the stencil kernel reports as its variant (RunResult.variants), blocks of steps too.
_STENCIL_VARIANT = kernel_label(rounded_stencil_step)
_INT64 = np.dtype(np.int64)
_add_reduce, _min_reduce, _max_reduce = np.add.reduce, np.minimum.reduce, np.maximum.reduce

def number(text: str) -> float:
    """A parameter value given as a decimal or a fraction (``0.5``, ``1/3``)."""
    try:
        return float(Fraction(text.strip()))
    except ZeroDivisionError:
        raise ValueError(text) from None


_MATRIX_PARAMS = (
    Param("matrix", str, "degree", f"diffusivity matrix P: {MATRIX_SPECS} (default P_ij = 1/(2 max(d_i, d_j)))"),
    Param("min_diag", number, 0.5, "lower bound required of every P_ii (Sec. 2: 1/2; 'any positive constant will "
          "do'); a decimal or a fraction such as 1/3"),
)
_THREADS_PARAM = Param("threads", int, 1, "numba threads of the kernel=numba step: 1 runs the serial kernel; k > 1 "
                       "a parallel one over blocks of rows (same results; opt-in, since it is slower when the "
                       "cores are busy)")


#: ``threads`` of the rounded schemes, whose threaded kernel gives the serial kernel's bits (the
#: continuous scheme's ``moved`` may differ in the last bits: it keeps ``threads=1`` by default).
_AUTO_THREADS_PARAM = auto_threads_param(
    "on a graph of at least 2^18 nodes without an offset stencil (a torus's serial stencil kernel beats the threaded "
    "row blocks), time the serial and the threaded kernels on the run's own steps and run the faster")


def _threads(options, name: str) -> int:
    """The validated ``threads`` option (>= 1); ``auto`` gives 1 (the protocol may race the kernels)."""
    k = options["threads"]
    if k == AUTO:
        return 1
    if k < 1:
        raise TokendistError(f"{name}: threads={k}: need at least 1")
    return k


# The fast kernels live in _diffusion_kernels (numba); this module keeps the numpy reference
# (:func:`rounded_flows`) and the per-node rule (:func:`_rounded_amount`).
_counter_uniform_nb = counter_uniform_nb  # (tests import it from here)


def exact_amounts(ud, ratio):
    """``(floor(ud num / den), ud num mod den)`` per entry, in exact uint64 arithmetic (numpy).

    ``ud``: uint64 load differences ``|load[u] - load[v]|``; ``ratio``: int64 rows ``(num, den)``
    (:func:`tokendist.protocols.diffusion._diffusivity.coefficient_ratios`, ``den <= 2**30``). ``ud = a den + b``
    keeps every product below 2**64 (``b num < 2**60``, ``a num <= ud num / den``).
    """
    num = ratio[:, 0].astype(np.uint64)
    den = ratio[:, 1].astype(np.uint64)
    a = ud // den
    t = (ud - a * den) * num
    return (a * num + t // den).astype(np.int64), (t % den).astype(np.int64)


def _abs_diff(lu, lv):
    """``|lu - lv|`` as uint64 and the sign of ``lu - lv``: exact for any int64 loads."""
    pos = lu > lv
    ud = np.where(pos, lu.view(np.uint64) - lv.view(np.uint64), lv.view(np.uint64) - lu.view(np.uint64))
    return ud, pos, lu < lv


def rounded_flows(u, v, alpha, loads, mode: str, *, coins=None, coin: str = "pij", orient=None,
                  ratio=None) -> np.ndarray:
    """Signed integer flow per edge (positive from ``u`` to ``v``) of one rounded step, vectorised.

    The numpy form of the kernel: ``x = P_uv |load[u] - load[v]|`` from the heavier end, with
    ``P_uv`` the exact fraction ``ratio`` (default: :func:`coefficient_ratios` of ``alpha``) and the
    floor and remainder in integers, so exact for any int64 loads (float64 sums would lose tokens
    past 2**53); the rounding ``mode`` (one of :data:`ROUNDINGS`) picks the floor or the ceiling.
    """
    loads = np.asarray(loads)
    if ratio is None:
        ratio = coefficient_ratios(alpha)
    ud, pos, neg = _abs_diff(loads[u].astype(np.int64), loads[v].astype(np.int64))
    fl, rem = exact_amounts(ud, ratio)
    frac = rem != 0
    if mode == "floor":
        up = np.zeros_like(frac)
    elif mode == "ceil":
        up = frac
    elif mode == "random":
        p = (rem / ratio[:, 1]) if coin == "fraction" else np.abs(alpha)
        up = frac & (coins < p)
    elif mode == "oriented":
        up = frac & ((orient > 0) == pos)
    else:
        raise ValueError(mode)
    amount = fl + up
    return pos.astype(np.int64) * amount - neg.astype(np.int64) * amount


@functools.lru_cache(maxsize=4096)
def _ratio_of(alpha: float) -> tuple[int, int]:
    num, den = coefficient_ratios(np.array([alpha]))[0]
    return int(num), int(den)


def _int_bincount(index, weights, n: int) -> np.ndarray:
    """``np.bincount(index, weights, minlength=n)`` in exact int64 (bincount sums in float64)."""
    out = np.zeros(n, dtype=np.int64)
    np.add.at(out, index, weights)
    return out


def _rounded_amount(alpha: float, diff, mode: int, coin_u: float, coin_fraction: bool, along: bool) -> int:
    """The per-node rule: tasks a node sends across one edge when it is ``diff > 0`` heavier.

    ``floor(P_ij diff)`` and its remainder in Python integers, ``P_ij`` the exact fraction of
    :func:`coefficient_ratios` (the same numbers as the kernels, for any load).
    """
    num, den = _ratio_of(float(alpha))
    fl, rem = divmod(int(diff) * num, den)
    if rem == 0:
        return fl
    if mode == _CEIL:
        return fl + 1
    if mode == _RANDOM:
        p = rem / den if coin_fraction else alpha
        return fl + 1 if coin_u < p else fl
    if mode == _ORIENTED:
        return fl + 1 if along else fl
    return fl


def _regular_degree(graph) -> int:
    """D when every node of ``graph`` has degree D >= 1 (the kernels' regular path), else 0."""
    d = graph.degrees
    return int(d[0]) if d.size and d[0] > 0 and int(d.min()) == int(d.max()) else 0


def _usable_stencil(graph):
    """``graph.stencil`` when the stencil kernels take it (offsets on both sides), else None."""
    st = graph.stencil
    # An empty offset tuple does not compile (numba cannot index Tuple()); such one-sided patterns
    # (neighbours all above or all below) do not occur on tori and rings.
    return st if st is not None and st.lower and st.upper else None


# ---------------------------------------------------------------------- protocols
class _DiffusionBase(Protocol):
    """Shared: the validated diffusivity matrix and per-node lookups of its entries."""

    def _coefficients(self, graph) -> np.ndarray:
        return diffusivity(graph, self.options["matrix"], min_diag=self.options["min_diag"])

    def _set_coefficients(self, graph, alpha, per_slot: bool) -> None:
        # The fast kernels read P_ij per CSR slot; the per-edge array is then rebuilt from it on
        # demand (reference kernel, per-node rule), so that a run holds one copy, not two.
        self._lookup_graph = graph
        self._rows: dict[int, dict] = {}
        self._alpha_ratio = None
        if per_slot:
            # On a regular graph (torus, hypercube) or with uniform:W every P_ij is one number:
            # the kernels then read no per-slot array at all (16 bytes per edge less).
            same = alpha.size > 0 and bool(np.all(alpha == alpha[0]))
            self._coef, self._alpha = (alpha[:1].copy() if same else alpha[graph.csr_edges]), None
            # The exact fractions of the rounded rules (int64 (num, den) per slot, or one row);
            # none when all are unit fractions 1/den: the kernels then take den = rint(1/P_ij).
            ratio = coefficient_ratios(self._coef)
            self._ratio = ratio if np.any(ratio[:, 0] != 1) else np.zeros((0, 2), dtype=np.int64)
        else:
            self._coef, self._alpha = None, alpha

    @property
    def alpha(self) -> np.ndarray:
        """The per-edge coefficients ``P_uv`` (edge order of the graph the rule runs on)."""
        if self._alpha is None:
            g = self._lookup_graph
            if self._coef.size == 1:
                alpha = np.full(g.m, self._coef[0])
            else:
                alpha = np.empty(g.m)
                alpha[g.csr_edges] = np.abs(self._coef)  # (signed per slot for the oriented rounding)
            self._alpha = alpha
        return self._alpha

    def _row(self, i: int) -> dict:
        row = self._rows.get(i)
        if row is None:
            g = self._lookup_graph
            sl = slice(g.indptr[i], g.indptr[i + 1])
            edges = g.csr_edges[sl]
            alpha = self.alpha
            row = {int(j): (float(alpha[e]), int(e)) for j, e in zip(g.indices[sl], edges)}
            self._rows[i] = row
        return row

    def report(self):
        spec = self.options["matrix"]
        return {"matrix": spec if isinstance(spec, str) else "array", "min_diag": self.options["min_diag"]}

    # ------------------------------------------------------------------ dynamic networks
    def _live_alpha(self, graph) -> np.ndarray:
        """``P_ij`` on the edges of a step graph other than the reset one (edge failures, mobility).

        The rule of Figure 2, lines (3)-(7), is per edge and per step: on the edges that are up it is
        unchanged. A failed edge carries nothing and its weight stays with its two ends (``P_ii``
        grows), so the step's P is still symmetric and stochastic with ``P_ii`` at least the base
        graph's (Sec. 2 asks ``P_ii >= 1/2``). A step graph with no map to the base graph (mobility
        builds a new one every step) gets the configured ``matrix`` built afresh for it.
        """
        if graph.base_edges is not None and graph.n == self._lookup_graph.n:
            return self.alpha[graph.base_edges]
        return self._coefficients(graph)


@register_protocol
class Diffusion(_DiffusionBase):
    """Continuous diffusion l(t+1) = P l(t) with real-valued loads (Algorithm DIFFUSE, Figure 2).

    Per node i, each iteration: broadcast ``load[i]``; for every neighbour j with
    ``load[i] > load[j]`` send ``P_ij (load[i] - load[j])`` tasks to j (lines (3)-(7)). With P
    symmetric and stochastic this is ``l(t+1) = P l(t)`` (Sec. 3.1, Equation 1), computed per node
    as ``sum_j P_ij l_j(t) + P_ii l_i(t)`` (the numpy reference adds in the kernel's order: the same bits).

    References
    ----------
    R. Subramanian, I. D. Scherson, An analysis of diffusive load-balancing, SPAA 1994, Sec. 2.
    """

    name = "diffusion"
    title = "Continuous diffusion (DIFFUSE)"
    paper = "Subramanian, Scherson 1994, Sec. 2"
    model = "flow"
    divisible = True
    dynamic = True
    exchange_rounds = 1
    params = _MATRIX_PARAMS

    params = _MATRIX_PARAMS + (
        Param("kernel", str, "numba", "numba (fused per-node CSR loop) or numpy (row sums slot by slot, the "
              "reference)", ("numba", "numpy")),
        _THREADS_PARAM,
    )

    def reset(self, graph, loads, rng):
        self._graph = graph
        self._threads = _threads(self.options, self.name)
        fast = self.options["kernel"] == "numba"
        alpha = self._coefficients(graph)
        self._P = self._parts = None
        if fast:
            diag = diagonal(graph, alpha)
            self._diag = diag[:1].copy() if diag.size and np.all(diag == diag[0]) else diag
        self._set_coefficients(graph, alpha, per_slot=fast)
        if fast:
            self._out = np.empty(graph.n)
            self._outflow = np.empty(graph.n)
            self._degree = _regular_degree(graph)
            # Offset stencil (tori, rings): the serial kernel's stencil path, same results bit for
            # bit. Looked up once here, for the graph of reset only (a dynamic run's later graphs
            # take the CSR path: no O(n D) search per step).
            self._stencil = _usable_stencil(graph) if self._degree and self._threads == 1 else None

    @property
    def P(self):
        """The N x N diffusivity matrix (scipy CSR), built on first use."""
        if self._P is None:
            self._P = diffusion_matrix(self._graph, self.alpha)
        return self._P

    def reference_exact(self, graph) -> bool:
        """The numpy step gives the serial kernel's run bit for bit (tokendist.kernels._choice);
        the threaded kernel sums the load moved in another order."""
        return self.options["threads"] in (1, AUTO)

    def _row_parts(self):
        """``(RowOrder, P_ij per CSR slot, diag(P))`` of the reset graph, for the numpy step."""
        if self._parts is None:
            g = self._graph
            self._parts = (RowOrder(g), self.alpha[g.csr_edges], diagonal(g, self.alpha))
        return self._parts

    def step(self, t, graph, loads):
        if graph is not self._graph:  # a dynamic network's step graph: the rule on the live edges
            flows = self._live_alpha(graph) * (loads[graph.u] - loads[graph.v])
            new = (loads - np.bincount(graph.u, weights=flows, minlength=graph.n)
                   + np.bincount(graph.v, weights=flows, minlength=graph.n))
            return Step(new, moved=float(np.abs(flows).sum()), messages=2 * graph.m, flows=flows)
        if self.options["kernel"] == "numpy":
            flows = self.alpha * (loads[graph.u] - loads[graph.v])
            # l_i(t+1) = sum_{j != i} P_ij l_j(t) + P_ii l_i(t), and what i sends, sum_j P_ij
            # max(l_i - l_j, 0): each summed over row i's slots in order from 0.0, the load moved
            # node after node, as the serial kernel adds them (tokendist.kernels._rows): the same bits.
            rows, coef, diag = self._row_parts()
            near = loads[graph.indices]
            new = rows.sums(coef * near) + diag * loads
            outflow = rows.sums(coef * np.maximum(loads[rows.row] - near, 0.0))
            return Step(new, moved=sequential_sum(outflow), messages=2 * graph.m, flows=flows, outflow=outflow)
        new = self._out if self._out is not loads else np.empty_like(loads)
        loads = np.ascontiguousarray(loads, dtype=np.float64)
        # The degree test scans n values: done once per graph, not per step.
        degree = self._degree if graph is self._graph else _regular_degree(graph)
        args = (graph.indptr, unsigned_view(graph.indices), self._coef, self._diag, loads, degree, new, self._outflow)
        st = self._stencil if graph is self._graph else None
        if self._threads > 1:  # same loads bit for bit; moved may differ in the last bits
            moved = run_parallel(diffuse_step_parallel, self._threads, *args)
        elif st is not None:
            moved = diffuse_stencil_step(args[1], self._coef, self._diag, loads, degree, st.starts, st.ends, st.lower,
                                         st.upper, new, self._outflow)
        else:
            moved = diffuse_step(*args)
        self._out = loads  # ping-pong buffers: the next step writes over this step's input
        return Step(new, moved=float(moved), messages=2 * graph.m, outflow=self._outflow)

    def is_stable(self, graph, loads):
        return bool(np.ptp(loads) <= 1e-12 * max(1.0, float(np.abs(loads).max())))

    # Partitioned form (tokendist.engine.mpi): the serial kernel's general (CSR) path on one
    # rank's local graph. An owned node's row lists the same neighbours in the same order with the
    # same P_ij as the whole graph's row (local ids follow global ids), so the kernel adds the same
    # floats in the same order: the owned loads and outflows are the single-process ones, bit for bit
    # (the kernel's and also the numpy reference's, which adds them in that order: kernels/_rows.py).
    def partitioned_setup(self, part):
        """Per-slot ``P_ij`` and per-node ``P_ii`` of the local graph (scalars stay scalars)."""
        g = part.graph
        one = self._coef is not None and self._coef.size == 1  # (kernel=numpy keeps P per edge only)
        coef = self._coef if one else self.alpha[part.edges[g.csr_edges]]
        full = self._diag if self.options["kernel"] == "numba" else diagonal(self._graph, self.alpha)
        diag = full if full.size == 1 else full[part.nodes]
        self._part_args = (np.ascontiguousarray(coef, dtype=np.float64), np.ascontiguousarray(diag, dtype=np.float64))

    def partitioned_step(self, t, part, loads):
        """One step on a rank's local graph; the owned entries of the result are the kernel's."""
        g = part.graph
        coef, diag = self._part_args
        new, outflow = np.empty(g.n), np.empty(g.n)
        diffuse_step(g.indptr, unsigned_view(g.indices), coef, diag, np.ascontiguousarray(loads, dtype=np.float64),
                     0, new, outflow)
        return Step(new, messages=2 * part.global_graph.m, outflow=outflow)

    def partitioned_is_stable(self, part, loads):
        own = loads[part.owned]
        hi, lo, top = part.allreduce_array(np.array([own.max(initial=-np.inf), -own.min(initial=np.inf),
                                                     np.abs(own).max(initial=0.0)]), "max")
        return bool(hi - (-lo) <= 1e-12 * max(1.0, float(top)))

    # Per-node form: lines (3)-(7) of Figure 2.
    def publish(self, rnd, t, node, view):
        return view.load

    def decide(self, t, node, view):
        row = self._row(node)
        return {j: row[j][0] * (view.load - w_j) for j, w_j in view.received[0].items() if view.load > w_j}


class _RoundedDiffusion(_DiffusionBase):
    """Algorithm DIFFUSE with line (7) rounded (Sec. 4); subclasses fix the rounding."""

    model = "flow"
    exchange_rounds = 1
    may_go_negative = True
    rounding = "floor"
    params = _MATRIX_PARAMS + (
        Param("kernel", str, "numba", "numba (per-node CSR loop) or numpy (edge-wise reference)", ("numba", "numpy")),
        _AUTO_THREADS_PARAM,
    )

    dynamic = True

    def reset(self, graph, loads, rng):
        self._graph = graph
        self._threads = _threads(self.options, self.name)
        #: threads=auto on a large graph without a stencil: serial against threaded kernel, timed.
        self.kernel_choice = MeasuredChoice()
        self._setup(graph, rng)
        g = self.h
        fast = self.options["kernel"] == "numba"
        self._set_coefficients(g, self._coefficients(g) if g is graph else self._coefficients_h(g), per_slot=fast)
        self._mode = ROUNDINGS.index(self.rounding)
        self._slots = None  # the numpy step's per-slot tables, built at its first step
        self._reference = not fast
        self._messages_static = self._messages(graph)
        if fast:
            self._tables(g)
            self._out = np.empty(graph.n, dtype=np.int64)
            self._outflow = np.empty(graph.n, dtype=np.int64)
        self.min_load = int(loads.min()) if loads.size else 0
        self.negative_steps = 0

    def _tables(self, h) -> None:
        # Per CSR slot of H: one more hop for an added edge (Case 2, else empty); for the oriented
        # rounding, 1 when the slot's edge points away from its row node (the sender then rounds
        # up): one int8 per slot read in order (a signed P_ij per slot cost 16 bytes per edge).
        # The random rounding draws its coins in blocks of COIN_BLOCK slots (not 2m floats).
        self._hop_extra = np.zeros(0, dtype=np.int64)
        self._along_slot = np.zeros(0, dtype=np.int8)
        self._coin_buf = np.empty(max(COIN_BLOCK, h.max_degree) if self.rounding == "random" else 0)
        if (self.relay >= 0).any():
            self._hop_extra = (self.relay[h.csr_edges] >= 0).astype(np.int64)
        if self.orient is not None and h.m:
            rows = np.repeat(np.arange(h.n, dtype=h.indices.dtype), np.diff(h.indptr))
            self._along_slot = ((self.orient[h.csr_edges] > 0) == (rows < h.indices)).astype(np.int8)
        # The regular path: D slots per row and P_ij = 1/q for one integer q (module doc of
        # _diffusion_kernels); 0 selects the general path.
        self._degree = _regular_degree(h)
        self._q = reciprocal(float(self._coef[0])) if self._coef.size == 1 and self._degree else 0
        # There, coin=pij draws each edge's coin once per step into a HEAD flag (1 byte per edge).
        pij = self.rounding == "random" and self.options.get("coin", "pij") == "pij"
        self._heads = np.empty(h.m if pij and self._q else 0, dtype=np.uint8)
        # Offset stencil (tori, rings; serial kernel, regular path, not coin=fraction): the stencil
        # kernel, same results bit for bit. The random rounding walks the runs cut where the slots'
        # edge ids stop being affine (affine_edge_runs), so that it reads no csr_edges in them.
        self._stencil_runs = None
        st = _usable_stencil(h) if self._q and self._threads == 1 and (pij or self.rounding != "random") \
            and not self._hop_extra.size else None
        if st is not None:
            if pij:
                starts, ends, ebase = affine_edge_runs(st, h.csr_edges)
            else:
                starts, ends, ebase = st.starts, st.ends, np.zeros((1, self._degree), dtype=np.int64)
            self._stencil_runs = (starts, ends, st.lower, st.upper, ebase)
            # The stencil kernel's arguments that stay the same all run, looked up once: on a
            # 256-node torus the kernel takes a few microseconds, and the views, attribute reads and
            # conversions around it cost as much again. (Here the random rounding has coin=pij: its
            # mode is _RANDOM, set with the key before _tables is called.)
            self._stencil_args = ((unsigned_view(h.indices), unsigned_view(h.csr_edges), float(self._coef[0]), self._q,
                                   self._along_slot, self._heads),
                                  (self._mode, np.uint64(self._key)), (self._degree, *self._stencil_runs))
        # threads=auto races the serial and the threaded CSR kernels where no stencil kernel runs.
        self._race_threads = 0
        if self.options["threads"] == AUTO and self._stencil_runs is None and h.n >= AUTO_MIN_NODES:
            k = numba.config.NUMBA_NUM_THREADS
            self._race_threads = k if k > 1 else 0

    def _setup(self, graph, rng) -> None:
        # relay[e]: the relay vertex of edge e of H (Case 2), -1 for a real edge; empty when H = G.
        self.h, self.relay = graph, np.zeros(0, dtype=np.int64)
        self.exchange_rounds = type(self).exchange_rounds
        self.orient = None
        self._key = 0

    def _coefficients_h(self, h):
        return self._coefficients(h)

    def _flows_h(self, t, loads) -> np.ndarray:
        h = self.h
        if getattr(self, "_alpha_ratio", None) is None:
            self._alpha_ratio = coefficient_ratios(self.alpha)
        return rounded_flows(h.u, h.v, self.alpha, loads, self.rounding,
                             coins=self._coins(t) if self.rounding == "random" else None,
                             coin=self.options.get("coin", "pij"), orient=self.orient, ratio=self._alpha_ratio)

    def _live_step(self, t, graph, loads) -> Step:
        """Line (7) rounded on the live edges of a dynamic network's step graph (see ``_live_alpha``).

        The coin of ``diffusion-random`` is the base edge's (its counter is the base edge index), so
        an edge that is up flips the coin it would flip on the static network.
        """
        alpha = self._live_alpha(graph)
        coins = None
        if self.rounding == "random":
            ids = graph.base_edges if graph.base_edges is not None else np.arange(graph.m)
            coins = counter_uniform(self._key, t, np.asarray(ids, dtype=np.uint64))
        fh = rounded_flows(graph.u, graph.v, alpha, loads, self.rounding, coins=coins,
                           coin=self.options.get("coin", "pij"))
        new, outflow = apply_edge_flows(graph.u, graph.v, loads, fh)  # (int64 sums: exact past 2**53)
        return Step(new, moved=int(np.abs(fh).sum()), messages=2 * graph.m, flows=fh, outflow=outflow)

    def step(self, t, graph, loads):
        h = self.h
        if graph is not self._graph:
            out = self._live_step(t, graph, loads)
            low = int(out.loads.min()) if out.loads.size else 0
            self.min_load = min(self.min_load, low)
            self.negative_steps += low < 0
            return out
        if self._reference:
            slots = self._slot_rule(loads)
            if slots is not None and h is graph:  # the same rule per CSR slot, without scatters (SlotRounding)
                new, outflow, flows = slots.step(t, loads, self._top)
                # Without relayed edges every token moved leaves its sender once: the sum of the outflows.
                out = Step(new, int(_add_reduce(outflow)), self._messages_static, flows, outflow)
                low = int(_min_reduce(new))  # (the ufuncs' reduce: .sum() and .min() go through Python wrappers)
            else:
                if slots is not None:
                    new, outflow, fh = slots.step(t, loads, self._top)
                else:
                    fh = self._flows_h(t, loads)
                    pos, neg = np.maximum(fh, 0), np.maximum(-fh, 0)
                    # Integer sums (bincount adds in float64 and lost tokens past 2**53).
                    outflow = _int_bincount(h.u, pos, h.n) + _int_bincount(h.v, neg, h.n)
                    new = loads - _int_bincount(h.u, fh, h.n) + _int_bincount(h.v, fh, h.n)
                flows = self._real_flows(graph, fh)
                moved = int(outflow.sum()) if flows is fh else int(np.abs(flows).sum())
                out = Step(new, moved=moved, messages=self._messages(graph), flows=flows, outflow=outflow)
                low = int(new.min()) if new.size else 0
        else:
            new = self._out if self._out is not loads else np.empty_like(loads)
            moved, low = self._kernel(t, loads, new, self._outflow)
            self._out = loads  # ping-pong buffers: the next step writes over this step's input
            # The engine reads outflow before the next step overwrites it.
            out = Step(new, int(moved), self._messages_static, None, self._outflow)
        if low < self.min_load:
            self.min_load = low
        if low < 0:
            self.negative_steps += 1
        return out

    def steps(self, t, k, graph, loads, block, moved, messages, stop_idle):
        """Up to ``k`` steps of the stencil kernel in one call (:meth:`Protocol.steps`), for the random
        rounding (the deterministic ones detect cycles step by step): the kernel of :meth:`step` on
        each, the same coins and loads, ``min_load`` and ``negative_load_steps`` as step by step.
        The block stops before a step the stencil kernel cannot take (loads spanning 2**29 or
        more) or that sends more than a node holds; that step, and the rest, go one at a time."""
        if not self.randomized or self._reference or graph is not self._graph or self._stencil_runs is None:
            return None
        lows = self.__dict__.get("_lows")
        if lows is None or lows.shape[0] < k:
            lows = self._lows = np.empty(k, dtype=np.int64)
        head, (mode, key), tail = self._stencil_args
        args = (*head, mode, key, *tail, self._outflow, t, k, stop_idle, loads, block, moved, lows)
        if not block_kernel_ready(_rounded_stencil_steps, args):
            return None
        done = _rounded_stencil_steps(*args)
        if not done:
            return None
        messages[:done] = self._messages_static
        low = int(lows[:done].min())
        self.min_load = min(self.min_load, low)
        self.negative_steps += int(np.count_nonzero(lows[:done] < 0))
        return done, _STENCIL_VARIANT

    def _slot_rule(self, loads):
        """The slot form of the numpy step (:class:`SlotRounding`), when it applies to ``loads``; then
        ``self._top`` is the largest load when none is negative (else at least 2**63)."""
        slots = self._slots
        if slots is None:
            if not (loads.size and self.h.m):
                return None
            self._slots = slots = SlotRounding(self.h, self.alpha, self.rounding, self.options.get("coin", "pij"),
                                               self.orient, self._key)
        if loads.dtype is not _INT64 and loads.dtype != _INT64:  # (is: the usual case, at no cost)
            return None
        # The loads must span less than 2**62 (d and d num / den would leave int64): loads in
        # [0, 2**62) do (one maximum of their bits as unsigned numbers, where a negative load is huge).
        self._top = top = int(_max_reduce(loads.view(np.uint64)))
        if top >= 1 << 62 and int(loads.max()) - int(loads.min()) >= 1 << 62:
            return None
        return slots

    def _kernel(self, t, loads, out, outflow):
        if self._stencil_runs is not None:
            # Offset stencil (_tables keeps it only for threads=1, so never with a race of threads).
            head, (mode, key), tail = self._stencil_args
            moved, low, narrow = rounded_stencil_step(*head, loads, mode, key, np.uint64(t & _MASK64), *tail, out,
                                                      outflow)
            if narrow:
                return moved, low
            # The loads span 2**29 or more: the general path (as rounded_step would do).
            return self._serial_kernel(0, mode, t, loads, out, outflow)
        h = self.h
        mode = self._mode
        if mode == _RANDOM and self.options.get("coin", "pij") == "fraction":
            mode = RANDOM_FRACTION
        if self._threads > 1:
            return self._threaded_kernel(self._threads, mode, t, loads, out, outflow)
        if self._race_threads and auto_threads_allowed():  # threads=auto: the faster now (the same bits)
            return self.kernel_choice.run(lambda: self._serial_kernel(self._q, mode, t, loads, out, outflow),
                                          lambda: self._threaded_kernel(self._race_threads, mode, t, loads, out,
                                                                        outflow))
        return self._serial_kernel(self._q, mode, t, loads, out, outflow)

    def _serial_kernel(self, q, mode, t, loads, out, outflow):
        h = self.h
        return rounded_step(h.indptr, unsigned_view(h.indices), unsigned_view(h.csr_edges), self._coef, self._ratio,
                            self._along_slot,
                            self._heads, loads, mode,
                            np.uint64(self._key), np.uint64(t & _MASK64), self._hop_extra, self._coin_buf,
                            self._degree, q, out, outflow)

    def _threaded_kernel(self, threads, mode, t, loads, out, outflow):
        h = self.h
        return run_parallel(rounded_step_parallel, threads, h.indptr, unsigned_view(h.indices),
                            unsigned_view(h.csr_edges), self._coef, self._ratio, self._along_slot, self._heads, loads,
                            mode,
                            np.uint64(self._key), np.uint64(t & _MASK64), self._hop_extra, self._degree, self._q,
                            out, outflow)

    def _real_flows(self, graph, fh):
        return fh

    def _messages(self, graph) -> int:
        return 2 * graph.m * self.exchange_rounds

    def is_stable(self, graph, loads):
        if self.randomized:
            # A coin may send a ceiling across any edge whose ends differ.
            return bool(graph.m == 0 or np.all(loads[graph.u] == loads[graph.v]))
        if self.options["kernel"] == "numba":
            # Only the amount moved matters: write into the spare load buffer and the outflow
            # buffer (the engine has read this step's outflow already) instead of allocating.
            out = self._out if self._out is not loads else np.empty_like(loads)
            moved, _ = self._kernel(0, loads, out, self._outflow)
            return bool(moved == 0)
        return bool(not np.any(self._flows_h(0, loads)))

    def report(self):
        return {**super().report(), "min_load": self.min_load, "negative_load_steps": int(self.negative_steps)}

    # Partitioned form (tokendist.engine.mpi): the numpy rule per edge (rounded_flows) on one
    # rank's local graph with the whole graph's P_ij and the coins of the global edge ids: integer
    # flows, so the owned loads and outflows are the kernel's exactly. diffusion-oriented off a
    # biconnected graph runs it on the rank's part of H, whose added edges read loads two hops
    # away in G (Case 2): a second halo over H brings them (._partitioned.RelayHalo).
    def partitioned_refusal(self) -> str | None:
        return None

    def partitioned_setup(self, part):
        self._relay_halo = relay_halo(self, part)

    def _partitioned_flows(self, t, part, loads):
        """(new loads, outflow, token-hops relayed) on G's local nodes (ghost entries partial)."""
        halo = getattr(self, "_relay_halo", None)
        if halo is None:
            g, edges, w = part.graph, part.edges, loads
        else:
            g, edges, w = halo.part.graph, halo.part.edges, halo.loads(part, loads)
        coins = counter_uniform(self._key, t, edges) if self.rounding == "random" else None
        orient = self.orient[edges] if self.rounding == "oriented" and self.orient.size else None
        flows = rounded_flows(g.u, g.v, self.alpha[edges], w, self.rounding, coins=coins,
                              coin=self.options.get("coin", "pij"), orient=orient)
        new, outflow = apply_edge_flows(g.u, g.v, w, flows)  # (int64 sums: exact past 2**53)
        if halo is None:
            return new, outflow, 0
        return new[halo.in_h], outflow[halo.in_h], halo.relayed(flows)

    def partitioned_step(self, t, part, loads):
        """One step on a rank's local graph; the owned entries of the result are the kernel's.

        ``info["relayed"]``: the second hops of the relayed transfers this rank's nodes sent
        (Case 2), which the kernels count in the load moved beyond the outflow.
        """
        new, outflow, relayed = self._partitioned_flows(t, part, loads)
        own = new[part.owned]
        low = part.allreduce(int(own.min()) if own.size else np.iinfo(np.int64).max, "min")
        self.min_load = min(self.min_load, low)
        self.negative_steps += low < 0
        return Step(new, messages=2 * part.global_graph.m * self.exchange_rounds, outflow=outflow,
                    info={"relayed": relayed} if relayed else {})

    def partitioned_is_stable(self, part, loads):
        g = part.graph
        if self.randomized:
            return part.allreduce(g.m == 0 or bool(np.all(loads[g.u] == loads[g.v])), "and")
        _, outflow, _ = self._partitioned_flows(0, part, loads)
        return part.allreduce(not np.any(outflow[part.owned]), "and")

    def partitioned_finish(self, part):
        if getattr(self, "_relay_halo", None) is not None:
            self._relay_halo.free()
            self._relay_halo = None

    # Per-node form: broadcast the load (line (4)); send the rounded amount to each lighter neighbour.
    def publish(self, rnd, t, node, view):
        return view.load

    def _coin_scalar(self, t, e):
        return 0.0

    def _along(self, node, j, e):
        return False

    def decide(self, t, node, view):
        row = self._row(node)
        sends = {}
        for j, w_j in view.received[0].items():
            if view.load > w_j:
                a, e = row[j]
                amt = _rounded_amount(a, view.load - w_j, self._mode, self._coin_scalar(t, e),
                                      self.options.get("coin", "pij") == "fraction", self._along(node, j, e))
                if amt:
                    sends[j] = amt
        return sends


@register_protocol
class DiffusionFloor(_RoundedDiffusion):
    """Rounded diffusion, floor scheme: send ``floor(P_ij (load[i] - load[j]))`` (Sec. 4, Figure 3).

    Per node i, each iteration: broadcast ``load[i]``; to every lighter neighbour j send
    ``floor(P_ij (load[i] - load[j]))`` tasks. The paper shows it may converge to an unbalanced
    distribution (Figure 3: neighbours differing by one, ``P_ij = 1/3``, nothing moves). It never
    overdraws while loads are non-negative (a node sends at most ``(1 - P_ii) load[i]``).

    References
    ----------
    R. Subramanian, I. D. Scherson, An analysis of diffusive load-balancing, SPAA 1994, Sec. 4.
    """

    name = "diffusion-floor"
    title = "Diffusion, rounded down"
    paper = "Subramanian, Scherson 1994, Sec. 4 (Figure 3)"
    may_go_negative = False
    rounding = "floor"


@register_protocol
class DiffusionCeil(_RoundedDiffusion):
    """Rounded diffusion, ceiling scheme: send ``ceil(P_ij (load[i] - load[j]))`` (Sec. 4, Figure 4).

    Per node i, each iteration: broadcast ``load[i]``; to every lighter neighbour j send
    ``ceil(P_ij (load[i] - load[j]))`` tasks, whether or not i holds that many ("a processor may
    not have enough tasks for all its neighbors": the engine reports such steps). The paper shows
    the loads may oscillate (Figure 4: neighbours differing by two, ``P_ij = 1/3``).

    References
    ----------
    R. Subramanian, I. D. Scherson, An analysis of diffusive load-balancing, SPAA 1994, Sec. 4.
    """

    name = "diffusion-ceil"
    title = "Diffusion, rounded up"
    paper = "Subramanian, Scherson 1994, Sec. 4 (Figure 4)"
    rounding = "ceil"


@register_protocol
class DiffusionRandom(_RoundedDiffusion):
    """Rounded diffusion with a biased coin per edge and iteration (Sec. 4).

    Per node i, each iteration: broadcast ``load[i]``; for every lighter neighbour j flip a coin
    that lands HEAD with probability ``P_ij`` (``coin=pij``, the paper's text) or with the
    fractional part of ``P_ij (load[i] - load[j])`` (``coin=fraction``); on HEAD send the ceiling,
    on TAIL the floor of ``P_ij (load[i] - load[j])``. The coin of edge e in iteration t is
    ``counter_uniform(key, t, e)``, so the kernel and the per-node rule flip the same coins. The
    paper reports that the imbalance stabilises at a non-zero value. May overdraw (ceilings).

    References
    ----------
    R. Subramanian, I. D. Scherson, An analysis of diffusive load-balancing, SPAA 1994, Sec. 4.
    """

    name = "diffusion-random"
    title = "Diffusion, biased-coin rounding"
    paper = "Subramanian, Scherson 1994, Sec. 4"
    randomized = True
    rounding = "random"
    params = _RoundedDiffusion.params + (
        Param("coin", str, "pij", "HEAD probability: pij (the paper's P_ij) or fraction (fractional part of the flow)",
              _COINS),
    )

    def _setup(self, graph, rng):
        super()._setup(graph, rng)
        self._key = stream_key(rng)

    def _coins(self, t):
        return counter_uniform(self._key, t, np.arange(self.h.m, dtype=np.uint64))

    def _coin_scalar(self, t, e):
        return counter_uniform_scalar(self._key, t, e)


@register_protocol
class DiffusionOriented(_RoundedDiffusion):
    """Rounded diffusion by an st-orientation: ceiling along the edge's direction, floor against it.

    Case 1 (G biconnected): orient G acyclically with a unique minimal vertex s (in-degree 0), a
    unique maximal vertex t (out-degree 0) and an edge st (from an st-numbering, see
    :func:`tokendist.graphs.st_orientation`). Per node i, each iteration: broadcast ``load[i]``; to
    every lighter neighbour j send ``ceil(P_ij (load[i] - load[j]))`` if the edge is directed from i
    to j and ``floor(...)`` if it is directed from j to i. The paper states, without proof, that
    this "guarantees convergence to the balanced distribution". It may overdraw (ceilings).

    Case 2 (G not biconnected): build H by chaining the neighbours of every cut vertex c in a cycle
    (:func:`tokendist.graphs.biconnected_supergraph`), orient H, and run the rule on H with P
    computed for H. A transfer on an added edge a-b is carried over the real edges a-c-b within the
    same iteration (c relays it); node i then needs the loads two hops away, so the per-node rule
    has two exchange rounds (own load, then the neighbours' loads).

    References
    ----------
    R. Subramanian, I. D. Scherson, An analysis of diffusive load-balancing, SPAA 1994, Sec. 4.
    """

    name = "diffusion-oriented"
    dynamic = False
    static_reason = ("the st-orientation (a unique source and sink joined by an edge, Sec. 4) is fixed on the "
                     "network of the start and is lost when edges fail")
    title = "Diffusion, st-orientation rounding"
    paper = "Subramanian, Scherson 1994, Sec. 4 (Cases 1 and 2)"
    rounding = "oriented"

    def reference_exact(self, graph) -> bool:
        """Whether the numpy step gives the kernels' run on ``graph`` (tokendist.kernels._choice).

        Not off biconnected graphs: on edges relayed over two hops the kernels count each hop's
        tokens as moved, the numpy step the net flow (tests/protocols/test_every_variant.py).
        """
        return is_biconnected(graph)
    params = _RoundedDiffusion.params + (
        Param("source", int, -1, "the minimal vertex s of the orientation (-1: node 0)", minimum=-1),
        Param("sink", int, -1, "the maximal vertex t, a neighbour of s in H (-1: the smallest neighbour of s)",
              minimum=-1),
    )

    def _setup(self, graph, rng):
        super()._setup(graph, rng)
        if graph.n <= 1:
            self.orient = np.zeros(0, dtype=np.int8)
            return
        h, relay = biconnected_supergraph(graph)
        self.h = h
        s = self.options["source"]
        t = self.options["sink"]
        for key, node in (("source", s), ("sink", t)):
            if node >= graph.n:
                raise TokendistError(f"diffusion-oriented: {key}={node} is not a node (n={graph.n})")
        self.orient = st_orientation(h, None if s < 0 else s, None if t < 0 else t)
        if (relay >= 0).any():
            self.relay = relay  # (on a biconnected G every entry is -1: not kept, 8 bytes per edge)
            self.exchange_rounds = 2
            self._map_real_edges(graph, h, relay)

    def _coefficients_h(self, h):
        if not (isinstance(self.options["matrix"], str) and self.options["matrix"].split(":")[0] in ("degree", "uniform")):
            raise TokendistError("diffusion-oriented: on a graph that is not biconnected P is taken on the supergraph H "
                                 "(Sec. 4, Case 2); use matrix=degree or matrix=uniform:W")
        return self._coefficients(h)

    def _map_real_edges(self, graph, h, relay):
        # Each edge of H: the real edge it is, or the two real edges a-c, c-b that carry it.
        self._g2h = h.edge_index(graph.u, graph.v)
        virt = np.flatnonzero(relay >= 0)
        a, b, c = h.u[virt], h.v[virt], relay[virt]
        self._virt = virt
        self._e1, self._s1 = graph.edge_index(a, c), np.where(a < c, 1, -1)
        self._e2, self._s2 = graph.edge_index(c, b), np.where(c < b, 1, -1)
        self._virt_at: dict[int, list] = {}
        self._relay_at: dict[int, list] = {}
        for k, e in enumerate(virt.tolist()):
            ai, bi, ci = int(a[k]), int(b[k]), int(c[k])
            self._virt_at.setdefault(ai, []).append((bi, ci, e))
            self._virt_at.setdefault(bi, []).append((ai, ci, e))
            self._relay_at.setdefault(ci, []).append((ai, bi, e))

    def _real_flows(self, graph, fh):
        if self.h is graph:
            return fh
        flows = fh[self._g2h].copy()
        fv = fh[self._virt]
        np.add.at(flows, self._e1, self._s1 * fv)
        np.add.at(flows, self._e2, self._s2 * fv)
        return flows

    def report(self):
        rep = super().report()
        if self.orient is not None and self.orient.size:
            src, snk = orientation_sources_sinks(self.h, self.orient)
            rep.update(source=int(src[0]), sink=int(snk[0]), added_edges=int((self.relay >= 0).sum()))
        return rep

    def _along(self, node, j, e):
        # Edge e = (u, v) with u < v; +1 orients u -> v.
        return bool((self.orient[e] > 0) == (node < j))

    def publish(self, rnd, t, node, view):
        return view.load if rnd == 0 else dict(view.received[0])

    def decide(self, t, node, view):
        sends = super().decide(t, node, view)
        if self.exchange_rounds == 1:
            return sends
        loads0 = view.received[0]
        far = view.received[1]
        mine = self.alpha
        # Transfers on added edges at this end: tokens go to (or come from) the relay c.
        for b, c, e in self._virt_at.get(node, ()):
            w_b = far[c][b]
            if view.load > w_b:
                amt = _rounded_amount(float(mine[e]), view.load - w_b, self._mode, 0.0, False, self._along(node, b, e))
                if amt:
                    sends[c] = sends.get(c, 0) + amt
        # As relay c of an added edge a-b: forward what the heavier end sends this iteration.
        for a, b, e in self._relay_at.get(node, ()):
            w_a, w_b = loads0[a], loads0[b]
            if w_a == w_b:
                continue
            src, dst = (a, b) if w_a > w_b else (b, a)
            amt = _rounded_amount(float(mine[e]), abs(w_a - w_b), self._mode, 0.0, False, self._along(src, dst, e))
            if amt:
                sends[dst] = sends.get(dst, 0) + amt
        return sends
