"""Opt-in multi-threaded SOS kernels (``threads=k``) of sos and sos-iou against the serial ones.

* Kernel level (Hypothesis, random connected graphs cut into blocks of 1-7 rows, every coefficient
  mode, unit and random speeds, point loads that make sos-iou overdraw): step by step, the
  ``parallel=True`` kernels write the same loads, outflows, per-edge flows / ``yhat`` / IOUs and
  exception bits as the serial kernels, bit for bit, and return the same values (real ``moved``:
  within 1e-12, as it is summed per block).
* Protocol level, with small blocks: ``threads=2`` against the numpy reference (``kernel=numpy``)
  step by step, with and without edge failures (Sec. 4's dynamic networks), and through
  ``simulate`` against ``threads=1``.
"""

import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

from tokendist import make_graph, simulate
from tokendist.engine import make_protocol
from tokendist.errors import TokendistError
from tokendist.protocols.heterogeneous import _rules as _heterogeneous
from tokendist.protocols.heterogeneous.kernels._serial import sos_iou_step, sos_real_step
from tokendist.protocols.heterogeneous.kernels._threaded import (block_edge_starts, run_blocks, sos_iou_step_par,
                                                         sos_real_step_par, use_threads)

from ..strategies import random_connected_graph
from .test_heterogeneous_kernels import _lockstep, graphs_with_loads


@st.composite
def kernel_cases(draw):
    rng = np.random.default_rng(draw(st.integers(0, 2**31)))
    if draw(st.booleans()):
        g = make_graph(draw(st.sampled_from(["torus:4x5", "hypercube:4", "ring:9", "complete:6"])))
    else:
        n = draw(st.integers(2, 30))
        g = random_connected_graph(rng, n, draw(st.integers(0, 3 * n)))
    loads = rng.integers(0, 60, g.n)
    if draw(st.booleans()):
        loads[int(rng.integers(0, g.n))] += int(rng.integers(0, 5000))
    mode = draw(st.sampled_from([0, 1, 2]))
    a0 = 1.0 / (2.0 * max(g.max_degree, 1))
    inv = 1.0 / (2.0 * np.maximum(g.degrees, 1)) if mode == 1 else np.zeros(0)
    alpha = rng.random(g.m) / (2.0 * max(g.max_degree, 1)) if mode == 2 else np.zeros(0)
    speeds = None if draw(st.booleans()) else rng.uniform(1.0, 3.0, g.n)
    # 64: one block, every short row pays in pass 2; 1: every short row is left to the serial phase.
    return g, loads, (mode, a0, inv, alpha), speeds, draw(st.sampled_from([1, 2, 3, 7, 64])), rng


def _x(w, speeds):
    return w if speeds is None else w / speeds


@settings(max_examples=25, deadline=None)
@given(case=kernel_cases(), beta=st.sampled_from([1.0, 1.5, 1.95]))
def test_eq4_parallel_sos_kernel_equals_serial(case, beta):
    g, loads, coefs, speeds, block, _ = case
    assert use_threads("sos", 2)
    eblock = block_edge_starts(g.u, g.n, block)
    w_s = loads.astype(np.float64)
    w_p = w_s.copy()
    flow_s, flow_p = np.zeros(g.m), np.zeros(g.m)
    for k in range(8):
        out_s, of_s = np.empty(g.n), np.empty(g.n)
        out_p, of_p = np.full(g.n, -7.0), np.full(g.n, -7.0)
        head = (g.indptr, g.indices, g.csr_edges, *coefs, beta, k == 0)
        m_s = sos_real_step(*head, _x(w_s, speeds), w_s, flow_s, out_s, of_s)
        m_p = run_blocks(sos_real_step_par, *head, _x(w_p, speeds), w_p, flow_p, out_p, of_p, block, eblock)
        np.testing.assert_array_equal(out_p, out_s)
        np.testing.assert_array_equal(of_p, of_s)
        np.testing.assert_array_equal(flow_p, flow_s)
        assert m_p == pytest.approx(m_s, rel=1e-12, abs=1e-300)
        w_s, w_p = out_s, out_p


@settings(max_examples=25, deadline=None)
@given(case=kernel_cases(), beta=st.sampled_from([1.5, 1.95]), pay=st.booleans())
def test_theorem1_parallel_sos_iou_kernel_equals_serial(case, beta, pay):
    g, loads, coefs, speeds, block, _ = case
    assert use_threads("sos-iou", 2)
    eblock = block_edge_starts(g.u, g.n, block)
    nbytes = (g.m + 7) // 8
    st_s = [loads.astype(np.int64), np.zeros(g.m), np.zeros(g.m), np.zeros(nbytes, np.uint8), False]
    st_p = [loads.astype(np.int64), np.zeros(g.m), np.zeros(g.m), np.zeros(nbytes, np.uint8), False]
    for k in range(10):
        res = []
        for state, par in ((st_s, False), (st_p, True)):
            w, yhat, iou, bits, has_exc = state
            out, owe = np.zeros(g.n, np.int64), np.full(g.n, -7.0)
            args = (g.indptr, g.indices, g.csr_edges, *coefs, beta, k == 0, k > 0, has_exc, bits, pay,
                    _x(w, speeds), w, yhat, iou, out, owe)
            r = run_blocks(sos_iou_step_par, *args, block, eblock) if par else sos_iou_step(*args)
            state[0], state[4] = out, r[4]
            res.append((r, out, owe))
        (r_s, out_s, owe_s), (r_p, out_p, owe_p) = res
        assert r_p == r_s
        np.testing.assert_array_equal(out_p, out_s)
        np.testing.assert_array_equal(owe_p, owe_s)
        for a, b in zip(st_p[1:4], st_s[1:4]):  # yhat, the amounts owed / IOUs, exception bits
            np.testing.assert_array_equal(a, b)


@pytest.mark.parametrize("name", ["sos", "sos-iou"])
@settings(max_examples=10, deadline=None)
@given(case=graphs_with_loads(), p_fail=st.sampled_from([0.0, 0.3]), block=st.sampled_from([1, 4]))
def test_eq4_threads2_equals_numpy_reference(name, case, p_fail, block):
    # Small blocks, so that these small graphs are cut into many; edge failures change the graph
    # (and its block edge starts) every step.
    g, loads, seed = case
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(_heterogeneous, "SOS_BLOCK", block)
        fast, ref = _lockstep(name, g, loads, seed, p_fail=p_fail, params={"threads": 2})
    assert fast.dropped == ref.dropped


@pytest.mark.parametrize("algo,graph,init", [
    ("sos", "torus:12x15", "point:5000"),
    ("sos-iou", "hypercube:7", "point:9000"),
    ("sos-iou", "random-regular:200,5", "random:0..200"),
])
def test_threads2_simulate_gives_the_serial_trace(algo, graph, init):
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(_heterogeneous, "SOS_BLOCK", 16)
        extra = {"allow_infeasible": True} if algo == "sos" else {}
        a, b = (simulate(graph, algo, init, seed=5, max_steps=60, params={"threads": k}, **extra) for k in (1, 2))
    assert a.steps == b.steps and a.stop_reason == b.stop_reason
    np.testing.assert_array_equal(a.loads, b.loads)
    for key in a.trace:
        if algo == "sos" and key == "tokens_moved":  # a float sum over blocks
            np.testing.assert_allclose(b.trace[key], a.trace[key], rtol=1e-12)
        else:
            np.testing.assert_array_equal(b.trace[key], a.trace[key], err_msg=key)
    if algo == "sos-iou":
        assert a.final == b.final


@pytest.mark.parametrize("algo", ["sos", "sos-iou"])
def test_threads_below_one_is_a_user_error(algo):
    with pytest.raises(TokendistError, match="threads must be at least 1"):
        make_protocol(algo, {"threads": 0})
