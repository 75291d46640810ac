"""The numba kernels of the diffusion protocols (Subramanian and Scherson 1994, Sec. 2 and Sec. 4).

One synchronous step is one fused loop per node over its CSR row that writes the new load and
the node's outflow (what it sends, for the engine's feasibility check) into buffers the protocol
owns; no kernel allocates. Why per-node loops: numpy needs per-edge gathers, a flows array and
bincounts (25-45 ns per edge-step against 3.6-6, docs/design/kernels.md).

Two paths each:

* *regular*: every node has degree D and every ``P_ij`` is one number ``p`` (tori, hypercubes,
  random-regular graphs with the default matrix, ``uniform:W`` on a regular graph). Row i is then
  ``indices[D i : D (i + 1)]``: the loop reads no ``indptr`` and no per-slot coefficient (on rows
  of 4 a variable-length row loop costs more than its arithmetic).
* *general*: any graph, ``P_ij`` per CSR slot (or one number).

The rounded kernels on the regular path with ``p = 1/q`` (q an integer, as the default
``1/(2 max(d_i, d_j))`` on a regular graph) round with one float multiply and one truncation per
slot (``_regular_rows``), which is exact, and equal to the exact integer arithmetic of the general
path (:func:`_exact_amount`), for ``|load[i] - load[j]| < 2**29``. The row loop tracks the lowest
and highest load it reads (two operations per row, not an OR of ``|d|`` per slot); a step whose loads span 2**29 or
more is redone on the general path (the inputs are not modified, so the redo is safe; the results
are the same either way, only the time differs). Measurements and the argument:
docs/protocols/diffusion.md, "Performance".

*Offset stencils* (tori, rings; :mod:`tokendist.graphs._stencil`): ``diffuse_stencil_step`` and
``rounded_stencil_step`` are the regular paths with the nodes of the stencil's runs reading their
neighbours at ``i + lower[k]``, ``i + upper[k]`` instead of through ``indices`` (every other node
keeps its CSR row). Same arithmetic in the same order per row, so the same results bit for bit
(tests/protocols/test_diffusion_stencil.py). Separate entry points, so that hypercubes and random
regular graphs compile nothing new. Why it is fast, and what each point bought (torus:1000x1000,
ns per edge-step against the CSR regular path, docs/protocols/diffusion.md, "Offset stencils"):
the offsets are tuples (compile-time trip counts, unrolled, offsets in registers), indices are
cast to uint64 (no negative-index wrap), the per-slot data are read at ``ds * i + k`` with ``ds``
the tuple lengths' sum (a constant stride: with the run-time ``D`` the oriented loop gathered and
stayed at 15 ns instead of 3), the continuous ``moved`` is summed in a second loop per run (a
float reduction blocks vectorisation), and the random rounding reads its HEAD bytes at affine
edge ids (:func:`tokendist.graphs._stencil.affine_edge_runs`) held in scalars, not via
``csr_edges`` (8 against 3.6-4).

Tried for the random rounding and dropped (every variant gave the same
loads): HEAD flags as bits (the packing pass is 1.7x slower than the byte pass, the row loop no
faster), as uint32 / int64 / float64 per edge (the pass writes 4-8x more; no faster overall), or
read as 32-bit words (LLVM loads the HEAD bytes of the vectorised slot loop one lane at a time;
a word gather instead was within the noise); hashing inside the row loop (1.4-1.9x slower); a
per-slot HEAD byte copied from the per-edge ones (that copy alone costs 1.5 ns per edge); fusing
the HEAD pass into blocks of rows; splitting each row into its lower and upper slots (the upper
slots' edges are consecutive, so they need no ``csr_edges``: variable trip counts made it 2-2.4x
slower); integer rounding (a shift for q a power of two, or a magic multiply) instead of the
shifted float truncation (no faster: the D-slot loop is vectorised and float and integer lanes
cost alike).
"""

from __future__ import annotations

import math

import numba
import numpy as np

from ....kernels._coins import _S11, _TO_UNIT, _splitmix64, _step_base, _uniform

__all__ = ["diffuse_step", "rounded_step", "diffuse_stencil_step", "rounded_stencil_step", "counter_uniform_nb",
           "reciprocal", "head_threshold", "COIN_BLOCK"]

#: CSR slots whose coins one block draws (random rounding): a fixed buffer, not 2m floats.
COIN_BLOCK = 4096
#: The regular path's exact rounding needs every |load[i] - load[j]| below this (see module doc).
_DIFF_LIMIT = 1 << 29
#: ... and q below this.
_Q_LIMIT = 1 << 21
_INT64_MAX = np.int64(9223372036854775807)

# Rounding modes of the row loops (the protocols' ``ROUNDINGS`` order, then coin=fraction).
FLOOR, CEIL, RANDOM, ORIENTED, RANDOM_FRACTION = range(5)



def reciprocal(p: float) -> int:
    """The integer q with ``p == 1.0 / q`` exactly in float64 and ``2 <= q < 2**21``, else 0.

    The regular rounded path needs it (the default matrix on a D-regular graph has ``q = 2D``).
    """
    if not 0.0 < p <= 0.5:
        return 0
    q = round(1.0 / p)
    return int(q) if 2 <= q < _Q_LIMIT and 1.0 / q == p else 0


# ---------------------------------------------------------------------- counter-based coins
@numba.njit(cache=True, nogil=True)
def counter_uniform_nb(key, step, index):
    """:func:`tokendist._random.counter_uniform` in numba, over an array of indices (for tests)."""
    base = _step_base(np.uint64(key), np.uint64(step))
    out = np.empty(index.shape[0])
    for k in range(index.shape[0]):
        out[k] = _uniform(base, index[k])
    return out


@numba.njit(cache=True, nogil=True, inline="always")
def _fill_coins(base, csr_edges, k0, k1, coins):
    # coins[k - k0] = counter_uniform(key, step, e) for the edge e of CSR slot k: a tight loop of
    # direct reads and writes that LLVM vectorises (hashing inside the row loop measured 4-5x slower).
    for k in range(k0, k1):
        coins[k - k0] = _uniform(base, csr_edges[k])


@numba.njit(cache=True, nogil=True, inline="always")
def _fill_heads(base, threshold, heads):
    # heads[e] = 1 when edge e's coin shows HEAD, counter_uniform(key, step, e) < p, i.e. when its
    # top 53 bits are below threshold = ceil(p 2**53) (exact: both sides scale by a power of two).
    # Once per edge in edge order, integer only: ~1 ns per edge (converting to float costs 2-3x).
    for e in range(heads.shape[0]):
        heads[e] = np.int64(_splitmix64(base ^ _splitmix64(np.uint64(e))) >> _S11) < threshold


def head_threshold(p: float) -> int:
    """``ceil(p * 2**53)``: ``counter_uniform(...) < p`` iff the draw's top 53 bits are below it."""
    return int(math.ceil(p * float(1 << 53)))


#: :func:`_trunc32` is exact below this size (every amount of a valid regular-path step is below 2**28 + 1).
_CLAMP = float(1 << 30)


@numba.njit(cache=True, nogil=True, inline="always")
def _trunc32(v):
    """``trunc(v)`` as int64 through int32: exact for ``|v| < 2**30``, clamped to ``+-2**30`` beyond.

    Why 32 bits: AVX2 has packed conversions between float64 and int32 but none to or from
    int64 (those are AVX-512), so with int64 LLVM converted slot by slot and the rounded row
    loops ran 2-3x slower on this machine's AMD EPYC than on the AVX-512 machine they were tuned
    on (docs/design/kernels.md). The regular paths' amounts are
    ``(w_i - w_j) / q`` plus a shift below 1 with ``|w_i - w_j| < 2**29`` whenever their results
    are used (the loads span less than 2**29; otherwise the step is redone on the general path),
    and the differences themselves go through int32 the same way. The clamp keeps a discarded
    step's out-of-range values away from LLVM's undefined float-to-int conversion.
    """
    return np.int64(np.int32(min(max(v, -_CLAMP), _CLAMP)))


@numba.njit(cache=True, nogil=True, inline="always")
def _diff32(wi, wj):
    """``float(wi - wj)`` through int32 (a packed conversion on AVX2): exact while ``|wi - wj| < 2**31``
    (see :func:`_trunc32`)."""
    return np.float64(np.int32(wi - wj))


# ---------------------------------------------------------------------- continuous diffusion
@numba.njit(cache=True, nogil=True, inline="always")
def _diffuse_general(indptr, indices, coef, diag, loads, i0, i1, out, outflow):
    # Rows i0..i1-1 (the serial kernel passes all rows, the parallel one a block).
    scalar = coef.shape[0] == 1
    same_diag = diag.shape[0] == 1
    moved = 0.0
    for i in range(i0, i1):
        wi = loads[i]
        s = 0.0
        sent = 0.0
        for k in range(indptr[i], indptr[i + 1]):
            wj = loads[indices[k]]
            a = coef[0] if scalar else coef[k]
            s += a * wj
            sent += a * max(wi - wj, 0.0)
        out[i] = s + (diag[0] if same_diag else diag[i]) * wi
        outflow[i] = sent
        moved += sent
    return moved


@numba.njit(cache=True, nogil=True, inline="always")
def _diffuse_regular(indices, coef, diag, loads, D, i0, i1, out, outflow):
    # Rows i0..i1-1; row i is slots D*i .. D*i + D - 1: a constant trip count, no indptr read.
    # The diagonal term is added after the row's neighbours (as the reference does): keeping
    # it in its sorted place, as scipy's ``P @ loads`` would, split each row in two loops of
    # data-dependent length and cost 2x (6.4 against 3.6 ns per edge-step on the torus, 8.9
    # against 3.2 on the hypercube, where the split point varies from row to row).
    scalar = coef.shape[0] == 1
    same_diag = diag.shape[0] == 1
    moved = 0.0
    for i in range(i0, i1):
        wi = loads[i]
        base = D * i
        s = 0.0
        sent = 0.0
        for k in range(base, base + D):
            wj = loads[indices[k]]
            a = coef[0] if scalar else coef[k]
            s += a * wj
            sent += a * max(wi - wj, 0.0)
        out[i] = s + (diag[0] if same_diag else diag[i]) * wi
        outflow[i] = sent
        moved += sent
    return moved


@numba.njit(cache=True, nogil=True)
def diffuse_step(indptr, indices, coef, diag, loads, degree, out, outflow):
    """One step of ``l(t+1) = P l(t)`` (Sec. 3.1, Equation 1) per node; returns the load moved.

    ``l_i(t+1) = sum_j P_ij l_j(t) + P_ii l_i(t)``: the off-diagonal entries of row i summed in
    column order from 0.0, then the diagonal term, exactly as the reference
    ``P_off @ loads + diag(P) * loads`` (scipy CSR product, then numpy) computes it, so the loads
    are bit-for-bit the same. (Not ``P @ loads``: that puts the diagonal in its sorted place, an
    order that costs this loop 2x; the two differ by rounding only, about 1e-16 relative.)
    ``outflow[i] = sum_j P_ij max(load[i] - load[j], 0)`` (what i sends, lines (6)-(7) of
    Figure 2) is summed in the same pass; the load moved is the sum of the outflows. ``coef``:
    ``P_ij`` per CSR slot, or one number for all; ``diag``: ``P_ii`` per node, or one number;
    ``degree``: D > 0 when every row has D slots (then ``indptr`` is not read), else 0.
    """
    n = loads.shape[0]
    if degree == 4:  # the 2-dimensional torus: a constant trip count that LLVM unrolls
        return _diffuse_regular(indices, coef, diag, loads, 4, 0, n, out, outflow)
    if degree > 0:
        return _diffuse_regular(indices, coef, diag, loads, degree, 0, n, out, outflow)
    return _diffuse_general(indptr, indices, coef, diag, loads, 0, n, out, outflow)


# ---------------------------------------------------------------------- rounded diffusion
@numba.njit(cache=True, nogil=True, inline="always")
def _exact_amount(ud, num, den, est):
    """``(floor(ud num / den), ud num mod den)`` in exact integers (Sec. 4's floor and its remainder).

    ``ud``: the load difference ``|load[i] - load[j]|`` as uint64 (exact for any two int64 loads);
    ``num / den``: ``P_ij`` as a fraction (:func:`tokendist.protocols.diffusion._diffusivity.coefficient_ratios`,
    ``0 <= num < den <= 2**30``); ``est``: its float, for the first guess. Below 2**31 the float
    product guesses the floor and one integer multiply checks it (``ud num < 2**61``: no
    overflow), a step corrects the rare guess off by one; beyond, ``ud = a den + b`` splits the
    product so that nothing exceeds 64 bits (``a num <= ud num / den < 2**64``; the floor is below
    2**63 whenever the loads are int64 and ``P_ij <= 1/2``).
    """
    if ud < np.uint64(2147483648):
        x = np.int64(ud)
        fl = np.int64(np.float64(x) * est)
        rem = x * num - fl * den
        while rem < 0:
            fl -= 1
            rem += den
        while rem >= den:
            fl += 1
            rem -= den
        return fl, rem
    un = np.uint64(num)
    ud_den = np.uint64(den)
    a = ud // ud_den
    t = (ud - a * ud_den) * un
    return np.int64(a * un + t // ud_den), np.int64(t % ud_den)


@numba.njit(cache=True, nogil=True, inline="always")
def _general_rows(indptr, indices, coef, ratio, along, loads, mode, coins, i0, i1, hop_extra, relays, out, outflow):
    # Rows i0..i1-1 on any graph; ``coins`` holds the coins of slots indptr[i0].. (random only).
    # Node i loses what it sends to every lighter neighbour and gains what every heavier neighbour
    # sends it; both ends of an edge compute the same amount from the same two loads (and, for the
    # random rounding, the same coin). The amount is floor(P_ij |d|) in exact integers, P_ij the
    # fraction ratio[k] = (num, den) (_exact_amount; a float product with a snapping tolerance sent
    # the ceiling for the floor once |d| passed about 2**30); the ceiling is one more when
    # the remainder is not zero. The sign of the difference enters arithmetically.
    # ``ratio`` empty: every P_ij is a unit fraction 1/den (the default 1/(2 max(d_i, d_j))), and
    # den = rint(1 / P_ij) is exact (den <= 2**30, the float within 2**-52 relative): no per-slot
    # integers to read (16 bytes per slot less traffic on the general path).
    scalar = coef.shape[0] == 1
    unit = ratio.shape[0] == 0
    c0 = indptr[i0]
    moved = 0
    low = _INT64_MAX
    for i in range(i0, i1):
        wi = loads[i]
        delta = 0
        sent = 0
        extra = 0
        for k in range(indptr[i], indptr[i + 1]):
            wj = loads[indices[k]]
            pos = wi > wj
            neg = wi < wj
            # |wi - wj| in uint64: exact for any two int64 loads (their difference may not fit int64).
            ud = (np.uint64(wi) - np.uint64(wj)) if pos else (np.uint64(wj) - np.uint64(wi))
            kk = 0 if scalar else k
            a = abs(coef[kk])
            if unit:
                num = np.int64(1)
                den = np.int64(np.rint(1.0 / a))
            else:
                num = ratio[kk, 0]
                den = ratio[kk, 1]
            fl, rem = _exact_amount(ud, num, den, a)
            up = rem != 0  # P_ij |d| is not an integer: the roundings differ
            if mode == FLOOR:
                up = False
            elif mode == RANDOM:
                up = up & (coins[k - c0] < a)  # HEAD with probability P_ij
            elif mode == RANDOM_FRACTION:
                up = up & (coins[k - c0] < np.float64(rem) / np.float64(den))
            elif mode == ORIENTED:
                up = up & ((along[k] != 0) == pos)  # the sender rounds up along the orientation
            amt = fl + np.int64(up)
            delta += (np.int64(neg) - np.int64(pos)) * amt
            s = np.int64(pos) * amt
            sent += s
            if relays:
                extra += s * hop_extra[k]
        new = wi + delta
        out[i] = new
        outflow[i] = sent
        moved += sent + extra
        low = min(low, new)
    return moved, low


@numba.njit(cache=True, nogil=True, inline="always")
def _regular_rows(indices, csr_edges, D, p, q, along, heads, loads, own, mode, coins, out, outflow):
    # The rows of one block of a D-regular graph with P_ij = p = 1/q. ``own``, ``out``, ``outflow``:
    # the block's rows of the loads and of the two outputs; ``indices``, ``csr_edges``, ``along``
    # and ``coins``: its slots (views starting at the block's first slot, D per row; ``along``
    # and ``coins`` may be empty when the rounding does not read them); ``loads``: all loads (the
    # neighbours). Views let every loop start at a literal 0: with a run-time first row LLVM kept
    # numba's negative-index wrap on every own-row access (1.2-1.4x slower). Random rounding:
    # coin=pij reads the step's HEAD flag per edge (``heads``), coin=fraction the block's coins.
    # x = (load[i] - load[j]) p; trunc(x + copysign(1/(2q), x)) = sign * floor(|d| / q) and
    # trunc(x + copysign(1 - 1/(2q), x)) = sign * ceil(|d| / q): the exact quotient sits at least
    # 1/(2q) from the next integer after the shift, float64 errs by < 2**-23 for |d| < 2**29 and
    # q < 2**21, so in that range it equals the exact integer floor of the general path.
    # Returns (moved, low, lowest load[i], highest load[i]): the caller checks that the loads span
    # less than 2**29, which bounds every |d| (a per-row min/max instead of OR-ing |d| per slot:
    # 5-17% faster, since the slot loop is what LLVM vectorises and each lane op counts).
    off_f = 0.5 / q
    span = 1.0 - 1.0 / q
    off_c = off_f + span  # 1 - 1/(2q), up to a rounding the argument above tolerates
    moved = 0
    low = _INT64_MAX
    lo_in = _INT64_MAX
    hi_in = -_INT64_MAX - 1
    for r in range(own.shape[0]):
        wi = own[r]
        lo_in = min(lo_in, wi)
        hi_in = max(hi_in, wi)
        delta = 0
        sent = 0
        base = D * r
        for kk in range(D):
            k = base + kk
            x = _diff32(wi, loads[indices[k]]) * p
            # The shift picks the rounding: off_f floors, off_c ceils (one conversion per slot;
            # the random and oriented choices enter as 0/1 arithmetic, since coins do not predict).
            if mode == FLOOR:
                a = _trunc32(x + math.copysign(off_f, x))
            elif mode == CEIL:
                a = _trunc32(x + math.copysign(off_c, x))
            elif mode == RANDOM:
                a = _trunc32(x + math.copysign(off_f + span * np.float64(heads[csr_edges[k]]), x))
            elif mode == ORIENTED:
                # The sender rounds up along the orientation: the signed amount is ceil(x) when the
                # edge points away from i (i sends the ceiling, or j sends the floor of -x) and
                # floor(x) when it points towards i; floor(x + 1/(2q)) and floor(x + 1 - 1/(2q))
                # are those exactly, by the argument above. No sign enters (no copysign, no xor
                # with d < 0): 10-20% faster than the magnitude form.
                a = _trunc32(np.floor(x + (off_f + span * np.float64(along[k]))))
            else:
                fl = _trunc32(x + math.copysign(off_f, x))
                # coin=fraction: HEAD below the float fraction |x| - floor, as on the general path.
                a = _trunc32(x + math.copysign(off_f + span * np.float64(coins[k] < abs(x) - abs(fl)), x))
            # a, signed: what i sends (> 0) or receives (< 0).
            delta -= a
            sent += max(a, 0)
        new = wi + delta
        out[r] = new
        outflow[r] = sent
        moved += sent
        low = min(low, new)
    return moved, low, lo_in, hi_in


@numba.njit(cache=True, nogil=True, inline="always")
def _narrow(lo, hi):
    """Whether loads between ``lo`` and ``hi`` differ by less than 2**29 (True when there are none)."""
    # hi - lo in uint64 is exact for hi >= lo (it may exceed the int64 range).
    return hi < lo or np.uint64(hi) - np.uint64(lo) < np.uint64(_DIFF_LIMIT)


@numba.njit(cache=True, nogil=True, inline="always")
def _general(indptr, indices, csr_edges, coef, ratio, along, loads, mode, base, hop_extra, relays, coins, out,
             outflow):
    n = loads.shape[0]
    if mode != RANDOM and mode != RANDOM_FRACTION:
        return _general_rows(indptr, indices, coef, ratio, along, loads, mode, coins, 0, n, hop_extra, relays, out,
                             outflow)
    # Random: blocks of whole rows whose slots fit the coin buffer (at least one row per block;
    # the protocol sizes the buffer to the maximum degree at least).
    moved = 0
    low = _INT64_MAX
    i0 = 0
    cap = coins.shape[0]
    while i0 < n:
        i1 = i0 + 1
        while i1 < n and indptr[i1 + 1] - indptr[i0] <= cap:
            i1 += 1
        _fill_coins(base, csr_edges, indptr[i0], indptr[i1], coins)
        mv, lo = _general_rows(indptr, indices, coef, ratio, along, loads, mode, coins, i0, i1, hop_extra, relays,
                               out, outflow)
        moved += mv
        low = min(low, lo)
        i0 = i1
    return moved, low


@numba.njit(cache=True, nogil=True, inline="always")
def _regular(indices, csr_edges, D, p, q, along, heads, loads, mode, base, coins, out, outflow):
    # Returns (moved, low, narrow): ``narrow`` False sends the step to the general path.
    n = loads.shape[0]
    if mode == RANDOM:
        _fill_heads(base, np.int64(math.ceil(p * 9007199254740992.0)), heads)  # head_threshold(p)
    if mode != RANDOM_FRACTION:
        moved, low, lo, hi = _regular_rows(indices, csr_edges, D, p, q, along, heads, loads, loads, mode, coins, out,
                                           outflow)
        return moved, low, _narrow(lo, hi)
    moved = 0
    low = _INT64_MAX
    lo = _INT64_MAX
    hi = -_INT64_MAX - 1
    rows = max(1, coins.shape[0] // D)
    for i0 in range(0, n, rows):
        i1 = min(n, i0 + rows)
        _fill_coins(base, csr_edges, D * i0, D * i1, coins)
        mv, lw, l, h = _regular_rows(indices[D * i0:D * i1], csr_edges, D, p, q, along, heads, loads, loads[i0:i1],
                                     mode, coins, out[i0:i1], outflow[i0:i1])
        moved += mv
        low = min(low, lw)
        lo = min(lo, l)
        hi = max(hi, h)
    return moved, low, _narrow(lo, hi)


@numba.njit(cache=True, nogil=True, inline="always")
def _rounded_mode(indptr, indices, csr_edges, coef, ratio, along, heads, loads, mode, base, hop_extra, relays, coins,
                  degree, q, out, outflow):
    if degree > 0 and q > 0:
        moved, low, narrow = _regular(indices, csr_edges, degree, coef[0], q, along, heads, loads, mode, base, coins,
                                      out, outflow)
        if narrow:
            return moved, low
    # Any graph, or a step whose loads span 2**29 or more: the exact integer arithmetic.
    return _general(indptr, indices, csr_edges, coef, ratio, along, loads, mode, base, hop_extra, relays, coins, out,
                    outflow)


@numba.njit(cache=True, nogil=True)
def rounded_step(indptr, indices, csr_edges, coef, ratio, along, heads, loads, mode, key, step, hop_extra, coins,
                 degree, q, out, outflow):
    """One rounded-diffusion step (Sec. 4), per node over its CSR row; returns (token-hops, min new load).

    ``mode``: FLOOR, CEIL, RANDOM (coin=pij), RANDOM_FRACTION (coin=fraction) or ORIENTED.
    ``coef``: ``P_ij`` per CSR slot, or one number for all; ``ratio``: the same as int64 fractions
    ``(num, den)`` per row (:func:`tokendist.protocols.diffusion._diffusivity.coefficient_ratios`), or empty
    (shape (0, 2)) when every ``P_ij`` is a unit fraction; the general path rounds in exact
    integers for any int64 loads. ``along`` (oriented only, else empty):
    int8 per CSR slot, 1 when the slot's edge points away from its row node (the sender then
    rounds up). The coin of edge e in this step is ``counter_uniform(key, step, e)``: on the
    regular path with coin=pij it is drawn once per edge into ``heads`` (uint8 per edge, HEAD
    flags; else it may be empty), otherwise once per CSR slot in blocks of ``coins.shape[0]``
    slots (random only, else empty). ``hop_extra[k]`` is 1 for an
    edge of H carried over two real edges (Case 2; empty when there is none). ``degree`` D > 0
    and ``q`` > 0 select the regular path (every row has D slots, ``P_ij = 1/q``), else 0; a
    step whose loads span 2**29 or more runs on the general path.
    """
    base = np.uint64(0)
    if mode == RANDOM or mode == RANDOM_FRACTION:
        base = _step_base(key, step)
    relays = hop_extra.shape[0] > 0
    # Every call below passes constants, so that each inlined copy keeps only its own rounding
    # (and the relay bookkeeping only where Case 2 needs it).
    if mode == FLOOR:
        return _rounded_mode(indptr, indices, csr_edges, coef, ratio, along, heads, loads, FLOOR, base, hop_extra,
                             False, coins, degree, q, out, outflow)
    if mode == CEIL:
        return _rounded_mode(indptr, indices, csr_edges, coef, ratio, along, heads, loads, CEIL, base, hop_extra,
                             False, coins, degree, q, out, outflow)
    if mode == RANDOM:
        return _rounded_mode(indptr, indices, csr_edges, coef, ratio, along, heads, loads, RANDOM, base, hop_extra,
                             False, coins, degree, q, out, outflow)
    if mode == RANDOM_FRACTION:
        return _rounded_mode(indptr, indices, csr_edges, coef, ratio, along, heads, loads, RANDOM_FRACTION, base,
                             hop_extra, False, coins, degree, q, out, outflow)
    if relays:
        # Case 2 graphs are not regular in H: the general path only.
        return _general(indptr, indices, csr_edges, coef, ratio, along, loads, ORIENTED, base, hop_extra, True, coins,
                        out, outflow)
    return _rounded_mode(indptr, indices, csr_edges, coef, ratio, along, heads, loads, ORIENTED, base, hop_extra, False,
                         coins, degree, q, out, outflow)


# ---------------------------------------------------------------------- offset-stencil paths
# On a graph with an offset stencil (tokendist.graphs._stencil: tori, rings) the nodes of each run
# [starts[r], ends[r]) have the neighbours i + lower[k], then i + upper[k], in their CSR order.
# The stencil kernels below walk those rows with the offsets (no CSR index read, a few contiguous
# streams that LLVM vectorises) and every other row with the regular path's code; each row does
# the arithmetic of the CSR kernel in the same order, so the results are bit for bit the same.
# * The offsets are numba tuples (``lower``, ``upper`` separately): their length is a compile-time
#   constant, the slot loops unroll and the offsets live in registers (an offsets array, or one
#   tuple split at a run-time point, measured 2-4x slower in the lead's prototype).
# * Every index is cast to uint64 (``_U``): numba then emits no negative-index wrap.
# * The continuous kernel's ``moved`` is a sequential float sum, which LLVM does not vectorise
#   (no reassociation without fastmath, and fastmath would change the bits): the run loop writes
#   out and outflow, a second loop over the same run (in L1) adds the outflows in row order.
_U = np.uint64


@numba.njit(cache=True, nogil=True, inline="always")
def _diffuse_row(indices, coef, diag, loads, D, i, out, outflow, scalar, same_diag):
    # One row of _diffuse_regular (same arithmetic, same order); returns what the row sends.
    wi = loads[i]
    base = D * i
    s = 0.0
    sent = 0.0
    for k in range(base, base + D):
        wj = loads[indices[k]]
        a = coef[0] if scalar else coef[k]
        s += a * wj
        sent += a * max(wi - wj, 0.0)
    out[i] = s + (diag[0] if same_diag else diag[i]) * wi
    outflow[i] = sent
    return sent


@numba.njit(cache=True, nogil=True, inline="always")
def _diffuse_runs(indices, coef, diag, loads, D, starts, ends, lower, upper, out, outflow, scalar, same_diag):
    n = loads.shape[0]
    nl = len(lower)
    ds = nl + len(upper)  # == D, but a compile-time constant: the slot reads become fixed strides
    moved = 0.0
    prev = 0
    for r in range(starts.shape[0]):
        s = starts[r]
        e = ends[r]
        for i in range(prev, s):
            moved += _diffuse_row(indices, coef, diag, loads, D, i, out, outflow, scalar, same_diag)
        for i in range(s, e):
            ui = _U(i)
            wi = loads[ui]
            acc = 0.0
            sent = 0.0
            for k in range(len(lower)):
                wj = loads[_U(i + lower[k])]
                a = coef[0] if scalar else coef[_U(ds * i + k)]
                acc += a * wj
                sent += a * max(wi - wj, 0.0)
            for k in range(len(upper)):
                wj = loads[_U(i + upper[k])]
                a = coef[0] if scalar else coef[_U(ds * i + nl + k)]
                acc += a * wj
                sent += a * max(wi - wj, 0.0)
            out[ui] = acc + (diag[0] if same_diag else diag[ui]) * wi
            outflow[ui] = sent
        for i in range(s, e):  # the float sum apart, so that the loop above vectorises
            moved += outflow[_U(i)]
        prev = e
    for i in range(prev, n):
        moved += _diffuse_row(indices, coef, diag, loads, D, i, out, outflow, scalar, same_diag)
    return moved


@numba.njit(cache=True, nogil=True)
def diffuse_stencil_step(indices, coef, diag, loads, degree, starts, ends, lower, upper, out, outflow):
    """:func:`diffuse_step` on a D-regular graph with an offset stencil; the same results, bit for bit.

    Nodes in the runs ``[starts[r], ends[r])`` read their neighbours at ``i + lower[k]`` then
    ``i + upper[k]`` (tuples of ints; :class:`tokendist.graphs._stencil.Stencil`), every other node
    its CSR row of ``degree`` slots. Each row sums as :func:`diffuse_step` does (Sec. 3.1,
    Equation 1: off-diagonal terms in column order from 0.0, then ``P_ii l_i``), and ``moved``
    adds the outflows in row order, so loads, outflows and ``moved`` are identical to it.
    """
    scalar = coef.shape[0] == 1
    if diag.shape[0] == 1:
        if scalar:
            return _diffuse_runs(indices, coef, diag, loads, degree, starts, ends, lower, upper, out, outflow, True,
                                 True)
        return _diffuse_runs(indices, coef, diag, loads, degree, starts, ends, lower, upper, out, outflow, False, True)
    return _diffuse_runs(indices, coef, diag, loads, degree, starts, ends, lower, upper, out, outflow, scalar, False)


@numba.njit(cache=True, nogil=True, inline="always")
def _shifted(mode, x, off_f, off_c, span, flag):
    # The amount of _regular_rows for one slot: ``flag`` is the HEAD byte (random) or the along
    # byte (oriented), as a float 0/1; see there for why the shifted truncation is exact.
    if mode == FLOOR:
        return _trunc32(x + math.copysign(off_f, x))
    if mode == CEIL:
        return _trunc32(x + math.copysign(off_c, x))
    if mode == RANDOM:
        return _trunc32(x + math.copysign(off_f + span * flag, x))
    return _trunc32(np.floor(x + (off_f + span * flag)))  # ORIENTED


@numba.njit(cache=True, nogil=True, inline="always")
def _pick(k, e0, e1, e2, e3, e4, e5, e6, e7):
    # e_k: with k a constant of an unrolled slot loop this folds to a register (see _rounded_runs).
    if k == 0:
        return e0
    if k == 1:
        return e1
    if k == 2:
        return e2
    if k == 3:
        return e3
    if k == 4:
        return e4
    if k == 5:
        return e5
    if k == 6:
        return e6
    return e7


@numba.njit(cache=True, nogil=True, inline="always")
def _rounded_runs(indices, csr_edges, D, p, q, along, heads, loads, mode, starts, ends, lower, upper, ebase, out,
                  outflow):
    # The regular rounded path (_regular_rows) with the runs' rows on the offsets. Random (coin=pij):
    # slot k of row i reads the HEAD byte of its edge csr_edges[D i + k], which in the runs of
    # affine_edge_runs is ebase[r, k] + nu i: a fixed-stride read. (Reading csr_edges, then
    # gathering the HEAD byte, kept LLVM from vectorising the row loop: 8 against 2.7 ns per
    # edge-step on torus:1000x1000.) The run's ebase row is copied into scalars first: read as
    # eb[k] inside the loop, LLVM reloaded it after every store to out (it may alias) and did
    # not vectorise (8.3 against 3.5 ns per edge-step); ds <= MAX_STENCIL_DEGREE = 8.
    n = loads.shape[0]
    nl = len(lower)
    nu = len(upper)
    ds = nl + nu  # == D, but a compile-time constant: the slot reads become fixed strides
    none = np.empty(0)
    off_f = 0.5 / q
    span = 1.0 - 1.0 / q
    off_c = off_f + span
    moved = 0
    low = _INT64_MAX
    lo_in = _INT64_MAX
    hi_in = -_INT64_MAX - 1
    prev = 0
    for r in range(starts.shape[0] + 1):
        s = starts[r] if r < starts.shape[0] else n
        e = ends[r] if r < starts.shape[0] else n
        if s > prev:  # the rows before the run: the regular path's loop on views (see there)
            k0 = D * prev
            k1 = D * s
            mv, lw, l, h = _regular_rows(indices[k0:k1], csr_edges[k0:k1], D, p, q,
                                         along[k0:k1], heads, loads, loads[prev:s],
                                         mode, none, out[prev:s], outflow[prev:s])
            moved += mv
            low = min(low, lw)
            lo_in = min(lo_in, l)
            hi_in = max(hi_in, h)
        if e > s:
            eb = ebase[r] if mode == RANDOM else ebase[0]
            e0 = eb[0]
            e1 = eb[1] if ds > 1 else 0
            e2 = eb[2] if ds > 2 else 0
            e3 = eb[3] if ds > 3 else 0
            e4 = eb[4] if ds > 4 else 0
            e5 = eb[5] if ds > 5 else 0
            e6 = eb[6] if ds > 6 else 0
            e7 = eb[7] if ds > 7 else 0
            for i in range(s, e):
                ui = _U(i)
                wi = loads[ui]
                lo_in = min(lo_in, wi)
                hi_in = max(hi_in, wi)
                delta = 0
                sent = 0
                for k in range(len(lower)):
                    slot = _U(ds * i + k)
                    flag = 0.0
                    if mode == RANDOM:
                        flag = np.float64(heads[_U(_pick(k, e0, e1, e2, e3, e4, e5, e6, e7) + nu * i)])
                    elif mode == ORIENTED:
                        flag = np.float64(along[slot])
                    a = _shifted(mode, _diff32(wi, loads[_U(i + lower[k])]) * p, off_f, off_c, span, flag)
                    delta -= a
                    sent += max(a, 0)
                for k in range(len(upper)):
                    flag = 0.0
                    if mode == RANDOM:
                        flag = np.float64(heads[_U(_pick(nl + k, e0, e1, e2, e3, e4, e5, e6, e7) + nu * i)])
                    elif mode == ORIENTED:
                        flag = np.float64(along[_U(ds * i + nl + k)])
                    a = _shifted(mode, _diff32(wi, loads[_U(i + upper[k])]) * p, off_f, off_c, span, flag)
                    delta -= a
                    sent += max(a, 0)
                new = wi + delta
                out[ui] = new
                outflow[ui] = sent
                moved += sent
                low = min(low, new)
        prev = e
    return moved, low, _narrow(lo_in, hi_in)


@numba.njit(cache=True, nogil=True)
def rounded_stencil_step(indices, csr_edges, p, q, along, heads, loads, mode, key, step, degree, starts, ends, lower,
                         upper, ebase, out, outflow):
    """The regular path of :func:`rounded_step` on a graph with an offset stencil; returns (moved, low, narrow).

    For FLOOR, CEIL, RANDOM (coin=pij) and ORIENTED on a ``degree``-regular graph with
    ``P_ij = p = 1/q`` and no relayed edges. Nodes in the runs ``[starts[r], ends[r])`` read
    their neighbours at ``i + lower[k]`` then ``i + upper[k]`` (tuples; their per-slot data at
    slot ``degree * i + k``), every other node its CSR row, with the arithmetic of the regular
    path; the coin of edge e is ``counter_uniform(key, step, e)`` (HEAD bytes per edge, as
    there). RANDOM needs the runs of :func:`tokendist.graphs._stencil.affine_edge_runs`
    (``starts``, ``ends``, ``ebase``); the other modes take the stencil's runs and ignore ``ebase``
    (pass an int64 ``np.zeros((1, D))``).
    When ``narrow`` is False (the loads span 2**29 or more) the outputs are not valid:
    the caller redoes the step with :func:`rounded_step` on the general path (``q = 0``).
    """
    if mode == RANDOM:
        _fill_heads(_step_base(key, step), np.int64(math.ceil(p * 9007199254740992.0)), heads)
        return _rounded_runs(indices, csr_edges, degree, p, q, along, heads, loads, RANDOM, starts, ends, lower, upper,
                             ebase, out, outflow)
    if mode == FLOOR:
        return _rounded_runs(indices, csr_edges, degree, p, q, along, heads, loads, FLOOR, starts, ends, lower, upper,
                             ebase, out, outflow)
    if mode == CEIL:
        return _rounded_runs(indices, csr_edges, degree, p, q, along, heads, loads, CEIL, starts, ends, lower, upper,
                             ebase, out, outflow)
    return _rounded_runs(indices, csr_edges, degree, p, q, along, heads, loads, ORIENTED, starts, ends, lower, upper,
                         ebase, out, outflow)
