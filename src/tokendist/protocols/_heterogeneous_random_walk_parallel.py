"""Opt-in multi-threaded phase 1 of ``random-walk`` (Elsässer, Monien, Schamberger 2006, Sec. 3).

``threads=k`` (k > 1) runs :func:`fos_pair_par` instead of the serial
:func:`._heterogeneous_random_walk_kernels.fos_pair_step` / ``fos_pair_regular``. The nodes are
cut into fixed blocks of ``block`` rows; ``numba.prange`` hands the blocks to the threads and each
block runs the *same* row loop as the serial kernel (``_pair_rows_regular`` on a D-regular graph
with one coefficient, ``_pair_rows`` otherwise). A row writes only its own ``out[i]``,
``outflow[i]`` and ``dst[i]`` and reads only the step's inputs (the FOS kernels compute every edge
from both ends), so the rows run in any order without races, and every row's arithmetic (its
summation order included) is the serial kernel's. The step's totals are then combined so that
they too are the serial kernel's values, bit for bit:

* ``moved`` is an integer sum, ``max |est - ideal|`` and ``max est / sbar`` are maxima: exact in
  any order (per-block values, combined serially);
* the squared error ``sum (est - ideal)^2`` (its square root is the ``estimate_l2_error`` trace)
  is a float sum whose bits depend on the order: it is summed after the blocks, serially in node
  order from the new estimate, which repeats the serial kernel's additions one for one.

So loads, outflows, estimate, the switch step (the ``error`` rule reads the max error) and the
trace are those of ``threads=1``. Phase 2 (the walk, :func:`mrws_step`) stays serial: each token
move adds to another node's counts and to an edge's net flow (scattered writes).

Its own function with ``parallel=True`` and ``cache=True``: compiling one function with and
without ``parallel=True`` under ``cache=True`` shares one cache entry (../shared/PERFORMANCE.md).
"""

from __future__ import annotations

import numba
import numpy as np

from ._heterogeneous_random_walk_kernels import _pair_rows, _pair_rows_regular

__all__ = ["fos_pair_par", "ROW_BLOCK"]

#: Rows per block (the threads take blocks a few at a time, see ``_diffusion_parallel.run_parallel``).
ROW_BLOCK = 1024


@numba.njit(parallel=True, cache=True, nogil=True)
def fos_pair_par(indptr, indices, csr_edges, D, a0, inv, deg, caps, c, s, ssum, total, loads, xw, est, xe, dst, out,
                 outflow, block=ROW_BLOCK):
    """:func:`._heterogeneous_random_walk_kernels.fos_pair_step` over blocks of rows in parallel.

    ``D > 0``: every row has D slots and the coefficient is the scalar ``a0`` (the serial
    ``fos_pair_regular``; ``indptr``, ``csr_edges``, ``inv``, ``deg``, ``caps`` unused); ``D = 0``:
    any graph (the serial ``fos_pair_step``). ``block`` (rows per block, >= 1) is an argument so
    that tests can cut small graphs into many blocks. Same arguments otherwise, and the same
    returned values and outputs as the serial kernels, bit for bit (module docstring).
    """
    n = loads.shape[0]
    nb = (n + block - 1) // block
    moved_b = np.zeros(nb, dtype=np.int64)
    err_b = np.zeros(nb)
    wmax_b = np.full(nb, -np.inf)
    for b in numba.prange(nb):
        i0 = b * block
        i1 = min(i0 + block, n)
        if D == 4:
            r = _pair_rows_regular(indices, 4, a0, s, ssum, total, loads, xw, est, xe, dst, out, outflow, i0, i1)
        elif D > 0:
            r = _pair_rows_regular(indices, D, a0, s, ssum, total, loads, xw, est, xe, dst, out, outflow, i0, i1)
        else:
            r = _pair_rows(indptr, indices, csr_edges, a0, inv, deg, caps, c, s, ssum, total, loads, xw, est, xe, dst,
                           out, outflow, i0, i1)
        moved_b[b] = r[0]
        err_b[b] = r[1]
        wmax_b[b] = r[3]
    moved = 0
    max_err = 0.0
    wmax = -np.inf
    for b in range(nb):
        moved += moved_b[b]
        max_err = max(max_err, err_b[b])
        wmax = max(wmax, wmax_b[b])
    # The squared error in node order, as the serial kernel adds it (dst[i] is its e, stored).
    ideal1 = total * 1.0 / ssum
    sq = 0.0
    for i in range(n):
        if s is None:
            err = abs(dst[i] - ideal1)
        else:
            err = abs(dst[i] - total * s[i] / ssum)
        sq += err * err
    if s is None:
        wmax = wmax / (n / ssum)
    return moved, max_err, sq, wmax
