"""Float sums in the serial kernels' order, with numpy: what makes a real-valued reference exact.

A serial CSR kernel sums a row's terms one slot after another, from ``0.0``, in CSR order, and
the load moved one node after another. Floating-point addition is not associative, so a numpy
step that adds the same terms in another order (``np.bincount``, ``np.sum``'s pairwise blocks, a
scipy product) differs from the kernel in the last bits, and a run's trace and stopping step can
follow. :class:`RowOrder` adds per-slot terms exactly as the kernels do: column by column over the
rows (``acc += terms[:, k]``, a regular graph's ``(n, D)`` view), or on an irregular graph over
the rows that have a ``k``-th slot, which are a prefix of the rows sorted by degree. Each row's
additions are then the kernel's, in the kernel's order, so the results are equal bit for bit
(no fused multiply-add on either side: numba compiles without ``fastmath``).

Used by the real-valued references (``diffusion``, ``fos``, ``sos``), so that a small run may take
the numpy step instead of compiling (:func:`tokendist.kernels._choice.reference_is_cheaper`).
"""

from __future__ import annotations

from functools import cached_property

import numpy as np

__all__ = ["RowOrder", "sequential_sum"]


def sequential_sum(values: np.ndarray) -> float:
    """``((0.0 + v[0]) + v[1]) + ...``: a kernel's running total (``np.cumsum`` adds in order;
    ``np.sum`` adds in pairwise blocks)."""
    return float(np.cumsum(values)[-1]) if values.size else 0.0


class RowOrder:
    """Per-row sums of per-slot terms in CSR order from ``0.0``, as the serial kernels add them.

    Parameters
    ----------
    graph : Graph
        The terms are given per CSR slot of this graph (``graph.indices`` order).

    Examples
    --------
    >>> from tokendist.graphs import make_graph
    >>> g = make_graph("path:3")
    >>> RowOrder(g).sums(np.array([1.0, 2.0, 3.0, 4.0])).tolist()  # rows: [1], [0, 2], [1]
    [1.0, 5.0, 4.0]
    """

    def __init__(self, graph):
        self.graph = graph
        indptr = graph.indptr.astype(np.int64)
        self.n = graph.n
        deg = np.diff(indptr)
        self.degree = int(deg.max()) if deg.size else 0
        #: The row of every slot, and whether the slot's neighbour comes before the row (a "lower" slot).
        self.row = np.repeat(np.arange(self.n), deg)
        self.lower = graph.indices < self.row
        self.regular = bool(deg.size) and bool(np.all(deg == self.degree))
        if not self.regular:
            # Rows by decreasing degree: the rows with a k-th slot are the first count[k] of them.
            self._by_degree = np.argsort(-deg, kind="stable")
            self._count = np.searchsorted(-deg[self._by_degree], -np.arange(self.degree), side="left")
            self._start = indptr[:-1][self._by_degree]

    def sums(self, terms: np.ndarray) -> np.ndarray:
        """``out[i] = ((0.0 + t[s0]) + t[s1]) + ...`` over row ``i``'s slots ``s0, s1, ...`` in order.

        Integer terms give int64 sums, exact over the whole int64 range (where a float
        ``np.bincount`` rounds past 2**53).
        """
        out = np.zeros(self.n, dtype=np.int64 if terms.dtype.kind in "iub" else np.float64)
        if self.regular:
            cols = terms.reshape(self.n, self.degree)
            for k in range(self.degree):
                out += cols[:, k]
            return out
        for k in range(self.degree):
            c = self._count[k]
            rows = self._by_degree[:c]
            out[rows] += terms[self._start[:c] + k]
        return out

    @cached_property
    def reverse(self) -> np.ndarray:
        """For each slot ``i -> j``, the slot ``j -> i`` (int64): what arrives over a slot is
        ``terms[reverse]``."""
        pairs = np.argsort(self.graph.csr_edges, kind="stable").reshape(-1, 2)  # each edge's two slots
        rev = np.empty(2 * pairs.shape[0], dtype=np.int64)
        rev[pairs[:, 0]], rev[pairs[:, 1]] = pairs[:, 1], pairs[:, 0]
        return rev

    @cached_property
    def reverse_by_column(self) -> np.ndarray:
        """On a regular graph of degree ``D``, :attr:`reverse` for per-slot terms laid out as
        ``(D, n)`` (slot ``i D + k``, the ``k``-th of row ``i``, at ``k n + i``): what arrives over
        each slot is ``terms.reshape(-1)[reverse_by_column]``, in the same layout. The layout makes
        a node's sum ``D - 1`` additions of contiguous rows (:meth:`column_sums`)."""
        n, D = self.n, self.degree
        rev = self.reverse.reshape(n, D).T
        return ((rev % D) * n + rev // D).reshape(-1)

    @staticmethod
    def column_sums(cols: np.ndarray) -> np.ndarray:
        """Per node, the sum of its ``D`` integer terms in the ``(D, n)`` layout of
        :attr:`reverse_by_column` (a regular graph; int64 sums are exact in any order). One
        reduction over contiguous rows: a third cheaper than ``D - 1`` additions on 256 nodes,
        and 2-3x cheaper than reducing an ``(n, D)`` array along its short axis."""
        return np.add.reduce(cols, axis=0)

    @cached_property
    def edge(self) -> np.ndarray:
        """The edge of every slot (int64)."""
        return self.graph.csr_edges.astype(np.int64)

    @cached_property
    def leaving(self) -> np.ndarray:
        """Per slot, +1 where the slot's node is its edge's ``u`` (a positive flow ``u -> v`` leaves
        it), else -1."""
        return np.where(self.row == self.graph.u[self.edge], 1, -1).astype(np.int64)

    def sent(self, flows: np.ndarray) -> np.ndarray:
        """Per slot, what its node sends over it of the per-edge ``flows`` (positive ``u -> v``;
        negative: the node receives)."""
        return flows[self.edge] * self.leaving

    def net(self, flows: np.ndarray) -> np.ndarray:
        """Per node, what arrives minus what leaves of the per-edge integer ``flows``, in exact
        int64 sums (a float ``np.bincount`` rounds past 2**53)."""
        return -self.sums(self.sent(flows))
