"""Opt-in multi-threaded steps of ``multi-port`` and ``ds`` (Ghosh et al. 1995, Sec. 1.1, 3.2, 5).

``multi-port``: the serial kernel :func:`._local_balancing_kernels.multi_port_step` computes each edge once and
writes to both of its ends, which threads cannot share without races. This variant is the same
rule as a per-node row loop over the CSR adjacency: node i gains one token from every neighbour
at least ``threshold`` heavier and loses one to every neighbour at least ``threshold`` lighter
(each edge's decision is computed from both ends, with the same integers, so both ends agree).
Each row writes only ``out[i]``; the outer loop is a ``numba.prange``. The tokens moved are the
edges with a move, counted once: at their heavier end (a row counts its lighter neighbours).
Integer arithmetic throughout, so loads and ``moved`` equal the serial kernel's bit for bit.

``ds`` (per-node estimates, :func:`ds_step_nodes_par`): the serial kernel is already a row form
(each row writes only its own ``out``, ``new_prev`` and ``outflow`` entries and reads ``prev``,
which no row writes), so the parallel kernel cuts the rows into fixed blocks of ``block`` rows
and runs the serial kernel's row loop (``_ds_regular_rows`` / ``_ds_general_rows``) on each block,
blocks handed out :data:`._diffusion_parallel.CHUNK` at a time by :func:`run_parallel`. Integer
sums: loads, outflows and tokens moved equal the serial kernel's, bit for bit, whatever the blocks.

Each is its own function with ``parallel=True`` (a separate cache entry from the serial kernel,
../shared/PERFORMANCE.md); the thread count is set per call by
:func:`._heterogeneous_parallel.use_threads`.
"""

from __future__ import annotations

import numba
import numpy as np

from ._diffusion_parallel import ROW_BLOCK, run_parallel
from ._local_balancing_kernels import _ds_general_rows, _ds_regular_rows

__all__ = ["multi_port_step_par", "ds_step_nodes_par", "run_parallel", "ROW_BLOCK"]


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


@numba.njit(parallel=True, cache=True, nogil=True)
def ds_step_nodes_par(indptr, indices, degree, loads, threshold, prev, new_prev, out, outflow, block=ROW_BLOCK):
    """:func:`._local_balancing_kernels.ds_step_nodes` over blocks of ``block`` rows in parallel.

    Same arguments and results (bit for bit); ``block`` (rows per block, >= 1) is a parameter so
    that tests can cut small graphs into many blocks.
    """
    n = loads.shape[0]
    nblocks = (n + block - 1) // block
    moved = 0
    flags = 0
    for b in numba.prange(nblocks):
        i0 = b * block
        i1 = min(i0 + block, n)
        if degree > 0:
            mv, fl = _ds_regular_rows(indices, degree, loads, threshold, prev, new_prev, out, outflow, i0, i1)
        else:
            mv, fl = _ds_general_rows(indptr, indices, loads, threshold, prev, new_prev, out, outflow, i0, i1)
        moved += mv  # prange reductions (integers: any order gives the same sum)
        flags += fl
    return moved, flags > 0
