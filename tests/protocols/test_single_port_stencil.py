"""The single-port step over an offset stencil (Ghosh et al. 1995, Sec. 1.1).

``single_port_stencil_step`` must give, bit for bit, what the counter kernel and the numpy
reference give: the same coins (``counter_uniform(key, t, e) < p``), the same matching (a
candidate edge whose ends have no other candidate), the same token per matched edge. Checked
under Hypothesis on tori and rings of every shape that has a stencil (seams and runs both), over
several steps, with any threshold and probability; and through the protocol, which takes the
stencil kernel on a torus and the counter kernel on another graph object.
"""

import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

from tokendist.engine import simulate
from tokendist.graphs import make_graph
from tokendist.graphs._stencil import find_stencil, lower_edge_runs
from tokendist.protocols.local._rules import SinglePort, single_port_flows, single_port_matching
from tokendist.protocols.local.kernels._serial import BLOCK, coin_bound, single_port_counter_step
from tokendist.protocols.local.kernels._stencil import single_port_stencil_step

_GRAPHS = {}


def _graph(spec):
    """The graph, its stencil (found even where it covers few nodes: small tori too) and its edge runs."""
    if spec not in _GRAPHS:
        g = make_graph(spec)
        stencil = find_stencil(g, min_coverage=0.0)
        _GRAPHS[spec] = (g, stencil, None if stencil is None else lower_edge_runs(stencil, g.csr_edges))
    return _GRAPHS[spec]


SPECS = [spec for spec in ["ring:7", "ring:40", "torus:3x5", "torus:5x5", "torus:6x4", "torus:7x9", "torus:12x10",
                           "torus:30x20"] if _graph(spec)[2] is not None and _graph(spec)[2][0].size]


def test_the_specs_have_stencil_runs():
    assert {"ring:40", "torus:5x5", "torus:7x9", "torus:30x20"} <= set(SPECS)


@settings(max_examples=40, deadline=None)
@given(spec=st.sampled_from(SPECS), seed=st.integers(0, 2**31), p=st.sampled_from([1 / 16, 1 / 8, 0.3, 0.9, 1.0, 0.0]),
       threshold=st.integers(1, 3), spread=st.integers(1, 40))
def test_sec1_1_stencil_step_is_the_counter_kernel_and_the_reference(spec, seed, p, threshold, spread):
    g, st_, (starts, ends, delta) = _graph(spec)
    rng = np.random.default_rng(seed)
    key = int(rng.integers(0, 2**62))
    loads = rng.integers(0, spread, g.n).astype(np.int64)
    counter = {"w": loads, "flows": np.zeros(g.m, np.int8), "sel": np.zeros(g.m, np.int32), "nprev": 0}
    stencil = {"w": loads, "flows": np.full(g.m, 7, np.int8), "sel": np.zeros(g.m, np.int32)}  # 7: must be overwritten
    cap = g.m + BLOCK
    count, cands, ca, cb = np.zeros(g.n, np.uint8), *(np.zeros(cap, np.int32) for _ in range(3))
    flags, partner = np.empty(g.m, np.uint8), np.empty(g.n, np.int32)
    for t in range(4):
        ref = single_port_flows(g, counter["w"], key, t, p, threshold)
        out1 = np.empty(g.n, np.int64)
        m1, counter["nprev"] = single_port_counter_step(g.u, g.v, counter["w"], key, t, coin_bound(p), threshold, out1,
                                                        counter["flows"], count, cands, ca, cb, counter["nprev"],
                                                        counter["sel"])
        out2 = np.empty(g.n, np.int64)
        m2 = single_port_stencil_step(g.indptr, g.indices, g.csr_edges, starts, ends, st_.lower, st_.upper, delta,
                                      stencil["w"], key, t, coin_bound(p), threshold, out2, stencil["flows"],
                                      stencil["sel"], flags, partner)
        assert m1 == m2 == np.abs(ref).sum()
        assert np.array_equal(stencil["flows"], ref) and np.array_equal(counter["flows"], ref)
        assert np.array_equal(out1, out2)
        assert np.array_equal(out2 - stencil["w"], np.bincount(g.v, ref, g.n) - np.bincount(g.u, ref, g.n))
        assert np.array_equal(counter["sel"], stencil["sel"])
        counter["w"], stencil["w"] = out1, out2
    assert not count.any()  # the counter kernel's invariant, untouched by the stencil kernel


def test_sec1_1_selection_counts_are_the_matching():
    g, st_, (starts, ends, delta) = _graph("torus:30x20")
    sel, key, p = np.zeros(g.m, np.int64), 99, 1 / 16
    loads = np.zeros(g.n, np.int64)  # balanced: no token moves, the matching is still drawn
    expected = np.zeros(g.m, np.int64)
    for t in range(5):
        moved = single_port_stencil_step(g.indptr, g.indices, g.csr_edges, starts, ends, st_.lower, st_.upper, delta,
                                         loads, key, t, coin_bound(p), 1, np.empty(g.n, np.int64),
                                         np.zeros(g.m, np.int8), sel, np.empty(g.m, np.uint8),
                                         np.empty(g.n, np.int64))
        assert moved == 0
        expected += single_port_matching(g, key, t, p)
    assert np.array_equal(sel, expected) and expected.sum() > 0


def _run(graph, params, steps=40):
    return simulate(graph, "single-port", "random:0..50", seed=4, max_steps=steps, params=params, check=True,
                    detect_cycles=False)


@pytest.mark.parametrize("spec", ["torus:16x12", "ring:30"])
def test_protocol_takes_the_stencil_kernel_and_matches_the_reference(spec):
    g = make_graph(spec)
    proto = SinglePort()
    proto.reset(g, np.zeros(g.n, np.int64), np.random.default_rng(0))
    assert proto._edge_runs is not None
    for params in ({"threads": 2}, {"coins": "geometric"}, {"kernel": "numpy"}):
        other = SinglePort(**params)
        other.reset(g, np.zeros(g.n, np.int64), np.random.default_rng(0))
        assert other._edge_runs is None
    fast, ref = _run(g, {}), _run(g, {"kernel": "numpy"})
    assert np.array_equal(fast.loads, ref.loads)
    assert np.array_equal(fast.trace["tokens_moved"], ref.trace["tokens_moved"])
    assert fast.report == ref.report  # the selection rates from the counts


def test_steps_on_another_graph_object_take_the_counter_kernel_with_clean_flows():
    # single-port runs on static networks only, but step() takes any graph: on another object of
    # the same torus the counter kernel runs, and the flows the stencil kernel wrote on every edge
    # must not survive into its (sparse) flows.
    a, b = make_graph("torus:16x12"), make_graph("torus:16x12")
    fast, ref = SinglePort(), SinglePort(kernel="numpy")
    loads = np.random.default_rng(3).integers(0, 50, a.n)
    for p in (fast, ref):
        p.reset(a, loads.copy(), np.random.default_rng(0))
    w1, w2 = loads.copy(), loads.copy()
    for t, g in enumerate([a, a, b, b, a, b]):
        s1, s2 = fast.step(t, g, w1), ref.step(t, g, w2)
        assert np.array_equal(s1.flows, s2.flows) and np.array_equal(s1.loads, s2.loads)
        assert s1.moved == s2.moved
        w1, w2 = s1.loads.copy(), s2.loads.copy()
    assert np.array_equal(fast.selection_counts(), ref.selection_counts())
