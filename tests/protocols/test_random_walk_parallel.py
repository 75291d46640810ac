"""``random-walk`` (Elsässer, Monien, Schamberger 2006, Sec. 3): the regular-degree phase-1 kernel
and the opt-in ``threads=k`` kernels of both phases against the serial kernels, bit for bit.

* Phase 1 (Hypothesis): on random connected graphs and on regular graphs (ring, torus, hypercube,
  complete, random-regular), with unit speeds, speeds or capacities, ``fos_pair_regular``
  (regular graphs, one coefficient), ``fos_pair_regular_par`` and ``fos_pair_par`` (cut into
  blocks of 1-7 rows) write the same loads, outflows and estimate as ``fos_pair_step`` and return
  the same moved, max error, squared error and max weighted estimate (``==``, not approximately).
  (``fos_pair_step`` itself is checked against the numpy reference in
  test_heterogeneous_random_walk.py.)
* Phase 2 (Hypothesis): ``mrws_step_par`` (two passes over blocks of 1-7 rows, moves per edge
  direction) gives the serial ``mrws_step``'s counts, loads, outflows, need and totals exactly.
* Protocol level: ``threads=2`` against ``threads=1`` and the numpy reference through the switch
  into phase 2: same loads every step, same estimate, phases and report (trace included).
"""

import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

from tokendist.engine import make_protocol
from tokendist.errors import TokendistError
from tokendist.graphs import Graph, make_graph
from tokendist.protocols.heterogeneous.kernels._walk_serial import fos_pair_regular, fos_pair_step, mrws_step
from tokendist.protocols.heterogeneous.kernels._walk_threaded import fos_pair_par, fos_pair_regular_par, mrws_step_par
from tokendist.graphs._model import unsigned_view
from tokendist.kernels import run_parallel

from ..strategies import random_connected_graph

REGULAR = ["ring:9", "torus:4x6", "torus:3x3", "hypercube:4", "complete:6", "random-regular:20,3"]


def _coefs(p, g):
    """The protocol's kernel coefficients ``(a0, inv, deg, caps)`` (None for the unused ones)."""
    a0, inv, deg, caps = p._graph_state(g)
    return a0, (inv if inv.shape[0] else None), (deg if caps.shape[0] else None), (caps if caps.shape[0] else None)


def _run(kernel, g, loads, est, s, *args, block=None):
    """One call of a phase-1 kernel on fresh copies; returns (results, out, outflow, new estimate)."""
    n = g.n
    w = loads.copy()
    e = est.copy()
    if s is None:
        xw, xe, dst = w, e, np.full(n, np.nan)
    else:
        xw, xe, dst = w / s, e / s, e
    out, outflow = np.full(n, -7, np.int64), np.full(n, -7, np.int64)
    tail = (w, xw, e, xe, dst, out, outflow)
    if kernel in (fos_pair_par, fos_pair_regular_par):
        res = run_parallel(kernel, 2, *args, *tail, block)
    else:
        res = kernel(*args, *tail)
    return res, out, outflow, dst.copy()


def _assert_same(a, b):
    assert a[0] == b[0]  # moved, max error, squared error, max weighted estimate: exact
    for x, y in zip(a[1:], b[1:]):
        np.testing.assert_array_equal(x.view(np.int64), y.view(np.int64))  # same bits (floats too)


@st.composite
def phase1_cases(draw):
    rng = np.random.default_rng(draw(st.integers(0, 2**31)))
    if draw(st.booleans()):
        g = make_graph(draw(st.sampled_from(REGULAR)), seed=int(rng.integers(0, 100)))
    else:
        n = draw(st.integers(2, 40))
        g = random_connected_graph(rng, n, draw(st.integers(0, 3 * n)))
    kind = draw(st.sampled_from(["unit", "speeds", "capacities"]))
    if kind == "speeds":
        g = g.with_speeds(rng.uniform(0.8, 3.0, g.n))
    elif kind == "capacities":
        g = g.with_capacities(rng.uniform(0.5, 2.0, g.m))
    else:
        g = Graph(g.n, g.u, g.v)
    loads = rng.integers(0, 60, g.n).astype(np.int64)
    loads[int(rng.integers(0, g.n))] += int(rng.integers(0, 5000))
    # An estimate some steps into phase 1: the loads plus real noise (rows see non-integer values).
    est = loads + rng.normal(0, 3, g.n)
    return g, loads, est, draw(st.integers(1, 7))


@settings(max_examples=60, deadline=None)
@given(phase1_cases())
def test_sec3_phase1_regular_and_parallel_kernels_equal_general_kernel(case):
    g, loads, est, block = case
    p = make_protocol("random-walk", {"c": "2"})
    p.reset(g, loads.copy(), np.random.default_rng(0))
    a0, inv, deg, caps = _coefs(p, g)
    s = None if p._unit_speeds else p._s
    c, ssum, total = 2.0, p._ssum, p._total
    ix = unsigned_view(g.indices)
    assert ix.dtype == np.uint32
    ref = _run(fos_pair_step, g, loads, est, s, g.indptr, ix, g.csr_edges, a0, inv, deg, caps, c, s, ssum, total)
    D = p._regular
    if caps is None and inv is None and g.n > 0 and np.all(g.degrees == g.degrees[0]):
        assert D == g.degrees[0]  # every regular graph with one coefficient takes the regular path
    if D:
        _assert_same(_run(fos_pair_regular, g, loads, est, s, ix, D, a0, s, ssum, total), ref)
        _assert_same(_run(fos_pair_regular_par, g, loads, est, s, ix, D, a0, s, ssum, total, block=block), ref)
    par = _run(fos_pair_par, g, loads, est, s, g.indptr, ix, g.csr_edges, a0, inv, deg, caps, c, s, ssum, total,
               block=block)
    _assert_same(par, ref)


@settings(max_examples=40, deadline=None)
@given(phase1_cases(), st.integers(0, 2**40), st.integers(0, 500))
def test_theorem2_parallel_walk_step_equals_serial(case, key, step):
    g, loads, _, block = case
    rng = np.random.default_rng(key % 1000)
    p = make_protocol("random-walk", {"c": "2"})
    p.reset(g, loads.copy(), np.random.default_rng(0))
    coefs = p._graph_state(g)
    n = g.n
    marked = rng.integers(0, 6, n) * (rng.random(n) < 0.5)
    negative = rng.integers(0, 6, n) * (rng.random(n) < 0.5)
    w = rng.integers(0, 4, n).astype(np.int64)  # small loads: overdraws happen
    outs = []
    for par in (False, True):
        m2, n2 = marked.astype(np.int64), negative.astype(np.int64)
        new_m, new_n, need = (np.full(n, -3, np.int32) for _ in range(3))
        out, outflow = np.full(n, -7, np.int64), np.full(n, -7, np.int64)
        if par:
            dm, dn = np.full(2 * g.m, 99, np.int32), np.full(2 * g.m, 99, np.int32)  # dirty scratch
            res = run_parallel(mrws_step_par, 2, g.indptr, unsigned_view(g.indices), g.csr_edges, *coefs, 2.0, p._s, key,
                               step, m2, n2, new_m, new_n, w, out, outflow, need, dm, dn, g.max_degree, block)
        else:
            net = np.zeros(g.m, np.int32)
            res = mrws_step(g.indptr, g.indices, g.csr_edges, g.u, g.v, *coefs, 2.0, p._s, key, step, m2, n2,
                            new_m, new_n, w, out, outflow, need, net, np.empty(max(g.max_degree, 1)))
        outs.append((tuple(int(x) for x in res), m2, n2, out, outflow, need))
    (ra, *a), (rb, *b) = outs
    assert ra == rb
    for x, y in zip(a, b):
        np.testing.assert_array_equal(x, y)


def _lockstep(spec, loads, params, steps):
    """threads=2, threads=1 and kernel=numpy side by side: every step's loads equal; the estimate
    and trace of threads=2 and threads=1 equal bit for bit."""
    g = make_graph(spec)
    protos = [make_protocol("random-walk", {**params, **extra})
              for extra in ({"threads": "2"}, {"threads": "1"}, {"kernel": "numpy"})]
    for p in protos:
        p.reset(g, loads.copy(), np.random.default_rng(3))
    ws = [loads.copy() for _ in protos]
    for t in range(steps):
        outs = [p.step(t, g, w) for p, w in zip(protos, ws)]
        for o in outs[1:]:
            np.testing.assert_array_equal(outs[0].loads, o.loads)
        np.testing.assert_array_equal(outs[0].outflow, outs[1].outflow)
        assert outs[0].moved == outs[1].moved and outs[0].info == outs[1].info
        assert protos[0].phase == protos[1].phase == protos[2].phase
        if protos[0].phase == 1:
            np.testing.assert_array_equal(protos[0].estimate.view(np.int64), protos[1].estimate.view(np.int64))
        ws = [o.loads.copy() for o in outs]
    r2, r1 = protos[0].report(), protos[1].report()
    assert r2 == r1  # series included: the l2 trace is the same bits
    return protos[0]


@pytest.mark.parametrize("spec,speeds,switch", [("torus:40x40", False, "step"), ("torus:6x6", True, "error"),
                                                ("lps:5,13", False, "error")])
def test_sec3_threads2_protocol_equals_serial_through_both_phases(spec, speeds, switch):
    # torus:40x40: 1600 nodes, two parallel blocks on the regular path (switch at step 60: its
    # estimate needs thousands of steps to reach a small error); lps:5,13 is 6-regular with 2184
    # nodes; the speeds case runs the in-place estimate path with non-unit weights.
    g = make_graph(spec)
    rng = np.random.default_rng(11)
    loads = rng.integers(0, 20, g.n).astype(np.int64)
    loads[0] += 500
    params = {"switch": switch, "switch_tol": "1e-3", "switch_step": "60"}
    if speeds:
        # Speeds are a graph attribute: run on a graph with speeds through a spec-free lockstep.
        gs = g.with_speeds(rng.uniform(0.8, 1.2, g.n))
        ps = [make_protocol("random-walk", {**params, "threads": k}) for k in ("2", "1")]
        for p in ps:
            p.reset(gs, loads.copy(), np.random.default_rng(3))
        w2, w1 = loads.copy(), loads.copy()
        for t in range(300):
            a, b = ps[0].step(t, gs, w2), ps[1].step(t, gs, w1)
            np.testing.assert_array_equal(a.loads, b.loads)
            w2, w1 = a.loads.copy(), b.loads.copy()
        assert ps[0].report() == ps[1].report() and ps[0].switch_at is not None
        return
    p = _lockstep(spec, loads, params, 300)
    assert p.switch_at is not None  # the run went through the switch into phase 2


def test_threads_must_be_positive():
    p = make_protocol("random-walk", {"threads": "0"})
    with pytest.raises(TokendistError, match="threads"):
        p.reset(make_graph("ring:5"), np.ones(5, dtype=np.int64), np.random.default_rng(0))
