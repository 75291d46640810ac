"""Quasirandom diffusion (Friedrich, Gairing, Sauerwald 2010/2012): bounded-error rounding per edge.

Every directed edge (i, j) carries the accumulated rounding error ``e_ij = sum_s (x_i(s) P_ij -
sent_ij(s))``; each step node i sends to j the integer nearest to ``e_ij + x_i(t) P_ij`` (the ideal
flow of the step plus the error so far), so that ``|e_ij| <= 1/2`` after every step.
"""

from __future__ import annotations

import math

import numba
import numpy as np

from ...engine import Param, Protocol, Step, register_protocol
from ...graphs._model import unsigned_view
from ._common import edge_coefficients, matrix_param, slot_rows

__all__ = ["Quasirandom", "quasirandom_reference_step"]

_TIES = ("down", "up")
_GUARDS = ("on", "off")


@numba.njit(cache=True, nogil=True)
def _quasirandom_step(indptr, indices, coef, loads, err, ties_up, guard, out, buf):  # pragma: no cover - compiled
    """One step, per-node CSR loop: round ``err + x_i P_ij`` to the nearest integer, scatter the tokens.

    Returns (tokens moved, tokens held back by the guard).
    """
    n = loads.shape[0]
    for i in range(n):
        out[i] = loads[i]
    moved = 0
    held = 0
    one = coef.shape[0] == 1
    c0 = coef[0]
    for i in range(n):
        x = loads[i]
        a = indptr[i]
        b = indptr[i + 1]
        total = 0
        for k in range(a, b):
            p = c0 if one else coef[k]
            acc = err[k] + x * p
            if ties_up:
                s = math.floor(acc + 0.5)
            else:
                s = math.ceil(acc - 0.5)
            if s < 0.0:
                s = 0.0
            err[k] = acc - s
            buf[k - a] = np.int64(s)
            total += np.int64(s)
        if guard and total > x:
            # Never send more than the node holds: take tokens back, one at a time, from the edge
            # whose error is the most negative (the one rounded up the furthest); first slot on ties.
            while total > x:
                best = -1
                worst = 0.0
                for k in range(a, b):
                    if buf[k - a] > 0 and (best < 0 or err[k] < worst):
                        best = k
                        worst = err[k]
                buf[best - a] -= 1
                err[best] += 1.0
                total -= 1
                held += 1
        for k in range(a, b):
            s = buf[k - a]
            if s:
                out[indices[k]] += s
        out[i] -= total
        moved += total
    return moved, held


@numba.njit(cache=True, nogil=True)
def _quasirandom_step_regular(indices, D, p, loads, err, ties_up, guard, out, buf):  # pragma: no cover - compiled
    """The same step on a D-regular graph with one coefficient ``p``: rows of D slots, float rounding.

    The arithmetic is the CSR kernel's (same bits): ``acc = err + x p``, nearest integer, clipped at 0.
    """
    n = loads.shape[0]
    for i in range(n):
        out[i] = loads[i]
    moved = 0
    held = 0
    for i in range(n):
        x = loads[i]
        xp = x * p
        a = i * D
        total = 0.0
        for k in range(D):
            acc = err[a + k] + xp
            s = np.floor(acc + 0.5) if ties_up else np.ceil(acc - 0.5)
            s = max(s, 0.0)
            err[a + k] = acc - s
            buf[k] = s
            total += s
        if guard and total > x:
            while total > x:
                best = -1
                worst = 0.0
                for k in range(D):
                    if buf[k] > 0 and (best < 0 or err[a + k] < worst):
                        best = k
                        worst = err[a + k]
                buf[best] -= 1.0
                err[a + best] += 1.0
                total -= 1.0
                held += 1
        for k in range(D):
            out[indices[a + k]] += np.int64(buf[k])
        sent = np.int64(total)
        out[i] -= sent
        moved += sent
    return moved, held


def quasirandom_reference_step(graph, coef_slot, loads, err, ties_up: bool, guard: bool):
    """The numpy reference of one step (updates ``err`` in place); returns ``(new loads, sent per slot)``."""
    rows = slot_rows(graph)
    acc = err + loads[rows] * coef_slot
    s = np.floor(acc + 0.5) if ties_up else np.ceil(acc - 0.5)
    s = np.maximum(s, 0.0)
    err[:] = acc - s
    sent = s.astype(np.int64)
    if guard:
        total = np.bincount(rows, weights=sent, minlength=graph.n).astype(np.int64)
        for i in np.flatnonzero(total > loads):  # rare: the node holds fewer tokens than its rounding asks
            a, b = graph.indptr[i], graph.indptr[i + 1]
            while total[i] > loads[i]:
                cand = [k for k in range(a, b) if sent[k] > 0]
                k = min(cand, key=lambda k: (err[k], k))
                sent[k] -= 1
                err[k] += 1.0
                total[i] -= 1
    new = loads - np.bincount(rows, weights=sent, minlength=graph.n).astype(np.int64) \
        + np.bincount(graph.indices, weights=sent, minlength=graph.n).astype(np.int64)
    return new, sent


@register_protocol
class Quasirandom(Protocol):
    """Quasirandom diffusion: each edge rounds its ideal flow so that its accumulated error stays within 1/2.

    Notes
    -----
    The rule as published (Friedrich, Gairing, Sauerwald, Sec. 2, "quasirandom" rounding): the
    idealised process is first-order diffusion ``xi(t+1) = xi(t) P`` with, on a d-regular graph,
    ``P_ij = 1/(2d)`` for every edge and ``P_ii = 1/2``. In the discrete process node i sends to each
    neighbour j either ``floor(x_i(t) P_ij)`` or ``ceil(x_i(t) P_ij)`` tokens, choosing the one that
    keeps the accumulated rounding error ``e_ij(t) = sum_{s <= t} (x_i(s) P_ij - sent_ij(s))`` of the
    directed edge smallest in absolute value. Here: ``sent = nearest integer to e_ij(t-1) + x_i P_ij``,
    so ``|e_ij| <= 1/2`` always. Claims (abstract and Sec. 1 of the paper): on d-dimensional tori
    the deviation ``max_k |x_k(t) - xi_k(t)|`` from the idealised process run from the same start is
    O(1); on the hypercube it is O(log^{3/2} n) and can be Omega(log n).

    Choices (parameters): ``matrix`` (``degree``: ``P_ij = 1/(2 max(d_i, d_j))``, the paper's
    matrix on regular graphs), ``ties`` (an accumulated value of exactly k + 1/2 rounds ``down`` or
    ``up``), ``guard``: the paper's rule can ask a node holding few tokens to send more than it has
    (all its edges rounding up at once); ``guard=on`` (default) takes the excess back from the edges
    with the most negative error, so loads stay non-negative and ``|e_ij| < 3/2`` on those edges
    (the report counts the tokens held back; at the loads of the reproductions it is 0). With
    ``guard=off`` the rule is the paper's and a run needs ``allow_infeasible``.

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
    title = "Quasirandom diffusion (bounded-error rounding)"
    paper = "Friedrich, Gairing, Sauerwald 2012 (SIAM J. Comput. 41(4); arXiv:1006.3302), Sec. 2"
    model = "flow"
    exchange_rounds = 1
    params = (matrix_param("degree"),
              Param("ties", str, "down", "an accumulated value of exactly k + 1/2 rounds down or up", _TIES),
              Param("guard", str, "on", "on: never send more than the node holds (takes back from the most "
                    "negative errors); off: the paper's rule, may overdraw (needs allow_infeasible)", _GUARDS),
              Param("kernel", str, "numba", "numba (per-node CSR loop) or numpy (edge-wise reference)",
                    ("numba", "numpy")))

    def reset(self, graph, loads, rng):
        self._graph = graph
        alpha = edge_coefficients(graph, self.options["matrix"])
        coef = alpha[graph.csr_edges] if graph.m else np.zeros(0)
        same = coef.size > 0 and bool(np.all(coef == coef[0]))
        self._coef_slot = coef
        self._coef = coef[:1].copy() if same else coef
        self.err = np.zeros(coef.size)  # accumulated error per directed edge (CSR slot)
        self._out = np.empty(graph.n, dtype=np.int64)
        self._buf = np.empty(max(graph.max_degree, 1), dtype=np.int64)
        self._fbuf = np.empty(max(graph.max_degree, 1))
        d = graph.degrees
        # Rows of D slots (torus, hypercube): the regular kernel, no row pointers read.
        self._degree = int(d[0]) if graph.n and d[0] > 0 and int(d.min()) == int(d.max()) else 0
        self._ties_up = self.options["ties"] == "up"
        self._guard = self.options["guard"] == "on"
        self.held_back = 0
        self.max_abs_error = 0.0

    def step(self, t, graph, loads):
        loads = np.ascontiguousarray(loads, dtype=np.int64)
        if self.options["kernel"] == "numpy":
            new, sent = quasirandom_reference_step(graph, self._coef_slot, loads, self.err, self._ties_up, self._guard)
            held = 0
            moved = int(sent.sum())
        else:
            new = self._out if self._out is not loads else np.empty_like(loads)
            D = self._degree if graph is self._graph else 0
            if D and self._coef.size == 1:
                moved, held = _quasirandom_step_regular(unsigned_view(graph.indices), D, float(self._coef[0]), loads,
                                                        self.err, self._ties_up, self._guard, new, self._fbuf)
            else:
                moved, held = _quasirandom_step(graph.indptr, unsigned_view(graph.indices), self._coef, loads, self.err,
                                                self._ties_up, self._guard, new, self._buf)
            self._out = loads
        self.held_back += int(held)
        return Step(new, moved=int(moved), messages=2 * graph.m)

    def state_key(self):
        return self.err.tobytes()

    def report(self):
        err = float(np.abs(self.err).max()) if self.err.size else 0.0
        return {"max_abs_error_now": err, "held_back": self.held_back, "ties": self.options["ties"],
                "guard": self.options["guard"], "matrix": self.options["matrix"]}

    # Per-node form: the node's own load and its out-edges' errors decide everything.
    def publish(self, rnd, t, node, view):
        return int(view.load)

    def decide(self, t, node, view):
        g = self._graph
        a, b = int(g.indptr[node]), int(g.indptr[node + 1])
        errs = view.memory.setdefault("err", [0.0] * (b - a))
        x = int(view.load)
        sent = []
        for k in range(a, b):
            p = float(self._coef_slot[k])
            acc = errs[k - a] + x * p
            s = math.floor(acc + 0.5) if self._ties_up else math.ceil(acc - 0.5)
            s = max(s, 0)
            errs[k - a] = acc - s
            sent.append(s)
        total = sum(sent)
        if self._guard:
            while total > x:
                k = min((k for k in range(b - a) if sent[k] > 0), key=lambda k: (errs[k], k))
                sent[k] -= 1
                errs[k] += 1.0
                total -= 1
        return {int(g.indices[a + k]): sent[k] for k in range(b - a) if sent[k]}
