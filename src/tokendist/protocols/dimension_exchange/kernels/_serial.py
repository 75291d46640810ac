"""Kernels of one dimension-exchange step: numba, numpy, and a deliberately naive reference.

One step touches only the active colour class, which is a matching, so the updates of its edges
are independent. The rules (Houle, Symvonis, Wood 2004), for an active edge ``xy`` with
``d = load(x) - load(y)``:

* ``THRESHOLD-2`` (Sec. 2): one token from x to y if ``d >= 2``;
* ``THRESHOLD-1`` (Sec. 2): one token from x to y if ``d >= 1``;
* ``THRESHOLD-1 PLUS`` (Sec. 5): one token from x to y if ``d >= 2``, or ``d = 1`` and
  ``load(x) != localMax(x)``.

(and symmetrically from y to x). A node marked halted (DISCREPANCY-1's local termination, when the
run honours it) takes part in no exchange.
"""

from __future__ import annotations

import numba
import numpy as np

from ....engine._cycles import PERIOD, add_moved, seen_before

__all__ = ["THRESHOLD2", "THRESHOLD1", "THRESHOLD1_PLUS", "LM_KEEP", "LM_MAX", "LM_SET", "colour_step_numba",
           "colour_step_numpy", "NodeColourStep", "naive_step", "threshold1_steps", "discrepancy1_steps"]

THRESHOLD2, THRESHOLD1, THRESHOLD1_PLUS = 0, 1, 2


#: What the numba kernel does to ``local_max`` while it copies the loads (DISCREPANCY-1's bookkeeping).
LM_KEEP, LM_MAX, LM_SET = 0, 1, 2


@numba.njit(cache=True, nogil=True)
def _colour_kernel(loads, out, gu, gv, eid, lo, hi, plo, phi, rule, local_max, lm_mode, halted, any_halted,
                   flows):  # pragma: no cover
    """Copy ``loads`` to ``out`` and apply ``rule`` on the edges ``eid[lo:hi]``; returns tokens moved.

    One fused pass per step, no temporaries:

    1. copy the loads (the contract: ``step`` must not modify ``loads``) and, in the same sweep,
       update DISCREPANCY-1's ``local_max`` from the loads at the start of the step
       (``lm_mode``: ``LM_MAX`` = max with the loads, ``LM_SET`` = set to the loads); with
       ``LM_KEEP`` the copy is skipped when the active class is a perfect matching (step 3
       writes every node then);
    2. clear the previous step's edges ``eid[plo:phi]`` of the reused per-edge ``flows`` buffer
       (int8: one token at most per edge), so the flows cost ``O(m / chi)`` and not ``O(m)``;
    3. the active colour class ``eid[lo:hi]``: a matching, so its updates are independent. The
       endpoints are read from the run graph's ``gu``/``gv`` through ``eid`` (no per-colour copies
       of the endpoints: 4 bytes per edge of schedule state instead of 12).

    The sign of the move is branch-free (docs/design/kernels.md); the ``rule`` branch is the
    same for every edge, so it is predicted. ``halted`` is read only when ``any_halted``.
    """
    n = loads.shape[0]
    if lm_mode == 1:
        for x in range(n):
            w = loads[x]
            out[x] = w
            local_max[x] = max(w, local_max[x])
    elif lm_mode == 2:
        for x in range(n):
            w = loads[x]
            out[x] = w
            local_max[x] = w
    elif 2 * (hi - lo) != n:
        out[:] = loads
    # else: the class is a perfect matching (n / 2 edges of a matching cover all n nodes), so the
    # loop below writes every node: no copy. Every colour class of a Delta-colouring of a
    # Delta-regular bipartite graph (even tori, hypercubes) is one; the copy was about a third
    # of a THRESHOLD-2 step's memory traffic on torus:1000x1000.
    for i in range(plo, phi):
        flows[eid[i]] = 0
    moved = 0
    for i in range(lo, hi):
        e = eid[i]
        a = gu[e]
        b = gv[e]
        wa = loads[a]
        wb = loads[b]
        d = wa - wb
        if rule == 0:
            s = np.int64(d >= 2) - np.int64(d <= -2)
        elif rule == 1:
            s = np.int64(d >= 1) - np.int64(d <= -1)
        else:
            s = (np.int64(d >= 2) - np.int64(d <= -2) + np.int64((d == 1) and (wa != local_max[a]))
                 - np.int64((d == -1) and (wb != local_max[b])))
        if any_halted and (halted[a] or halted[b]):
            s = 0
        out[a] = wa - s
        out[b] = wb + s
        flows[e] = s
        moved += s if s > 0 else -s
    return moved


def colour_step_numba(loads, out, sched, t, prev, rule, local_max, halted, flows, lm_mode=LM_KEEP,
                      active=None) -> int:
    """One step of ``rule`` at time ``t`` into ``out`` (numba); ``prev`` is the previous step's edge range.

    ``flows`` (one int8 per edge of the run graph) must hold the flows of the step whose range is
    ``prev`` (all zero for ``prev = (0, 0)``); ``local_max`` is first updated as ``lm_mode`` says.
    ``halted`` is ``None`` when no node is halted (then it is not read); ``local_max`` may be
    ``None`` for the rules that do not use it. ``active`` is ``sched.active(t)`` when the caller
    has it at hand (a protocol keeps the ranges of its colours as Python ints).
    """
    lo, hi = sched.active(t) if active is None else active
    plo, phi = prev
    any_halted = halted is not None
    h = halted if any_halted else _NO_HALTED
    lm = _NO_MAX if local_max is None else local_max
    return int(_colour_kernel(loads, out, sched.run_u, sched.run_v, sched.eid, lo, hi, plo, phi, rule, lm,
                              lm_mode, h, any_halted, flows))


_NO_HALTED = np.zeros(1, dtype=np.bool_)
_NO_MAX = np.zeros(1, dtype=np.int64)


@numba.njit(cache=True, nogil=True, inline="always")
def _all_equal(loads):  # pragma: no cover - compiled
    for i in range(1, loads.shape[0]):
        if loads[i] != loads[0]:
            return False
    return True


@numba.njit(cache=True, nogil=True)
def discrepancy1_steps(gu, gv, eid, offsets, start, flows, plo, phi, rule, lm_mode, local_max, halted, any_halted,
                       cycle, prev_max, same, pending, scratch, t, k, stop_idle, keys, visits, info, loads, block,
                       moved, messages):  # pragma: no cover - compiled
    """Up to ``k`` DISCREPANCY-1 steps from step ``t`` within one phase of a cycle (``Protocol.steps``).

    The steps of :func:`threshold1_steps` with the phase's ``rule`` (THRESHOLD-1 or THRESHOLD-1
    PLUS) and ``lm_mode`` (``LM_MAX`` in the A-phase, ``LM_KEEP`` in the B-phase), ``halted`` read
    only when ``any_halted``; the caller takes the steps at a phase's start (their bookkeeping is
    Python's). The cycle check's state is the protocol's ``state_key`` bytes: the position
    ``(t + b) mod cycle`` (int64), ``local_max``, ``prev_max``, ``same``, ``halted``, ``pending``,
    one after another in ``scratch``. With ``stop_idle`` the block ends after a step that moved
    nothing when all loads are equal or some node is halted (then the engine asks ``is_stable``).
    """
    chi = offsets.shape[0] - 1
    period = info[PERIOD]
    n = loads.shape[0]
    prev = loads
    for b in range(k):
        if period > 0 and (t + b) % period == 0:
            scratch[:8].view(np.int64)[0] = (t + b) % cycle
            o = 8
            for arr in (local_max, prev_max, same):
                w = arr.shape[0] * 8
                scratch[o:o + w].view(np.int64)[:] = arr
                o += w
            for i in range(n):
                scratch[o + i] = 1 if halted[i] else 0
                scratch[o + n + i] = 1 if pending[i] else 0
            if seen_before(keys, visits, info, prev.view(np.uint8), scratch, t + b):
                return b, plo, phi
        c = (start + t + b) % chi
        lo = offsets[c]
        hi = offsets[c + 1]
        row = block[b]
        m = _colour_kernel(prev, row, gu, gv, eid, lo, hi, plo, phi, rule, local_max, lm_mode, halted, any_halted,
                           flows)
        plo = lo
        phi = hi
        moved[b] = m
        messages[b] = 2 * (hi - lo)
        prev = row
        if not add_moved(info, m):
            return b + 1, plo, phi
        if stop_idle and m == 0 and (any_halted or _all_equal(row)):
            return b + 1, plo, phi
    return k, plo, phi


@numba.njit(cache=True, nogil=True)
def threshold1_steps(gu, gv, eid, offsets, start, flows, plo, phi, no_max, no_halted, t, k, stop_idle, keys, visits,
                     info, loads, block, moved, messages):  # pragma: no cover - compiled
    """Up to ``k`` THRESHOLD-1 steps from step ``t`` (``Protocol.steps``, engine/_batch.py).

    Each step is :func:`_colour_kernel` on the colour ``(start + t) mod chi`` (``eid[offsets[c]:
    offsets[c + 1]]``), as :func:`colour_step_numba` calls it, ``(plo, phi)`` the range of the
    previous step's flows; before each step at a period boundary the engine's cycle check
    (:func:`tokendist.engine._cycles.seen_before`: the loads, and no state). The loads after step
    ``t + b`` go to ``block[b]``, its tokens moved and messages (two per active edge) to ``moved[b]``
    and ``messages[b]``. With ``stop_idle`` the block ends after a step that moved nothing only when
    all loads are equal (the protocol's ``is_stable``: otherwise the engine's answer is no and the
    block goes on). ``no_max``, ``no_halted``: the kernel's unused arrays. Returns ``(steps done,
    range of the last step's flows)``; a state seen before ends the block before its step.
    """
    chi = offsets.shape[0] - 1
    period = info[PERIOD]
    state = np.zeros(0, dtype=np.uint8)  # (Threshold1.state_key: b"", no state)
    prev = loads
    for b in range(k):
        if period > 0 and (t + b) % period == 0 and seen_before(keys, visits, info, prev.view(np.uint8), state, t + b):
            return b, plo, phi
        c = (start + t + b) % chi
        lo = offsets[c]
        hi = offsets[c + 1]
        row = block[b]
        m = _colour_kernel(prev, row, gu, gv, eid, lo, hi, plo, phi, 1, no_max, 0, no_halted, False, flows)
        plo = lo
        phi = hi
        moved[b] = m
        messages[b] = 2 * (hi - lo)
        prev = row
        if not add_moved(info, m):
            return b + 1, plo, phi
        if stop_idle and m == 0 and _all_equal(row):
            return b + 1, plo, phi
    return k, plo, phi


def colour_step_numpy(loads, sched, t, rule, local_max, halted, m_run) -> tuple[np.ndarray, np.ndarray, int]:
    """The same step on whole arrays (numpy): returns ``(new loads, flows on the run graph, moved)``."""
    lo, hi = sched.active(t)
    e = sched.eid[lo:hi]
    a, b = sched.run_u[e], sched.run_v[e]
    wa, wb = loads[a], loads[b]
    d = wa - wb
    if rule == THRESHOLD2:
        s = (d >= 2).astype(np.int64) - (d <= -2)
    elif rule == THRESHOLD1:
        s = (d >= 1).astype(np.int64) - (d <= -1)
    else:
        s = ((d >= 2).astype(np.int64) - (d <= -2) + ((d == 1) & (wa != local_max[a]))
             - ((d == -1) & (wb != local_max[b])))
    if halted is not None:
        s = np.where(halted[a] | halted[b], 0, s)
    new = loads.copy()
    new[a] -= s  # a matching: no index repeats within one colour
    new[b] += s
    flows = np.zeros(m_run, dtype=np.int64)
    flows[e] = s
    return new, flows, int(np.abs(s).sum())


class NodeColourStep:
    """:func:`colour_step_numpy` per node, with the per-colour constants made once per run.

    The reference step of a small run (a few thousand steps on a few hundred nodes), where each
    numpy call's overhead, not its arithmetic, is the cost. Node ``v``'s partner across the active
    colour is ``p(v)`` (``v`` itself when unmatched, so that ``d = 0`` and nothing moves), and
    with ``d(v) = load(v) - load(p(v))`` the token v sends (+1) or receives (-1) is

    * THRESHOLD-1: ``sign(d)``;
    * THRESHOLD-2: ``sign(d - sign(d))`` (0 for ``|d| <= 1``);
    * THRESHOLD-1 PLUS: ``send(v) - send(p(v))`` with ``send(v) = [d(v) + q(v) >= 2]`` and
      ``q(v) = [load(v) != localMax(v)]`` (``d >= 2``, or ``d = 1`` and ``load != localMax``),

    and the new load is ``load - delta``: four to eight whole-array calls a step instead of the
    per-edge gathers and scatters. The flows go to one int64 buffer per colour, nonzero only on
    that colour's edges, so nothing is cleared between steps. Same loads, flows and ``moved`` as
    :func:`colour_step_numpy` (tests/protocols/test_dimension_exchange_kernels.py).
    """

    def __init__(self, sched, n: int, m_run: int, dtype):
        self.colours = []
        for c in range(sched.chi):
            lo, hi = int(sched.offsets[c]), int(sched.offsets[c + 1])
            e = sched.eid[lo:hi].astype(np.intp)
            a, b = sched.run_u[e].astype(np.intp), sched.run_v[e].astype(np.intp)
            partner = np.arange(n, dtype=np.intp)
            partner[a], partner[b] = b, a
            self.colours.append((partner, a, e, np.zeros(m_run, dtype=np.int64), 2 * (hi - lo)))
        self._out = (np.empty(n, dtype=dtype), np.empty(n, dtype=dtype))
        self._d = np.empty(n, dtype=dtype)
        self._sg = np.empty(n, dtype=dtype)
        self._s = np.empty(0, dtype=np.int64)

    def step(self, loads, c: int, rule: int, local_max=None, halted=None):
        """Colour ``c`` under ``rule``: ``(new loads, flows on the run graph, moved, messages)``.

        The new loads are one of two buffers used in turn (never ``loads`` itself).
        """
        partner, a, e, flows, messages = self.colours[c]
        out = self._out[0] if self._out[0] is not loads else self._out[1]
        d = self._d
        np.take(loads, partner, out=d)
        np.subtract(loads, d, out=d)  # d(v) = load(v) - load(p(v))
        if rule == THRESHOLD1:
            np.sign(d, out=d)
        elif rule == THRESHOLD2:
            sg = self._sg
            np.sign(d, out=sg)
            np.subtract(d, sg, out=d)
            np.sign(d, out=d)
        else:
            d += loads != local_max
            send = d >= 2
            np.subtract(send, send[partner], out=d, dtype=d.dtype)
        if halted is not None:
            d[halted | halted[partner]] = 0
        np.subtract(loads, d, out=out)
        flows[e] = d[a]  # the signed flow u -> v of each active edge is what its end u sends
        return out, flows, np.count_nonzero(d) >> 1, messages


def naive_step(edges, colours, chi, colour, loads, rule, local_max=None, halted=None) -> list[int]:
    """Deliberately naive reference: every node, in a Python loop, looks for its edge of the active
    colour among all edges and applies the rule of the paper literally (Sec. 1.1, DIMENSION-EXCHANGE).

    ``edges`` is a list of pairs, ``colours`` one colour per edge; returns the new loads as a list.
    """
    n = len(loads)
    new = list(loads)
    for v in range(n):
        for (x, y), c in zip(edges, colours):
            if c % chi != colour or v not in (x, y):
                continue
            w = y if v == x else x
            if halted is not None and (halted[v] or halted[w]):
                continue
            lv, lw = loads[v], loads[w]
            if rule == THRESHOLD2:
                send = lv >= lw + 2
            elif rule == THRESHOLD1:
                send = lv >= lw + 1
            else:
                send = lv >= lw + 2 or (lv == lw + 1 and lv != local_max[v])
            if send:
                new[v] -= 1
                new[w] += 1
    return new
