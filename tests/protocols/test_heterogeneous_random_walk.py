"""The randomized algorithm of Elsässer, Monien, Schamberger 2006, Sec. 3: phases, targets, walks."""

import numpy as np
import pytest

from tokendist import make_graph, simulate
from tokendist.engine import EdgeFailures, make_protocol
from tokendist.protocols.heterogeneous._matrix import diffusion_matrix, edge_coefficients
from tokendist._random import counter_uniform_scalar
from tokendist.protocols.heterogeneous._random_walk import targets, walk_tokens


def naive_walk(counts, graph, alpha, s, key, step, kind=0):
    """Token by token, a Python loop over each row of M's column; token k of node i draws the
    counter coin ``counter_uniform(key, step, i * 2**32 + kind * 2**31 + k)``."""
    n = graph.n
    new = np.zeros(n, dtype=np.int64)
    for i in range(n):
        nbrs = graph.neighbours(i)
        probs = [alpha[graph.edge_index(i, j)] / s[i] for j in nbrs]
        stay = 1.0 - sum(probs)
        for k in range(counts[i]):
            u = counter_uniform_scalar(key, step, i * 2**32 + kind * 2**31 + k)
            if u < stay:
                new[i] += 1
                continue
            acc = stay
            for j, p in zip(nbrs, probs):
                acc += p
                if u < acc:
                    new[j] += 1
                    break
            else:
                new[nbrs[-1]] += 1
    return new


def test_walk_tokens_matches_naive_reference():
    g = make_graph("grid:3x5").with_speeds(np.random.default_rng(1).uniform(0.8, 1.2, 15))
    alpha = edge_coefficients(g, 2.0)
    counts = np.random.default_rng(2).integers(0, 50, 15)
    for kind in (0, 1):
        fast, moves = walk_tokens(counts, g, alpha, g.speeds, 9, 4, kind)
        slow = naive_walk(counts, g, alpha, g.speeds, 9, 4, kind)
        np.testing.assert_array_equal(fast, slow)
    assert fast.sum() == counts.sum() and moves.sum() <= counts.sum()


def test_walk_tokens_follows_column_of_M_statistically():
    # Seeded chi-square test: 40000 tokens on node 0 move by column 0 of M.
    g = make_graph("star:5").with_speeds(np.array([1.5, 0.8, 1.0, 1.2, 0.9, 1.1]))
    alpha = edge_coefficients(g, 1.5)
    counts = np.zeros(6, dtype=np.int64)
    counts[0] = 40000
    new, _ = walk_tokens(counts, g, alpha, g.speeds, 123, 0)
    expected = 40000 * diffusion_matrix(g, alpha, g.speeds).toarray()[:, 0]
    chi2 = float(((new - expected) ** 2 / expected).sum())
    assert chi2 < 20.5  # 5 degrees of freedom: p ~ 0.001


def test_lemma2_walk_reaches_speed_proportional_distribution():
    g = make_graph("torus:4x4").with_speeds(np.random.default_rng(3).uniform(0.8, 1.2, 16))
    alpha = edge_coefficients(g, 2.0)
    counts = np.zeros(16, dtype=np.int64)
    counts[5] = 30000
    for t in range(150):
        counts, _ = walk_tokens(counts, g, alpha, g.speeds, 4, t)
    expected = 30000 * g.speeds / g.speeds.sum()
    chi2 = float(((counts - expected) ** 2 / expected).sum())
    assert chi2 < 37.7  # 15 degrees of freedom: p ~ 0.001


def test_targets_follow_section3():
    s = np.array([0.1, 1.0, 1.0, 1.9])          # sbar = n s / sum s = [0.1, 1, 1, 1.9]
    est = np.array([10.2, 100.0, 99.5, 190.3])
    what, slow = targets(est, s)
    assert slow.tolist() == [True, False, False, False]
    assert what.tolist() == [11, 100 + 2, 100 + 2, 191 + 4]


def _step_manually(g, w0, steps, seed=0, dynamics=None, **params):
    p = make_protocol("random-walk", params)
    p.check_graph(g)
    rng = np.random.default_rng(seed)
    p.reset(g, w0.copy(), rng)
    if dynamics is not None:
        dynamics.reset(g, np.random.default_rng(seed + 1))
    w = w0.copy()
    for t in range(steps):
        gt = g if dynamics is None else dynamics.graph_at(t)
        out = p.step(t, gt, w)
        w = out.loads
        assert w.sum() == w0.sum()
        if p.phase >= 2:
            # unmarked + negative = what on every node, so w = what - negative + marked.
            np.testing.assert_array_equal(w, p.what - p.negative + p.marked)
            assert np.all(np.minimum(p.marked, p.negative) == 0)
    return p, w


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_theorem2_random_walk_ends_under_targets(seed):
    g = make_graph("torus:8x8").with_speeds(np.random.default_rng(seed).uniform(0.8, 1.2, 64))
    w0 = np.zeros(64, dtype=np.int64)
    w0[0] = 64 * 64
    p, w = _step_manually(g, w0, 2500, seed=seed, dynamics=EdgeFailures(0.1))
    assert p.phase == 3, p.report()
    assert np.all(w <= p.what)
    rep = p.report()
    series = rep["series"]
    diff = np.array(series["negative"]) - np.array(series["marked"])
    assert np.all(diff[rep["switch_step"]:] == p.what.sum() - w0.sum())  # annihilation keeps the gap
    assert rep["initial_negative"] - rep["initial_marked"] >= 64          # Omega(n) more negative tokens
    assert rep["overdraw_events"] == 0
    # The result beats the rounding floor of integer FOS on the same network.
    fos = simulate(g, "fos-floor", w0, seed=seed, max_steps=2500, dynamics=EdgeFailures(0.1))
    weighted = w / (g.speeds * 64 / g.speeds.sum())
    assert weighted.max() < fos.final["max_weighted_load"]


def test_random_walk_phase1_is_integer_fos_and_real_estimate():
    g = make_graph("hypercube:4").with_speeds(np.random.default_rng(5).uniform(0.8, 1.2, 16))
    kw = dict(seed=4, max_steps=40, keep_loads_every=1)
    a = simulate(g, "random-walk", "point:2560", params={"switch": "step", "switch_step": "40"}, **kw)
    b = simulate(g, "fos-floor", "point:2560", **kw)
    k = b.load_history.shape[0]
    np.testing.assert_array_equal(a.load_history[:k], b.load_history)
    np.testing.assert_array_equal(a.load_history[k:], np.repeat(b.loads[None], a.load_history.shape[0] - k, 0))
    real = simulate(g, "fos", "point:2560", **kw)
    assert a.report["series"]["estimate_l2_error"][-1] == pytest.approx(real.final["l2_error"], rel=1e-9, abs=1e-9)


def test_switch_rules():
    g = make_graph("torus:6x6")
    r_err = simulate(g, "random-walk", "point:1296", seed=1, max_steps=3000)
    r_loc = simulate(g, "random-walk", "point:1296", seed=1, max_steps=3000, params={"switch": "local"})
    r_step = simulate(g, "random-walk", "point:1296", seed=1, max_steps=3000,
                      params={"switch": "step", "switch_step": "50"})
    assert r_step.report["switch_step"] == 50
    assert r_err.report["switch_step"] > 50 and r_loc.report["switch_step"] > 50
    for r in (r_err, r_loc, r_step):
        assert r.report["phase"] == 3 and r.tokens == 1296


def test_random_walk_seeded_runs_are_reproducible():
    kw = dict(seed=9, max_steps=600, speeds="uniform:0.8..1.2", dynamics=None)
    a = simulate("torus:6x6", "random-walk", "point:1296", **kw)
    b = simulate("torus:6x6", "random-walk", "point:1296", **kw)
    np.testing.assert_array_equal(a.loads, b.loads)
    assert a.report == b.report


# ---------------------------------------------------------------------------------------------------
# The numba kernels (kernel=numba, default) against the numpy reference (kernel=numpy), step by step.

from hypothesis import given, settings, strategies as st  # noqa: E402

from tokendist.graphs import Graph  # noqa: E402
from tokendist.protocols.heterogeneous.kernels import _walk_serial as K  # noqa: E402

from ..strategies import random_connected_graph  # noqa: E402


def _reference_outflow(g, flows):
    out = np.zeros(g.n)
    np.add.at(out, g.u, np.maximum(flows, 0))
    np.add.at(out, g.v, np.maximum(-flows, 0))
    return out


def _lockstep(g, loads, seed, *, steps, p_fail=0.0, params=None):
    """numba and numpy side by side on the same graphs and coins: every step's loads, outflow,
    counters and state equal (the l2 series to rounding: serial vs pairwise sum)."""
    params = dict(params or {})
    fast = make_protocol("random-walk", {**params, "kernel": "numba"})
    ref = make_protocol("random-walk", {**params, "kernel": "numpy"})
    fast.check_graph(g)
    fast.reset(g, loads.copy(), np.random.default_rng(seed))
    ref.reset(g, loads.copy(), np.random.default_rng(seed))
    dyn = EdgeFailures(p_fail) if p_fail else None
    if dyn is not None:
        dyn.reset(g, np.random.default_rng(seed + 1))
    wf, wr = loads.copy(), loads.copy()
    for t in range(steps):
        gt = g if dyn is None else dyn.graph_at(t)
        a, b = fast.step(t, gt, wf), ref.step(t, gt, wr)
        np.testing.assert_array_equal(a.loads, b.loads)
        np.testing.assert_array_equal(a.outflow, _reference_outflow(gt, b.flows))
        assert (a.moved, a.messages, a.info) == (b.moved, b.messages, b.info)
        assert fast.phase == ref.phase
        if fast.phase == 1:
            np.testing.assert_array_equal(fast.estimate, ref.estimate)
        else:
            np.testing.assert_array_equal(fast.marked, ref.marked)
            np.testing.assert_array_equal(fast.negative, ref.negative)
        wf, wr = a.loads.copy(), b.loads
    ra, rb = fast.report(), ref.report()
    sa, sb = ra.pop("series"), rb.pop("series")
    assert ra == rb
    for key in sa:
        np.testing.assert_allclose(sa[key], sb[key], rtol=1e-12, atol=1e-12)
    return fast


@st.composite
def rw_cases(draw, max_n=24):
    n = draw(st.integers(2, max_n))
    rng = np.random.default_rng(draw(st.integers(0, 2**31)))
    g = random_connected_graph(rng, n, draw(st.integers(0, 3 * n)))
    kind = draw(st.sampled_from(["speeds", "unit", "capacities"]))
    if kind == "unit":
        g = Graph(g.n, g.u, g.v)
    elif kind == "capacities":
        g = g.with_capacities(rng.uniform(0.5, 2.0, g.m))
    loads = rng.integers(0, 60, n).astype(np.int64)
    loads[int(rng.integers(0, n))] += int(rng.integers(0, 3000))
    params = {"switch": "step", "switch_step": str(draw(st.integers(0, 20)))}
    if draw(st.booleans()):
        params["adapt_degrees"] = "false"
    return g, loads, int(rng.integers(0, 2**31)), params


@settings(max_examples=40, deadline=None)
@given(rw_cases(), st.sampled_from([0.0, 0.3]))
def test_kernels_match_numpy_reference_step_by_step(case, p_fail):
    g, loads, seed, params = case
    _lockstep(g, loads, seed, steps=45, p_fail=p_fail, params=params)


@pytest.mark.parametrize("speeds", [True, False])
@pytest.mark.parametrize("switch", ["error", "local"])
def test_kernels_match_reference_through_switch_rules(switch, speeds):
    # The switch step itself comes from the kernel's fused error (error) or edge_gap (local).
    # A torus: one scalar coefficient; without speeds the unit-speed (ping-pong) path.
    g = make_graph("torus:5x5")
    if speeds:
        g = g.with_speeds(np.random.default_rng(7).uniform(0.8, 1.2, 25))
    w0 = np.zeros(25, dtype=np.int64)
    w0[3] = 2500
    p = _lockstep(g, w0, 5, steps=700, params={"switch": switch, "switch_tol": "1e-6"})
    assert p.phase == 3 and p.switch_at > 0


@pytest.mark.parametrize("speeds", [True, False])
def test_cube_kernel_matches_reference_through_both_phases(speeds):
    # hypercube:5 runs phase 1 by dimensions (fos_pair_cube): against the numpy reference directly.
    g = make_graph("hypercube:5")
    assert g.cube_dimension == 5
    if speeds:
        g = g.with_speeds(np.random.default_rng(7).uniform(0.8, 1.2, 32))
    w0 = np.random.default_rng(3).integers(0, 30, 32).astype(np.int64)
    w0[9] += 2000
    p = _lockstep(g, w0, 5, steps=400, params={"switch": "error", "switch_tol": "1e-6"})
    assert p.phase == 3 and p.switch_at > 0


def _walk_once(g, c, marked, negative, seed, step=0):
    """One MRWS of the numba kernel on ``g`` (coefficients as the protocol builds them)."""
    p = make_protocol("random-walk", {"c": str(c)})
    p.reset(g, np.zeros(g.n, dtype=np.int64), np.random.default_rng(0))
    coefs = p._graph_state(g)
    marked, negative = marked.copy(), negative.copy()
    n = g.n
    new_m, new_n, need, outflow = (np.empty(n, np.int64) for _ in range(4))
    out = np.empty(n, np.int64)
    net = np.zeros(g.m, np.int32)
    K.mrws_step(g.indptr, g.indices, g.csr_edges, g.u, g.v, *coefs, c, p._s, seed, step,
                marked, negative, new_m, new_n, np.full(n, 10**6, np.int64), out, outflow, need, net,
                np.empty(g.max_degree))
    assert not net.any()  # left clean for the next step
    return new_m, new_n, out


@pytest.mark.parametrize("kind", ["marked", "negative"])
def test_kernel_walk_follows_column_of_M_statistically(kind):
    # Seeded chi-square test of the numba walk: 40000 tokens on node 0 move by column 0 of M
    # (5 degrees of freedom, p ~ 0.001), for marked and for negative tokens (no annihilation:
    # only one kind walks).
    g = make_graph("star:5").with_speeds(np.array([1.5, 0.8, 1.0, 1.2, 0.9, 1.1]))
    counts = np.zeros(6, dtype=np.int64)
    counts[0] = 40000
    zero = np.zeros(6, dtype=np.int64)
    new_m, new_n, out = _walk_once(g, 1.5, counts if kind == "marked" else zero,
                                   counts if kind == "negative" else zero, 123)
    new = new_m if kind == "marked" else new_n
    expected = 40000 * diffusion_matrix(g, edge_coefficients(g, 1.5), g.speeds).toarray()[:, 0]
    chi2 = float(((new - expected) ** 2 / expected).sum())
    assert new.sum() == 40000 and chi2 < 20.5
    # Real tokens follow: a marked token 0 -> j takes one there, a negative one brings one back.
    moved = new.copy()
    moved[0] -= 40000
    sign = 1 if kind == "marked" else -1
    np.testing.assert_array_equal(out - 10**6, sign * moved)


def test_kernel_walk_uses_the_reference_coins():
    # Same key and step -> the same counter coins, the same destinations as walk_tokens (the reference).
    g = make_graph("grid:4x5").with_speeds(np.random.default_rng(1).uniform(0.8, 1.2, 20))
    counts = np.random.default_rng(2).integers(0, 30, 20)
    new_m, _, _ = _walk_once(g, 2.0, counts, np.zeros(20, dtype=np.int64), 9)
    ref, _ = walk_tokens(counts, g, edge_coefficients(g, 2.0), g.speeds, 9, 0, 0)
    np.testing.assert_array_equal(new_m, ref)


@pytest.mark.parametrize("node", [1, 3, 5])
def test_reference_walk_sends_the_largest_draw_along_the_last_slot(node):
    # The largest counter draw (1 - 2**-53) lies above every boundary but the last, pinned to 1:
    # the token leaves along node i's last slot (the boundaries are local to the row, so no draw
    # can fall into another node's row, as i + u could with the former global boundaries).
    g = make_graph("ring:6")
    counts = np.zeros(g.n, np.int64)
    counts[node] = 1
    new, moves = walk_tokens(counts, g, edge_coefficients(g, 2.0), np.ones(g.n), draws=np.array([1 - 2.0**-53]))
    slot = int(np.flatnonzero(moves)[0])
    assert slot == g.indptr[node + 1] - 1
    assert new[g.indices[slot]] == 1 and new.sum() == 1


# ---------------------------------------------------------------------- per-node form
from tokendist.engine import run_node_rules  # noqa: E402


def _node_vs_kernels(g, loads, seed, steps, params, schedule="sync"):
    """The per-node rule (real messages), the numba kernel and the numpy reference: same loads
    after every step. Returns the numba run (for checks on its phases)."""
    runs = [simulate(g, "random-walk", loads, seed=seed, max_steps=steps, keep_loads_every=1, detect_cycles=False,
                     allow_infeasible=True, params={**params, "kernel": k}) for k in ("numba", "numpy")]
    np.testing.assert_array_equal(runs[0].load_history, runs[1].load_history)
    history, stats = run_node_rules(g, "random-walk", loads, runs[0].steps, seed=seed, params=params,
                                    schedule=schedule, allow_negative=True)
    np.testing.assert_array_equal(history, runs[0].load_history)
    return runs[0]


@settings(max_examples=25, deadline=None)
@given(rw_cases(max_n=12), st.sampled_from(["sync", "async"]))
def test_theorem2_node_form_matches_kernels_through_the_walk(case, schedule):
    # switch=step (the switch is local): integer FOS with the estimate, the preparation from each
    # node's own estimate, then MRWS with counter coins and annihilation, on random graphs with
    # speeds, unit speeds or capacities (adapt_degrees on and off).
    g, loads, seed, params = case
    params["switch_step"] = str(min(int(params["switch_step"]), 8))
    _node_vs_kernels(g, loads, seed, 30, params, schedule)


@pytest.mark.parametrize("schedule", ["sync", "async"])
@pytest.mark.parametrize("switch", ["error", "local"])
def test_node_form_global_switch_rules_through_the_oracle(switch, schedule):
    # The global switch rules (and the end of phase 2) reach the nodes through the termination
    # oracle; the run goes through the switch, the whole walk and the stable phase 3.
    g = make_graph("torus:4x4").with_speeds(np.random.default_rng(7).uniform(0.8, 1.2, 16))
    w0 = np.zeros(16, dtype=np.int64)
    w0[3] = 400
    r = _node_vs_kernels(g, w0, 5, 80, {"switch": switch, "switch_tol": "0.05"}, schedule)
    rep = r.report
    assert rep["switch_step"] is not None and rep["done_step"] is not None
    assert rep["initial_marked"] > 0 and rep["annihilated"] > 0


def test_node_form_walk_uses_the_kernel_coins():
    # One MRWS from given counts, node by node with counter_uniform_scalar: the same destinations
    # as walk_tokens (vectorised counter_uniform) and as the numba kernel.
    from tokendist.protocols.heterogeneous._random_walk_node import _walk
    from tokendist.engine._local import NodeView

    g = make_graph("grid:4x5").with_speeds(np.random.default_rng(1).uniform(0.8, 1.2, 20))
    p = make_protocol("random-walk", {"c": "2.0"})
    p.reset(g, np.zeros(g.n, dtype=np.int64), np.random.default_rng(0))
    marked = np.random.default_rng(2).integers(0, 30, 20)
    negative = np.random.default_rng(3).integers(0, 30, 20)
    deg = np.diff(g.indptr).astype(float)
    new = np.zeros((2, g.n), dtype=np.int64)
    for i in range(g.n):
        nb = g.neighbours(i)
        view = NodeView(i, 0, nb, received=[{int(j): (0.0, deg[j], 0.0) for j in nb}],
                        memory={"d": deg[i], "marked": int(marked[i]), "negative": int(negative[i])})
        moves = _walk(p, i, view, 6)
        new[:, i] += view.memory["stays"]
        for j, (m, q) in moves.items():
            new[0, j] += m
            new[1, j] += q
    alpha = edge_coefficients(g, 2.0)
    for kind, counts in ((0, marked), (1, negative)):
        ref, _ = walk_tokens(counts, g, alpha, g.speeds, p._key, 6, kind)
        np.testing.assert_array_equal(new[kind], ref)
    new_m, new_n, _ = _walk_once(g, 2.0, marked, negative, p._key, step=6)  # before annihilation
    np.testing.assert_array_equal(new_m, new[0])
    np.testing.assert_array_equal(new_n, new[1])
