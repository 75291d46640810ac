"""The fused numba kernels of the diffusion protocols against their numpy/scipy references.

Subramanian-Scherson (1994): continuous diffusion l(t+1) = P l(t) (Sec. 2, Equation 1) and the four
roundings of line (7) (Sec. 4). ``kernel=numba`` (default) must compute exactly what
``kernel=numpy`` computes: the same integer loads, outflows, moves and stop reasons; for real loads
the same bits (the fused loop sums each row of P in scipy's order), moves to 1e-12.
"""

import numpy as np
import scipy.sparse as sp
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tokendist._random import counter_uniform, stream
from tokendist.engine import make_protocol, simulate
from tokendist.errors import InfeasibleStepError
from tokendist.graphs import make_graph
from tokendist.protocols.diffusion._rules import _counter_uniform_nb

from .test_diffusion import connected_graphs

ROUNDED = ["diffusion-floor", "diffusion-ceil", "diffusion-random", "diffusion-oriented"]


def _outflow(graph, flows):
    pos, neg = np.maximum(flows, 0), np.maximum(-flows, 0)
    return np.bincount(graph.u, weights=pos, minlength=graph.n) + np.bincount(graph.v, weights=neg, minlength=graph.n)


def _split_product(P, b):
    """``P_off @ b + diag(P) * b``: the off-diagonal row sums first, then the diagonal term."""
    off = (sp.triu(P, 1) + sp.tril(P, -1)).tocsr()
    off.sort_indices()
    return off @ b + P.diagonal() * b


@given(st.integers(0, 2**63 - 1), st.integers(0, 2**64 - 1),
       st.lists(st.integers(0, 2**63 - 1), min_size=1, max_size=50))
@settings(max_examples=50, deadline=None)
def test_numba_counter_uniform_equals_the_numpy_one(key, step, index):
    idx = np.array(index, dtype=np.int64)
    fast = _counter_uniform_nb(np.uint64(key), np.uint64(step), idx)
    np.testing.assert_array_equal(fast, counter_uniform(key, step, idx))


@given(connected_graphs(max_n=14), st.integers(0, 2**31), st.sampled_from(["degree", "uniform:1/32", "uniform:1/30"]))
@settings(max_examples=40, deadline=None)
def test_sec2_fused_step_is_bitwise_the_sparse_product(graph, seed, matrix):
    rng = np.random.default_rng(seed)
    loads = rng.uniform(-5, 100, graph.n) * rng.integers(0, 2, graph.n)  # ties (zeros) and negatives
    fast, ref = (make_protocol("diffusion", {"matrix": matrix, "kernel": k}) for k in ("numba", "numpy"))
    fast.reset(graph, loads.copy(), None)
    ref.reset(graph, loads.copy(), None)
    a = b = loads
    for t in range(4):
        sa, sb = fast.step(t, graph, a), ref.step(t, graph, b)
        np.testing.assert_array_equal(sa.loads, sb.loads)
        np.testing.assert_array_equal(sb.loads, _split_product(ref.P, b))
        np.testing.assert_allclose(sb.loads, ref.P @ b, rtol=1e-13, atol=1e-13)
        assert sa.moved == pytest.approx(sb.moved, rel=1e-12, abs=1e-12)
        np.testing.assert_allclose(sa.outflow, _outflow(graph, sb.flows), rtol=1e-12, atol=1e-12)
        a, b = sa.loads, sb.loads.copy()
        assert a is not b


def _pair(algo, params):
    return [make_protocol(algo, {**params, "kernel": k}) for k in ("numba", "numpy")]


@given(connected_graphs(max_n=12), st.integers(0, 2**31), st.sampled_from(ROUNDED),
       st.sampled_from([{}, {"coin": "fraction"}, {"matrix": "uniform:1/3", "min_diag": 1 / 3},
                        {"matrix": "uniform:1/30"}]))
@settings(max_examples=80, deadline=None)
def test_sec4_numba_kernel_equals_the_numpy_reference(graph, seed, algo, params):
    if "coin" in params and algo != "diffusion-random":
        params = {}
    rng = np.random.default_rng(seed)
    loads = rng.integers(-5, 80, graph.n)
    fast, ref = _pair(algo, params)
    try:
        fast.reset(graph, loads.copy(), stream(seed, "protocol"))
    except Exception as exc:  # e.g. uniform:1/3 is not a valid P on this graph: both must refuse
        with pytest.raises(type(exc)):
            ref.reset(graph, loads.copy(), stream(seed, "protocol"))
        return
    ref.reset(graph, loads.copy(), stream(seed, "protocol"))
    relays = fast.h is not graph and bool((fast.relay >= 0).any())
    a = b = loads
    for t in range(5):
        sa, sb = fast.step(t, graph, a), ref.step(t, graph, b)
        np.testing.assert_array_equal(sa.loads, sb.loads)
        np.testing.assert_array_equal(sa.outflow, sb.outflow)
        if relays:
            # The reference counts |net flow| per real edge; the kernel counts token-hops.
            assert sa.moved >= sb.moved
        else:
            assert sa.moved == sb.moved
        assert (fast.min_load, fast.negative_steps) == (ref.min_load, ref.negative_steps)
        assert fast.is_stable(graph, sa.loads) == ref.is_stable(graph, sb.loads)
        a, b = sa.loads, sb.loads.copy()


@pytest.mark.parametrize("algo", ["diffusion", *ROUNDED])
@pytest.mark.parametrize("spec,init", [("torus:5x5", "point:200"), ("star:6", "random:0..30"),
                                       ("random-tree:12", "point:50"), ("hypercube:4", "random:0..9")])
def test_runs_are_identical_with_either_kernel(algo, spec, init):
    runs = []
    for kernel in ("numba", "numpy"):
        try:
            r = simulate(spec, algo, init, seed=3, params={"kernel": kernel}, max_steps=150)
        except InfeasibleStepError as exc:
            runs.append(("infeasible", str(exc)))
            continue
        runs.append((r.stop_reason, r.steps, r.infeasible_steps, r.cycle_length, r.loads.tolist(), r.report))
    fast, ref = runs
    if algo == "diffusion":
        assert fast[:4] == ref[:4]
        np.testing.assert_array_equal(fast[4], ref[4])
    else:
        assert fast == ref


@pytest.mark.parametrize("algo", ["diffusion-ceil", "diffusion-oriented"])
def test_sec4_infeasible_steps_are_reported_alike(algo):
    # Ceilings overdraw: both kernels must raise the same error, or count the same steps.
    for allow in (False, True):
        got = []
        for kernel in ("numba", "numpy"):
            try:
                r = simulate("ring:6", algo, "point:1", seed=0, params={"kernel": kernel}, max_steps=30,
                             allow_infeasible=allow)
                got.append((r.infeasible_steps, r.loads.tolist(), r.stop_reason))
            except InfeasibleStepError as exc:
                got.append(str(exc))
        assert got[0] == got[1]


def test_kernel_reuses_its_buffers_without_per_step_allocation():
    g = make_graph("torus:8x8")
    p = make_protocol("diffusion-floor")
    loads = np.arange(g.n, dtype=np.int64) * 7
    p.reset(g, loads.copy(), None)
    s1 = p.step(0, g, loads)
    s2 = p.step(1, g, s1.loads)
    s3 = p.step(2, g, s2.loads)
    # Ping-pong: each step writes over the previous step's input; one outflow buffer throughout.
    assert s2.loads is loads and s3.loads is s1.loads and s1.loads is not loads
    assert s1.outflow is s2.outflow is s3.outflow
