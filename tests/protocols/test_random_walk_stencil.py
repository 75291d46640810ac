"""``random-walk`` (Elsässer, Monien, Schamberger 2006, Sec. 3): the offset-stencil phase-1 kernel.

* Kernel (Hypothesis): ``fos_pair_stencil`` over a stencil (forced with ``min_coverage=0.0`` on
  small tori, rings and a 3-dimensional torus, so that seam rows and runs alternate) writes the
  same loads, outflows and estimate as ``fos_pair_regular`` and returns the same moved, max
  error, squared error and max weighted estimate, bit for bit, with unit speeds and with speeds
  (the in-place estimate path).
* Protocol: ``random-walk`` picks the stencil kernel on tori and rings (serial numba kernel) and
  runs through the switch into phase 2 with the loads, outflows, estimate and report (trace
  included) of the same protocol without the stencil, bit for bit.
"""

import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

from tokendist.engine import make_protocol
from tokendist.graphs import Graph, make_graph
from tokendist.graphs._model import unsigned_view
from tokendist.graphs._stencil import find_stencil
from tokendist.protocols.heterogeneous import _random_walk as rw
from tokendist.protocols.heterogeneous.kernels._walk_serial import fos_pair_regular, fos_pair_stencil

from tokendist.protocols.heterogeneous.kernels._walk_serial import STENCIL_CHUNK

# Small graphs with a stencil: 2- and 3-dimensional tori (wrap-around seams), odd sizes, rings.
# ring:700 has a run of 698 rows: several chunks of STENCIL_CHUNK rows.
STENCIL_GRAPHS = ["torus:6x6", "torus:5x7", "torus:3x4", "torus:8x8", "torus:3x4x5", "ring:9", "ring:4", "ring:700"]


def _phase1(kernel, args, n, loads, est, s):
    """One call of a phase-1 kernel on fresh copies; returns (results, out, outflow, new estimate)."""
    w, e = loads.copy(), est.copy()
    if s is None:
        xw, xe, dst = w, e, np.full(n, np.nan)
    else:
        xw, xe, dst = w / s, e / s, e
    out, outflow = np.full(n, -7, np.int64), np.full(n, -7, np.int64)
    res = kernel(*args(s), w, xw, e, xe, dst, out, outflow)
    return res, out, outflow, dst.copy()


def _inputs(n, rng, noise, speeds):
    """Loads (one node much heavier), an estimate some steps into phase 1 (the loads plus real noise,
    negative flows included) and speeds (or None) for a phase-1 kernel on n nodes."""
    loads = rng.integers(0, 60, n).astype(np.int64)
    loads[int(rng.integers(0, n))] += int(rng.integers(0, 5000))
    est = loads + rng.normal(0, noise, n) if noise else loads.astype(np.float64)
    s = rng.uniform(0.8, 3.0, n) if speeds else None
    return loads, est, s


def _assert_same(a, b):
    assert a[0] == b[0]  # moved, max error, squared error, max weighted estimate: exact
    for x, y in zip(a[1:], b[1:]):
        np.testing.assert_array_equal(x.view(np.int64), y.view(np.int64))  # same bits (floats too)


@settings(max_examples=40, deadline=None)
@given(st.sampled_from(STENCIL_GRAPHS), st.booleans(), st.integers(0, 2**31), st.sampled_from([0.0, 3.0, 1e6]))
def test_sec3_phase1_stencil_kernel_equals_regular_kernel(spec, speeds, seed, noise):
    g = make_graph(spec)
    rng = np.random.default_rng(seed)
    # Each tuple length and speeds/no speeds is a compiled kernel (about 3 s cold): the 3-tuple
    # one runs without speeds only (the speeds code is the same for every tuple length).
    speeds = speeds and spec != "torus:3x4x5"
    stencil = find_stencil(g, min_coverage=0.0)
    assert stencil is not None and stencil.lower and stencil.upper
    assert 0 < stencil.covered <= g.n
    if spec == "ring:700":
        assert stencil.covered > 2 * STENCIL_CHUNK
    n, D = g.n, int(g.degrees[0])
    loads, est, s = _inputs(n, rng, noise, speeds)
    a0, total = 1.0 / (2 * D), float(loads.sum())
    ssum = float(s.sum()) if speeds else float(n)
    ix = unsigned_view(g.indices)
    ref = _phase1(fos_pair_regular, lambda s: (ix, D, a0, s, ssum, total), n, loads, est, s)
    new = _phase1(fos_pair_stencil, lambda s: (ix, stencil.starts, stencil.ends, stencil.lower, stencil.upper, a0,
                                               s, ssum, total), n, loads, est, s)
    _assert_same(new, ref)
    assert (new[1] >= 0).all() and new[1].sum() == loads.sum()  # integer FOS conserves the tokens


def _run(spec, loads, params, steps, use_stencil, speeds=None, monkeypatch=None):
    """``steps`` steps of random-walk (numba, serial); returns the protocol, the loads and outflows
    of every step and the number of calls of the stencil kernel."""
    g = make_graph(spec)
    if speeds is not None:
        g = g.with_speeds(speeds)
    calls = []
    real = rw.fos_pair_stencil

    def spy(*args):
        calls.append(1)
        return real(*args)

    monkeypatch.setattr(rw, "fos_pair_stencil", spy)
    p = make_protocol("random-walk", params)
    p.reset(g, loads.copy(), np.random.default_rng(3))
    if not use_stencil:
        monkeypatch.setattr(p, "_stencil_of", lambda graph: None)
    return p, _steps(p, g, loads, steps), len(calls)


def _assert_same_steps(a, b):
    """Two runs' ``_steps`` records are equal, bit for bit (floats compared as their bits)."""
    assert len(a) == len(b)
    for x, y in zip(a, b):
        for u, v in zip(x, y):
            if isinstance(u, np.ndarray):
                np.testing.assert_array_equal(u.view(np.int64), v.view(np.int64))
            else:
                assert u == v


def _steps(p, g, loads, steps):
    """Run ``steps`` steps of the reset protocol ``p``; each step's loads, outflows, moved, info and
    (in phase 1) estimate."""
    w, seen = loads.copy(), []
    for t in range(steps):
        o = p.step(t, g, w)
        seen.append((o.loads.copy(), o.outflow.copy(), o.moved, dict(o.info),
                     p.estimate.copy() if p.phase == 1 else None))
        w = o.loads.copy()
    return seen


@pytest.mark.parametrize("spec,speeds,switch", [("torus:12x12", False, "error"), ("torus:8x8", True, "error"),
                                                ("ring:300", True, "step"), ("torus:10x10x10", False, "local")])
def test_sec3_protocol_with_stencil_equals_without_through_both_phases(spec, speeds, switch, monkeypatch):
    g = make_graph(spec)
    assert g.stencil is not None
    rng = np.random.default_rng(5)
    loads = rng.integers(0, 20, g.n).astype(np.int64)
    loads[0] += 700
    s = rng.uniform(0.8, 1.2, g.n) if speeds else None
    params = {"switch": switch, "switch_tol": "1e-2", "switch_step": "40"}
    p1, a, calls = _run(spec, loads, params, 400, True, s, monkeypatch)
    p0, b, none = _run(spec, loads, params, 400, False, s, monkeypatch)
    assert calls > 0 and none == 0  # the stencil kernel ran (from the second phase-1 step on)
    assert p1.switch_at is not None and p1.switch_at == p0.switch_at  # through the switch into phase 2
    assert calls == p1.switch_at - 1
    _assert_same_steps(a, b)
    assert p1.report() == p0.report()  # series included: the l2 trace is the same bits


def test_sec3_stencil_lookup_static_dynamic_and_stencil_free_graphs(monkeypatch):
    # Static graph: the stencil kernel from the second step, or from the first when the graph has
    # already computed its stencil. A new graph object every step (a dynamic run) never looks the
    # stencil up; a hypercube has none.
    loads = np.arange(64, dtype=np.int64)
    real = rw.fos_pair_stencil
    for spec, fresh, cached, expected in (("torus:8x8", False, False, 4), ("torus:8x8", False, True, 5),
                                          ("torus:8x8", True, False, 0), ("hypercube:6", False, False, 0)):
        calls = []
        monkeypatch.setattr(rw, "fos_pair_stencil", lambda *a: calls.append(1) or real(*a))
        p = make_protocol("random-walk", {"switch": "step", "switch_step": "10"})
        g = make_graph(spec)
        if cached:
            assert g.stencil is not None
        p.reset(g, loads.copy(), np.random.default_rng(0))
        w = loads.copy()
        for t in range(5):
            gt = Graph(g.n, g.u, g.v) if fresh else g
            w = p.step(t, gt, w).loads.copy()
        assert len(calls) == expected, (spec, fresh, cached)
        if fresh:
            assert p._st is False  # never looked up
