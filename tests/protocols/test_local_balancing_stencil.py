"""Ghosh et al. 1995: the offset-stencil kernels of multi-port (Sec. 1.1, 3.2) and DS (Sec. 5).

The stencil kernels (``multi_port_step_stencil``, ``ds_step_nodes_stencil``) walk the runs of a
torus or ring (:mod:`tokendist.graphs._stencil`) without CSR indices and the seams with the
existing rows; they must give the regular row kernels' results bit for bit.

* Kernel level (Hypothesis, tori and rings with stencils forced by ``min_coverage=0``, random
  loads including negative ones and ones past int32, both ``prev`` dtypes, with and without
  outflows): every output array and returned value of the stencil kernels equals the regular
  row kernel's.
* Protocol level: ``simulate`` on tori and rings that get a stencil by default gives the trace of
  the same run with the stencil switched off, and the protocol really takes the stencil path.
"""

import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

from tokendist import simulate
from tokendist.engine import EdgeFailures, make_protocol
from tokendist.graphs import make_graph
from tokendist.graphs._stencil import find_stencil
from tokendist.protocols.local import _rules as _local_balancing
from tokendist.protocols.local.kernels._serial import (INT32_MAX, ds_step_nodes, ds_step_nodes_stencil,
                                                          multi_port_step_regular, multi_port_step_stencil)


@st.composite
def stencil_cases(draw, rings=True):
    """(graph, its forced stencil, loads) on a torus or ring."""
    rng = np.random.default_rng(draw(st.integers(0, 2**31)))
    if not rings or draw(st.booleans()):
        g = make_graph(f"torus:{draw(st.integers(3, 9))}x{draw(st.integers(3, 9))}")
    else:
        g = make_graph(f"ring:{draw(st.integers(3, 30))}")
    s = find_stencil(g, min_coverage=0.0)
    assert s is not None and s.covered > 0
    loads = rng.integers(-10 if draw(st.booleans()) else 0, draw(st.sampled_from([3, 40, 500])), g.n)
    if draw(st.booleans()):  # a load past int32 (the DS flag, int32 prev truncated)
        loads[int(rng.integers(g.n))] += 3 * 2**31
    return g, s, loads.astype(np.int64), rng


@settings(max_examples=40, deadline=None)
@given(case=stencil_cases(), threshold=st.integers(1, 12))
def test_sec3_2_multi_port_stencil_kernel_equals_the_row_kernel(case, threshold):
    g, s, loads, _ = case
    idx = g.indices.view(np.uint32)
    D = int(g.degrees[0])
    a, b = np.full(g.n, -7, np.int64), np.full(g.n, -9, np.int64)
    moved = multi_port_step_regular(idx, D, loads, threshold, a)
    assert multi_port_step_stencil(idx, D, s.starts, s.ends, s.lower, s.upper, loads, threshold, b) == moved
    assert np.array_equal(a, b)


@settings(max_examples=40, deadline=None)
@given(case=stencil_cases(rings=False), threshold=st.integers(1, 12), with_outflow=st.booleans(),
       small=st.booleans())
def test_sec5_ds_stencil_kernel_equals_the_row_kernel(case, threshold, with_outflow, small):
    # Tori only: each (prev dtype, outflow, offsets) combination is a numba compilation of its own;
    # the rings' offsets go through DS in the protocol-level test below.
    g, s, loads, rng = case
    idx = g.indices.view(np.uint32)
    D = int(g.degrees[0])
    prev = loads + rng.integers(-15, 15, g.n)
    if small and np.abs(prev).max() <= INT32_MAX:
        prev = prev.astype(np.int32)
    res = []
    head = (idx, D, s.starts, s.ends, s.lower, s.upper)
    for kernel in (lambda *a: ds_step_nodes(g.indptr, idx, D, *a), lambda *a: ds_step_nodes_stencil(*head, *a)):
        out, nxt = np.full(g.n, -7, np.int64), np.full(g.n, -7, prev.dtype)
        of = np.full(g.n, -7, np.int32) if with_outflow else None
        got = kernel(loads, threshold, prev, nxt, out, of)
        res.append((got, out, nxt, of))
    got0, out0, nxt0, of0 = res[0]
    for got1, out1, nxt1, of1 in res[1:]:
        assert got0 == got1
        assert np.array_equal(out0, out1) and np.array_equal(nxt0, nxt1)
        if with_outflow:
            assert np.array_equal(of0, of1)


def test_stencil_kernels_on_a_torus_with_many_runs_move_tokens():
    # A non-trivial case, checked to exercise both the runs and the seams.
    g = make_graph("torus:12x12")
    s = g.stencil
    assert s is not None and 0 < s.covered < g.n and len(s.starts) > 1
    rng = np.random.default_rng(7)
    w = rng.integers(0, 400, g.n)
    idx = g.indices.view(np.uint32)
    a, b = np.empty(g.n, np.int64), np.empty(g.n, np.int64)
    moved = multi_port_step_regular(idx, 4, w, 9, a)
    assert moved > 0 and multi_port_step_stencil(idx, 4, s.starts, s.ends, s.lower, s.upper, w, 9, b) == moved
    assert np.array_equal(a, b)
    prev = (w + rng.integers(-50, 50, g.n)).astype(np.int32)
    n0, n1 = np.empty(g.n, np.int32), np.empty(g.n, np.int32)
    of0, of1 = np.empty(g.n, np.int32), np.empty(g.n, np.int32)
    got = ds_step_nodes(g.indptr, idx, 4, w, 20, prev, n0, a, of0)
    assert got[0] > 0 and ds_step_nodes_stencil(idx, 4, s.starts, s.ends, s.lower, s.upper, w, 20, prev, n1, b,
                                                 of1) == got
    assert np.array_equal(a, b) and np.array_equal(n0, n1) and np.array_equal(of0, of1)


@pytest.mark.parametrize("graph,algo,init,params,failures", [
    ("torus:8x8", "multi-port", "point:20000", {}, 0.0),
    ("torus:12x12", "multi-port", "random:0..300", {"threshold": 2}, 0.0),
    ("ring:40", "multi-port", "random:0..100", {"threshold": 1}, 0.0),
    ("torus:12x12", "ds", "point:50000", {}, 0.0),
    ("torus:8x8", "ds", "random:0..400", {"estimates": "zero", "threshold": 3}, 0.0),
    ("ring:40", "ds", "random:0..100", {"estimates": "max", "threshold": 1}, 0.0),
    ("torus:12x10", "ds", "random:0..400", {"estimates": "random", "threshold": 4}, 0.0),
    ("torus:8x8", "ds", "point:20000", {"threshold": 5}, 0.3),
])
def test_protocols_with_and_without_the_stencil_give_the_same_trace(monkeypatch, graph, algo, init, params,
                                                                    failures):
    def run():
        return simulate(graph, algo, init, seed=5, max_steps=60, keep_loads_every=1, detect_cycles=False,
                        allow_infeasible=True, dynamics=EdgeFailures(failures) if failures else None,
                        params=params)

    used = []
    real = _local_balancing._stencil_of

    def spy(*args):
        s = real(*args)
        used.append(s is not None)
        return s

    monkeypatch.setattr(_local_balancing, "_stencil_of", spy)
    a = run()
    assert used == [True]  # these graphs get a stencil by default, and the kernels use it
    monkeypatch.setattr(_local_balancing, "_stencil_of", lambda *args: None)
    b = run()
    np.testing.assert_array_equal(a.load_history, b.load_history)
    for key in a.trace:
        np.testing.assert_array_equal(b.trace[key], a.trace[key], err_msg=key)
    assert a.tokens_moved == b.tokens_moved > 0 and a.infeasible_steps == b.infeasible_steps


@pytest.mark.parametrize("graph,algo,params", [
    ("hypercube:5", "multi-port", {}),
    ("torus:8x8", "multi-port", {"kernel": "numpy"}),
    ("torus:8x8", "multi-port", {"threads": 2}),
    ("torus:8x8", "ds", {"kernel": "numpy"}),
    ("random-regular:30,4", "ds", {}),
])
def test_no_stencil_where_it_is_not_used(graph, algo, params):
    # Hypercubes and random regular graphs have none; threads > 1 (the parallel row kernels) and
    # the numpy reference do not look one up.
    proto = make_protocol(algo, params)
    simulate(graph, proto, "point:5000", seed=1, max_steps=3)
    assert proto._stencil is None
