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

import math
from fractions import Fraction

import numba
import numpy as np

from .._random import counter_uniform, counter_uniform_scalar, stream_key
from ..engine import Param, Protocol, Step, register_protocol
from ..errors import TokendistError
from ..graphs import biconnected_supergraph, orientation_sources_sinks, st_orientation
from ._diffusivity import MATRIX_SPECS, default_diffusivity, diagonal, diffusion_matrix, diffusivity

__all__ = ["Diffusion", "DiffusionFloor", "DiffusionCeil", "DiffusionRandom", "DiffusionOriented",
           "default_diffusivity", "rounded_flows", "ROUNDINGS"]

#: Rounding modes of the kernels (Sec. 4, in the paper's order).
ROUNDINGS = ("floor", "ceil", "random", "oriented")
_FLOOR, _CEIL, _RANDOM, _ORIENTED = range(4)
_COINS = ("pij", "fraction")
_SNAP = 1e-9
_MASK64 = (1 << 64) - 1

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


# ---------------------------------------------------------------------- the fast kernels
# Why fused numba loops: one synchronous step reads every CSR slot once and writes every node once;
# numpy needs per-edge gathers, a flows array and bincounts (25-45 ns per edge-step against 3.6-6
# for a per-node loop, ../shared/PERFORMANCE.md). P_ij is laid out per CSR slot in reset (or kept as
# one number when all agree, as on tori and hypercubes), so the row loop reads arrays in order and
# gathers only ``loads[j]``. No kernel allocates: outputs go to buffers the protocol owns.

_M1 = np.uint64(0x9E3779B97F4A7C15)
_M2 = np.uint64(0xBF58476D1CE4E5B9)
_M3 = np.uint64(0x94D049BB133111EB)
_S30, _S27, _S31, _S11 = np.uint64(30), np.uint64(27), np.uint64(31), np.uint64(11)
_TO_UNIT = 1.0 / (1 << 53)


@numba.njit(cache=True, nogil=True)
def _splitmix64(x):
    """The SplitMix64 finaliser in uint64 arithmetic (wraps mod 2**64), as ``tokendist._random``."""
    x = x + _M1
    x = (x ^ (x >> _S30)) * _M2
    x = (x ^ (x >> _S27)) * _M3
    return x ^ (x >> _S31)


@numba.njit(cache=True, nogil=True)
def _step_base(key, step):
    """The per-step part of :func:`tokendist._random.counter_uniform` (``key``, ``step``: uint64)."""
    return _splitmix64(key ^ _splitmix64(step))


@numba.njit(cache=True, nogil=True)
def _uniform(base, index):
    """``counter_uniform(key, step, index)`` given ``base = _step_base(key, step)``."""
    return np.float64(_splitmix64(base ^ _splitmix64(np.uint64(index))) >> _S11) * _TO_UNIT


@numba.njit(cache=True, nogil=True)
def _fill_uniform(base, index, out):
    """``out[k] = counter_uniform(key, step, index[k])``, given the step's ``base``."""
    for k in range(out.shape[0]):
        out[k] = _uniform(base, index[k])


@numba.njit(cache=True, nogil=True)
def _fill_heads(base, index, coef, out):
    """``out[k] = +P_ij`` on HEAD (``counter_uniform(key, step, index[k]) < P_ij``), else ``-P_ij``."""
    scalar = coef.shape[0] == 1
    for k in range(out.shape[0]):
        a = coef[0] if scalar else coef[k]
        out[k] = a if _uniform(base, index[k]) < a else -a


@numba.njit(cache=True, nogil=True)
def _counter_uniform_nb(key, step, index):
    """:func:`tokendist._random.counter_uniform` in numba, over an array of indices (for tests)."""
    base = _step_base(np.uint64(key), np.uint64(step))
    out = np.empty(index.shape[0])
    for k in range(index.shape[0]):
        out[k] = _uniform(base, index[k])
    return out


@numba.njit(cache=True, nogil=True, inline="always")
def _rounded_rows(indptr, indices, coef, loads, mode, coins, hop_extra, relays, out, outflow):
    # The loop of _rounded_kernel; inlined once per mode, where ``mode`` is a constant, so that
    # LLVM drops the other roundings' code from the inner loop.
    scalar = coef.shape[0] == 1
    moved = 0
    low = np.int64(9223372036854775807)
    for i in range(loads.shape[0]):
        wi = loads[i]
        delta = 0
        sent = 0
        extra = 0
        for k in range(indptr[i], indptr[i + 1]):
            d = wi - loads[indices[k]]
            pos = d > 0
            c = coef[0] if scalar else coef[k]
            a = abs(c)  # P_ij; oriented: the sign says whether the edge points away from i
            x = a * abs(d)
            tol = _SNAP * max(1.0, x)
            fl = np.floor(x + tol)
            # ceil(x - tol) > fl, i.e. x is not (nearly) an integer; for an integer fl the two agree.
            up = (x - tol) > fl
            if mode == 0:
                up = False
            elif mode == 2:
                up = up & (c > 0)  # coin=pij: HEAD drawn before the loop, kept as the sign of P_ij
            elif mode == 4:
                up = up & (coins[k] < x - fl)  # coin=fraction
            elif mode == 3:
                up = up & ((c > 0) == pos)  # the sender rounds up along the orientation
            amt = np.int64(fl) + np.int64(up)
            delta += (np.int64(d < 0) - np.int64(pos)) * amt
            s = np.int64(pos) * amt
            sent += s
            if relays:
                extra += s * hop_extra[k]
        new = wi + delta
        out[i] = new
        outflow[i] = sent
        moved += sent + extra
        low = min(low, new)
    if loads.shape[0] == 0:
        low = 0
    return moved, low


@numba.njit(cache=True, nogil=True)
def _rounded_kernel(indptr, indices, csr_edges, coef, loads, mode, key, step, coin_fraction, hop_extra, coins,
                    out, outflow):
    """One rounded-diffusion step, per node over its CSR row; returns (token-hops moved, min new load).

    Node i loses what it sends to every lighter neighbour and gains what every heavier neighbour
    sends it; both ends of an edge compute the same rounded amount from the same two loads (and,
    for ``random``, the same coin ``counter_uniform(key, step, e)``). The floor and ceiling are taken
    with the snapping tolerance (``floor(x + tol)``, ``ceil(x - tol)``), which equals rounding the
    snapped x. Equal loads give x = 0 and amount 0, so no branch is needed on them; the sign of the
    load difference enters arithmetically (branch-free, ../shared/PERFORMANCE.md). ``coef`` holds
    ``P_ij`` per CSR slot (or one value for all, when every P_ij is the same), negated for the
    oriented rounding when slot k's edge points towards its row node; ``hop_extra[k]`` is 1 for an
    edge of H carried over two real edges (empty when there is none); ``coins`` is a buffer of one
    float per CSR slot (random rounding only, else empty): the coin (coin=fraction) or P_ij signed
    by the toss (coin=pij). ``mode`` indexes :data:`ROUNDINGS`.
    """
    if mode == 2:
        # One pass draws every slot's coin in CSR order (a tight loop LLVM vectorises); hashing
        # inside the row loop costs 4-5x more. With coin=pij the toss does not depend on the
        # loads, so the pass stores P_ij signed by the toss (+ on HEAD), which the row loop reads
        # in place of P_ij (reading a separate per-slot flag there measured 2-3x slower).
        if coin_fraction:
            _fill_uniform(_step_base(key, step), csr_edges, coins)
        else:
            _fill_heads(_step_base(key, step), csr_edges, coef, coins)
    # Every call below passes constants, so that each inlined copy keeps only its own rounding
    # (and relay bookkeeping only where Case 2 needs it): LLVM then vectorises the row loop.
    if mode == 0:
        return _rounded_rows(indptr, indices, coef, loads, 0, coins, hop_extra, False, out, outflow)
    if mode == 1:
        return _rounded_rows(indptr, indices, coef, loads, 1, coins, hop_extra, False, out, outflow)
    if mode == 2 and coin_fraction:
        return _rounded_rows(indptr, indices, coef, loads, 4, coins, hop_extra, False, out, outflow)
    if mode == 2:
        return _rounded_rows(indptr, indices, coins, loads, 2, coins, hop_extra, False, out, outflow)
    if hop_extra.shape[0] > 0:
        return _rounded_rows(indptr, indices, coef, loads, 3, coins, hop_extra, True, out, outflow)
    return _rounded_rows(indptr, indices, coef, loads, 3, coins, hop_extra, False, out, outflow)


@numba.njit(cache=True, nogil=True)
def _diffuse_kernel(indptr, indices, coef, diag, loads, out, outflow):
    """One step of ``l(t+1) = P l(t)`` per node over its CSR row; returns the load moved.

    Row i of P is summed in column order with the diagonal in its sorted place, starting from 0.0,
    exactly as scipy's CSR product ``P @ loads`` does, so the loads are bit-for-bit the same.
    ``outflow[i] = sum_j P_ij max(load[i] - load[j], 0)`` (what i sends, lines (6)-(7) of Figure 2)
    is summed in the same pass; the load moved is the sum of the outflows.
    """
    scalar = coef.shape[0] == 1
    same_diag = diag.shape[0] == 1
    moved = 0.0
    for i in range(loads.shape[0]):
        wi = loads[i]
        p_ii = diag[0] if same_diag else diag[i]
        s = 0.0
        sent = 0.0
        pending = True
        for k in range(indptr[i], indptr[i + 1]):
            j = indices[k]
            wj = loads[j]
            if pending and j > i:
                s += p_ii * wi
                pending = False
            a = coef[0] if scalar else coef[k]
            s += a * wj
            sent += a * max(wi - wj, 0.0)
        if pending:
            s += p_ii * wi
        out[i] = s
        outflow[i] = sent
        moved += sent
    return moved


def rounded_flows(u, v, alpha, loads, mode: str, *, coins=None, coin: str = "pij", orient=None) -> np.ndarray:
    """Signed integer flow per edge (positive from ``u`` to ``v``) of one rounded step, vectorised.

    The numpy form of the kernel: ``x = P_uv |load[u] - load[v]|`` from the heavier end; the
    rounding ``mode`` (one of :data:`ROUNDINGS`) picks the floor or the ceiling of ``x``.
    """
    diff = loads[u] - loads[v]
    x = alpha * np.abs(diff)
    r = np.rint(x)
    x = np.where(np.abs(x - r) <= _SNAP * np.maximum(1.0, x), r, x)
    fl = np.floor(x)
    frac = x != fl
    if mode == "floor":
        up = np.zeros_like(frac)
    elif mode == "ceil":
        up = frac
    elif mode == "random":
        p = (x - fl) if coin == "fraction" else alpha
        up = frac & (coins < p)
    elif mode == "oriented":
        up = frac & ((orient > 0) == (diff > 0))
    else:
        raise ValueError(mode)
    amount = fl.astype(np.int64) + up
    return np.sign(diff).astype(np.int64) * amount


def _rounded_amount(alpha: float, diff, mode: int, coin_u: float, coin_fraction: bool, along: bool) -> int:
    """The per-node rule: tasks a node sends across one edge when it is ``diff > 0`` heavier."""
    x = alpha * diff
    r = float(np.rint(x))
    if abs(x - r) <= _SNAP * max(1.0, x):
        x = r
    fl = math.floor(x)
    if x == fl:
        return int(fl)
    if mode == _CEIL:
        return fl + 1
    if mode == _RANDOM:
        p = (x - fl) if coin_fraction else alpha
        return fl + 1 if coin_u < p else fl
    if mode == _ORIENTED:
        return fl + 1 if along else fl
    return fl


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
        if per_slot:
            # On a regular graph (torus, hypercube) or with uniform:W every P_ij is one number:
            # the kernels then read no per-slot array at all (16 bytes per edge less).
            same = alpha.size > 0 and bool(np.all(alpha == alpha[0]))
            self._coef, self._alpha = (alpha[:1].copy() if same else alpha[graph.csr_edges]), None
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


@register_protocol
class Diffusion(_DiffusionBase):
    """Continuous diffusion l(t+1) = P l(t) with real-valued loads (Algorithm DIFFUSE, Figure 2).

    Per node i, each iteration: broadcast ``load[i]``; for every neighbour j with
    ``load[i] > load[j]`` send ``P_ij (load[i] - load[j])`` tasks to j (lines (3)-(7)). With P
    symmetric and stochastic this is ``l(t+1) = P l(t)`` (Sec. 3.1, Equation 1), computed as one
    sparse matrix-vector product.

    References
    ----------
    R. Subramanian, I. D. Scherson, An analysis of diffusive load-balancing, SPAA 1994, Sec. 2.
    """

    name = "diffusion"
    title = "Continuous diffusion (DIFFUSE)"
    paper = "Subramanian, Scherson 1994, Sec. 2"
    model = "flow"
    divisible = True
    exchange_rounds = 1
    params = _MATRIX_PARAMS

    params = _MATRIX_PARAMS + (
        Param("kernel", str, "numba", "numba (fused per-node CSR loop) or numpy (scipy SpMV and edge flows, the "
              "reference)", ("numba", "numpy")),
    )

    def reset(self, graph, loads, rng):
        self._graph = graph
        fast = self.options["kernel"] == "numba"
        alpha = self._coefficients(graph)
        self._P = None
        if fast:
            diag = diagonal(graph, alpha)
            self._diag = diag[:1].copy() if diag.size and np.all(diag == diag[0]) else diag
        self._set_coefficients(graph, alpha, per_slot=fast)
        if fast:
            self._out = np.empty(graph.n)
            self._outflow = np.empty(graph.n)

    @property
    def P(self):
        """The N x N diffusivity matrix (scipy CSR), built on first use."""
        if self._P is None:
            self._P = diffusion_matrix(self._graph, self.alpha)
        return self._P

    def step(self, t, graph, loads):
        if self.options["kernel"] == "numpy":
            flows = self.alpha * (loads[graph.u] - loads[graph.v])
            new = self.P @ loads
            return Step(new, moved=float(np.abs(flows).sum()), messages=2 * graph.m, flows=flows)
        new = self._out if self._out is not loads else np.empty_like(loads)
        loads = np.ascontiguousarray(loads, dtype=np.float64)
        moved = _diffuse_kernel(graph.indptr, graph.indices, self._coef, self._diag, loads, new, self._outflow)
        self._out = loads  # ping-pong buffers: the next step writes over this step's input
        return Step(new, moved=float(moved), messages=2 * graph.m, outflow=self._outflow)

    def is_stable(self, graph, loads):
        return bool(np.ptp(loads) <= 1e-12 * max(1.0, float(np.abs(loads).max())))

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
    )

    def reset(self, graph, loads, rng):
        self._setup(graph, rng)
        g = self.h
        fast = self.options["kernel"] == "numba"
        self._set_coefficients(g, self._coefficients(g) if g is graph else self._coefficients_h(g), per_slot=fast)
        self._mode = ROUNDINGS.index(self.rounding)
        if fast:
            self._tables(g)
            self._out = np.empty(graph.n, dtype=np.int64)
            self._outflow = np.empty(graph.n, dtype=np.int64)
        self.min_load = int(loads.min()) if loads.size else 0
        self.negative_steps = 0

    def _tables(self, h) -> None:
        # Per CSR slot of H: one more hop for an added edge (Case 2); for the oriented rounding
        # the sign of P_ij per slot says whether the edge points away from the slot's row node
        # (the sender then rounds up): reading it with P_ij keeps the row loop vectorisable.
        self._hop_extra = np.zeros(0, dtype=np.int64)
        self._coin_buf = np.empty(2 * h.m if self.rounding == "random" else 0)
        if (self.relay >= 0).any():
            self._hop_extra = (self.relay[h.csr_edges] >= 0).astype(np.int64)
        if self.orient is not None and h.m:
            rows = np.repeat(np.arange(h.n, dtype=h.indices.dtype), np.diff(h.indptr))
            along = (self.orient[h.csr_edges] > 0) == (rows < h.indices)
            coef = self._coef if self._coef.size > 1 else np.full(2 * h.m, self._coef[0])
            self._coef = np.where(along, coef, -coef)

    def _setup(self, graph, rng) -> None:
        self.h, self.relay = graph, np.full(graph.m, -1, dtype=np.int64)
        self.exchange_rounds = type(self).exchange_rounds
        self.orient = None
        self._key = 0

    def _coefficients_h(self, h):
        return self._coefficients(h)

    def _flows_h(self, t, loads) -> np.ndarray:
        h = self.h
        return rounded_flows(h.u, h.v, self.alpha, loads, self.rounding, coins=self._coins(t) if self.rounding == "random" else None,
                             coin=self.options.get("coin", "pij"), orient=self.orient)

    def step(self, t, graph, loads):
        h = self.h
        if self.options["kernel"] == "numpy":
            fh = self._flows_h(t, loads)
            pos, neg = np.maximum(fh, 0), np.maximum(-fh, 0)
            outflow = np.bincount(h.u, weights=pos, minlength=h.n) + np.bincount(h.v, weights=neg, minlength=h.n)
            new = (loads - np.bincount(h.u, weights=fh, minlength=h.n).astype(np.int64)
                   + np.bincount(h.v, weights=fh, minlength=h.n).astype(np.int64))
            flows = self._real_flows(graph, fh)
            moved = int(np.abs(flows).sum())
            out = Step(new, moved=moved, messages=self._messages(graph), flows=flows, outflow=outflow.astype(np.int64))
            low = int(out.loads.min()) if out.loads.size else 0
        else:
            new = self._out if self._out is not loads else np.empty_like(loads)
            moved, low = _rounded_kernel(h.indptr, h.indices, h.csr_edges, self._coef, loads, self._mode,
                                         np.uint64(self._key), np.uint64(t & _MASK64),
                                         self.options.get("coin", "pij") == "fraction", self._hop_extra, self._coin_buf,
                                         new, self._outflow)
            self._out = loads  # ping-pong buffers: the next step writes over this step's input
            # The engine reads outflow before the next step overwrites it.
            out = Step(new, moved=int(moved), messages=self._messages(graph), outflow=self._outflow)
        self.min_load = min(self.min_load, low)
        self.negative_steps += low < 0
        return out

    def _real_flows(self, graph, fh):
        return fh

    def _messages(self, graph) -> int:
        return 2 * graph.m * self.exchange_rounds

    def is_stable(self, graph, loads):
        if self.randomized:
            # A coin may send a ceiling across any edge whose ends differ.
            return bool(graph.m == 0 or np.all(loads[graph.u] == loads[graph.v]))
        if self.options["kernel"] == "numba":
            h = self.h
            moved, _ = _rounded_kernel(h.indptr, h.indices, h.csr_edges, self._coef, loads, self._mode, np.uint64(0),
                                       np.uint64(0), False, self._hop_extra, self._coin_buf, np.empty_like(loads),
                                       np.empty_like(loads))
            return bool(moved == 0)
        return bool(not np.any(self._flows_h(0, loads)))

    def report(self):
        return {**super().report(), "min_load": self.min_load, "negative_load_steps": int(self.negative_steps)}

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
    title = "Diffusion, st-orientation rounding"
    paper = "Subramanian, Scherson 1994, Sec. 4 (Cases 1 and 2)"
    rounding = "oriented"
    params = _RoundedDiffusion.params + (
        Param("source", int, -1, "the minimal vertex s of the orientation (-1: node 0)"),
        Param("sink", int, -1, "the maximal vertex t, a neighbour of s in H (-1: the smallest neighbour of s)"),
    )

    def _setup(self, graph, rng):
        super()._setup(graph, rng)
        if graph.n <= 1:
            self.orient = np.zeros(0, dtype=np.int8)
            return
        h, relay = biconnected_supergraph(graph)
        self.h, self.relay = h, relay
        s = self.options["source"]
        t = self.options["sink"]
        self.orient = st_orientation(h, None if s < 0 else s, None if t < 0 else t)
        if (relay >= 0).any():
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
