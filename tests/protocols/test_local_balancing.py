"""Ghosh et al. 1995: multi-port and single-port local balancing (Sec. 1.1, 3, 4.3)."""

import numpy as np
import pytest
from hypothesis import given, settings, strategies as st
from scipy import stats

from tokendist._random import counter_uniform
from tokendist.engine import simulate
from tokendist.engine._metrics import local_discrepancy
from tokendist.graphs import Graph, make_graph
from tokendist.protocols.local._rules import (SinglePort, single_port_matching,
                                                  single_port_selection_probability)
from tokendist.protocols.local.kernels._serial import BLOCK, coin_bound, single_port_counter_step


class _CounterKernel:
    """Calls the single-port counter kernel with its own buffers; returns (moved, out, flows)."""

    def __init__(self, g, cap=None):
        self.g = g
        cap = g.m + BLOCK if cap is None else cap
        self.out, self.flows = np.empty(g.n, np.int64), np.zeros(g.m, np.int8)
        self.count = np.zeros(g.n, np.uint8)
        self.cands, self.ca, self.cb = (np.zeros(cap, np.int32) for _ in range(3))
        self.nprev = 0

    def __call__(self, loads, key, t, p, threshold, selected):
        moved, self.nprev = single_port_counter_step(self.g.u, self.g.v, loads, key, t, coin_bound(p), threshold,
                                                     self.out, self.flows, self.count, self.cands, self.ca, self.cb,
                                                     self.nprev, selected)
        return moved, self.out, self.flows


def _random_connected_graph(draw_seed, n, extra):
    rng = np.random.default_rng(draw_seed)
    parents = [rng.integers(0, i) for i in range(1, n)]
    edges = {(int(p), i) for i, p in enumerate(parents, start=1)}
    for _ in range(extra):
        a, b = rng.integers(0, n, size=2)
        if a != b:
            edges.add((int(min(a, b)), int(max(a, b))))
    return Graph.from_edges(n, sorted(edges), spec=f"hyp:{draw_seed}")


graphs = st.builds(_random_connected_graph, st.integers(0, 10**6), st.integers(2, 14), st.integers(0, 20))


# ------------------------------------------------------------------ multi-port
@given(graphs, st.integers(0, 10**6))
@settings(max_examples=30)
def test_sec4_3_multi_port_ends_locally_balanced_within_2d(g, seed):
    loads = np.random.default_rng(seed).integers(0, 200, size=g.n)
    r = simulate(g, "multi-port", loads, max_steps=20_000, check=True)
    assert r.stop_reason in ("stable", "fixed-point")
    assert local_discrepancy(g, r.loads) <= 2 * g.max_degree
    assert r.loads.sum() == loads.sum()


@pytest.mark.parametrize("spec", ["torus:5x5", "hypercube:4", "ring:11", "star:7"])
def test_multi_port_numba_matches_numpy(spec):
    a = simulate(spec, "multi-port", "random:0..300", seed=2, max_steps=60, keep_loads_every=1, detect_cycles=False)
    b = simulate(spec, "multi-port", "random:0..300", seed=2, max_steps=60, keep_loads_every=1, detect_cycles=False,
                 params={"kernel": "numpy"}, check=True)
    np.testing.assert_array_equal(a.load_history, b.load_history)


def test_multi_port_rule_is_2d_plus_1():
    # Path 0-1-2 (d = 2): a difference of 5 = 2d + 1 moves one token, a difference of 4 does not.
    g = make_graph("path:3")
    r = simulate(g, "multi-port", [5, 0, 0], max_steps=1, detect_cycles=False)
    assert r.loads.tolist() == [4, 1, 0]
    r = simulate(g, "multi-port", [4, 0, 0], max_steps=1, detect_cycles=False)
    assert r.loads.tolist() == [4, 0, 0] and r.stop_reason == "stable"


# ------------------------------------------------------------------ single-port
def test_counter_coins_match_numpy_in_kernel():
    g = make_graph("torus:6x6")
    loads = np.arange(g.n, dtype=np.int64) % 7
    p = 1.0 / (4 * g.max_degree)
    kernel = _CounterKernel(g)
    for t in range(30):
        sel = np.zeros(g.m, np.int64)
        kernel(loads, 12345, t, p, 1, sel)
        np.testing.assert_array_equal(sel.astype(bool), single_port_matching(g, 12345, t, p))


@pytest.mark.parametrize("spec", ["torus:5x5", "hypercube:4", "grid:3x7", "star:6", "complete:6"])
def test_single_port_numba_matches_numpy(spec):
    kw = dict(seed=4, max_steps=200, keep_loads_every=1)
    a = simulate(spec, "single-port", "random:0..50", **kw)
    b = simulate(spec, "single-port", "random:0..50", params={"kernel": "numpy"}, **kw)
    np.testing.assert_array_equal(a.load_history, b.load_history)
    assert a.report["observed_selection_rate_mean"] == b.report["observed_selection_rate_mean"]


@given(graphs, st.integers(0, 10**6))
@settings(max_examples=25)
def test_sec1_1_single_port_uses_a_matching(g, seed):
    # check=True makes the engine verify on every step that the edges used form a matching.
    r = simulate(g, "single-port", np.random.default_rng(seed).integers(0, 30, size=g.n), seed=seed,
                 max_steps=150, check=True)
    assert r.loads.sum() == r.initial_loads.sum()
    key = 99
    p = 1.0 / (4 * g.max_degree)
    for t in range(20):
        m = single_port_matching(g, key, t, p)
        deg = np.bincount(np.concatenate([g.u[m], g.v[m]]), minlength=g.n)
        assert deg.max(initial=0) <= 1


@given(graphs)
def test_lemma3_2_selection_probability_at_least_1_over_8d(g):
    exact = single_port_selection_probability(g)
    assert exact.min() >= 1.0 / (8 * g.max_degree)


@pytest.mark.parametrize("spec", ["star:5", "grid:3x4", "kary:3,2"])
def test_lemma3_2_selection_frequency_matches_exact_probability(spec):
    """Each edge's matching frequency over T steps is Binomial(T, p_e) with p_e = p (1-p)^(du+dv-2).

    Seeded binomial tests (Bonferroni over edges) at level 1e-3, plus a chi-square test on the
    total; a wrong formula (e.g. ignoring the dropped neighbours, p_e = p) fails both.
    """
    g = make_graph(spec)
    p = 1.0 / (4 * g.max_degree)
    T = 20_000
    counts = np.zeros(g.m, dtype=np.int64)  # the kernel accumulates the matchings it used
    loads, kernel = np.zeros(g.n, np.int64), _CounterKernel(g)
    for t in range(T):
        kernel(loads, 2024, t, p, 1, counts)
    exact = single_port_selection_probability(g, p)
    pvals = np.array([stats.binomtest(int(c), T, float(q)).pvalue for c, q in zip(counts, exact)])
    assert pvals.min() * g.m > 1e-3
    assert stats.binomtest(int(counts.sum()), T * g.m, float(exact.mean())).pvalue > 1e-3
    naive = np.array([stats.binomtest(int(c), T, p).pvalue for c in counts])
    assert naive.min() < 1e-6  # the test has power against the candidate probability itself
    # The kernel counts the same matchings.
    proto = SinglePort()
    r = simulate(g, proto, "random:0..9", seed=1, max_steps=300)
    assert r.report["selection_probability_min"] == pytest.approx(exact.min())


@given(graphs, st.integers(0, 10**6))
@settings(max_examples=20)
def test_single_port_reaches_local_balance_within_1(g, seed):
    loads = np.random.default_rng(seed).integers(0, 25, size=g.n)
    r = simulate(g, "single-port", loads, seed=seed, max_steps=200_000, until_local_discrepancy=1)
    assert r.stop_reason in ("target-reached", "stable")
    assert local_discrepancy(g, r.loads) <= 1


def test_single_port_does_not_stay_locally_balanced():
    """The paper's rule also moves a token across a difference of 1, which can break local balance:
    on path:3 with loads (2, 1, 0) matching edge (0, 1) gives (1, 2, 0), local discrepancy 2."""
    g = make_graph("path:3")
    r = simulate(g, "single-port", [2, 1, 0], seed=0, max_steps=400, keep_loads_every=1)
    ld = np.array([local_discrepancy(g, w) for w in r.load_history])
    assert ld[0] == 1 and ld.max() == 2
    # The threshold-2 variant stops at local balance within 1 and stays there.
    r2 = simulate(g, "single-port", [2, 1, 0], seed=0, max_steps=400, params={"threshold": 2})
    assert r2.stop_reason == "stable" and r2.loads.tolist() == [2, 1, 0]


def test_single_port_report_next_to_lemma3_2():
    r = simulate("hypercube:4", "single-port", "point:200", seed=3, max_steps=500)
    rep = r.report
    assert rep["candidate_probability"] == pytest.approx(1 / 16)
    assert rep["lemma_3_2_bound_1_over_8d"] == pytest.approx(1 / 32)
    assert rep["selection_probability_min"] == pytest.approx((1 / 16) * (15 / 16) ** 6)
    assert rep["lemma_3_2_holds"]


def test_counter_uniform_is_uniformish():
    x = counter_uniform(7, 3, np.arange(100_000))
    assert stats.kstest(x, "uniform").pvalue > 1e-3


# ------------------------------------------------------------------ geometric skipping
def test_geometric_kernel_matches_numpy_reference_and_node_form():
    from tokendist.engine import run_node_rules

    for spec in ("torus:6x6", "hypercube:4", "grid:3x5"):
        kw = dict(seed=5, max_steps=150, keep_loads_every=1, params={"coins": "geometric"})
        a = simulate(spec, "single-port", "random:0..40", check=True, **kw)
        b = simulate(spec, "single-port", "random:0..40", **{**kw, "params": {"coins": "geometric", "kernel": "numpy"}})
        np.testing.assert_array_equal(a.load_history, b.load_history)
        hist, _ = run_node_rules(spec, "single-port", "random:0..40", 40, seed=5, params={"coins": "geometric"})
        np.testing.assert_array_equal(hist, a.load_history[:41])


@pytest.mark.parametrize("p", [0.05, 0.3, 1.0])
def test_geometric_candidates_are_bernoulli_p(p):
    """Geometric gaps give independent Bernoulli(p) candidates: per-edge counts over T steps."""
    from tokendist.protocols.local._rules import geometric_candidates

    m, T = 40, 4000
    counts = sum(geometric_candidates(m, 77, t, p).astype(int) for t in range(T))
    if p == 1.0:
        assert (counts == T).all()
        return
    pvals = [stats.binomtest(int(c), T, p).pvalue for c in counts]
    assert min(pvals) * m > 1e-3
    # Independence between neighbouring edges: joint frequency of consecutive candidates is p^2.
    both = sum((lambda c: (c[:-1] & c[1:]).sum())(geometric_candidates(m, 78, t, p)) for t in range(T))
    assert stats.binomtest(int(both), T * (m - 1), p * p).pvalue > 1e-3


@given(graphs, st.integers(0, 10**6))
@settings(max_examples=25)
def test_sec4_3_potential_drops_by_at_least_d_while_unbalanced(g, seed):
    """Sec. 4.3: while some edge differs by >= 2d + 1, a multi-port step lowers sum (w - rho)^2 by >= d."""
    loads = np.random.default_rng(seed).integers(0, 150, size=g.n)
    r = simulate(g, "multi-port", loads, max_steps=3000, keep_loads_every=1, detect_cycles=False)
    H = r.load_history.astype(float)
    phi = ((H - H[0].mean()) ** 2).sum(axis=1)
    d = g.max_degree
    for k in range(len(H) - 1):
        if np.abs(H[k][g.u] - H[k][g.v]).max() >= 2 * d + 1:
            assert phi[k] - phi[k + 1] >= d


# ------------------------------------------------------------------ kernels against the numpy references
from tokendist.protocols.local._rules import _apply_flows, multi_port_flows, single_port_flows  # noqa: E402
from tokendist.protocols.local.kernels._serial import (multi_port_step,  # noqa: E402
                                                          single_port_geometric_step)


@given(graphs, st.integers(0, 10**6), st.integers(1, 12))
@settings(max_examples=40, deadline=None)
def test_multi_port_kernel_matches_numpy_reference(g, seed, threshold):
    # Signed loads too: the kernel must not assume anything the rule does not.
    loads = np.random.default_rng(seed).integers(-30, 60, size=g.n)
    flows = multi_port_flows(g, loads, threshold)
    out = np.empty(g.n, np.int64)
    moved = multi_port_step(g.u, g.v, loads, threshold, out)
    np.testing.assert_array_equal(out, _apply_flows(g, loads, flows))
    assert moved == np.abs(flows).sum()


@given(graphs, st.integers(0, 10**6), st.sampled_from([0.0, 0.05, 0.3, 1.0]), st.integers(1, 3))
@settings(max_examples=40, deadline=None)
def test_single_port_counter_kernel_matches_numpy_reference(g, seed, p, threshold):
    loads = np.random.default_rng(seed).integers(0, 20, size=g.n)
    kernel = _CounterKernel(g)
    for t in range(3):
        sel = np.zeros(g.m, np.int32)
        moved, out, flows = kernel(loads, seed, t, p, threshold, sel)
        ref = single_port_flows(g, loads, seed, t, p, threshold)
        np.testing.assert_array_equal(flows, ref)
        np.testing.assert_array_equal(out, _apply_flows(g, loads, ref))
        np.testing.assert_array_equal(sel.astype(bool), single_port_matching(g, seed, t, p))
        assert moved == np.abs(ref).sum()
        assert not kernel.count.any()  # counts are left at zero for the next step
        loads = out.copy()


def test_coin_bound_is_exact_at_the_boundary():
    # counter_uniform is k * 2**-53; the kernel compares k < coin_bound(p) instead of k * 2**-53 < p.
    rng = np.random.default_rng(0)
    ks = rng.integers(0, 2**53, size=200)
    for k in ks.tolist():
        for p in (k * 2.0**-53, (k + 0.5) * 2.0**-53, np.nextafter(k * 2.0**-53, 1), np.nextafter(k * 2.0**-53, 0)):
            assert (k < coin_bound(p)) == (k * 2.0**-53 < p)
    assert coin_bound(1.0) == 2**53 and coin_bound(0.0) == 0


@pytest.mark.parametrize("kernel", [single_port_counter_step, single_port_geometric_step])
def test_single_port_kernels_report_a_full_candidate_buffer_and_leave_clean_state(kernel):
    g = make_graph("torus:40x40")
    loads = np.random.default_rng(1).integers(0, 9, size=g.n)
    p, key, t = 0.5, 31, 4
    coin = coin_bound(p) if kernel is single_port_counter_step else p
    count, flows = np.zeros(g.n, np.uint8), np.zeros(g.m, np.int8)
    small = [np.zeros(BLOCK + 10, np.int32) for _ in range(3)]
    sel = np.zeros(g.m, np.int32)
    assert kernel(g.u, g.v, loads, key, t, coin, 1, np.empty(g.n, np.int64), flows, count, *small, 0, sel) == (-1, 0)
    assert not count.any() and not sel.any()
    # The protocol grows its buffers and gets the reference result.
    proto = SinglePort(probability=p, coins="per-edge" if kernel is single_port_counter_step else "geometric")
    proto.reset(g, loads, np.random.default_rng(0))
    proto._edge_runs = None  # the counter kernel (on a torus the protocol takes the stencil kernel, no buffers)
    proto._alloc_candidates(BLOCK + 10)
    step = proto.step(t, g, loads)
    mask = single_port_matching(g, proto.key, t, p, proto.options["coins"])
    diff = loads[g.u] - loads[g.v]
    np.testing.assert_array_equal(step.flows, np.where(mask, np.sign(diff), 0))
    assert proto._cands.size > BLOCK + 10
