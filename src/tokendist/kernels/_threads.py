"""Threads of the numba kernels: the ``threads`` parameter and how a parallel kernel is called.

Threaded kernels are opt-in (``threads=k``) or raced against the serial ones (``threads=auto``,
:mod:`._choice`): this machine class's second core is often busy, and a threaded kernel then runs
slower than the serial one. Both hand work out in small chunks (numba's dynamic chunking), so a
descheduled thread holds back one chunk, not half of the step.
"""

from __future__ import annotations

import numba

from ..engine import Param
from ..errors import TokendistError
from ._choice import AUTO

__all__ = ["THREADS_PARAM", "check_threads", "use_threads", "run_rows", "run_parallel", "CHUNK_ROWS", "CHUNK",
           "ROW_BLOCK"]

#: Opt-in threads of the numba kernel (the machine's second core is often busy: serial by default).
THREADS_PARAM = Param("threads", int, 1, "threads of the numba kernel: 1 runs the serial kernel; k > 1 a "
                      "numba parallel kernel on min(k, NUMBA_NUM_THREADS) threads (same results)")


#: Rows per block on the general paths and the continuous kernel (regular rounded path: COIN_BLOCK // D).
ROW_BLOCK = 1024
#: Blocks a thread takes at a time (numba's dynamic chunking): a thread that the OS does not
#: schedule (another process holds the core) leaves its blocks to the running one, instead of
#: holding half of the step as with prange's default static split.
CHUNK = 8


def check_threads(name: str, k) -> None:
    """Refuse ``threads=k < 1`` of protocol ``name`` (a user error); ``auto`` passes."""
    if k == AUTO:
        return
    if k < 1:
        raise TokendistError(f"{name}: threads must be at least 1, got {k}")


def use_threads(name: str, k: int) -> bool:
    """Validate ``threads=k`` of protocol ``name``; for k > 1 set numba's thread count, return True.

    ``auto`` gives False: the serial kernels, except where the protocol races a threaded kernel
    against its serial one (:class:`._measured_choice.MeasuredChoice`), which it does itself.
    """
    check_threads(name, k)
    if k == 1 or k == AUTO:
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


def run_parallel(kernel, threads: int, *args):
    """``kernel(*args)`` on ``min(threads, NUMBA_NUM_THREADS)`` numba threads, blocks handed out CHUNK at a time.

    The chunk size is set for this call only (numba keeps it per calling thread) and restored.
    """
    numba.set_num_threads(max(1, min(int(threads), numba.config.NUMBA_NUM_THREADS)))
    old = numba.set_parallel_chunksize(CHUNK)
    try:
        return kernel(*args)
    finally:
        numba.set_parallel_chunksize(old)
