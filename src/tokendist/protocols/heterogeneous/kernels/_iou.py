"""The IOU accounting of ``sos-iou``'s stencil kernels: settling a run's edges, short nodes paying
in proportion, the exception bitmap of IOUs of at least one token (Elsässer, Monien, Schamberger
2006, Sec. 3, with the IOUs of Muthukrishnan, Ghosh, Schultz 1998).

Each helper is inlined into the kernel that calls it (:mod:`._stencil`, :mod:`._stencil_threaded`,
:mod:`._sos_cube_threaded`); they are tested with it against the numpy reference step.
"""

from __future__ import annotations

import numba
import numpy as np

from ._common import _INF_BITS, _U, _any_subnormal, _bits_float, _float_bits, _times

__all__: list[str] = []

@numba.njit(cache=True, nogil=True)
def _clear_bits(bits, lo, hi):
    """Clear bits ``lo .. hi - 1`` of a little-endian bit array (``np.packbits(bitorder="little")``)."""
    if hi <= lo:
        return
    b0 = lo >> 3
    b1 = hi >> 3
    keep_low = np.uint8((1 << (lo & 7)) - 1)  # bits of b0 below lo
    keep_high = np.uint8(255 - ((1 << (hi & 7)) - 1))  # bits of b1 from hi on
    if b0 == b1:
        bits[_U(b0)] &= keep_low | keep_high
        return
    bits[_U(b0)] &= keep_low
    for b in range(b0 + 1, b1):
        bits[_U(b)] = 0
    if hi & 7:
        bits[_U(b1)] &= keep_high


@numba.njit(cache=True, nogil=True, inline="always")
def _iou_settle(indices, csr_edges, k0, mid, end, e0, held, owed, iou, exc_bits, out, units, exc_big):
    """A short node's payments (the ``pay_iou`` branch of :func:`_sos_iou_pass`, line for line).

    Slots ``k0 .. mid`` are the row's lower slots (edge ids from ``csr_edges``), ``mid .. end`` the
    upper ones (edges ``e0, e0 + 1, ...``). Returns ``(paid_sum, delta, moved, units, exc_big)``:
    what the node pays, the change of its load and of ``moved``, and the updated exception tallies.
    Used for the CSR rows of :func:`sos_iou_stencil` (a run's rows use :func:`_iou_settle_run`).
    """
    heldf = np.float64(held)
    paid_sum = 0.0
    delta = 0
    moved = 0
    for kk in range(k0, end):
        lower = kk < mid
        le = np.int64(csr_edges[_U(kk)]) if lower else e0 + (kk - mid)
        o = iou[_U(le)]
        t = np.trunc(o)
        if (t >= 0.0) if lower else (t <= 0.0):
            continue  # i does not send on this edge
        paid = np.sign(t) * np.floor((np.abs(t) * heldf) / owed)
        paid_sum += np.abs(paid)
        back = np.int64(t) - np.int64(paid)
        moved -= abs(back)
        r = o - paid
        iou[_U(le)] = r
        exc_bits[_U(le >> 3)] |= np.uint8(1 << (le & 7))
        units += np.floor(np.abs(r))
        exc_big = max(exc_big, np.abs(r))
        jn = indices[_U(kk)]
        if lower:
            delta -= back
            out[_U(jn)] += back
        else:
            delta += back
            out[_U(jn)] += np.int64(paid) - np.int64(np.trunc(r))
    return paid_sum, delta, moved, units, exc_big


@numba.njit(cache=True, nogil=True, inline="always")
def _iou_pay(o, t, held, owed, le, iou, exc_bits, units, exc_big):
    """One edge of a short node: what it pays, ``o - paid`` stored as an exception (see :func:`_iou_settle`)."""
    paid = np.sign(t) * np.floor((np.abs(t) * np.float64(held)) / owed)
    r = o - paid
    iou[_U(le)] = r
    exc_bits[_U(le >> 3)] |= np.uint8(1 << (le & 7))
    units += np.floor(np.abs(r))
    exc_big = max(exc_big, np.abs(r))
    return paid, r, units, exc_big


@numba.njit(cache=True, nogil=True, inline="always")
def _iou_pay_if(send, o, t, held, owed, le, iou, exc_bits, units, exc_big):
    """:func:`_iou_pay` where ``send``; returns ``(paid, tt, r, units, exc_big)``, ``tt`` the transfer paid on.

    Where not ``send`` it returns ``(0.0, 0.0, o, units, exc_big)`` and changes nothing.
    Branch-free: an edge on which the node does not send is taken with ``t = 0``, so it pays
    ``0.0``, stores ``o - 0.0 = o`` back (the same bits, ``-0.0`` included) and ORs a zero bit.
    """
    tt = t if send else 0.0
    paid = np.sign(tt) * np.floor((np.abs(tt) * np.float64(held)) / owed)
    r = o - paid
    iou[_U(le)] = r
    exc_bits[_U(le >> 3)] |= np.uint8(np.uint8(send) << (le & 7))
    units += np.floor(np.abs(r)) if send else 0.0
    exc_big = max(exc_big, np.abs(r) if send else 0.0)
    return paid, tt, r, units, exc_big


@numba.njit(cache=True, nogil=True, inline="always")
def _iou_settle_run(i, eb, lower, upper, edge_delta, held, owed, iou, exc_bits, out, units, exc_big, read_below):
    """:func:`_iou_settle` for a row of a stencil run: neighbours and edge ids from the offsets.

    The same slots in the same order (lower, then upper), so the same results; no CSR array is
    read (a short node's ``indptr``, ``indices`` and ``csr_edges`` were three cache misses: 14.9
    -> 11.0 ns per edge on torus:1000x1000 with 35,080 short nodes in the step).

    An upper neighbour ``j`` adds ``trunc`` of the edge's stored value to its load when it reads
    the edge: ``trunc(r)`` if it reads it later (``j >= read_below``, the end of the run), so it
    is corrected by ``paid - trunc(r)`` as in :func:`_sos_iou_pass`; ``t`` if it has read it
    already (a later row of the same run: loop (2a) of :func:`sos_iou_stencil` read every row's
    edges before any row of the run pays), corrected by ``paid - t``. Either way its load ends
    with ``paid``. A receiver's amount owed does not depend on which of the two it read (``t``
    and ``trunc(r)`` have the same sign), so neither does which rows are short.

    Every slot is taken, those on which the row does not send with ``t = 0`` (:func:`_iou_pay_if`),
    instead of skipping them with a branch: whether a short row sends on a slot is a coin flip to
    the branch predictor. The kernel 3-16% faster on torus:1000x1000 at
    step 150 of the bench's run, where 81% of the nodes were short (three alternated measurements;
    docs/design/kernels.md). The slots it does not send on are written back unchanged, so a row still
    writes only its own edges, bits and neighbours' loads: what the threaded kernel's chunks rely
    on (:mod:`._heterogeneous_stencil_parallel`).
    """
    paid_sum = 0.0
    delta = 0
    moved = 0
    for k in range(len(lower)):
        le = eb + edge_delta[k]
        o = iou[_U(le)]
        t = np.trunc(o)
        paid, tt, r, units, exc_big = _iou_pay_if(t < 0.0, o, t, held, owed, le, iou, exc_bits, units, exc_big)
        paid_sum += np.abs(paid)
        back = np.int64(tt) - np.int64(paid)  # 0 where the row does not send
        moved -= abs(back)
        delta -= back
        out[_U(i + lower[k])] += back
    for k in range(len(upper)):
        le = eb + k
        o = iou[_U(le)]
        t = np.trunc(o)
        send = t > 0.0
        paid, tt, r, units, exc_big = _iou_pay_if(send, o, t, held, owed, le, iou, exc_bits, units, exc_big)
        paid_sum += np.abs(paid)
        back = np.int64(tt) - np.int64(paid)
        moved -= abs(back)
        delta += back
        jn = i + upper[k]
        read = np.int64(tt) if jn < read_below else np.int64(np.trunc(r))
        out[_U(jn)] += np.int64(paid) - read if send else 0
    return paid_sum, delta, moved, units, exc_big


#: (2b) of :func:`sos_iou_stencil` pays a run's short rows with :func:`_pay_run` (passes over
#: every row) when more than one row in this many is short, else row by row. The passes cost
#: about 9 ns per edge of the run whatever the share of short rows; row by row the cost grows
#: with that share (about 15 ns per edge at 81%). The two were even at 45% (step 60 of the
#: bench's run on torus:1000x1000; docs/design/kernels.md).
_DENSE_SHORT = 2


@numba.njit(cache=True, nogil=True, inline="always")
def _paid_only(x, pay):
    """``x`` where ``pay``, else ``+0.0``: a select on the bits (no branch)."""
    return _bits_float(_float_bits(x) & -np.int64(pay))


@numba.njit(cache=True, nogil=True, inline="always")
def _paid_tallies(e0, stride, count, backs, iou, exc_bits, moved, units, exc_big):
    """Bits and tallies of the edges ``e0 + stride c`` (``c < count``) that were paid (``backs[c] != 0``).

    Their exception bits are set (built a byte at a time in a register: a read-modify-write of
    the byte per edge waited on the previous store), ``sum |back|``, the units and the largest
    IOU of the paid ones updated. Returns ``(moved, units, exc_big)``.
    """
    byte = -1
    acc = np.uint8(0)
    for c in range(count):
        le = e0 + stride * c
        b = backs[_U(c)]
        pay = b != 0.0
        rr = _paid_only(np.abs(iou[_U(le)]), pay)
        moved += abs(b)
        units += np.floor(rr)
        exc_big = max(exc_big, rr)
        if le >> 3 != byte:
            if byte >= 0:
                exc_bits[_U(byte)] |= acc
            byte = le >> 3
            acc = np.uint8(0)
        acc |= np.uint8(np.uint8(pay) << (le & 7))
    if byte >= 0:
        exc_bits[_U(byte)] |= acc
    return moved, units, exc_big


@numba.njit(cache=True, nogil=True, error_model="numpy")
def _pay_run(s, en, e, lower, upper, edge_delta, loads, owe, iou, exc_bits, out, backs, paids, backs_below,
             paids_below):
    """(2b) of :func:`sos_iou_stencil` for every short row of the run ``s .. en - 1`` at once; the same results.

    :func:`_iou_settle_run` row by row (node order, ``read_below = en``) makes each short row pay
    on every edge it sends on. A payment depends only on the edge's ``o``, the sender's load and
    what it owes (``owe``, as loop (2a) left it), so the edges can be taken in any order, each
    once, by its sender. Four passes over all the rows of the run, with selects instead of
    branches on whether a row is short or sends on an edge (a coin flip to the branch predictor):

    (A) every upper edge of the run: its sender is its lower end (``t > 0``) or its upper end
        (``t < 0``) if that is a row of the run; what is paid, ``o - paid`` stored (``o`` where
        nobody pays), and per edge ``back = t - paid`` (0 where nobody pays) and ``paid``
        (``backs``, ``paids``: scratch of ``len(upper)`` values per row);
    (B) the edges that end at a row of the run from below it (lower slots whose edge lies before
        the run): the row pays where it sends (``t < 0``), its lower neighbour, which has read
        ``t``, gets ``back``; ``back`` and ``paid`` per row and slot (``backs_below``,
        ``paids_below``: ``len(lower)`` values per row);
    (C) per row: its load (``+back`` of each of its upper edges and ``-back`` of each of its
        lower edges, whoever paid: each end has read ``t``, so each gets ``paid`` instead), what
        it paid (``owe``, short rows only), and ``paid - trunc(o - paid)`` to an upper neighbour
        past the run (it reads the edge later);
    (D) the exception bits and the tallies of every edge paid (:func:`_paid_tallies`). With them
        in (C), a read-modify-write of the bits' byte per edge, each waiting on the previous
        store, the passes were as slow as paying row by row.

    Every edge a row pays on has ``|back| >= 1`` (a short row pays less than ``t``), every other
    edge ``back = 0``. Returns ``(moved, units, exc_big)``: the change of ``moved`` (the tokens not
    paid, negative) and the exception tallies of the payments (integer-valued float sums, exact
    in any order, as the row loop's).
    """
    nu = len(upper)
    nl = len(lower)
    L = en - s
    # (A) The run's upper edges paid by a row of the run.
    for r in range(L):
        i = s + r
        ui = _U(i)
        short_i = owe[ui] > loads[ui]
        for k in range(nu):
            q = _U(nu * r + k)
            j = i + upper[k]
            uj = _U(j)
            o = iou[_U(e) + q]
            t = np.trunc(o)
            send_i = short_i & (t > 0.0)
            send_j = (t < 0.0) & (j < en) & (owe[uj] > loads[uj])  # owe[j] past the run: not used
            pay = send_i | send_j
            tt = t if pay else 0.0
            held = loads[ui] if send_i else loads[uj]
            total = owe[ui] if send_i else (owe[uj] if send_j else 1.0)
            paid = np.sign(tt) * np.floor((np.abs(tt) * np.float64(held)) / total)
            iou[_U(e) + q] = o - paid
            backs[q] = tt - paid
            paids[q] = paid
    # (B) Edges from below the run to its rows: the row, their upper end, sends where t < 0.
    for k in range(nl):
        below = min(L, (-edge_delta[k] + nu - 1) // nu)  # rows r with nu r + edge_delta[k] < 0
        for r in range(below):
            i = s + r
            ui = _U(i)
            le = _U(e + nu * r + edge_delta[k])
            o = iou[le]
            t = np.trunc(o)
            pay = (t < 0.0) & (owe[ui] > loads[ui])
            tt = t if pay else 0.0
            paid = np.sign(tt) * np.floor((np.abs(tt) * np.float64(loads[ui])) / (owe[ui] if pay else 1.0))
            iou[le] = o - paid
            back = tt - paid
            backs_below[_U(nl * r + k)] = back
            paids_below[_U(nl * r + k)] = paid
            out[_U(i + lower[k])] += np.int64(back)
    # (C) Per row: its load, what it paid, and paid - trunc(o - paid) to an upper neighbour past
    # the run (it reads the edge later). No value is carried from row to row: the tallies are (D).
    for r in range(L):
        i = s + r
        ui = _U(i)
        delta = 0.0
        paid_sum = 0.0
        for k in range(nl):
            qq = nu * r + edge_delta[k]
            if qq >= 0:  # an upper edge of the run, taken in (A)
                b = backs[_U(qq)]
                p = paids[_U(qq)]
            else:
                b = backs_below[_U(nl * r + k)]
                p = paids_below[_U(nl * r + k)]
            delta -= b  # the upper end: -back whoever paid
            paid_sum -= min(p, 0.0)  # p < 0 where this row paid (t < 0), else p >= 0 or nobody paid
        for k in range(nu):
            q = _U(nu * r + k)
            b = backs[q]
            p = paids[q]
            delta += b  # the lower end: +back whoever paid
            paid_sum += max(p, 0.0)  # p > 0 where this row paid (t > 0), else p <= 0
            j = i + upper[k]
            if j >= en:  # reads the edge later, as trunc(o - paid): it gets paid - trunc(o - paid)
                out[_U(j)] += np.int64(p - np.trunc(iou[_U(e) + q])) * np.int64(b > 0.0)
        out[ui] += np.int64(delta)
        total = owe[ui]
        owe[ui] = paid_sum if total > loads[ui] else total  # a store either way: no branch
    # (D) The bits and tallies of every edge paid: (A)'s edges in order, then (B)'s.
    moved, units, exc_big = _paid_tallies(e, 1, L * nu, backs, iou, exc_bits, 0.0, 0.0, 0.0)
    for k in range(nl):
        below = min(L, (-edge_delta[k] + nu - 1) // nu)
        moved, units, exc_big = _paid_tallies(e + edge_delta[k], nu, below, backs_below[k::nl], iou, exc_bits, moved,
                                              units, exc_big)
    return -np.int64(moved), units, exc_big


@numba.njit(cache=True, nogil=True)
def _pay_short_rows(s, en, e, found, shortbuf, lower, upper, edge_delta, loads, owe, iou, exc_bits, out, units,
                    exc_big, exc_idx, exc_val):
    """(2b) of :func:`sos_iou_stencil`: the run's ``found`` short rows (``shortbuf``, in node order) pay.

    Row by row (:func:`_iou_settle_run`), or, when more than one row in :data:`_DENSE_SHORT` is
    short, all at once (:func:`_pay_run`, its scratch cut from the kernels' run buffers:
    ``exc_idx``, ``len(upper)`` int64 per row of the longest run, and ``exc_val``, ``len(upper) +
    2 len(lower)`` floats per row). Returns ``(moved, units, exc_big)``: the change of ``moved``
    and the updated tallies.
    """
    nu = len(upper)
    if _DENSE_SHORT * found > en - s:
        return _pay_run_scratch(s, en, e, lower, upper, edge_delta, loads, owe, iou, exc_bits, out, units, exc_big,
                                exc_idx, exc_val)
    moved = 0
    for f in range(found):
        i = shortbuf[_U(f)]
        ui = _U(i)
        paid, dd, dm, units, exc_big = _iou_settle_run(i, e + nu * (i - s), lower, upper, edge_delta, loads[ui],
                                                       owe[ui], iou, exc_bits, out, units, exc_big, en)
        owe[ui] = paid
        out[ui] += dd
        moved += dm
    return moved, units, exc_big


@numba.njit(cache=True, nogil=True, inline="always")
def _pay_run_scratch(s, en, e, lower, upper, edge_delta, loads, owe, iou, exc_bits, out, units, exc_big, exc_idx,
                     exc_val):
    """:func:`_pay_run` with its scratch cut from the kernels' run buffers (``exc_idx``: ``len(upper)``
    int64 per row of the longest run, ``exc_val``: ``len(upper) + 2 len(lower)`` floats per row);
    returns ``(moved, units, exc_big)`` with the tallies updated."""
    nu = len(upper)
    nl = len(lower)
    longest = exc_idx.shape[0] // nu
    dm, du, de = _pay_run(s, en, e, lower, upper, edge_delta, loads, owe, iou, exc_bits, out, exc_idx.view(np.float64),
                          exc_val, exc_val[longest * nu:longest * (nu + nl)], exc_val[longest * (nu + nl):])
    return dm, units + du, max(exc_big, de)


@numba.njit(cache=True, nogil=True, inline="always")
def _save_exceptions(bits, lo, hi, iou, exc_idx, exc_val):
    """The edges ``lo .. hi - 1`` whose exception bit is set, into ``exc_idx``, with their IOUs, into ``exc_val``.

    Returns how many. Reads the bit array a byte at a time: most bytes are 0.
    """
    c = 0
    for b in range(lo >> 3, ((hi - 1) >> 3) + 1):
        byte = bits[_U(b)]
        if byte == 0:
            continue
        for q in range(8):
            ee = (b << 3) + q
            if (byte >> q) & 1 and lo <= ee < hi:
                exc_idx[_U(c)] = ee
                exc_val[_U(c)] = iou[_U(ee)]
                c += 1
    return c


@numba.njit(cache=True, nogil=True, inline="always")
def _upper_edges(s, en, e, upper, a0, beta, first, owed_stored, x, yhat, iou, keep, tiny):
    """Loop (1) of :func:`sos_iou_stencil` over the rows ``s .. en - 1`` of a run, whose first upper edge is ``e``.

    ``yhat`` of every upper edge (eq. (4) in flow form) and the amount owed ``o = yhat + IOU``,
    stored in ``iou``; an IOU kept as the amount owed last step (``owed_stored``) is ``p -
    trunc(p)``, except where ``keep[q]`` is 1 (edge ``e + q`` is an exception, its IOU stored as
    it is). Called with constant ``first`` and ``owed_stored``, and ``keep`` either ``None`` or a
    byte per edge: each combination is compiled into a loop of its own, with no test in it but
    the select on ``keep``. ``tiny`` (constant too): some ``yhat`` of the run is subnormal, so
    ``(beta - 1) yhat`` is taken by :func:`._common._times` (the same bits; elsewhere the plain
    product, cheaper by about 1 ns per edge).
    """
    nu = len(upper)
    bm1 = beta - 1.0
    for i in range(s, en):
        ui = _U(i)
        xi = np.float64(x[ui])
        eb = e + nu * (i - s)
        for k in range(nu):
            ue = _U(eb + k)
            f = a0 * (xi - np.float64(x[_U(i + upper[k])]))
            y = f if first else beta * f + (_times(bm1, yhat[ue]) if tiny else bm1 * yhat[ue])
            yhat[ue] = y
            p = iou[ue]
            if owed_stored:
                p = p - np.trunc(p) if keep is None else (p if keep[_U(eb + k - e)] else p - np.trunc(p))
            iou[ue] = y + p


#: :func:`_run_upper` keeps a run's exceptions in its loop when more than one edge in this many
#: is one, and saves and recomputes them otherwise. Measured crossover on torus:1000x1000: 6-8%
#: of the edges (docs/design/kernels.md).
_DENSE_EXCEPTIONS = 12


#: Set bits of every byte value.
_POPCOUNT = np.array([bin(v).count("1") for v in range(256)], dtype=np.uint8)


@numba.njit(cache=True, nogil=True, inline="always")
def _count_bits(bits, lo, hi):
    """How many of bits ``lo .. hi - 1`` of a little-endian bit array are set."""
    if hi <= lo:
        return 0
    b0 = lo >> 3
    b1 = (hi - 1) >> 3
    c = 0
    for b in range(b0, b1 + 1):
        c += _POPCOUNT[bits[_U(b)]]
    # the bits of the end bytes outside the range
    c -= _POPCOUNT[bits[_U(b0)] & np.uint8((1 << (lo & 7)) - 1)]
    c -= _POPCOUNT[bits[_U(b1)] & np.uint8((255 << (((hi - 1) & 7) + 1)) & 255)]
    return c


@numba.njit(cache=True, nogil=True)
def _run_upper_settled(s, en, e, upper, a0, beta, x, yhat, iou, keep):
    """:func:`_upper_edges` (every step after the first) on a run whose flows are subnormal: ``(beta - 1)
    yhat`` by :func:`._common._times`. A function of its own, called: inlined into :func:`_run_upper`,
    the extra loop made the kernel slower on normal flows too."""
    _upper_edges(s, en, e, upper, a0, beta, False, True, x, yhat, iou, keep, True)


@numba.njit(cache=True, nogil=True)
def _run_upper(s, en, e, upper, a0, beta, first, owed_stored, has_exc, exc_bits, x, yhat, iou, exc_idx, exc_val):
    """Loop (1) of :func:`sos_iou_stencil` over the rows ``s .. en - 1`` of a run (first upper edge ``e``).

    An exception keeps its IOU as it is: saved first (``exc_idx``, ``exc_val``: scratch of the
    run's length times ``len(upper)``), its ``o`` recomputed after the loop, so that the loop
    tests no bit (it then vectorises). The loop is compiled once per value of the flags
    (constant arguments of an inlined function): with the flags tested in the loop the step was
    13-18% slower (alternated chains of protocol steps on torus:1000x1000). The bits are left
    as they are: the caller clears the run's (every old bit of its upper edges is consumed).

    Saving costs about 15 ns per exception (the save is the first to touch the run's IOUs, one
    at a time), so when more than one upper edge in :data:`_DENSE_EXCEPTIONS` is an exception
    (long runs, where most nodes end their steps short) the bits are unpacked to a byte per edge
    instead and the loop selects per edge (``keep`` of :func:`_upper_edges`): one more specialisation
    of the loop, the same bits.

    Not inlined (one call per run): its loops are compiled once per type signature and shared by
    :func:`sos_iou_stencil` and the threaded kernel, instead of once in each. Inlined, the
    dense path had made a cold run of the threaded kernel's protocol test 43 -> 56 s; called, 44.5
    s, at the same speed.
    """
    hi = e + len(upper) * (en - s)
    if has_exc and owed_stored and not first and _DENSE_EXCEPTIONS * _count_bits(exc_bits, e, hi) > hi - e:
        # Many exceptions (long runs: most nodes short, most edges paid short): the bits as a
        # byte per edge, and a select in the loop, instead of saving and recomputing each one.
        keep = exc_idx.view(np.uint8)
        for ee in range(e, hi):
            keep[_U(ee - e)] = (exc_bits[_U(ee >> 3)] >> (ee & 7)) & 1
        if _any_subnormal(yhat, e, hi):
            _run_upper_settled(s, en, e, upper, a0, beta, x, yhat, iou, keep)
        else:
            _upper_edges(s, en, e, upper, a0, beta, False, True, x, yhat, iou, keep, False)
        return
    nexc = 0
    if has_exc:
        nexc = _save_exceptions(exc_bits, e, hi, iou, exc_idx, exc_val)
    if owed_stored and not first:  # every step after the first
        if _any_subnormal(yhat, e, hi):  # (a settled run: see _times)
            _run_upper_settled(s, en, e, upper, a0, beta, x, yhat, iou, None)
        else:
            _upper_edges(s, en, e, upper, a0, beta, False, True, x, yhat, iou, None, False)
    elif owed_stored:
        _upper_edges(s, en, e, upper, a0, beta, True, True, x, yhat, iou, None, False)
    elif first:
        _upper_edges(s, en, e, upper, a0, beta, True, False, x, yhat, iou, None, False)
    else:
        _upper_edges(s, en, e, upper, a0, beta, False, False, x, yhat, iou, None, False)
    for q in range(nexc):
        ue = _U(exc_idx[_U(q)])
        iou[ue] = yhat[ue] + exc_val[_U(q)]  # o = y + p, as the loop computes it


@numba.njit(cache=True, nogil=True, inline="always")
def _run_transfers(s, a, b, e, nu, lower, edge_delta, iou, loads, out, owe, shortbuf, found):
    """Loop (2a) and the short-row scan of :func:`sos_iou_stencil` for the rows ``a .. b - 1`` of a run.

    ``s`` and ``e`` are the run's first row and first upper edge. Short rows are appended to
    ``shortbuf`` from ``found`` on. Returns ``(moved,
    found, run_big)``, ``run_big`` the largest ``|o - trunc(o)|`` of the rows' upper edges as a
    bit pattern (a NaN shows as a pattern at or above :data:`_INF_BITS`).
    """
    nl = len(lower)
    moved = 0
    run_big = 0
    for i in range(a, b):
        ui = _U(i)
        eb = e + nu * (i - s)
        owed = 0.0
        delta = 0.0
        for k in range(nl):
            t = np.trunc(iou[_U(eb + edge_delta[k])])
            owed += max(-t, 0.0)
            delta += t
        for k in range(nu):
            o = iou[_U(eb + k)]
            t = np.trunc(o)
            owed += max(t, 0.0)
            delta -= t
            run_big = max(run_big, _float_bits(abs(o - t)))
        held = loads[ui]
        moved += np.int64(owed)
        owe[ui] = owed
        out[ui] += held + np.int64(delta)
    for i in range(a, b):
        shortbuf[_U(found)] = i  # kept only if short: no branch to mispredict
        found += owe[_U(i)] > loads[_U(i)]
    return moved, found, run_big


@numba.njit(cache=True, nogil=True, inline="always")
def _largest(run_big, iou, lo, hi, biggest):
    """``biggest`` raised to the run's largest ``|o - trunc(o)|`` (edges ``lo .. hi - 1``), NaNs never picked."""
    if run_big >= _INF_BITS:
        for ee in range(lo, hi):
            o = iou[_U(ee)]
            rr = abs(o - np.trunc(o))
            if rr > biggest:
                biggest = rr
    elif _bits_float(run_big) > biggest:
        biggest = _bits_float(run_big)
    return biggest
