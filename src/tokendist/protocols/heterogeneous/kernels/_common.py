"""What every heterogeneous-family kernel shares: the index cast, the coefficient modes, float bit casts."""

from __future__ import annotations

import numba
import numpy as np
from llvmlite import ir
from numba.core import types
from numba.extending import intrinsic

__all__ = ["COEF_SCALAR", "COEF_NODE", "COEF_EDGE"]

#: Every index is cast to this before it indexes an array: numba wraps negative signed indices
#: (``a[-1]``), three extra instructions per access; with unsigned ones it emits none. Measured
#: 35-45% faster on the SOS loops (sos-iou 10.6 -> 6.2 ns per edge in cache on torus:64x64, 9.1 ->
#: 5.7 on torus:1000x1000).
_U = np.uint64


COEF_SCALAR = 0


COEF_NODE = 1


COEF_EDGE = 2


#: Bit pattern of +inf: every non-negative float64 at or above it in bit order is inf or a NaN.
_INF_BITS = 0x7FF0000000000000


@intrinsic
def _float_bits(typingctx, x):
    """The bits of a float64 as an int64 (a bitcast, no instruction)."""
    def codegen(context, builder, signature, args):
        return builder.bitcast(args[0], ir.IntType(64))
    return types.int64(types.float64), codegen


@intrinsic
def _bits_float(typingctx, b):
    """The float64 with the bits of an int64 (a bitcast, no instruction)."""
    def codegen(context, builder, signature, args):
        return builder.bitcast(args[0], ir.DoubleType())
    return types.float64(types.int64), codegen


#: Exponent and fraction fields and sign bit of a float64's bits.
_EXP_FIELD = 0x7FF0000000000000
_FRAC_FIELD = 0x000FFFFFFFFFFFFF
_SIGN_BIT = -0x8000000000000000
#: :func:`_times` takes a subnormal factor by integers when its fraction is below this (``m B`` then
#: fits in an int64 for a 53-bit ``B``).
_SMALL_SUBNORMAL = 1 << 10


@numba.njit(cache=True, nogil=True, inline="always")
def _times(c, y):
    """``c * y``, the same bits, without feeding the multiplier a subnormal ``y``.

    A multiplication with a subnormal operand or result takes a microcode assist on this
    machine's x86 cores (about 30 ns a lane, against 0.6 ns; additions take none). The SOS flows
    of an edge whose ends' loads have become equal decay as ``(beta - 1)^k y`` into the
    subnormal range, where round to nearest keeps them at a few units of ``2^-1074`` for good:
    ``sos-iou`` on torus:16x16 then spent three quarters of its kernel time in these assists
    (424 of 512 edges, from step 1,950 of the default compare's 10,000). Used by ``sos-iou``'s
    stencil kernels in a run's loop where :func:`_any_subnormal` finds the run settled (on
    normal flows it costs about 1 ns per edge more than the plain product).

    For ``|c|`` in ``[2^-10, 1)`` (the momentum factor ``beta - 1``) and ``y = m 2^-1074``
    subnormal with ``m < 2^10``, the product ``m B 2^-s 2^-1074`` (``|c| = B 2^-s``, ``B`` an
    integer of 53 bits, ``53 <= s <= 62``) is subnormal; IEEE 754 rounds it to the nearest
    multiple of ``2^-1074``, ties to even: ``q = round(m B / 2^s)``, computed exactly in int64,
    and the float's bits are ``sign | q``. Every other ``y`` (normal, zero, inf, NaN, larger
    subnormals) takes the float product. No branch (the loops stay vectorised): the multiplier
    gets ``y``, or where ``y`` is tiny the normal ``+-m`` (the product's sign is then the result's,
    which is why it is computed: with the product unused on tiny lanes, LLVM folded the select
    away and multiplied every lane by ``y`` again).
    """
    cb = _float_bits(c)
    ce = (cb >> 52) & 0x7FF  # biased exponent of c: |c| = (2^52 + frac) 2^(ce - 1075)
    ok = (ce >= 1013) & (ce <= 1022)  # |c| in [2^-10, 1)
    s = 1075 - ce if ok else 53  # (a shift in range either way)
    big = (cb & _FRAC_FIELD) | (1 << 52)
    yb = _float_bits(y)
    m = yb & _FRAC_FIELD
    tiny = ok & ((yb & _EXP_FIELD) == 0) & (m != 0) & (m < _SMALL_SUBNORMAL)
    signed_m = _float_bits(np.float64(m)) | (yb & _SIGN_BIT)  # +-m, normal
    prod = c * _bits_float(signed_m if tiny else yb)
    p = m * big  # < 2^10 2^53
    q = p >> s
    rest = p - (q << s)
    half = np.int64(1) << (s - 1)
    q += np.int64((rest > half) | ((rest == half) & ((q & 1) == 1)))
    exact = _bits_float((_float_bits(prod) & _SIGN_BIT) | q)
    return exact if tiny else prod


@numba.njit(cache=True, nogil=True, inline="always")
def _is_subnormal(v):
    b = _float_bits(v)
    return ((b & _EXP_FIELD) == 0) & ((b & _FRAC_FIELD) != 0)


@numba.njit(cache=True, nogil=True, inline="always")
def _any_subnormal(y, lo, hi):
    """Whether ``y[lo:hi]`` (a run's flows, ``lo < hi``) looks settled in the subnormal range: one of
    four samples spread over it is subnormal. The run's loop then takes ``(beta - 1) y`` by
    :func:`_times`, else by the plain product. Either loop gives the same bits, so a sample that
    misses only costs time; a full scan of the run cost about 1 ns per edge, as much as
    :func:`_times` itself on normal flows, which the plain product saves."""
    q = (hi - lo) // 3
    return (_is_subnormal(y[_U(lo)]) | _is_subnormal(y[_U(lo + q)]) | _is_subnormal(y[_U(hi - 1 - q)])
            | _is_subnormal(y[_U(hi - 1)]))
