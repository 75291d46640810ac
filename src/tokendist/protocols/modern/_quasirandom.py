"""Quasirandom diffusion (Friedrich, Gairing, Sauerwald 2010/2012): bounded-error rounding per edge.

Every directed edge (i, j) carries the accumulated rounding error ``e_ij = sum_s (x_i(s) P_ij -
sent_ij(s))``; each step node i sends to j the integer nearest to ``e_ij + x_i(t) P_ij`` (the ideal
flow of the step plus the error so far), so that ``|e_ij| <= 1/2`` after every step.

Exact bookkeeping: every ``P_ij`` is ``1/q_ij`` for an integer ``q_ij`` (``2 max(d_i, d_j)``,
``Delta + 1``, or ``uniform:1/k``), so the error is kept as an integer count of ``1/q_ij``-th
tokens: no floating-point drift, exact ties, and with ``x = a q + b`` the rounding is one
comparison, ``sent = a + [2 (e + b) > q]``. Rounding keeps an error in ``[-(q+1)/2, q/2]`` (or
lowers it); only the guard's take-backs raise one above ``q/2``, and the tests find them within
``3q/2``. The errors are stored in the narrowest signed integer type that holds ``2q``
(:func:`error_dtype`: int8 on tori and hypercubes up to degree 31, 1 byte per directed edge);
a value that would not fit stops the run with a one-line error instead of wrapping. ``q`` must
stay below 2^29 (a graph of maximum degree below 2^28).
"""

from __future__ import annotations

import numpy as np

from ...engine import Param, Protocol, Step, register_protocol
from ...errors import TokendistError
from ...graphs._model import unsigned_view
from ...engine._cycles import NO_TABLE
from .kernels._quasirandom import quasirandom_stencil_step, quasirandom_step, quasirandom_step_regular
from .kernels._quasirandom import quasirandom_regular_steps as _quasirandom_regular_steps
from .kernels._quasirandom import quasirandom_stencil_steps as _quasirandom_stencil_steps
from .kernels._quasirandom import quasirandom_steps as _quasirandom_steps
from ...kernels._report import block_kernel_ready, instrument_kernels, kernel_label
from ...kernels._rows import RowOrder
from ._common import edge_coefficients, matrix_param, slot_rows


instrument_kernels(globals())  # runs report which kernel ran each step

__all__ = ["Quasirandom", "error_dtype", "quasirandom_reference_step", "RegularQuasirandomStep",
           "reciprocal_denominators"]

_TIES = ("down", "up")
_GUARDS = ("on", "off")


def reciprocal_denominators(alpha: np.ndarray, name: str) -> np.ndarray:
    """The integers ``q`` with ``alpha = 1/q`` (int64); a one-line error when some entry is not of that form."""
    q = np.rint(1.0 / alpha).astype(np.int64) if alpha.size else np.zeros(0, dtype=np.int64)
    if alpha.size and (np.any(q < 1) or np.any(np.abs(alpha * q - 1.0) > 1e-12)):
        raise TokendistError(f"{name}: every P_ij must be 1/k for an integer k (exact error bookkeeping); "
                             "use matrix=degree, max-degree or uniform:1/k")
    return q


def error_dtype(q_max: int) -> np.dtype:
    """The narrowest of int8, int16, int32 whose range holds ``+-2 q_max`` (the errors measured stay within ``3q/2``).

    One byte per directed edge on tori and hypercubes of degree up to 31 (``q = 2d``): the kernel
    reads and writes every error once a step. The margin over ``3q/2`` costs nothing; a kernel
    that would still store a value its type cannot hold refuses the run (:class:`Quasirandom`).
    """
    for t in (np.int8, np.int16):
        if 2 * int(q_max) <= np.iinfo(t).max:
            return np.dtype(t)
    return np.dtype(np.int32)


def quasirandom_rounding(graph, order, q_slot, loads, err, ties_up: bool, guard: bool, q=None):
    """Each slot's tokens this step (updates the integer ``err`` in place): ``(sent, total, held)``.

    ``order`` is the graph's :class:`~tokendist.kernels._rows.RowOrder`, ``q`` the one value of
    ``q_slot`` when all are equal (numpy divides by one integer several times faster); ``total``
    is what each node sends (int64 sums: exact), ``held`` the tokens the guard kept back.
    """
    x = loads[order.row]
    whole = x // (q_slot if q is None else q)
    rest = x - whole * q_slot
    v = err + rest
    up = 2 * v + int(ties_up) > q_slot
    err[:] = v - up * q_slot
    sent = whole + up
    total = order.sums(sent)
    held = take_back(graph, q_slot, loads, sent, err, total) if guard else 0
    return sent, total, held


def take_back(graph, q_slot, loads, sent, err, total) -> int:
    """The guard: where a node's rounding asks for more than it holds, take tokens back one at a
    time from its edge with the most negative error (``sent``, ``err``, ``total`` updated in place);
    returns the tokens held back."""
    held = 0
    for i in np.flatnonzero(total > loads):  # rare: the node holds fewer tokens than its rounding asks
        a, b = graph.indptr[i], graph.indptr[i + 1]
        while total[i] > loads[i]:
            k = min((k for k in range(a, b) if sent[k] > 0), key=lambda k: (err[k] / q_slot[k], k))
            sent[k] -= 1
            raised = int(err[k]) + int(q_slot[k])
            if raised > np.iinfo(err.dtype).max:  # as the kernels: refuse rather than wrap
                raise TokendistError(f"quasirandom: an accumulated error left the range of its {err.dtype} store; "
                                     "the run cannot continue exactly")
            err[k] = raised
            total[i] -= 1
            held += 1
    return held


def quasirandom_reference_step(graph, q_slot, loads, err, ties_up: bool, guard: bool, order=None, q=None):
    """The numpy reference of one step (updates the integer ``err`` in place).

    ``order``: the graph's :class:`~tokendist.kernels._rows.RowOrder` (built here if not given; a
    run keeps one); ``q`` as in :func:`quasirandom_rounding`. Returns ``(loads, sent per slot,
    tokens held back by the guard)``.
    """
    order = RowOrder(graph) if order is None else order
    sent, total, held = quasirandom_rounding(graph, order, q_slot, loads, err, ties_up, guard, q)
    # What arrives over a slot is what its reverse slot sent.
    return loads - total + order.sums(sent[order.reverse]), sent, held


class RegularQuasirandomStep:
    """:func:`quasirandom_reference_step` on a ``D``-regular graph whose slots all have ``q_slot = q``.

    The reference step of a small run (a torus or a hypercube of a few hundred nodes), where the
    cost is the number of numpy calls and their strides, not their arithmetic. The per-slot work
    runs on ``(D, n)`` arrays, column ``i`` holding node ``i``'s ``D`` slots: ``x = a q + b`` is
    divided once per node and broadcast along rows (by a shift and a mask when ``q`` is a power
    of two), a node's sum is one reduction over contiguous rows (int64: exact in any order), and
    ``2 (e + b) + tie > q`` is one comparison with ``floor((q - tie) / 2)`` (for integers,
    ``2 v > k`` exactly when ``v > floor(k / 2)``). Every temporary is a buffer made once. The
    same integers as the plain step (tests/protocols/test_small_run_references.py).
    """

    def __init__(self, graph, order, q_slot, q: int, ties_up: bool, err):
        self.graph, self.q_slot, self.q, self.err = graph, q_slot, int(q), err
        #: the errors as (D, n): a view of ``err`` (CSR slot order), updated in place
        self.errT = err.reshape(order.n, order.degree).T
        self.n, self.D = n, D = order.n, order.degree
        self.threshold = (self.q - int(ties_up)) // 2
        self.order = order
        # Slot s = i D + k sits at k n + i of the (D, n) arrays: what arrives over slot s is what its
        # reverse slot sent, read through this permutation of the (D, n) layout.
        self.arrive_from = order.reverse_by_column
        self._v, self._up = np.empty((D, n), dtype=np.int64), np.empty((D, n), dtype=np.int64)
        self._sent = np.empty((D, n), dtype=np.int64)
        self._whole, self._rest = np.empty(n, dtype=np.int64), np.empty(n, dtype=np.int64)

    def step(self, loads, guard: bool):
        """One step (``err`` updated in place): ``(loads, tokens sent, tokens held back)``."""
        whole, rest, v, up, sent, errT = self._whole, self._rest, self._v, self._up, self._sent, self.errT
        q = self.q
        if q & (q - 1) == 0:  # q a power of two (tori, hypercubes of 2^k dimensions): the same floor
            np.right_shift(loads, q.bit_length() - 1, out=whole)  # quotient and remainder (two's
            np.bitwise_and(loads, q - 1, out=rest)  # complement), without an integer division
        else:
            np.divmod(loads, q, out=(whole, rest))  # floor division: x // q and x - (x // q) q
        np.add(errT, rest, out=v)
        np.greater(v, self.threshold, out=up)  # round up (0 or 1, int64: faster to multiply and add)
        np.multiply(up, q, out=sent)  # (sent holds q up for a moment: a masked subtract costs 4x more)
        np.subtract(v, sent, out=errT, casting="unsafe")  # (as err[:] = ...: error_dtype holds it)
        np.add(up, whole, out=sent)
        total = self.order.column_sums(sent)
        new = loads - total
        held = 0
        if guard and new.min() < 0:  # rare: the guard's loop on the slots in CSR order
            flat = sent.T.copy().reshape(-1)
            held = take_back(self.graph, self.q_slot, loads, flat, self.err, total)
            sent[...] = flat.reshape(self.n, self.D).T
            new = loads - total
        new += self.order.column_sums(sent.reshape(-1)[self.arrive_from].reshape(self.D, self.n))
        return new, int(total.sum()), held


@register_protocol
class Quasirandom(Protocol):
    """Quasirandom diffusion: each edge rounds its ideal flow so that its accumulated error stays within 1/2.

    Notes
    -----
    The rule as published (Friedrich, Gairing, Sauerwald, Sec. 2, "quasirandom" rounding; abstract:
    "keeping the accumulated rounding errors as small as possible"): the idealised process is
    first-order diffusion ``xi(t+1) = xi(t) P`` with, on a d-regular graph, ``P_ij = 1/(2d)`` for
    every edge and ``P_ii = 1/2``. In the discrete process node i sends to each neighbour j either
    ``floor(x_i(t) P_ij)`` or ``ceil(x_i(t) P_ij)`` tokens, choosing the one that keeps the
    accumulated rounding error ``e_ij(t) = sum_{s <= t} (x_i(s) P_ij - sent_ij(s))`` of the directed
    edge smallest in absolute value: ``sent = nearest integer to e_ij(t-1) + x_i P_ij``, so
    ``|e_ij| <= 1/2`` always. Claims (abstract): on d-dimensional tori the deviation
    ``max_k |x_k(t) - xi_k(t)|`` from the idealised process run from the same start is bounded by a
    constant; on the hypercube it is O(log^{3/2} n) (and the paper gives an instance with
    Omega(log n)).

    Choices (parameters): ``matrix`` (``degree``: ``P_ij = 1/(2 max(d_i, d_j))``, the paper's
    matrix on regular graphs; every entry must be 1/k for an integer k), ``ties`` (an accumulated
    value of exactly k + 1/2 rounds ``down`` or ``up``), ``guard``: the paper's rule can ask a node
    holding few tokens to send more than it has (all its edges rounding up at once); ``guard=on``
    (default) takes the excess back from the edges with the most negative error, so loads stay
    non-negative and ``|e_ij| < 3/2`` on those edges (the report counts the tokens held back). With
    ``guard=off`` the rule is the paper's and a run needs ``allow_infeasible``.

    ``track=true`` runs the idealised process alongside and adds to the report the largest deviation
    ``max_k |x_k - xi_k|`` and the largest accumulated edge error over the run.

    The per-node form needs no message but the load exchange of the engine: the errors of a node's
    out-edges are its own memory.

    References
    ----------
    T. Friedrich, M. Gairing, T. Sauerwald, Quasirandom load balancing, SODA 2010; SIAM J. Comput.
    41(4):747-771, 2012; arXiv:1006.3302.

    Examples
    --------
    >>> import tokendist as td
    >>> r = td.simulate("torus:8x8", "quasirandom", "uniform:6400", seed=1, max_steps=400)
    >>> r.tokens, int(r.loads.min()) >= 0, r.report["held_back"]
    (6400, True, 0)
    """

    name = "quasirandom"
    exact_load_limit = 2**53  # the kernel divides loads in float64 before it rounds
    static_reason = "each edge's accumulated rounding error belongs to an edge of the network of the start (FGS 2012 analyse a fixed graph)"
    title = "Quasirandom diffusion (bounded-error rounding)"
    paper = "Friedrich, Gairing, Sauerwald 2012 (SIAM J. Comput. 41(4); arXiv:1006.3302), Sec. 2"
    model = "flow"
    exchange_rounds = 1
    params = (matrix_param("degree"),
              Param("ties", str, "down", "an accumulated value of exactly k + 1/2 rounds down or up", _TIES),
              Param("guard", str, "on", "on: never send more than the node holds (takes back from the most "
                    "negative errors); off: the paper's rule, may overdraw (needs allow_infeasible)", _GUARDS),
              Param("kernel", str, "numba", "numba (per-node CSR loop) or numpy (edge-wise reference)",
                    ("numba", "numpy")),
              Param("track", bool, False, "run the continuous process xi(t+1) = xi(t) P alongside and report the "
                    "largest deviation max_k |x_k - xi_k| and the largest accumulated edge error over the run "
                    "(costs one SpMV and one pass over the errors a step)"))

    def reset(self, graph, loads, rng):
        self._graph = graph
        self._xi = np.asarray(loads, dtype=float).copy() if self.options["track"] else None
        self.max_deviation = self.deviation_now = 0.0
        self.max_error_seen = 0.0
        alpha = edge_coefficients(graph, self.options["matrix"])
        q_slot = reciprocal_denominators(alpha[graph.csr_edges] if graph.m else alpha, self.name)
        same = q_slot.size > 0 and bool(np.all(q_slot == q_slot[0]))
        self._q_slot = q_slot
        self._q = q_slot[:1].copy() if same else q_slot
        #: accumulated error per directed edge (CSR slot), in units of 1/q of a token
        self.err_units = np.zeros(q_slot.size, dtype=error_dtype(q_slot.max() if q_slot.size else 1))
        self._out = np.empty(graph.n, dtype=np.int64)
        self._indices = unsigned_view(graph.indices)  # (once: the step below runs for a few microseconds)
        self._buf = np.empty(max(graph.max_degree, 1), dtype=np.int64)
        self._ties_up = self.options["ties"] == "up"
        self._guard = self.options["guard"] == "on"
        self.held_back = 0
        self._order = None  # the numpy step's RowOrder, made at its first step
        self._regular = None  # and on a regular graph its RegularQuasirandomStep
        self._messages = 2 * graph.m
        d = graph.degrees
        # Rows of D slots (torus, hypercube): the regular kernel, no row pointers read.
        self._degree = int(d[0]) if graph.n and d[0] > 0 and int(d.min()) == int(d.max()) and same else 0
        # Offset stencil (tori, rings): its runs send to i + offset, no CSR index read.
        st = graph.stencil if self._degree else None
        self._stencil = (st.starts, st.ends, st.offsets) if st is not None and st.degree == self._degree else None
        # The kernel and its arguments that stay the same for the run, made once (a step on a small
        # torus is a few microseconds of kernel; looking them up every step cost about as much).
        run = (self._ties_up, self._guard, self._buf)
        if self.options["kernel"] == "numpy":
            self._fast = self._blocks = None
        elif self._degree and self._stencil is not None:
            self._fast = (quasirandom_stencil_step,
                          (self._indices, self._degree, int(self._q[0])) + run + self._stencil)
            self._blocks = _quasirandom_stencil_steps
        elif self._degree:
            self._fast = (quasirandom_step_regular, (self._indices, self._degree, int(self._q[0])) + run)
            self._blocks = _quasirandom_regular_steps
        else:
            self._fast = (quasirandom_step, (graph.indptr, self._indices, self._q) + run)
            self._blocks = _quasirandom_steps

    @property
    def err(self) -> np.ndarray:
        """The accumulated error of every directed edge (CSR slot), in tokens."""
        return self.err_units / self._q_slot

    def step(self, t, graph, loads):
        loads = np.ascontiguousarray(loads, dtype=np.int64)
        fast = self._fast
        if fast is not None and graph is self._graph:  # the kernel for the graph of the start
            new = self._out if self._out is not loads else np.empty_like(loads)
            kernel, fixed = fast
            moved, held = kernel(*fixed, self.err_units, loads, new)
            return self._kernel_step(graph, new, moved, held, loads)
        regular = self._regular
        if regular is not None and graph is self._graph and regular.err is self.err_units:  # (a small run on a
            # torus or hypercube: fewer calls; err_units is the array the step was made with)
            new, moved, held = regular.step(loads, self._guard)
            self.held_back += held
            if self._xi is not None:
                self._track(graph, new)
            return Step(new, moved=moved, messages=self._messages)
        if self.options["kernel"] == "numpy":
            if self._order is None or self._order.graph is not graph:
                self._order = RowOrder(graph)
            q = int(self._q[0]) if self._q.size == 1 else None
            if self._degree and graph is self._graph:
                self._regular = RegularQuasirandomStep(graph, self._order, self._q_slot, q, self._ties_up,
                                                       self.err_units)
                return self.step(t, graph, loads)
            new, sent, held = quasirandom_reference_step(graph, self._q_slot, loads, self.err_units, self._ties_up,
                                                         self._guard, self._order, q)
            self.held_back += held
            if self._xi is not None:
                self._track(graph, new)
            return Step(new, moved=int(sent.sum()), messages=2 * graph.m)
        new = self._out if self._out is not loads else np.empty_like(loads)
        moved, held = quasirandom_step(graph.indptr, unsigned_view(graph.indices), self._q, self._ties_up,
                                        self._guard, self._buf, self.err_units, loads, new)
        return self._kernel_step(graph, new, moved, held, loads)

    steps_find_cycles = True

    def steps(self, t, k, graph, loads, block, moved, messages, stop_idle, seen=None):
        """Up to ``k`` steps of the step kernel in one call (:meth:`Protocol.steps`), with the cycle
        check on the errors (:meth:`state_key`); None where :meth:`step` takes another path (the
        numpy reference, another graph, ``track``) or a small run would compile the block kernel."""
        fast = self._fast
        if fast is None or graph is not self._graph or self._xi is not None:
            return None
        kernel, fixed = fast
        table = NO_TABLE if seen is None else seen.arrays()
        args = (*fixed, self.err_units, t, k, stop_idle, *table, loads, block, moved, messages, self._messages)
        if not block_kernel_ready(self._blocks, args):
            return None
        done, held = self._blocks(*args)
        self._held(held)
        return done, kernel_label(kernel)

    def _held(self, held):
        if held < 0:  # (error_dtype leaves a margin of q/2 over the errors ever measured: not expected)
            raise TokendistError(f"{self.name}: an accumulated error left the range of its "
                                 f"{self.err_units.dtype} store; the run cannot continue exactly")
        self.held_back += int(held)

    def _kernel_step(self, graph, new, moved, held, loads):
        # The bookkeeping after a kernel's step.
        self._held(held)
        self._out = loads
        if self._xi is not None:
            self._track(graph, new)
        return Step(new, moved=int(moved), messages=self._messages if graph is self._graph else 2 * graph.m)

    def _track(self, graph, new):
        # The idealised process from the same start (FGS Sec. 2), for the report only.
        alpha = 1.0 / self._q_slot
        xi = self._xi
        rows = slot_rows(graph)
        self._xi = xi - np.bincount(rows, weights=alpha * xi[rows], minlength=graph.n) \
            + np.bincount(graph.indices, weights=alpha * xi[rows], minlength=graph.n)
        self.deviation_now = float(np.abs(new - self._xi).max())
        self.max_deviation = max(self.max_deviation, self.deviation_now)
        if self.err_units.size:
            self.max_error_seen = max(self.max_error_seen, float(np.abs(self.err).max()))

    def state_key(self):
        return self.err_units  # (its bytes, hashed at once by the engine: engine/_cycles.py)

    def report(self):
        err = float(np.abs(self.err).max()) if self.err_units.size else 0.0
        out = {"max_abs_error_now": err, "held_back": self.held_back, "ties": self.options["ties"],
               "guard": self.options["guard"], "matrix": self.options["matrix"]}
        if self._xi is not None:
            out.update(max_abs_error=self.max_error_seen, max_deviation=self.max_deviation,
                       deviation_now=self.deviation_now)
        return out

    # Per-node form: the node's own load and its out-edges' errors decide everything.
    def publish(self, rnd, t, node, view):
        return int(view.load)

    def decide(self, t, node, view):
        g = self._graph
        a, b = int(g.indptr[node]), int(g.indptr[node + 1])
        errs = view.memory.setdefault("err", [0] * (b - a))
        x = int(view.load)
        sent = []
        for k in range(b - a):
            q = int(self._q_slot[a + k])
            whole, rest = divmod(x, q)
            v = errs[k] + rest
            up = int(2 * v + int(self._ties_up) > q)
            errs[k] = v - up * q
            sent.append(whole + up)
        total = sum(sent)
        if self._guard:
            while total > x:
                k = min((k for k in range(b - a) if sent[k] > 0), key=lambda k: (errs[k] / int(self._q_slot[a + k]), k))
                sent[k] -= 1
                errs[k] += int(self._q_slot[a + k])
                total -= 1
        return {int(g.indices[a + k]): sent[k] for k in range(b - a) if sent[k]}
