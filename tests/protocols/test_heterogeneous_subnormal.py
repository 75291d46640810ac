"""SOS flows in the subnormal range: ``_times`` against the float product, the kernels against the references.

* :func:`~tokendist.protocols.heterogeneous.kernels._common._times` (``c * y`` with a subnormal
  ``y`` taken by integers) against numpy's ``c * y``, bit for bit: a Hypothesis property and every
  small subnormal with factors whose products fall on ties.
* The stencil kernels (``sos-iou``'s uses it) and the CSR kernels on flows that are partly
  subnormal: against each other, and their flows against eq. (4) in numpy.
* ``sos-iou`` and ``sos`` on torus:16x16 (the default compare's scenario) through the step where
  their flows become subnormal: the numba path against the numpy reference, step by step, loads,
  moves and state keys (``sos-iou``'s key from :func:`._sos_readings.shadow_step`).
"""

import numba
import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

from tokendist.engine import make_loads, make_protocol
from tokendist.engine._cycles import state_bytes
from tokendist.graphs import make_graph
from tokendist.graphs._stencil import find_stencil, lower_edge_runs
from tokendist.protocols.heterogeneous.kernels._common import _SMALL_SUBNORMAL, _times
from tokendist.protocols.heterogeneous.kernels._serial import sos_iou_step, sos_real_step
from tokendist.protocols.heterogeneous.kernels._stencil import sos_iou_stencil, sos_real_stencil

_Z = np.zeros(0)
_TINY = np.finfo(np.float64).tiny  # the smallest normal float64, 2^-1022


@numba.njit(cache=True)
def _times_all(c, y, out):
    for i in range(y.shape[0]):
        out[i] = _times(c, y[i])


def _bits(a):
    return np.asarray(a, dtype=np.float64).view(np.int64)


def _assert_products(c, y):
    got = np.empty_like(y)
    _times_all(c, y, got)
    want = c * y
    same = (_bits(got) == _bits(want)) | (np.isnan(got) & np.isnan(want))
    assert same.all(), (c, y[~same][:4], got[~same][:4], want[~same][:4])


def _subnormals(m):
    """``+-m 2^-1074`` for the integers ``m``."""
    m = np.asarray(m, dtype=np.int64)
    return np.concatenate((m.view(np.float64), -(m.view(np.float64))))


@settings(max_examples=200, deadline=None)
@given(c=st.floats(-1.0, 1.0, allow_subnormal=True),
       ys=st.lists(st.one_of(st.integers(0, 2 * _SMALL_SUBNORMAL), st.integers(0, 2**52 - 1),
                             st.integers(0, 2**64 - 1)), min_size=1, max_size=40))
def test_times_is_the_float_product(c, ys):
    # Small subnormals (the integer path), larger ones, and any float64 bit pattern.
    y = np.array(ys, dtype=np.uint64).view(np.float64)
    _assert_products(c, np.concatenate((y, -y)))


@pytest.mark.parametrize("c", [0.5, -0.5, 0.75, -0.75, 0.6748175070340365, -0.3, 2.0**-10, -(2.0**-10) * 1.5,
                               2.0**-11, np.nextafter(1.0, 0.0), 1.0, -1.0, 0.0, -0.0])
def test_times_rounds_subnormal_products_to_nearest_even(c):
    # 0.5 and 0.75 put half of the products m c on ties (ties to even); 2^-10 and below 2^-10,
    # 1 and 0 are the ends of the integer path's range of c (outside it: the float product).
    _assert_products(c, _subnormals(np.arange(0, 2 * _SMALL_SUBNORMAL)))


def _subnormal_count(values):
    return int(((values != 0) & (np.abs(values) < _TINY)).sum())


def _subnormal_flows(rng, m, share):
    """Normal flows, a ``share`` of them replaced by small subnormals (a few units of 2^-1074)."""
    flows = rng.normal(0.0, 3.0, m)
    tiny = rng.random(m) < share
    flows[tiny] = rng.integers(1, 40, tiny.sum()) * 5e-324 * rng.choice([-1.0, 1.0], tiny.sum())
    return flows


@settings(max_examples=20, deadline=None)
@given(spec=st.sampled_from(["torus:6x6", "torus:8x8", "ring:16"]), seed=st.integers(0, 2**31),
       share=st.sampled_from([0.3, 0.9]))
def test_eq4_sos_kernels_on_subnormal_flows(spec, seed, share):
    g = make_graph(spec)
    s = find_stencil(g, min_coverage=0.0)
    n, m, rng = g.n, g.m, np.random.default_rng(seed)
    a0 = 1.0 / (2.0 * s.degree)
    starts, ends, delta = lower_edge_runs(s, g.csr_edges)
    beta = float(rng.uniform(1.2, 1.99))
    # Equal loads at the ends of many edges (edge 0 among them): F_e = 0 there, and a subnormal
    # y_prev gives a subnormal y = (beta - 1) y_prev (edge 0: 37 (beta - 1) >= 7.4 units of 2^-1074).
    w = rng.integers(5, 7, n).astype(np.float64)
    w[g.v[0]] = w[g.u[0]]
    flow1 = _subnormal_flows(rng, m, share)
    flow1[0] = 37 * 5e-324
    # Eq. (4) in flow form, in numpy (float products on the FPU), edge by edge.
    want = beta * (a0 * (w[g.u] - w[g.v])) + (beta - 1.0) * flow1
    flow2 = flow1.copy()
    o1, f1, o2, f2 = (np.empty(n) for _ in range(4))
    m1 = sos_real_step(g.indptr, g.indices, g.csr_edges, 0, a0, _Z, _Z, beta, False, w, w, flow1, o1, f1)
    m2 = sos_real_stencil(g.indptr, g.indices, g.csr_edges, starts, ends, s.lower, s.upper, delta, a0, beta, False,
                          w, w, flow2, o2, f2)
    assert m1 == m2
    assert np.array_equal(o1, o2) and np.array_equal(f1, f2)
    assert np.array_equal(_bits(flow1), _bits(want)) and np.array_equal(_bits(flow2), _bits(want))
    assert _subnormal_count(flow2) > 0  # (edge 0 at least)

    wi = w.astype(np.int64)
    yhat = _subnormal_flows(rng, m, share)
    yhat[0] = -37 * 5e-324
    want = beta * (a0 * (w[g.u] - w[g.v])) + (beta - 1.0) * yhat
    iou = rng.normal(0.0, 0.3, m)
    results = []
    for stencil in (False, True):
        y, io, bits = yhat.copy(), iou.copy(), np.zeros((m + 7) // 8, np.uint8)
        out, owe = np.zeros(n, np.int64), np.empty(n)
        tail = (beta, False, True, False, bits, True, w, wi, y, io, out, owe)
        if stencil:
            r = sos_iou_stencil(g.indptr, g.indices, g.csr_edges, starts, ends, s.lower, s.upper, delta, a0, *tail)
        else:
            r = sos_iou_step(g.indptr, g.indices, g.csr_edges, 0, a0, _Z, _Z, *tail)
        results.append((r, _bits(y), _bits(io), bits, out, owe))
    (r1, *a1), (r2, *a2) = results
    assert r1 == r2 and all(np.array_equal(p, q) for p, q in zip(a1, a2))
    assert np.array_equal(a1[0], _bits(want)) and _subnormal_count(y) > 0


@pytest.mark.slow
@pytest.mark.parametrize("algo,steps", [("sos-iou", 2100), ("sos", 2050)])
def test_theorem1_kernels_equal_reference_through_subnormal_flows(algo, steps):
    # torus:16x16, random:0..200, seed 0 (tokendist compare's defaults): the flows of most edges
    # become subnormal near step 1,950 and stay so. The numba path (stencil kernel, _times,
    # shadow_step's state key) against the numpy reference (numpy's float products), every step.
    g = make_graph("torus:16x16", seed=0)
    loads = np.asarray(make_loads("random:0..200", g, 0))
    if algo == "sos":
        loads = loads.astype(np.float64)
    fast, ref = make_protocol(algo, {"kernel": "numba"}), make_protocol(algo, {"kernel": "numpy"})
    fast.reset(g, loads.copy(), np.random.default_rng(0))
    ref.reset(g, loads.copy(), np.random.default_rng(0))
    wa, wb = loads.copy(), loads.copy()
    for t in range(steps):
        a, b = fast.step(t, g, wa), ref.step(t, g, wb)
        assert np.array_equal(a.loads, b.loads) and a.moved == b.moved, t
        assert state_bytes(fast.state_key()) == state_bytes(ref.state_key()), t
        wa, wb = a.loads, b.loads
    assert _subnormal_count(fast._prev) > g.m // 2  # the run reached the subnormal flows
    if algo == "sos-iou":  # the key shadow_step wrote is the state's bytes
        assert state_bytes(fast.state_key()) == np.concatenate((fast._prev, fast._iou, fast._shadow)).tobytes()


@pytest.mark.parametrize("asked", [False, True])
def test_sos_iou_state_key_whether_or_not_asked_every_step(asked):
    # The kernel path writes the key's buffer in shadow_step once the engine has asked for a key
    # (small graphs, every step); a protocol never asked (large graphs) writes none, and a key
    # asked for later is the state's bytes all the same.
    g = make_graph("torus:8x8")
    loads = np.asarray(make_loads("random:0..50", g, 1))
    p = make_protocol("sos-iou", {"kernel": "numba"})
    p.reset(g, loads.copy(), np.random.default_rng(0))
    w = loads.copy()
    for t in range(40):
        if asked:
            state_bytes(p.state_key())
        w = p.step(t, g, w).loads
        if asked:
            assert p._state.views is not None
    assert p._state.wanted == asked
    assert state_bytes(p.state_key()) == np.concatenate((p._prev, p._iou, p._shadow)).tobytes()
    w = p.step(40, g, w).loads
    assert state_bytes(p.state_key()) == np.concatenate((p._prev, p._iou, p._shadow)).tobytes()
