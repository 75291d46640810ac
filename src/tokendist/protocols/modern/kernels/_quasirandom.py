"""The quasirandom (bounded-error) diffusion step in numba: CSR rows and rows of a regular graph.

Friedrich, Gairing, Sauerwald (SIAM J. Comput. 41(4), 2012): every edge's accumulated rounding
error, kept as an exact count of ``1/q`` tokens, stays within 1/2. Tested against
:func:`..._quasirandom.quasirandom_reference_step` step by step.
"""

from __future__ import annotations

import numba
import numpy as np

__all__ = ["quasirandom_step", "quasirandom_step_regular"]


@numba.njit(cache=True, nogil=True)
def _guard(a, b, sent, err, q, one, total, x):  # pragma: no cover - compiled
    # Take tokens back, one at a time, from the slot whose error (in tokens) is the most negative.
    held = 0
    while total > x:
        best = -1
        for k in range(a, b):
            if sent[k - a] > 0:
                if best < 0:
                    best = k
                else:
                    qk = q[0] if one else q[k]
                    qb = q[0] if one else q[best]
                    if err[k] * qb < err[best] * qk:
                        best = k
        sent[best - a] -= 1
        err[best] += q[0] if one else q[best]
        total -= 1
        held += 1
    return total, held


@numba.njit(cache=True, nogil=True)
def quasirandom_step(indptr, indices, q, loads, err, ties_up, guard, out, buf):  # pragma: no cover - compiled
    """One step, per-node CSR loop (``q`` per slot, or one value); returns (moved, held back)."""
    n = loads.shape[0]
    out[:] = 0  # (a write-only pass: each node adds its own kept tokens below)
    moved = 0
    held = 0
    one = q.shape[0] == 1
    tie = 1 if ties_up else 0
    for i in range(n):
        x = loads[i]
        a = indptr[i]
        b = indptr[i + 1]
        total = 0
        for k in range(a, b):
            qk = q[0] if one else q[k]
            whole = x // qk
            v = err[k] + (x - whole * qk)
            up = 1 if 2 * v + tie > qk else 0
            err[k] = v - up * qk
            s = whole + up
            buf[k - a] = s
            total += s
        if guard and total > x:
            total, h = _guard(a, b, buf, err, q, one, total, x)
            held += h
        for k in range(a, b):
            s = buf[k - a]
            if s:
                out[indices[k]] += s
        out[i] += x - total
        moved += total
    return moved, held


@numba.njit(cache=True, nogil=True)
def quasirandom_step_regular(indices, D, q, loads, err, ties_up, guard, out, buf):  # pragma: no cover - compiled
    """The same step on a D-regular graph with one ``q``: rows of D slots, one division per node."""
    n = loads.shape[0]
    out[:] = 0  # (a write-only pass: each node adds its own kept tokens below)
    moved = 0
    held = 0
    tie = 1 if ties_up else 0
    inv = 1.0 / q
    qarr = np.empty(1, dtype=np.int64)
    qarr[0] = q
    for i in range(n):
        x = loads[i]
        # x = whole q + rest, by a float reciprocal and one correction (no integer division).
        whole = np.int64(x * inv)
        rest = x - whole * q
        if rest >= q:
            whole += 1
            rest -= q
        elif rest < 0:
            whole -= 1
            rest += q
        a = i * D
        ups = 0
        # Scatter at once (the common case); a node that would overdraw takes its sends back and
        # redoes them through the guard.
        for k in range(D):
            v = err[a + k] + rest
            up = 1 if 2 * v + tie > q else 0
            err[a + k] = v - up * q
            out[indices[a + k]] += whole + up
            buf[k] = whole + up
            ups += up
        total = D * whole + ups
        if guard and total > x:
            for k in range(D):
                out[indices[a + k]] -= buf[k]
            total, h = _guard(a, a + D, buf, err, qarr, True, total, x)
            held += h
            for k in range(D):
                out[indices[a + k]] += buf[k]
        out[i] += x - total
        moved += total
    return moved, held
