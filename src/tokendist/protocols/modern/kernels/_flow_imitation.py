"""The flow-imitation step in numba (Akbari, Berenbrink, Sauerwald, PODC 2012): one pass in edge order.

Bit for bit the numpy reference :meth:`.._flow_imitation.FlowImitation.step`: the continuous flow of
every edge, its cumulative flow ``F_e`` and discrete flow ``D_e`` (``D_e`` brought to ``trunc(F_e)``),
the guard that pays a node's edges in CSR order while its tokens last, and the continuous loads
``xi`` summed in the order of ``np.bincount`` (edge order, from 0.0).

Why one pass is enough: edges are sorted by ``(u, v)`` with ``u < v``.

* Once the edges of node ``i``'s group (``u = i``) are done, every edge touching ``i`` is done
  (those with ``v = i`` come from smaller ``u``) and no later edge reads ``xi[i]``: node ``i`` is
  finished in place, its continuous load ``(xi_i - sum_{u=i} f) + sum_{v=i} f`` summed in edge order.
* The guard pays a node's edges in CSR order, its smaller neighbours first, in increasing order:
  exactly the order in which the pass meets them. So each edge is settled when it is met, the
  paying end spending from what it has left (``spent[v]``: what ``v`` paid its smaller neighbours
  so far), and nothing waits for a later turn.
"""

from __future__ import annotations

import numba
import numpy as np

__all__ = ["flow_imitation_step", "flow_imitation_step_uniform", "FOS", "SOS", "MATCHED"]

#: ``mode``: first-order diffusion, second-order diffusion, a matching (circuit or random).
FOS, SOS, MATCHED = 0, 1, 2


@numba.njit(cache=True, nogil=True)
def flow_imitation_step(ustart, vv, mode, sos_on, beta, alpha, one_alpha, has_speeds, speeds, mask, xi, F, D,
                        prev, loads, guard, new, want_outflow, outflow, B, recv, spent):  # pragma: no cover - compiled
    """One step; updates ``xi``, ``F``, ``D`` (and ``prev`` for SOS) in place, writes ``new`` (and ``outflow``).

    ``ustart[i]:ustart[i+1]`` are the edges with ``u = i``; ``B``, ``recv`` and ``spent`` are zeroed
    scratch arrays, left zeroed. Returns ``(tokens moved, tokens held back, max |F - D|)``.
    """
    n = loads.shape[0]
    moved = 0
    owed = 0  # sum of |trunc(F_e) - D_e|: what the edges owe; held back = owed - paid
    paid = 0
    gap = 0.0
    a0 = alpha[0] if one_alpha else 0.0
    b1 = beta - 1.0
    for i in range(n):
        x = loads[i]
        budget = x - spent[i]
        spent[i] = 0
        net = recv[i]
        recv[i] = 0
        xi_i = xi[i]
        pot_i = xi_i / speeds[i] if has_speeds else xi_i
        acc = 0.0  # np.bincount(u, weights=f)[i]: the group's flows in edge order, from 0.0
        for e in range(ustart[i], ustart[i + 1]):  # uint64: no negative-index wrap per access
            j = vv[e]
            if mode == MATCHED:
                if mask[e]:
                    su = speeds[i]
                    sv = speeds[j]
                    total = xi_i + xi[j]
                    f = xi_i - total * su / (su + sv)
                else:
                    f = 0.0
            else:
                pot_j = xi[j] / speeds[j] if has_speeds else xi[j]
                f = (a0 if one_alpha else alpha[e]) * (pot_i - pot_j)
                if mode == SOS:
                    if sos_on:
                        f = b1 * prev[e] + beta * f
                    prev[e] = f
            acc += f
            B[j] += f
            Fe = F[e] + f
            F[e] = Fe
            De = D[e]
            s = np.int64(Fe) - De  # trunc(F_e) - D_e: i owes s > 0, j owes -s > 0
            # Branch-free by bit masks (the sign of s is data; LLVM turns conditional expressions
            # into mispredicted branches here): sp = max(s, 0), sn = max(-s, 0).
            neg = s >> 63
            sp = s & ~neg
            sn = -s & neg
            pu = sp
            pv = sn
            if guard:  # pay min(owed, budget), and nothing on an edge not owed
                d = sp - budget
                pu = (budget + (d & (d >> 63))) & -np.int64(sp > 0)
                d = sn - (loads[j] - spent[j])
                pv = (sn - (d & ~(d >> 63))) & neg
            spent[j] += pv
            budget -= pu
            De += pu - pv
            D[e] = De
            recv[j] += pu - pv
            net += pv - pu
            owed += sp + sn
            g = abs(Fe - De)
            gap = g if g > gap else gap
        xi[i] = (xi_i - acc) + B[i]
        B[i] = 0.0
        new[i] = x + net
        out = x - budget  # what i paid, on all its edges
        # |out| is the sum of |pay| over i's edges: with x >= 0 no pay is negative; with x < 0 the
        # guard's one (negative) pay is the whole budget (the reference's min(owed, budget)).
        moved += abs(out)
        paid += out
        if want_outflow:
            outflow[i] = out
    return moved, owed - paid, gap


@numba.njit(cache=True, nogil=True)
def flow_imitation_step_uniform(ustart, vv, sos, sos_on, beta, a0, xi, F, D, prev, loads, guard, new, want_outflow,
                                outflow, B, recv, spent):  # pragma: no cover - compiled
    """The same step for FOS or SOS with one ``P_ij = a0`` and no speeds (tori, hypercubes): fewer branches."""
    n = loads.shape[0]
    moved = 0
    owed = 0  # sum of |trunc(F_e) - D_e|: what the edges owe; held back = owed - paid
    paid = 0
    gap = 0.0
    b1 = beta - 1.0
    for i in range(n):
        x = loads[i]
        budget = x - spent[i]
        spent[i] = 0
        net = recv[i]
        recv[i] = 0
        xi_i = xi[i]
        acc = 0.0
        for e in range(ustart[i], ustart[i + 1]):  # uint64: no negative-index wrap per access
            j = vv[e]
            f = a0 * (xi_i - xi[j])
            if sos:
                if sos_on:
                    f = b1 * prev[e] + beta * f
                prev[e] = f
            acc += f
            B[j] += f
            Fe = F[e] + f
            F[e] = Fe
            De = D[e]
            s = np.int64(Fe) - De  # trunc(F_e) - D_e: i owes s > 0, j owes -s > 0
            # Branch-free by bit masks (the sign of s is data; LLVM turns conditional expressions
            # into mispredicted branches here): sp = max(s, 0), sn = max(-s, 0).
            neg = s >> 63
            sp = s & ~neg
            sn = -s & neg
            pu = sp
            pv = sn
            if guard:  # pay min(owed, budget), and nothing on an edge not owed
                d = sp - budget
                pu = (budget + (d & (d >> 63))) & -np.int64(sp > 0)
                d = sn - (loads[j] - spent[j])
                pv = (sn - (d & ~(d >> 63))) & neg
            spent[j] += pv
            budget -= pu
            De += pu - pv
            D[e] = De
            recv[j] += pu - pv
            net += pv - pu
            owed += sp + sn
            g = abs(Fe - De)
            gap = g if g > gap else gap
        xi[i] = (xi_i - acc) + B[i]
        B[i] = 0.0
        new[i] = x + net
        out = x - budget  # what i paid, on all its edges
        # |out| is the sum of |pay| over i's edges: with x >= 0 no pay is negative; with x < 0 the
        # guard's one (negative) pay is the whole budget (the reference's min(owed, budget)).
        moved += abs(out)
        paid += out
        if want_outflow:
            outflow[i] = out
    return moved, owed - paid, gap
