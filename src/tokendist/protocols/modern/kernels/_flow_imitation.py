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

On tori and rings, while every ``D_e`` equals ``trunc(F_e)``, :func:`flow_imitation_stencil_step`
runs instead: each node pulls from its own edges (no scatter, ``D`` implicit); see there.
"""

from __future__ import annotations

import numba
import numpy as np

from ....engine._cycles import PERIOD, add_moved, seen_before

__all__ = ["flow_imitation_step", "flow_imitation_step_uniform", "flow_imitation_stencil_step",
           "flow_imitation_stencil_steps", "FOS", "SOS", "MATCHED"]

#: ``mode``: first-order diffusion, second-order diffusion, a matching (circuit or random).
FOS, SOS, MATCHED = 0, 1, 2

_U = np.uint64


@numba.njit(cache=True, nogil=True, inline="always")
def _settle(Fe, De, f, budget, avail_j, guard):
    """One edge ``(i, j)``, ``i < j``, met in the pass: its cumulative flows and what each end pays.

    ``Fe``, ``De``: the edge's ``F`` and ``D`` before the step; ``f``: its continuous flow this step;
    ``budget``: what ``i`` has left to pay, ``avail_j``: what ``j`` has left. Returns ``(F, D, pu, pv,
    owed, |F - D|)``: ``pu`` paid by ``i``, ``pv`` by ``j``. Scalars in and out: a trial that passed
    the arrays to inlined helpers ran 10x slower (reference counting in the loop).
    """
    Fe = Fe + f
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
        d = sn - avail_j
        pv = (sn - (d & ~(d >> 63))) & neg
    De += pu - pv
    return Fe, De, pu, pv, sp + sn, abs(Fe - De)


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
            Fe, De, pu, pv, ow, g = _settle(F[e], D[e], f, budget, loads[j] - spent[j], guard)
            F[e] = Fe
            D[e] = De
            spent[j] += pv
            budget -= pu
            recv[j] += pu - pv
            net += pv - pu
            owed += ow
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
            Fe, De, pu, pv, ow, g = _settle(F[e], D[e], f, budget, loads[j] - spent[j], guard)
            F[e] = Fe
            D[e] = De
            spent[j] += pv
            budget -= pu
            recv[j] += pu - pv
            net += pv - pu
            owed += ow
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


@numba.njit(cache=True, nogil=True, inline="always")
def _sos_flow(f, prev, e, sos, sos_on, b1, beta):
    """The SOS flow ``(beta - 1) f(t-1) + beta f`` from edge e's previous flow (FOS, or SOS's first step: ``f``).

    ``prev`` is read only for SOS (FOS passes a one-element dummy).
    """
    if sos and sos_on:
        return b1 * prev[e] + beta * f
    return f


@numba.njit(cache=True, nogil=True, fastmath={"nnan"})
def flow_imitation_stencil_step(ustart, indptr, indices, csr_edges, starts, ends, lower, upper, delta, sos, beta, a0,
                                guard, want_outflow, outflow, xi, xi_new, F, F_new, prev, prev_new, sos_on,
                                loads, new):  # pragma: no cover - compiled
    """One step while every ``D_e == trunc(F_e)``, on a graph with an offset stencil (tori); FOS or SOS, one ``P_ij``.

    The same step as :func:`flow_imitation_step_uniform` in the common case where no node owes more
    than it holds (the guard pays everything) and no edge lags behind its continuous flow: then
    ``D_e = trunc(F_e)`` before and after the step, ``D`` need not be read or written (the caller
    keeps it implicit), and each node's new load is its load plus ``trunc(F_e) - trunc(F_e^old)``
    over its edges, signed. Every node pulls from its own edges only (both ends compute an edge's
    flow from the same old values, so the same bits): no scatter to neighbours, no scratch, the
    old ``xi``, ``F``, ``prev`` only read, the new ones written to ``xi_new``, ``F_new``,
    ``prev_new``. Nodes in the runs ``[starts[r], ends[r])`` (:func:`tokendist.graphs._stencil.
    lower_edge_runs`) read their neighbours at ``i + lower[k]``, ``i + upper[k]`` and their edges at
    ``e_i + delta[k]``, ``e_i + k`` (``e_i = ustart[i]``, affine in a run); the others their CSR rows.

    Returns ``(moved, binding, max |F - D|)``. ``binding > 0``: some node owes more than it holds
    (guard on); the outputs are then not valid and the inputs untouched: the caller runs the
    general kernel on this step instead.

    The arguments that stay the same for a run come first and those of the step last (``sos_on``,
    ``loads``, ``new``): the caller keeps the others in a tuple, one per state buffer.
    """
    # The default (FOS, guard on, no outflow) with its flags as constants: LLVM drops their
    # branches from the slot loops (5-8% on torus:1000x1000); any other combination runs the
    # same code with the flags read at run time.
    if not sos and guard and not want_outflow:
        return _stencil_rows(ustart, indptr, indices, csr_edges, starts, ends, lower, upper, delta, False, sos_on,
                             beta, a0, xi, xi_new, F, F_new, prev, prev_new, loads, True, new, False, outflow)
    return _stencil_rows(ustart, indptr, indices, csr_edges, starts, ends, lower, upper, delta, sos, sos_on,
                         beta, a0, xi, xi_new, F, F_new, prev, prev_new, loads, guard, new, want_outflow, outflow)


@numba.njit(cache=True, nogil=True, fastmath={"nnan"}, inline="always")
def _stencil_rows(ustart, indptr, indices, csr_edges, starts, ends, lower, upper, delta, sos, sos_on, beta, a0, xi,
                  xi_new, F, F_new, prev, prev_new, loads, guard, new, want_outflow, outflow):  # pragma: no cover
    # The step of flow_imitation_stencil_step (see there); inlined at each call, its flags constants there.
    n = loads.shape[0]
    nu = len(upper)
    b1 = beta - 1.0
    moved = 0
    binding = 0
    gap = 0.0
    nruns = starts.shape[0]
    i0 = 0
    for r in range(nruns + 1):
        i1 = starts[r] if r < nruns else n
        for i in range(i0, i1):  # nodes outside the runs: their CSR rows (lower slots first, as in the runs)
            xi_i = xi[i]
            acc = 0.0  # the flows out (u = i), in edge order from 0.0, as np.bincount sums them
            b = 0.0  # the flows in (v = i), likewise
            net = 0
            out = 0
            for k in range(indptr[i], indptr[i + 1]):
                j = indices[k]
                e = csr_edges[k]
                Fo = F[e]
                if j < i:
                    f = _sos_flow(a0 * (xi[j] - xi_i), prev, e, sos, sos_on, b1, beta)
                    b += f
                    s = np.int64(Fo + f) - np.int64(Fo)  # what j sends i (< 0: what i sends j)
                    net += s
                    out += -s & (s >> 63)
                else:
                    f = _sos_flow(a0 * (xi_i - xi[j]), prev, e, sos, sos_on, b1, beta)
                    if sos:
                        prev_new[e] = f
                    acc += f
                    Fe = Fo + f
                    F_new[e] = Fe
                    s = np.int64(Fe) - np.int64(Fo)
                    net -= s
                    out += s & ~(s >> 63)
                    g = abs(Fe - np.trunc(Fe))
                    gap = g if g > gap else gap
            xi_new[i] = (xi_i - acc) + b
            x = loads[i]
            new[i] = x + net
            moved += out
            if want_outflow:
                outflow[i] = out
            binding += guard and out > x
        if r == nruns:
            break
        s0 = starts[r]
        i0 = ends[r]
        e0 = np.int64(ustart[s0]) - nu * s0  # node i's edges u = i: e0 + nu i + k
        # The edge (i - 1, i) was node i - 1's first upper edge: its flow and payment are carried over
        # in registers instead of computed again (offsets -1 and +1, i.e. tori and rings; 4-6% faster).
        carry = lower[len(lower) - 1] == -1 and upper[0] == 1
        fh = 0.0
        sh = 0
        for i in range(s0, i0):
            ui = _U(i)  # unsigned indices: no negative-index wrap
            xi_i = xi[ui]
            eu = e0 + nu * i
            acc = 0.0
            b = 0.0
            net = 0
            out = 0
            for k in range(len(lower)):
                if carry and k == len(lower) - 1 and i > s0:
                    f = fh
                    s = sh
                else:
                    e = _U(eu + delta[k])
                    Fo = F[e]
                    f = _sos_flow(a0 * (xi[_U(i + lower[k])] - xi_i), prev, e, sos, sos_on, b1, beta)
                    s = np.int64(Fo + f) - np.int64(Fo)  # what i + lower[k] sends i (< 0: what i sends it)
                b += f
                net += s
                out += -s & (s >> 63)
            for k in range(nu):
                e = _U(eu + k)
                Fo = F[e]
                f = _sos_flow(a0 * (xi_i - xi[_U(i + upper[k])]), prev, e, sos, sos_on, b1, beta)
                if sos:
                    prev_new[e] = f
                acc += f
                Fe = Fo + f
                F_new[e] = Fe
                s = np.int64(Fe) - np.int64(Fo)
                if k == 0:
                    fh = f
                    sh = s
                net -= s
                out += s & ~(s >> 63)
                g = abs(Fe - np.trunc(Fe))
                gap = g if g > gap else gap
            xi_new[ui] = (xi_i - acc) + b
            x = loads[ui]
            new[ui] = x + net
            moved += out
            if want_outflow:
                outflow[ui] = out
            binding += guard and out > x
    return moved, binding, gap


@numba.njit(cache=True, nogil=True)
def flow_imitation_stencil_steps(args0, args1, state0, state1, cur, t, k, stop_idle, keys, visits, info, loads,
                                 block, moved, messages, msg):  # pragma: no cover - compiled
    """Up to ``k`` steps of :func:`flow_imitation_stencil_step` (``Protocol.steps``, engine/_batch.py).

    ``args0``, ``args1``: the step's arguments but its own (``sos_on``, loads, new) reading state
    buffer 0 or 1 (writing the other); ``state0``, ``state1``: the bytes of each buffer that
    :meth:`~.._flow_imitation.FlowImitation.state_key` returns while ``D = trunc(F)`` (F and xi);
    ``cur``: the buffer in use. Then the first step ``t``, at most ``k`` steps, ``stop_idle``, the
    cycle table (keys, visits, info: engine/_cycles.py), the loads before step ``t``, the ``(k, n)``
    block of the loads after each step, the per-step tokens moved and messages, a step's messages.

    Each step is taken first and kept only if it may be: the block ends before a step that binds
    (a node owes more than it holds: :meth:`step` takes it with the general kernel) or whose state
    (the loads before it and buffer ``cur``, which the step only reads) was seen before at a period
    boundary (:func:`~tokendist.engine._cycles.seen_before`). A step not kept changed only the other
    buffer and the block's row. Returns ``(steps done, buffer in use after them, max |F - D|)``.
    """
    period = info[PERIOD]
    prev = loads
    gap = 0.0
    for b in range(k):
        row = block[b]
        if cur == 0:
            m, binding, g = flow_imitation_stencil_step(*args0, t + b > 0, prev, row)
        else:
            m, binding, g = flow_imitation_stencil_step(*args1, t + b > 0, prev, row)
        if binding:
            return b, cur, gap
        if period > 0 and (t + b) % period == 0 and seen_before(keys, visits, info, prev.view(np.uint8),
                                                                state0 if cur == 0 else state1, t + b):
            return b, cur, gap
        cur = 1 - cur
        gap = g if g > gap else gap
        moved[b] = m
        messages[b] = msg
        prev = row
        if not add_moved(info, m) or (stop_idle and m == 0):
            return b + 1, cur, gap
    return k, cur, gap
