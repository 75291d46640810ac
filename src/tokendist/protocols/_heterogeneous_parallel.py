"""Opt-in multi-threaded steps of ``fos`` and ``fos-floor`` (Elsässer, Monien, Schamberger 2006, eq. (3)).

``threads=k`` (k > 1) runs these kernels instead of the serial ones in :mod:`._heterogeneous_kernels`.
The row loop is the serial kernel's, line for line; only the outer loop over nodes is a
``numba.prange``. Each row writes only its own ``out[i]`` and ``outflow[i]`` (the FOS kernels
compute every edge from both ends), so the rows run in any order without races and the per-row
sums are added in the same order as before:

* ``fos-floor``: loads, outflows and ``moved`` are the serial kernel's bit for bit (integers);
* ``fos``: loads and outflows are the serial kernel's bit for bit; only ``moved`` (a float sum of
  the rows, split between threads) may differ in the last bits.

Each variant is its own function (a separate cache entry): compiling one function with and
without ``parallel=True``, both cached, makes the parallel build run the serial code
(../shared/PERFORMANCE.md). Numba's thread count is set per call by :func:`use_threads`; the
rows are handed out in chunks by :func:`run_rows`.
"""

from __future__ import annotations

import numba
import numpy as np

from ..engine import Param
from ..errors import TokendistError

__all__ = ["THREADS_PARAM", "CHUNK_ROWS", "check_threads", "use_threads", "run_rows", "fos_real_step_par", "fos_floor_step_par"]

#: Opt-in threads of the numba kernel (the machine's second core is often busy: serial by default).
THREADS_PARAM = Param("threads", int, 1, "threads of the numba kernel: 1 runs the serial kernel; k > 1 a "
                      "numba parallel kernel on min(k, NUMBA_NUM_THREADS) threads (same results)")


def check_threads(name: str, k: int) -> None:
    """Refuse ``threads=k < 1`` of protocol ``name`` (a user error)."""
    if k < 1:
        raise TokendistError(f"{name}: threads must be at least 1, got {k}")


def use_threads(name: str, k: int) -> bool:
    """Validate ``threads=k`` of protocol ``name``; for k > 1 set numba's thread count, return True."""
    check_threads(name, k)
    if k == 1:
        return False
    numba.set_num_threads(min(int(k), numba.config.NUMBA_NUM_THREADS))
    return True


#: Rows a thread takes at a time (numba's dynamic chunking): a thread that the OS deschedules
#: (this machine's second core is often busy) then holds back only its current chunk, not half
#: of the step as with prange's default static split.
CHUNK_ROWS = 4096


def run_rows(kernel, *args):
    """``kernel(*args)`` (a prange over rows) with rows handed out :data:`CHUNK_ROWS` at a time.

    The chunk size is numba's per calling thread: set for this call only and restored.
    """
    old = numba.set_parallel_chunksize(CHUNK_ROWS)
    try:
        return kernel(*args)
    finally:
        numba.set_parallel_chunksize(old)


@numba.njit(parallel=True, cache=True, nogil=True)
def fos_real_step_par(indptr, indices, csr_edges, mode, a0, inv, alpha, x, loads, out, outflow):
    """:func:`._heterogeneous_kernels.fos_real_step` with the rows spread over threads."""
    n = loads.shape[0]
    moved = 0.0
    for i in numba.prange(n):
        xi = x[i]
        ai = inv[i] if mode == 1 else a0
        inn = 0.0
        outs = 0.0
        sent_in = 0.0
        sent_out = 0.0
        for k in range(indptr[i], indptr[i + 1]):
            j = indices[k]
            a = a0 if mode == 0 else (min(ai, inv[j]) if mode == 1 else alpha[csr_edges[k]])
            # The serial kernel's two branches as selects: numba's parfor pass fails ("unexpected
            # cycle in lookup()") on an if/else with float accumulators inside a prange. Same bits:
            # a (x_j - x_i) is exactly -(a (x_i - x_j)), and adding +0.0 to an accumulator that
            # starts at +0.0 changes nothing.
            z = a * (xi - x[j])  # flow out of i on this edge
            pos = max(z, 0.0)
            lo = j < i  # edge (j, i): the serial kernel adds y = -z to inn and max(-y, 0) to sent_in
            inn += -z if lo else 0.0
            sent_in += pos if lo else 0.0
            outs += 0.0 if lo else z
            sent_out += 0.0 if lo else pos
        out[i] = loads[i] + (inn - outs)
        sent = sent_out + sent_in
        outflow[i] = sent
        moved += sent  # prange reduction
    return moved


@numba.njit(parallel=True, cache=True, nogil=True)
def fos_floor_step_par(indptr, indices, csr_edges, mode, a0, inv, alpha, x, loads, out, outflow):
    """:func:`._heterogeneous_kernels.fos_floor_step` with the rows spread over threads."""
    n = loads.shape[0]
    moved = 0
    for i in numba.prange(n):
        xi = np.float64(x[i])
        ai = inv[i] if mode == 1 else a0
        delta = 0
        sent = 0
        for k in range(indptr[i], indptr[i + 1]):
            j = indices[k]
            a = a0 if mode == 0 else (min(ai, inv[j]) if mode == 1 else alpha[csr_edges[k]])
            z = np.int64(a * (xi - np.float64(x[j])))  # float -> int truncates towards zero
            delta -= z
            sent += max(z, 0)
        out[i] = loads[i] + delta
        outflow[i] = sent
        moved += sent  # prange reduction
    return moved
