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

__all__ = ["THRESHOLD2", "THRESHOLD1", "THRESHOLD1_PLUS", "colour_step_numba", "colour_step_numpy",
           "naive_step"]

THRESHOLD2, THRESHOLD1, THRESHOLD1_PLUS = 0, 1, 2


@numba.njit(cache=True, nogil=True)
def _colour_kernel(loads, out, eu, ev, eid, lo, hi, plo, phi, rule, local_max, halted, flows):  # pragma: no cover
    """Copy ``loads`` to ``out`` and apply ``rule`` on the edges ``lo:hi``; returns tokens moved.

    ``flows`` is a reused per-edge buffer: the previous step's edges ``plo:phi`` are zeroed first,
    so a step costs ``O(n)`` for the copy plus ``O(edges of the colour)``. Branch-free sign of the
    move (see ../shared/PERFORMANCE.md).
    """
    out[:] = loads
    for i in range(plo, phi):
        flows[eid[i]] = 0
    moved = 0
    for i in range(lo, hi):
        a = eu[i]
        b = ev[i]
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
        if halted[a] or halted[b]:
            s = 0
        out[a] = wa - s
        out[b] = wb + s
        flows[eid[i]] = s
        moved += s if s > 0 else -s
    return moved


def colour_step_numba(loads, out, sched, t, prev, rule, local_max, halted, flows) -> int:
    """One step of ``rule`` at time ``t`` into ``out`` (numba); ``prev`` is the previous step's edge range."""
    lo, hi = sched.active(t)
    plo, phi = prev
    return int(_colour_kernel(loads, out, sched.eu, sched.ev, sched.eid, lo, hi, plo, phi, rule, local_max,
                              halted, flows))


def colour_step_numpy(loads, sched, t, rule, local_max, halted, m_run) -> tuple[np.ndarray, np.ndarray, int]:
    """The same step on whole arrays (numpy): returns ``(new loads, flows on the run graph, moved)``."""
    lo, hi = sched.active(t)
    a, b = sched.eu[lo:hi], sched.ev[lo:hi]
    wa, wb = loads[a], loads[b]
    d = wa - wb
    if rule == THRESHOLD2:
        s = (d >= 2).astype(np.int64) - (d <= -2)
    elif rule == THRESHOLD1:
        s = (d >= 1).astype(np.int64) - (d <= -1)
    else:
        s = ((d >= 2).astype(np.int64) - (d <= -2) + ((d == 1) & (wa != local_max[a]))
             - ((d == -1) & (wb != local_max[b])))
    s = np.where(halted[a] | halted[b], 0, s)
    new = loads.copy()
    new[a] -= s  # a matching: no index repeats within one colour
    new[b] += s
    flows = np.zeros(m_run, dtype=np.int64)
    flows[sched.eid[lo:hi]] = s
    return new, flows, int(np.abs(s).sum())


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
