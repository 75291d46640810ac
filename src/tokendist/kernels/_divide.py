"""Floor division by a small positive integer without an integer division instruction.

The modern protocols' kernels split a load ``x = whole q + rest`` (``0 <= rest < q``, floor
division, as ``np.divmod``) once per node and step. A 64-bit integer division costs tens of cycles;
a multiplication by the float reciprocal and one correction costs a few. The correction makes it
exact while ``x * (1/q)`` is within one of ``x / q``: for ``|x| < 2**53``, the loads the callers
accept (``quasirandom`` and ``rotor-router`` declare ``exact_load_limit = 2**53``, and the engine
refuses a run with a larger load).
"""

from __future__ import annotations

import numba
import numpy as np

__all__ = ["divmod_by"]


@numba.njit(cache=True, nogil=True, inline="always")
def divmod_by(x, q, inv):  # pragma: no cover - compiled
    """``(x // q, x % q)`` for an integer ``q >= 1`` and ``inv = 1.0 / q``."""
    whole = np.int64(x * inv)
    rest = x - whole * q
    if rest >= q:
        whole += 1
        rest -= q
    elif rest < 0:
        whole -= 1
        rest += q
    return whole, rest
