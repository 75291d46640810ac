"""The quasirandom (bounded-error) diffusion step in numba: CSR rows, rows of a regular graph, offset stencils.

Friedrich, Gairing, Sauerwald (SIAM J. Comput. 41(4), 2012): every edge's accumulated rounding
error, kept as an exact count of ``1/q`` tokens, stays within 1/2. Tested against
:func:`..._quasirandom.quasirandom_reference_step` step by step.

The error array ``err`` is int8, int16 or int32 (the narrowest that holds the errors of the
graph's ``q``; :func:`.._quasirandom.error_dtype`): numba compiles one specialisation per type.
Arithmetic is in int64 (``err + rest`` promotes). Only the guard raises an error above ``q/2``;
it checks that the value it stores reads back unchanged, and a kernel returns ``held = -1`` if
one did not (the caller refuses the run: never silently wrong).
"""

from __future__ import annotations

import numba
import numpy as np

from ....engine._cycles import PERIOD, add_moved, seen_before
from ....kernels._divide import divmod_by

__all__ = ["quasirandom_step", "quasirandom_step_regular", "quasirandom_stencil_step", "quasirandom_steps",
           "quasirandom_regular_steps", "quasirandom_stencil_steps"]

_U = np.uint64


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
        nv = err[best] + (q[0] if one else q[best])
        err[best] = nv
        if err[best] != nv:  # the narrow error type would wrap: report it, never store it silently
            return total - 1, -(1 << 40)
        total -= 1
        held += 1
    return total, held


@numba.njit(cache=True, nogil=True)
def quasirandom_step(indptr, indices, q, ties_up, guard, buf, err, loads, out):  # pragma: no cover - compiled
    """One step, per-node CSR loop (``q`` per slot, or one value); returns (moved, held back).

    As in every step kernel here, the arguments that stay the same for a run come first, then the
    errors (updated in place) and the step's loads and output.
    """
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
            if h < 0:
                return moved, -1
        for k in range(a, b):
            s = buf[k - a]
            if s:
                out[indices[k]] += s
        out[i] += x - total
        moved += total
    return moved, held


@numba.njit(cache=True, nogil=True)
def quasirandom_step_regular(indices, D, q, ties_up, guard, buf, err, loads, out):  # pragma: no cover - compiled
    """The same step on a D-regular graph with one ``q``: rows of D slots, one division per node."""
    n = loads.shape[0]
    out[:] = 0  # (a write-only pass: each node adds its own kept tokens below)
    tie = 1 if ties_up else 0
    inv = 1.0 / q
    qarr = np.empty(1, dtype=np.int64)
    qarr[0] = q
    return _rows_of_d(0, n, indices, D, q, inv, 0, False, loads, err, tie, guard, out, buf, qarr)


@numba.njit(cache=True, nogil=True, inline="always")
def _split(x, q, inv, shift, pow2):
    # x = whole q + rest, 0 <= rest < q (floor division, as np.divmod): a shift and a mask when q is
    # a power of two (tori: q = 2 d = 8), else a float reciprocal and one correction.
    if pow2:
        return x >> shift, x & (q - 1)
    return divmod_by(x, q, inv)


@numba.njit(cache=True, nogil=True, inline="always")
def _rows_of_d(i0, i1, indices, D, q, inv, shift, pow2, loads, err, tie, guard, out, buf, qarr):
    # Rows i0..i1-1 of D slots each: round each slot, scatter at once (the common case); a node
    # that would overdraw takes its sends back and redoes them through the guard. Returns (tokens
    # sent, held back), held back -1 when the guard refused. A range of rows per call, not a row:
    # inlined once per row, the array arguments cost a reference count each per row (3x the step
    # on hypercube:20).
    moved = 0
    held = 0
    for i in range(i0, i1):
        x = loads[i]
        whole, rest = _split(x, q, inv, shift, pow2)
        a = i * D
        ups = 0
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
            if h < 0:
                return moved, -1
            held += h
            for k in range(D):
                out[indices[a + k]] += buf[k]
        out[i] += x - total
        moved += total
    return moved, held


@numba.njit(cache=True, nogil=True, inline="always")
def _stencil_rows(indices, D, q, loads, err, tie, guard, out, buf, starts, ends, offsets, shift, pow2, qarr):
    # The step of quasirandom_stencil_step; pow2 is a constant at each call (two specialised loops).
    n = loads.shape[0]
    inv = 1.0 / q
    moved = 0
    held = 0
    ds = len(offsets)
    nruns = starts.shape[0]
    i0 = 0
    for r in range(nruns + 1):
        i1 = starts[r] if r < nruns else n
        # Rows outside the runs: the regular kernel's loop.
        m, h = _rows_of_d(i0, i1, indices, D, q, inv, shift, pow2, loads, err, tie, guard, out, buf, qarr)
        moved += m
        if h < 0:
            return moved, -1
        held += h
        if r == nruns:
            break
        i0 = ends[r]
        for i in range(starts[r], i0):
            ui = _U(i)  # unsigned indices: no negative-index wrap
            x = loads[ui]
            whole, rest = _split(x, q, inv, shift, pow2)
            a = ds * i
            ups = 0
            if not guard or x >= ds * (whole + 1):  # the common case: it cannot overdraw
                for k in range(ds):
                    v = err[_U(a + k)] + rest
                    up = 1 if 2 * v + tie > q else 0
                    err[_U(a + k)] = v - up * q
                    out[_U(i + offsets[k])] += whole + up
                    ups += up
                total = ds * whole + ups
                out[ui] += x - total
                moved += total
                continue
            bits = 0  # which slots rounded up: the guard's undo needs no buffer writes
            for k in range(ds):
                v = err[_U(a + k)] + rest
                up = 1 if 2 * v + tie > q else 0
                err[_U(a + k)] = v - up * q
                out[_U(i + offsets[k])] += whole + up
                bits |= up << k
                ups += up
            total = ds * whole + ups
            if total > x:  # rare: take the sends back and redo them through the guard
                for k in range(ds):
                    s = whole + ((bits >> k) & 1)
                    out[_U(i + offsets[k])] -= s
                    buf[k] = s
                total, h = _guard(a, a + ds, buf, err, qarr, True, total, x)
                held += h
                if h < 0:
                    return moved, -1
                for k in range(ds):
                    out[_U(i + offsets[k])] += buf[k]
            out[ui] += x - total
            moved += total
    return moved, held


@numba.njit(cache=True, nogil=True)
def quasirandom_stencil_step(indices, D, q, ties_up, guard, buf, starts, ends, offsets, err, loads,
                             out):  # pragma: no cover - compiled
    """:func:`quasirandom_step_regular` on a graph with an offset stencil (tori, rings): the same results.

    Nodes in the runs ``[starts[r], ends[r])`` (:class:`tokendist.graphs._stencil.Stencil`) send
    to ``i + offsets[k]`` (a tuple: its length is a compile-time constant, the slot loop unrolls,
    no CSR index is read); the other nodes read their rows of ``D`` slots. Each node rounds its
    slots in CSR order with the same integer arithmetic, and ``out`` is a sum of integers, so
    the new loads, the errors, ``moved`` and ``held`` are the regular kernel's exactly. A node
    that would overdraw takes its sends back (which slots rounded up is kept in the bits of one
    integer) and redoes them through the guard.
    Returns ``(moved, held)``; ``held = -1``: an error did not fit ``err``'s type.
    """
    out[:] = 0  # (a write-only pass: each node adds its own kept tokens below)
    tie = 1 if ties_up else 0
    qarr = np.empty(1, dtype=np.int64)
    qarr[0] = q
    if q & (q - 1) == 0:  # q = 2^shift: whole and rest by a shift and a mask
        shift = 0
        while (1 << shift) < q:
            shift += 1
        return _stencil_rows(indices, D, q, loads, err, tie, guard, out, buf, starts, ends, offsets, shift, True,
                             qarr)
    return _stencil_rows(indices, D, q, loads, err, tie, guard, out, buf, starts, ends, offsets, 0, False, qarr)


# Blocks of steps (Protocol.steps, engine/_batch.py): each a loop over one step kernel above, with
# the engine's cycle check before each step at a period boundary (engine/_cycles.py seen_before: the
# key of the loads and of the errors' bytes, the protocol's state_key). Arguments: the step kernel's
# fixed ones, the errors, the first step t, at most k steps, stop_idle, the cycle table (keys,
# visits, info), the loads before step t, the (k, n) block the loads after each step go to, the
# per-step tokens moved and messages, the messages of a step. Return (steps done, tokens held back),
# held back -1 when an error did not fit its type (the block ends after that step); a state seen
# before ends the block before its step.

@numba.njit(cache=True, nogil=True)
def quasirandom_steps(indptr, indices, q, ties_up, guard, buf, err, t, k, stop_idle, keys, visits, info, loads,
                      block, moved, messages, msg):  # pragma: no cover - compiled
    """Up to ``k`` steps of :func:`quasirandom_step` (the block comment above)."""
    state = err.view(np.uint8)
    period = info[PERIOD]
    held = 0
    prev = loads
    for b in range(k):
        if period > 0 and (t + b) % period == 0 and seen_before(keys, visits, info, prev.view(np.uint8), state, t + b):
            return b, held
        row = block[b]
        m, h = quasirandom_step(indptr, indices, q, ties_up, guard, buf, err, prev, row)
        if h < 0:
            return b + 1, -1
        held += h
        moved[b] = m
        messages[b] = msg
        prev = row
        if not add_moved(info, m) or (stop_idle and m == 0):
            return b + 1, held
    return k, held


@numba.njit(cache=True, nogil=True)
def quasirandom_regular_steps(indices, D, q, ties_up, guard, buf, err, t, k, stop_idle, keys, visits, info, loads,
                              block, moved, messages, msg):  # pragma: no cover - compiled
    """Up to ``k`` steps of :func:`quasirandom_step_regular` (the block comment above)."""
    state = err.view(np.uint8)
    period = info[PERIOD]
    held = 0
    prev = loads
    for b in range(k):
        if period > 0 and (t + b) % period == 0 and seen_before(keys, visits, info, prev.view(np.uint8), state, t + b):
            return b, held
        row = block[b]
        m, h = quasirandom_step_regular(indices, D, q, ties_up, guard, buf, err, prev, row)
        if h < 0:
            return b + 1, -1
        held += h
        moved[b] = m
        messages[b] = msg
        prev = row
        if not add_moved(info, m) or (stop_idle and m == 0):
            return b + 1, held
    return k, held


@numba.njit(cache=True, nogil=True)
def quasirandom_stencil_steps(indices, D, q, ties_up, guard, buf, starts, ends, offsets, err, t, k, stop_idle, keys,
                              visits, info, loads, block, moved, messages, msg):  # pragma: no cover - compiled
    """Up to ``k`` steps of :func:`quasirandom_stencil_step` (the block comment above)."""
    state = err.view(np.uint8)
    period = info[PERIOD]
    held = 0
    prev = loads
    for b in range(k):
        if period > 0 and (t + b) % period == 0 and seen_before(keys, visits, info, prev.view(np.uint8), state, t + b):
            return b, held
        row = block[b]
        m, h = quasirandom_stencil_step(indices, D, q, ties_up, guard, buf, starts, ends, offsets, err, prev, row)
        if h < 0:
            return b + 1, -1
        held += h
        moved[b] = m
        messages[b] = msg
        prev = row
        if not add_moved(info, m) or (stop_idle and m == 0):
            return b + 1, held
    return k, held
