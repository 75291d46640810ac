"""Stratified randomized diffusion (Shiraga, arXiv:1802.06532): multiple random walks with stratified draws.

Node u's k-th token (k = 0 .. x_u - 1) draws a uniform number in ``[k/x_u, (k+1)/x_u)`` and moves to
the vertex whose interval of the cumulative row ``P(u, .)`` contains it. Only the tokens whose
stratum straddles a boundary of the row are random, so every neighbour receives ``x_u P_uv``
within less than 2 tokens, and the expected load is ``x P``.
"""

from __future__ import annotations

import math

import numpy as np

from ..._random import counter_uniform, counter_uniform_mixed, counter_uniform_scalar, mix_index, stream_key
from ...engine import Param, Protocol, Step, register_protocol
from ...graphs._model import unsigned_view
from ...kernels._report import instrument_kernels, kernel_label
from ...kernels._rows import RowOrder
from ._common import edge_coefficients, matrix_param, stateless_steps
from .kernels._stratified import stratified_step
from .kernels._stratified import stratified_steps as _stratified_steps

instrument_kernels(globals())  # runs report which kernel ran each step

__all__ = ["StratifiedDiffusion", "row_boundaries"]

_ORDERS = ("self-first", "self-last")

_add_reduce, _max_reduce = np.add.reduce, np.maximum.reduce  # (the ufuncs' own: .sum(), .max() wrap them in Python)

#: Largest table of token mixes the reference keeps (entries: n times a power of two above the loads).
_MIX_TABLE_LIMIT = 1 << 22
#: What a step of the kernel reports as its variant (RunResult.variants), blocks of steps too.
_STEP_VARIANT = kernel_label(stratified_step)


def row_boundaries(graph, alpha: np.ndarray, order: str) -> tuple[np.ndarray, np.ndarray]:
    """``(c, slot_of)``: per node the cumulative boundaries of its row (``n x (S + 1)``, S = Delta + 1
    columns; ``c[:, 0] = 0``, padded with 1.0) and, per CSR slot, the column of its neighbour."""
    n, S = graph.n, graph.max_degree + 1
    deg = np.diff(graph.indptr)
    rows = np.repeat(np.arange(n), deg)
    k = np.arange(graph.indptr[-1]) - graph.indptr[rows]
    p = np.zeros((n, S))
    a_slot = alpha[graph.csr_edges] if graph.m else np.zeros(0)
    self_p = 1.0 - np.bincount(rows, weights=a_slot, minlength=n)
    if order == "self-first":
        p[:, 0] = self_p
        col = k + 1
    else:
        p[np.arange(n), deg] = self_p
        col = k
    p[rows, col] = a_slot
    c = np.zeros((n, S + 1))
    c[:, 1:] = np.cumsum(p, axis=1)  # sequential sums: the per-node rule adds in the same order
    last = deg + 1  # boundary after the node's last real column
    c[np.arange(S + 1)[None, :] >= last[:, None]] = 1.0
    return c, col


def _below(c: np.ndarray, x: np.ndarray, nodes: np.ndarray, key: int, t: int, mixes=None) -> np.ndarray:
    """Tokens whose stratified draw falls below boundary ``c``: floor(c x) + [U_k < frac(c x)], k = floor(c x).

    ``mixes``: ``(table, at)`` with ``table[at + k] = mix_index(nodes << 32 | k)`` for every k the
    loads ``x`` allow, when the caller keeps such a table (the same draws, fewer numpy calls).
    """
    B = c * x
    k = np.floor(B)
    frac = B - k
    k = k.astype(np.int64)
    if mixes is None:
        idx = (nodes.astype(np.uint64) << np.uint64(32)) | (k.astype(np.uint64) & np.uint64(0xFFFFFFFF))
        u = counter_uniform(key, t, idx)
    else:
        table, at = mixes
        u = counter_uniform_mixed(key, t, table[at + k])
    extra = (k < x) & (u < frac)
    return k + extra


@register_protocol
class StratifiedDiffusion(Protocol):
    """Stratified randomized diffusion: the k-th token moves by a uniform draw in [k/x, (k+1)/x) through P's row.

    Notes
    -----
    The rule (Shiraga, "Discrepancy analysis of a new randomized diffusion algorithm",
    arXiv:1802.06532, Sec. 3; as the abstract states it): each vertex u with x_u tokens
    numbers them k = 0 .. x_u - 1; token k draws ``U_k`` uniformly from ``[k/x_u, (k+1)/x_u)`` and
    goes to the vertex v whose interval ``[sum_{w < v} P_uw, sum_{w <= v} P_uw)`` of the row
    ``P(u, .)`` contains ``U_k`` (itself included). No vertex sends more than it holds, no history is
    kept, and ``E[x(t+1)] = x(t) P``. Claim: discrepancy ``O(sqrt(d log n))`` w.h.p. on d-regular
    graphs after the continuous process's balancing time (and for any symmetric round matrix,
    without knowing Delta).

    Choices: ``matrix`` (default ``degree``: ``P_uv = 1/(2 max(d_u, d_v))``), ``order`` of the row's
    intervals (``self-first``: u itself, then its neighbours in increasing order; ``self-last``).
    Token k of node u at step t draws ``counter_uniform(key, t, u * 2^32 + k)``: the vectorised rule
    and the per-node rule agree. Only the tokens at the row's boundaries are drawn, so a step costs
    O(m), not O(tokens). ``kernel=numba`` (default) runs the step in numba
    (:mod:`.kernels._stratified`), the same draws, the same loads bit for bit; ``kernel=numpy`` the
    vectorised reference.

    References
    ----------
    T. Shiraga, Discrepancy analysis of a new randomized diffusion algorithm, arXiv:1802.06532, 2018.

    Examples
    --------
    >>> import tokendist as td
    >>> r = td.simulate("torus:8x8", "stratified-diffusion", "point:6400", seed=1, max_steps=400)
    >>> r.tokens, int(r.loads.min()) >= 0
    (6400, True)
    """

    name = "stratified-diffusion"
    exact_load_limit = 2**53  # the tokens' positions in a row are float64
    static_reason = "the tokens move through the rows of the transition matrix of the start (Shiraga 2018 analyses a fixed graph)"
    title = "Stratified randomized diffusion"
    paper = "Shiraga 2018, arXiv:1802.06532"
    model = "flow"
    randomized = True
    exchange_rounds = 1
    keeps_balance = False  # tokens at the row's boundaries still move at random
    params = (matrix_param("degree"),
              Param("order", str, "self-first", "order of the row's intervals", _ORDERS),
              Param("kernel", str, "numba", "numba (one pass over the CSR rows) or numpy (the reference step)",
                    ("numba", "numpy")))

    def reset(self, graph, loads, rng):
        self._graph = graph
        alpha = edge_coefficients(graph, self.options["matrix"])
        self._c, self._col = row_boundaries(graph, alpha, self.options["order"])
        deg = np.diff(graph.indptr)
        self._rows = np.repeat(np.arange(graph.n), deg)
        self._key = stream_key(rng)
        self._out = np.empty(graph.n, dtype=np.int64)
        self._indices = unsigned_view(graph.indices)  # (once: the step below runs for a few microseconds)
        self._bounds = None  # the reference's boundaries, made at its first step
        self._mixes, self._mix_width = None, 0  # and its table of token mixes (_token_mixes)
        self._table = None  # on a regular graph, the boundaries as a table (_boundary_table)
        # The kernel's arguments that stay the same for the run, made once (see step).
        self._fast = ((graph.indptr, self._indices, self._col, self._c, self._key)
                      if self.options["kernel"] == "numba" else None)
        self._messages = 2 * graph.m

    def _boundaries(self):
        """The reference's boundaries: ``(c, row, lo, hi)``, each (row, column) once.

        Slot s of node i sends the tokens between boundaries ``col[s]`` and ``col[s] + 1`` of its
        row, and consecutive slots share one: drawn once, the step makes about half the draws.
        ``lo``, ``hi``: the position of each slot's two boundaries among them.
        """
        S1, rows, col = self._c.shape[1], self._rows, self._col
        used, where = np.unique(np.concatenate([rows * S1 + col, rows * S1 + col + 1]), return_inverse=True)
        return self._c.ravel()[used], used // S1, where[:len(col)], where[len(col):]

    def _boundary_table(self):
        """On a regular graph: ``(c, inner, rev, exact)``, the boundaries as a ``(D + 1, n)`` table.

        Row i uses D + 1 consecutive boundaries of its row of ``P`` (slot k: boundaries k and k + 1
        of them), so column i of the table holds them in order and slot k of node i sends
        ``below[k + 1, i] - below[k, i]`` tokens: the tokens sent as a ``(D, n)`` table (D rows of n
        numbers: numpy's fast loops). A first row of zeros (``self-last``: the row starts at 0) and
        a last row of ones (``self-first``: it ends at 1) need no draws (``below`` is 0 and the load):
        ``c`` holds the ``inner`` rows only. ``rev``: for each slot of the ``(D, n)`` table, the
        position of the slot that comes back (what node i receives over its slot k is
        ``sent.flat[rev[k, i]]``). ``exact``: every boundary is at most 1.0, so that
        ``floor(c x) <= x`` and the test ``k < x`` of :func:`_below` holds whenever its draw counts
        (``k = x`` only where ``c x = x``, and then ``frac`` is 0). None off regular graphs.
        """
        g = self._graph
        D, n = g.max_degree, g.n
        if not n or not D or int(g.degrees.min()) != D:
            return None
        c, row, lo, hi = self._bounds
        at = np.arange(n)[:, None] * (D + 1) + np.arange(D)  # slot k of row i: boundaries at, at + 1
        if c.size != n * (D + 1) or not (np.array_equal(lo, at.ravel()) and np.array_equal(hi, at.ravel() + 1)):
            return None
        c = c.reshape(n, D + 1).T
        first, last = int(np.all(c[0] == 0.0)), D + 1 - int(np.all(c[D] == 1.0))
        self._below_rows = np.zeros((D + 1, n), dtype=np.int64)  # (a first row of zeros stays 0)
        # CSR slot s = i D + k is position k n + i of the (D, n) table.
        back = RowOrder(g).reverse.reshape(n, D)
        rev = ((back % D) * n + back // D).T.copy()
        return c[first:last].copy(), slice(first, last), rev, bool(c.max() <= 1.0)

    def _table_step(self, t, loads):
        """``(new loads, moved)`` on a regular graph while the token mixes are in a table (loads in
        ``[0, _mix_width)``): :func:`_below` of every boundary in one table (:meth:`_boundary_table`)."""
        c, inner, rev, exact = self._table
        table, _ = self._mixes
        B = c * loads  # (each column: its node's load)
        k = np.floor(B)
        frac = np.subtract(B, k, out=B)
        k = k.astype(np.int64)
        u = counter_uniform_mixed(self._key, t, table.take(k + self._at))
        extra = u < frac
        if not exact:
            extra &= k < loads
        below = self._below_rows
        np.add(k, extra.astype(np.int64), out=below[inner])  # (two calls: bool + int64 in one is slower)
        if inner.stop < below.shape[0]:  # a last row of ones: below = the load
            below[-1] = loads
        sent = below[1:] - below[:-1]
        outflow = below[-1] - below[0]  # (a row's slots add up to its last boundary minus its first)
        new = loads - outflow
        new += _add_reduce(sent.reshape(-1).take(rev), 0)  # what arrives over each slot, exact in int64
        return new, int(_add_reduce(outflow))

    def _token_mixes(self, top: int):
        """``(table, at)`` for :func:`_below` on the boundaries while no node holds more than ``top``
        tokens: ``mix_index(u << 32 | k)`` of every node u and k < K, K a power of two above ``top``
        (None past :data:`_MIX_TABLE_LIMIT` entries)."""
        K = 1 << int(top).bit_length()
        n = self._graph.n
        if n * K > _MIX_TABLE_LIMIT:
            return None
        self._mix_width = K
        self._at = np.arange(n) * K  # (the table step's offsets: node i's mixes from i K on)
        tokens = (np.arange(n, dtype=np.uint64)[:, None] << np.uint64(32)) | np.arange(K, dtype=np.uint64)
        return mix_index(tokens).ravel(), self._bounds[1] * K

    def step(self, t, graph, loads):
        fast = self._fast
        if fast is not None and graph is self._graph:
            loads = np.ascontiguousarray(loads, dtype=np.int64)
            new = self._out if self._out is not loads else np.empty_like(loads)
            moved = stratified_step(*fast, t, loads, new)
            self._out = loads  # the engine's previous loads: next step's output buffer
            return Step(new, moved=int(moved), messages=self._messages)
        loads = np.asarray(loads, dtype=np.int64)
        if self._bounds is None:
            self._bounds = self._boundaries()
            self._table = self._boundary_table()
        # The token mixes in a table while the loads are small: k = floor(c x) <= x <= top (c <= 1 up
        # to a few ulps, which cannot lift floor(c x) above x below 2^50 tokens).
        top = int(_max_reduce(loads.view(np.uint64)))  # (a negative load: huge, no table)
        if top >= self._mix_width:
            self._mixes = self._token_mixes(top) if top < _MIX_TABLE_LIMIT else None
        if top < self._mix_width and self._table is not None and self._mixes is not None:
            new, moved = self._table_step(t, loads)
            return Step(new, moved, 2 * graph.m)
        c, row, lo, hi = self._bounds
        # _below(c[rows, col]) and _below(c[rows, col + 1]) of every slot, each boundary computed once.
        below = _below(c, loads[row], row, self._key, t, self._mixes if top < self._mix_width else None)
        sent = below[hi] - below[lo]
        n = graph.n
        # in - out per node, exact in float64 below exact_load_limit
        new = loads + (np.bincount(graph.indices, weights=sent, minlength=n)
                       - np.bincount(self._rows, weights=sent, minlength=n)).astype(np.int64)
        return Step(new, moved=int(sent.sum()), messages=2 * graph.m)

    # Per-node form: the node's row, its load and its own counter-based draws.
    def steps(self, t, k, graph, loads, block, moved, messages, stop_idle):
        """Up to ``k`` steps of the numba kernel in one call (:meth:`Protocol.steps`): the kernel of
        :meth:`step` on each, so the same draws and loads; the rule has no state between steps."""
        return stateless_steps(self, _stratified_steps, _STEP_VARIANT, t, k, graph, loads, block, moved,
                               messages, stop_idle)

    def publish(self, rnd, t, node, view):
        return int(view.load)

    def _below_scalar(self, c: float, x: int, node: int, t: int) -> int:
        B = c * x
        k = math.floor(B)
        frac = B - k
        extra = k < x and counter_uniform_scalar(self._key, t, (node << 32) | (k & 0xFFFFFFFF)) < frac
        return k + int(extra)

    def decide(self, t, node, view):
        g = self._graph
        a, b = int(g.indptr[node]), int(g.indptr[node + 1])
        x = int(view.load)
        out = {}
        for s in range(a, b):
            col = int(self._col[s])
            n_tok = self._below_scalar(float(self._c[node, col + 1]), x, node, t) - \
                self._below_scalar(float(self._c[node, col]), x, node, t)
            if n_tok:
                out[int(g.indices[s])] = n_tok
        return out
