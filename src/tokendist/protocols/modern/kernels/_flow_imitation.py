"""The flow-imitation step in numba (Akbari, Berenbrink, Sauerwald, PODC 2012): one pass in edge order.

Bit for bit the numpy reference :meth:`.._flow_imitation.FlowImitation.step`: the continuous flow of
every edge, its cumulative flow ``F_e`` and discrete flow ``D_e`` (``D_e`` brought to ``trunc(F_e)``),
the guard that pays a node's edges in CSR order while its tokens last, and the continuous loads
``xi`` summed in the order of ``np.bincount`` (edge order, from 0.0).

Why one pass is possible: edges are sorted by ``(u, v)`` with ``u < v``, so once the edges of node
``i``'s group (``u = i``) are done, every edge that touches ``i`` is done (those with ``v = i`` come
from smaller ``u``), no later edge reads ``xi[i]``, and node ``i`` is finished in place. An edge
whose ``v`` end pays (``trunc(F_e) < D_e``) is left for ``v``'s turn, when ``v``'s budget is known in
CSR order (its smaller neighbours first, as the reference pays them): ``D_e`` keeps its old value
until then. ``recv[v]`` packs, for the nodes not yet finished, the tokens paid to ``v`` (times 2) and
a bit saying that ``v`` pays on some edge: one read-modify-write per edge instead of two.
"""

from __future__ import annotations

import numba
import numpy as np

__all__ = ["flow_imitation_step"]

#: ``mode``: first-order diffusion, second-order diffusion, a matching (circuit or random).
FOS, SOS, MATCHED = 0, 1, 2


@numba.njit(cache=True, nogil=True)
def flow_imitation_step(ustart, vv, indptr, indices, csr_edges, mode, sos_on, beta, alpha, one_alpha,
                        has_speeds, speeds, mask, xi, F, D, prev, loads, guard, new, want_outflow, outflow, B,
                        recv):  # pragma: no cover - compiled
    """One step; updates ``xi``, ``F``, ``D`` (and ``prev`` for SOS) in place, writes ``new`` (and ``outflow``).

    ``ustart[i]:ustart[i+1]`` are the edges with ``u = i``; ``B`` and ``recv`` are zeroed scratch
    arrays, left zeroed. Returns ``(tokens moved, tokens held back, max |F - D|)``.
    """
    n = loads.shape[0]
    moved = 0
    held = 0
    gap = 0.0
    a0 = alpha[0] if one_alpha else 0.0
    b1 = beta - 1.0
    for i in range(n):
        x = loads[i]
        budget = x
        paid = 0
        e0 = ustart[i]
        e1 = ustart[i + 1]
        r = recv[i]
        recv[i] = 0
        if r & 1:
            # Edges to smaller neighbours that i pays: they come first in i's CSR row.
            for k in range(indptr[i], indptr[i + 1] - (e1 - e0)):
                e = csr_edges[k]
                s = np.int64(F[e]) - D[e]
                if s < 0:
                    owed = -s
                    pay = owed
                    if guard:
                        pay = min(owed, budget)
                        budget -= pay
                        held += owed - pay
                    De = D[e] - pay
                    D[e] = De
                    paid += pay
                    new[indices[k]] += pay  # a smaller node, already finished
                    moved += abs(pay)
                    g = abs(F[e] - De)
                    if g > gap:
                        gap = g
        xi_i = xi[i]
        pot_i = xi_i / speeds[i] if has_speeds else xi_i
        acc = 0.0  # np.bincount(u, weights=f)[i]: the group's flows in edge order, from 0.0
        for e in range(e0, e1):
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
            s = np.int64(Fe) - De
            # Branch-free (the sign of s is data, a mispredicted branch costs more than the work):
            # u pays s > 0 now, within its budget; v pays s < 0 on its turn.
            sp = max(s, 0)
            pay = sp
            if guard:
                pay = min(sp, budget) if sp > 0 else 0
                budget -= pay
                held += sp - pay
            De += pay
            D[e] = De
            paid += pay
            recv[j] = (recv[j] + 2 * pay) | (s < 0)
            moved += abs(pay)
            g = abs(Fe - De) if s >= 0 else 0.0
            gap = max(gap, g)
        xi[i] = (xi_i - acc) + B[i]
        B[i] = 0.0
        new[i] = x - paid + (r >> 1)
        if want_outflow:
            outflow[i] = paid
    return moved, held, gap
