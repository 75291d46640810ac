"""Hypercube labelling: is a graph the d-cube on nodes ``0 .. 2^d - 1`` with ``x ~ x xor 2^k``?

Kernels that know it can walk the cube one dimension at a time: for a block of ``2^b`` consecutive
nodes, the neighbours across a dimension ``k >= b`` are the ``2^b`` consecutive nodes of the partner
block ``i0 xor 2^k``, and those across ``k < b`` lie inside the block. Such loops read the loads in
contiguous streams that LLVM vectorises, where a CSR row loop gathers ``d`` scattered values per node
(:mod:`tokendist.protocols.heterogeneous.kernels._walk_cube`; measurements in
docs/design/kernels.md).
"""

from __future__ import annotations

import numpy as np

__all__ = ["cube_dimension"]

_CHUNK = 1 << 20  # edges checked per pass


def cube_dimension(graph) -> int | None:
    """``d`` if ``graph`` is the d-dimensional hypercube in its binary labelling, else None.

    The labelling of ``hypercube:d`` (Houle et al. 2004, Sec. 2; Elsässer et al. 2006, Table 1): node
    ``i`` is joined to ``i xor 2^k`` for every ``k < d``. A graph is that cube exactly when
    ``n = 2^d``, it has all ``d 2^(d-1)`` edges and every edge joins two labels differing in one bit:
    a :class:`~tokendist.graphs.Graph` is simple, so ``d 2^(d-1)`` distinct such edges are all of them.
    The two counts are checked first, so any other graph costs O(1); the cube costs one pass over
    its edges. ``d = 0`` (one node, no edge) is not reported: there is nothing to walk.

    Examples
    --------
    >>> from tokendist.graphs import make_graph
    >>> cube_dimension(make_graph("hypercube:4")), cube_dimension(make_graph("torus:4x4"))
    (4, None)
    >>> cube_dimension(make_graph("ring:4"))  # the 2-cube is the 4-cycle, but labelled 0-1-2-3-0
    >>> cube_dimension(make_graph("path:2"))  # the 1-cube
    1
    """
    n = graph.n
    if n < 2 or n & (n - 1):
        return None
    d = n.bit_length() - 1
    if graph.m != d * n // 2:
        return None
    # Graph stores u < v, so x = u xor v > 0; one bit set: x & (x - 1) == 0. In chunks, in the
    # arrays' own dtype: whole-array temporaries would cost about 30 bytes per edge at once.
    for start in range(0, graph.m, _CHUNK):
        x = np.bitwise_xor(graph.u[start:start + _CHUNK], graph.v[start:start + _CHUNK])
        if np.any(x & (x - 1)):
            return None
    return d
