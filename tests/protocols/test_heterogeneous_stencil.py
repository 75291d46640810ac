"""Offset-stencil paths of fos, fos-floor, sos and sos-iou against the CSR kernels, bit for bit.

* Each stencil kernel against its CSR kernel (``COEF_SCALAR``) on small tori and rings with a forced
  stencil (``find_stencil(g, min_coverage=0.0)``), over random loads, speeds, flows, IOUs and
  exception bits: loads, outflows, ``moved``, flows, IOUs and bits ``np.array_equal``.
* The lower edge ids the SOS stencil kernels compute, ``e_s + U (i - s) + delta[k]``, against
  ``csr_edges`` row by row (a naive loop).
* The protocols (which pick the stencil path by themselves on torus:8x8, torus:12x12, ring:N)
  against the same protocols on a copy of the graph without a stencil, step by step.
"""

import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

from tokendist.engine import make_protocol
from tokendist.graphs import make_graph
from tokendist.graphs._stencil import find_stencil, lower_edge_runs
from tokendist.protocols.heterogeneous.kernels._iou import _DENSE_EXCEPTIONS, _count_bits, _iou_settle_run, _pay_run, _run_upper
from tokendist.protocols.heterogeneous.kernels._serial import fos_floor_step, fos_real_step, sos_iou_step, sos_real_step
from tokendist.protocols.heterogeneous.kernels._stencil import fos_floor_stencil, fos_real_stencil, sos_iou_stencil, sos_real_stencil

from .lockstep import assert_same_steps

# Two offset shapes, (2, 2) and (1, 1): each further shape compiles the four kernels again
# (about 8 s with a cold numba cache).
SPECS = ["torus:6x6", "torus:5x7", "torus:8x8", "torus:12x12", "ring:7", "ring:16"]
_Z = np.zeros(0)


def _forced(spec):
    g = make_graph(spec)
    s = find_stencil(g, min_coverage=0.0)
    assert s is not None
    return g, s


def _same(a, b):
    return all(np.array_equal(p, q) for p, q in zip(a, b))


def _bits(rng, m, density):
    """Exception bits of ``m`` edges, each set with probability ``density``, the padding bits too."""
    return np.packbits(rng.random(8 * ((m + 7) // 8)) < density, bitorder="little")


@settings(max_examples=25, deadline=None)
@given(spec=st.sampled_from(SPECS), seed=st.integers(0, 2**31), speeds=st.booleans())
def test_eq3_fos_stencil_kernels_equal_csr_kernels(spec, seed, speeds):
    g, s = _forced(spec)
    n, rng = g.n, np.random.default_rng(seed)
    a0 = 1.0 / (2.0 * s.degree)
    args = (g.indptr, g.indices)
    runs = (s.starts, s.ends, s.lower, s.upper)
    w = rng.random(n) * 10.0 ** rng.integers(0, 6)
    x = w / rng.uniform(0.5, 3.0, n) if speeds else w
    o1, f1, o2, f2 = (np.empty(n) for _ in range(4))
    m1 = fos_real_step(*args, g.csr_edges, 0, a0, _Z, _Z, x, w, o1, f1)
    m2 = fos_real_stencil(*args, *runs, a0, x, w, o2, f2)
    assert m1 == m2 and _same((o1, f1), (o2, f2))
    wi = rng.integers(0, 10 ** int(rng.integers(1, 7)), n)
    xi = wi / rng.uniform(0.5, 3.0, n) if speeds else wi
    o1, f1, o2, f2 = (np.empty(n, np.int64) for _ in range(4))
    m1 = fos_floor_step(*args, g.csr_edges, 0, a0, _Z, _Z, xi, wi, o1, f1)
    m2 = fos_floor_stencil(*args, *runs, a0, xi, wi, o2, f2)
    assert m1 == m2 and _same((o1, f1), (o2, f2))


@settings(max_examples=25, deadline=None)
@given(spec=st.sampled_from(SPECS), seed=st.integers(0, 2**31), speeds=st.booleans(), first=st.booleans())
def test_eq4_sos_stencil_kernel_equals_csr_kernel(spec, seed, speeds, first):
    g, s = _forced(spec)
    n, m, rng = g.n, g.m, np.random.default_rng(seed)
    a0 = 1.0 / (2.0 * s.degree)
    starts, ends, delta = lower_edge_runs(s, g.csr_edges)
    w = rng.random(n) * 1000.0
    x = w / rng.uniform(0.5, 3.0, n) if speeds else w
    beta = float(rng.uniform(1.0, 1.99))
    flow1 = rng.normal(0.0, 50.0, m)
    flow2 = flow1.copy()
    o1, f1, o2, f2 = (np.empty(n) for _ in range(4))
    m1 = sos_real_step(g.indptr, g.indices, g.csr_edges, 0, a0, _Z, _Z, beta, first, x, w, flow1, o1, f1)
    m2 = sos_real_stencil(g.indptr, g.indices, g.csr_edges, starts, ends, s.lower, s.upper, delta, a0, beta, first,
                          x, w, flow2, o2, f2)
    assert m1 == m2 and _same((o1, f1, flow1), (o2, f2, flow2))


@settings(max_examples=40, deadline=None)
@given(spec=st.sampled_from(SPECS), seed=st.integers(0, 2**31), speeds=st.booleans(), first=st.booleans(),
       owed_stored=st.booleans(), has_exc=st.booleans(), pay_iou=st.booleans(), density=st.sampled_from([0.04, 0.5]))
def test_theorem1_sos_iou_stencil_kernel_equals_csr_kernel(spec, seed, speeds, first, owed_stored, has_exc, pay_iou,
                                                           density):
    # Small loads and large flows: many short nodes, so the in-row payments run on run rows too.
    # Exception bits sparse or dense: a run saves its exceptions, or keeps them in its loop when
    # more than one edge in _DENSE_EXCEPTIONS is one (the two paths of _run_upper).
    g, s = _forced(spec)
    n, m, rng = g.n, g.m, np.random.default_rng(seed)
    a0 = 1.0 / (2.0 * s.degree)
    starts, ends, delta = lower_edge_runs(s, g.csr_edges)
    w = rng.integers(0, 8, n)
    x = w / rng.uniform(0.5, 3.0, n) if speeds else w
    beta = float(rng.uniform(1.0, 1.99))
    yhat, iou = rng.normal(0.0, 3.0, m), rng.normal(0.0, 2.0, m)
    bits = _bits(rng, m, density if has_exc else 0.0)
    results = []
    for stencil in (False, True):
        y, io, b = yhat.copy(), iou.copy(), bits.copy()
        out, owe = np.zeros(n, np.int64), np.empty(n)
        tail = (beta, first, owed_stored, has_exc, b, pay_iou, x, w, y, io, out, owe)
        if stencil:
            r = sos_iou_stencil(g.indptr, g.indices, g.csr_edges, starts, ends, s.lower, s.upper, delta, a0, *tail)
        else:
            r = sos_iou_step(g.indptr, g.indices, g.csr_edges, 0, a0, _Z, _Z, *tail)
        results.append((r, y, io, b, out, owe))
    (r1, *a1), (r2, *a2) = results
    assert r1 == r2
    assert _same(a1, a2)


def _no_stencil(g):
    g.__dict__["stencil"] = None  # the cached property, answered: the protocol takes the CSR kernels
    return g


@pytest.mark.parametrize("name", ["fos", "fos-floor", "sos", "sos-iou"])
@pytest.mark.parametrize("spec,speeds", [("torus:8x8", False), ("torus:12x12", True), ("ring:16", False)])
def test_eq3_eq4_protocol_stencil_path_equals_csr_path(name, spec, speeds):
    rng = np.random.default_rng(7)
    g = make_graph(spec)
    if speeds:  # x = w / s is a buffer, not the loads; the coefficients stay scalar (regular graph)
        g = g.with_speeds(rng.uniform(1.0, 3.0, g.n))
    h = _no_stencil(g.with_speeds(g.speeds) if speeds else make_graph(spec))
    assert g is not h and g.stencil is not None and h.stencil is None
    params = {"kernel": "numba", "speed_scale": "min"} if speeds else {"kernel": "numba"}
    fast, ref = make_protocol(name, params), make_protocol(name, params)
    loads = rng.integers(0, 5, g.n)
    loads[3] += 5000
    w0 = loads.astype(np.float64) if fast.divisible else loads.astype(np.int64)
    assert_same_steps(fast, ref, w0, 30, g, h)
    assert fast._stencil_val is not None and ref._stencil_val is None  # both paths were taken
    if name == "sos-iou":
        assert fast.report() == ref.report()
        assert fast.events > 0 or spec == "ring:16"  # short nodes paid in proportion on the tori


@pytest.mark.parametrize("spec", ["torus:6x6", "torus:12x12"])
def test_theorem1_sos_iou_stencil_largest_iou_ignores_nan_as_csr_kernel(spec):
    # The stencil kernel takes the largest |o - trunc(o)| of a run as an integer max of the bit
    # patterns; a NaN (an infinite o) sends it back to the float comparisons, which never pick one.
    g, s = _forced(spec)
    n, m, rng = g.n, g.m, np.random.default_rng(3)
    starts, ends, delta = lower_edge_runs(s, g.csr_edges)
    w = rng.integers(10**6, 2 * 10**6, n)
    iou = rng.normal(0.0, 0.4, m)
    row = int(starts[-1])
    iou[int(g.csr_edges[s.degree * row + len(s.lower)])] = np.inf  # an upper edge of a run row
    big = []
    for stencil in (False, True):
        # pay_iou false: the node with the infinite amount owed pays in full (no exceptions).
        tail = (1.5, False, False, False, np.zeros((m + 7) // 8, np.uint8), False, w, w, np.zeros(m), iou.copy(),
                np.zeros(n, np.int64), np.empty(n))
        if stencil:
            r = sos_iou_stencil(g.indptr, g.indices, g.csr_edges, starts, ends, s.lower, s.upper, delta, 0.125, *tail)
        else:
            r = sos_iou_step(g.indptr, g.indices, g.csr_edges, 0, 0.125, _Z, _Z, *tail)
        big.append(r[3])
    assert big[0] == big[1] and np.isfinite(big[0]) and 0.0 < big[0] < 1.0


def _run_upper_reference(s, en, e, upper, a0, beta, first, owed_stored, has_exc, bits, x, yhat, iou):
    """Loop (1) of sos_iou_stencil as its docstring defines it, in numpy: yhat and o = y + IOU of the run's upper edges."""
    rows = np.repeat(np.arange(s, en), len(upper))
    nbrs = rows + np.tile(np.asarray(upper), en - s)
    edges = np.arange(e, e + len(upper) * (en - s))
    f = a0 * (x[rows] - x[nbrs])
    y = f if first else beta * f + (beta - 1.0) * yhat[edges]
    p = iou[edges]
    exc = np.unpackbits(bits, bitorder="little")[edges].astype(bool) & has_exc
    keep_p = exc | (not owed_stored)
    yhat, iou = yhat.copy(), iou.copy()
    yhat[edges] = y
    iou[edges] = y + np.where(keep_p, p, p - np.trunc(p))
    return yhat, iou


@settings(max_examples=60, deadline=None)
@given(rows=st.integers(1, 60), upper=st.sampled_from([(1,), (1, 7)]), density=st.sampled_from([0.0, 0.03, 0.3, 1.0]),
       seed=st.integers(0, 2**31), first=st.booleans(), owed_stored=st.booleans(), has_exc=st.booleans())
def test_theorem1_run_upper_takes_every_exception_as_stored(rows, upper, density, seed, first, owed_stored, has_exc):
    # _run_upper's two paths (save and recompute the exceptions; or, when more than one upper
    # edge in _DENSE_EXCEPTIONS is one, a byte per edge and a select in the loop) against the
    # definition: an exception's IOU is used as stored, another's as p - trunc(p) when the
    # amounts owed were stored. Edges outside the run and every bit stay as they were.
    rng = np.random.default_rng(seed)
    s, e = 3, 5
    en = s + rows
    hi = e + len(upper) * rows
    x = rng.integers(0, 50, en + max(upper)).astype(np.float64)
    yhat, iou = rng.normal(0.0, 3.0, hi + 9), rng.normal(0.0, 4.0, hi + 9)
    bits = np.packbits(rng.random(8 * ((hi + 9 + 7) // 8)) < density, bitorder="little")
    a0, beta = 0.125, float(rng.uniform(1.0, 1.99))
    want = _run_upper_reference(s, en, e, upper, a0, beta, first, owed_stored, has_exc, bits, x, yhat, iou)
    y, io, b = yhat.copy(), iou.copy(), bits.copy()
    scratch_idx, scratch_val = np.empty(len(upper) * rows, np.int64), np.empty(len(upper) * rows)
    _run_upper(s, en, e, upper, a0, beta, first, owed_stored, has_exc, b, x, y, io, scratch_idx, scratch_val)
    assert _same((y, io, b), (*want, bits))


@pytest.mark.parametrize("density,dense", [(0.03, False), (0.5, True)])
def test_run_upper_takes_the_dense_path_above_its_threshold(density, dense):
    # The path _run_upper takes for a run of 2000 upper edges, by the threshold it documents
    # (the results are the same either way: the test above).
    rng = np.random.default_rng(1)
    bits = np.packbits(rng.random(2048) < density, bitorder="little")
    assert (_DENSE_EXCEPTIONS * _count_bits(bits, 5, 2005) > 2000) == dense
    assert _count_bits(bits, 5, 2005) == np.unpackbits(bits, bitorder="little")[5:2005].sum()


def _settle_rows(s, en, e, lower, upper, delta, loads, owe, iou, bits, out):
    """(2b) row by row, as sos_iou_stencil does below _DENSE_SHORT: every short row in node order."""
    nu, moved, units, exc_big = len(upper), 0, 0.0, 0.0
    for i in range(s, en):
        if owe[i] > loads[i]:
            paid, dd, dm, units, exc_big = _iou_settle_run(i, e + nu * (i - s), lower, upper, delta, loads[i], owe[i],
                                                           iou, bits, out, units, exc_big, en)
            owe[i], out[i], moved = paid, out[i] + dd, moved + dm
    return moved, units, exc_big


@settings(max_examples=40, deadline=None)
@given(spec=st.sampled_from(["torus:8x8", "torus:12x12", "ring:16"]), seed=st.integers(0, 2**31),
       short=st.floats(0.0, 1.0), density=st.sampled_from([0.0, 0.3]))
def test_theorem1_pay_run_equals_the_rows_paying_one_by_one(spec, seed, short, density):
    # _pay_run (all short rows of a run at once, by edges) against _iou_settle_run row by row on the
    # longest run of the stencil: loads, what each row paid, IOUs, bits and tallies equal. Rows
    # short with probability `short`; the neighbours outside the run are written too (the lower
    # neighbours of the first rows, the upper ones past the run), and bits set before (density)
    # are kept.
    g, st_ = _forced(spec)
    starts, ends, delta = lower_edge_runs(st_, g.csr_edges)
    r = int(np.argmax(ends - starts))
    s, en = int(starts[r]), int(ends[r])
    e = int(np.searchsorted(g.u, s))
    rng = np.random.default_rng(seed)
    n, m, nu, nl = g.n, g.m, len(st_.upper), len(st_.lower)
    loads = rng.integers(0, 20, n)
    owe = np.where(rng.random(n) < short, loads + rng.integers(1, 30, n), rng.integers(0, 20, n) * (rng.random(n) < 0.5))
    owe = owe.astype(np.float64)
    iou = np.trunc(rng.normal(0.0, 6.0, m)) + rng.uniform(-0.99, 0.99, m)
    bits = _bits(rng, m, density)
    out = rng.integers(0, 50, n)
    L = en - s
    results = []
    for dense in (False, True):
        o, io, b, ow = out.copy(), iou.copy(), bits.copy(), owe.copy()
        if dense:
            res = _pay_run(s, en, e, st_.lower, st_.upper, delta, loads, ow, io, b, o, np.empty(L * nu), np.empty(L * nu),
                           np.empty(L * nl), np.empty(L * nl))
        else:
            res = _settle_rows(s, en, e, st_.lower, st_.upper, delta, loads, ow, io, b, o)
        results.append((res, o, io, b, ow))
    (r1, *a1), (r2, *a2) = results
    assert r1 == r2
    assert _same(a1, a2)

