"""The counter-based coin in numba: :func:`tokendist._random.counter_uniform`, bit for bit.

Every randomised kernel draws ``u = counter_uniform(key, step, index)`` from the run's protocol key,
the step and an edge, slot or node index, so that a coin does not depend on the order in which
rows are visited, on the number of threads, or on the variant that runs.
"""

from __future__ import annotations

import numba
import numpy as np

__all__ = ["_splitmix64", "_step_base", "_uniform"]

_M1 = np.uint64(0x9E3779B97F4A7C15)
_M2 = np.uint64(0xBF58476D1CE4E5B9)
_M3 = np.uint64(0x94D049BB133111EB)
_S30, _S27, _S31, _S11 = np.uint64(30), np.uint64(27), np.uint64(31), np.uint64(11)
_TO_UNIT = 1.0 / (1 << 53)


@numba.njit(cache=True, nogil=True)
def _splitmix64(x):
    """The SplitMix64 finaliser in uint64 arithmetic (wraps mod 2**64), as ``tokendist._random``."""
    x = x + _M1
    x = (x ^ (x >> _S30)) * _M2
    x = (x ^ (x >> _S27)) * _M3
    return x ^ (x >> _S31)


@numba.njit(cache=True, nogil=True)
def _step_base(key, step):
    """The per-step part of :func:`tokendist._random.counter_uniform` (``key``, ``step``: uint64)."""
    return _splitmix64(key ^ _splitmix64(step))


@numba.njit(cache=True, nogil=True)
def _uniform(base, index):
    """``counter_uniform(key, step, index)`` given ``base = _step_base(key, step)``."""
    return np.float64(_splitmix64(base ^ _splitmix64(np.uint64(index))) >> _S11) * _TO_UNIT
