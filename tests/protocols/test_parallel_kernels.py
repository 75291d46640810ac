"""Opt-in 2-thread kernels (``threads=2``) of fos, fos-floor and multi-port against the serial ones.

* Kernel level (Hypothesis, random connected graphs, every coefficient mode of the FOS kernels):
  the ``parallel=True`` kernel writes the same loads and outflows as the serial kernel, bit for
  bit; ``moved`` is equal for the integer schemes and within 1e-12 for real FOS (only its global
  sum is added in another order).
* Protocol level: ``simulate`` with ``threads=2`` gives the same final loads and trace as
  ``threads=1``.
"""

import numba
import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

from tokendist import simulate
from tokendist.errors import TokendistError
from tokendist.engine import make_protocol
from tokendist.graphs import make_graph
from tokendist.protocols.heterogeneous.kernels._serial import fos_floor_step, fos_real_step
from tokendist.protocols.heterogeneous.kernels._threaded import fos_floor_step_par, fos_real_step_par, use_threads
from tokendist.protocols.local.kernels._serial import multi_port_step
from tokendist.protocols.local.kernels._threaded import multi_port_step_par

from ..strategies import random_connected_graph


@st.composite
def graph_cases(draw, max_n=40):
    n = draw(st.integers(2, max_n))
    rng = np.random.default_rng(draw(st.integers(0, 2**31)))
    g = random_connected_graph(rng, n, draw(st.integers(0, 3 * n)))
    loads = rng.integers(0, 60, n)
    if draw(st.booleans()):
        loads[int(rng.integers(0, n))] += int(rng.integers(0, 5000))
    return g, loads, rng


def _fos_args(g, rng, mode):
    """Kernel coefficient arguments ``(a0, inv, alpha)`` for ``mode`` (0 scalar, 1 per node, 2 per edge)."""
    inv = 1.0 / (2.0 * np.maximum(g.degrees, 1)) if mode == 1 else np.zeros(0)
    alpha = rng.random(g.m) / (2.0 * max(g.max_degree, 1)) if mode == 2 else np.zeros(0)
    return 1.0 / (2.0 * max(g.max_degree, 1)), inv, alpha


@settings(max_examples=40, deadline=None)
@given(case=graph_cases(), mode=st.sampled_from([0, 1, 2]), unit=st.booleans())
def test_eq3_parallel_fos_kernels_equal_serial(case, mode, unit):
    g, loads, rng = case
    assert use_threads("fos", 2)
    a0, inv, alpha = _fos_args(g, rng, mode)
    # x = w / s: the loads themselves (unit speeds) or a quotient by random speeds.
    x = loads.astype(np.float64) if unit else loads / rng.uniform(1.0, 3.0, g.n)
    args = (g.indptr, g.indices, g.csr_edges, mode, a0, inv, alpha)
    for ser, par, dtype in ((fos_real_step, fos_real_step_par, np.float64),
                            (fos_floor_step, fos_floor_step_par, np.int64)):
        w = loads.astype(dtype)
        out_s, flow_s = np.empty(g.n, dtype), np.empty(g.n, dtype)
        out_p, flow_p = np.full(g.n, -7, dtype), np.full(g.n, -7, dtype)
        moved_s = ser(*args, x, w, out_s, flow_s)
        moved_p = par(*args, x, w, out_p, flow_p)
        np.testing.assert_array_equal(out_p, out_s)
        np.testing.assert_array_equal(flow_p, flow_s)
        if dtype is np.int64:
            assert moved_p == moved_s
        else:
            assert moved_p == pytest.approx(moved_s, rel=1e-12, abs=1e-300)


@settings(max_examples=40, deadline=None)
@given(case=graph_cases(), threshold=st.integers(1, 6))
def test_sec3_2_parallel_multi_port_kernel_equals_serial(case, threshold):
    g, loads, _ = case
    assert use_threads("multi-port", 2)
    w = loads.astype(np.int64)
    out_s, out_p = np.empty(g.n, np.int64), np.full(g.n, -7, np.int64)
    moved_s = multi_port_step(g.u, g.v, w, threshold, out_s)
    moved_p = multi_port_step_par(g.indptr, g.indices, w, threshold, out_p)
    np.testing.assert_array_equal(out_p, out_s)
    assert moved_p == moved_s
    assert out_p.sum() == w.sum()


def test_parallel_kernels_on_a_graph_split_between_threads():
    # Large enough for every thread to get a share of the rows (Hypothesis graphs are small).
    g = make_graph("torus:40x50", seed=1)
    rng = np.random.default_rng(3)
    w = rng.integers(0, 1000, g.n)
    assert use_threads("multi-port", 2)
    out_s, out_p = np.empty(g.n, np.int64), np.empty(g.n, np.int64)
    assert multi_port_step_par(g.indptr, g.indices, w, 9, out_p) == multi_port_step(g.u, g.v, w, 9, out_s) > 0
    np.testing.assert_array_equal(out_p, out_s)
    x = w / rng.uniform(1.0, 3.0, g.n)
    a0, inv, alpha = _fos_args(g, rng, 2)
    out_s, out_p, f_s, f_p = (np.empty(g.n) for _ in range(4))
    args = (g.indptr, g.indices, g.csr_edges, 2, a0, inv, alpha, x, w.astype(np.float64))
    moved = fos_real_step_par(*args, out_p, f_p)
    assert moved == pytest.approx(fos_real_step(*args, out_s, f_s), rel=1e-12)
    np.testing.assert_array_equal(out_p, out_s)
    np.testing.assert_array_equal(f_p, f_s)


@pytest.mark.parametrize("algo,graph,init", [
    ("fos", "torus:12x15", "point:5000"),
    ("fos-floor", "random-regular:200,5", "random:0..200"),
    ("multi-port", "hypercube:7", "point:9000"),
])
def test_threads2_simulate_gives_the_serial_trace(algo, graph, init):
    runs = [simulate(graph, algo, init, seed=5, max_steps=40, params={"threads": k}) for k in (1, 2)]
    a, b = runs
    assert a.steps == b.steps and a.stop_reason == b.stop_reason
    np.testing.assert_array_equal(a.loads, b.loads)
    assert set(a.trace) == set(b.trace)
    for key in a.trace:
        if algo == "fos" and key == "tokens_moved":  # a float sum over threads
            np.testing.assert_allclose(b.trace[key], a.trace[key], rtol=1e-12)
        else:
            np.testing.assert_array_equal(b.trace[key], a.trace[key], err_msg=key)
    assert b.tokens_moved == pytest.approx(a.tokens_moved, rel=1e-12)


@pytest.mark.parametrize("algo", ["fos", "fos-floor", "multi-port"])
def test_threads_below_one_is_a_user_error(algo):
    with pytest.raises(TokendistError, match="threads must be at least 1"):
        make_protocol(algo, {"threads": 0})
    assert numba.config.NUMBA_NUM_THREADS >= 1
