"""Opt-in multi-threaded step of ``multi-port`` (Ghosh et al. 1995, Sec. 1.1, 3.2).

The serial kernel :func:`._local_balancing_kernels.multi_port_step` computes each edge once and
writes to both of its ends, which threads cannot share without races. This variant is the same
rule as a per-node row loop over the CSR adjacency: node i gains one token from every neighbour
at least ``threshold`` heavier and loses one to every neighbour at least ``threshold`` lighter
(each edge's decision is computed from both ends, with the same integers, so both ends agree).
Each row writes only ``out[i]``; the outer loop is a ``numba.prange``. The tokens moved are the
edges with a move, counted once: at their heavier end (a row counts its lighter neighbours).
Integer arithmetic throughout, so loads and ``moved`` equal the serial kernel's bit for bit.

Its own function with ``parallel=True`` (a separate cache entry from the serial kernel,
../shared/PERFORMANCE.md); the thread count is set per call by
:func:`._heterogeneous_parallel.use_threads`.
"""

from __future__ import annotations

import numba
import numpy as np

__all__ = ["multi_port_step_par"]


@numba.njit(parallel=True, cache=True, nogil=True)
def multi_port_step_par(indptr, indices, loads, threshold, out):
    """One multi-port step, rows in parallel; writes the new loads to ``out``, returns the tokens moved.

    ``threshold`` must be at least 1 (else an edge between equal loads would move both ways; the
    protocol's threshold is always >= 1). Branch-free (PERFORMANCE.md).
    """
    n = loads.shape[0]
    moved = 0
    for i in numba.prange(n):
        wi = loads[i]
        gain = 0
        loss = 0
        for k in range(indptr[i], indptr[i + 1]):
            diff = wi - loads[indices[k]]
            loss += np.int64(diff >= threshold)
            gain += np.int64(diff <= -threshold)
        out[i] = wi + (gain - loss)
        moved += loss  # prange reduction: each moving edge counted at its heavier end
    return moved
