"""The randomized algorithm of Elsässer, Monien, Schamberger 2006, Sec. 3: phases, targets, walks."""

import numpy as np
import pytest

from tokendist import make_graph, simulate
from tokendist.engine import EdgeFailures, make_protocol
from tokendist.protocols._heterogeneous_matrix import diffusion_matrix, edge_coefficients
from tokendist.protocols._heterogeneous_random_walk import targets, walk_tokens


def naive_walk(counts, graph, alpha, s, rng):
    """Token by token, the same uniform draws, a Python loop over each row of M's column."""
    n = graph.n
    draws = rng.random(int(counts.sum()))
    new = np.zeros(n, dtype=np.int64)
    k = 0
    for i in range(n):
        nbrs = graph.neighbours(i)
        probs = [alpha[graph.edge_index(i, j)] / s[i] for j in nbrs]
        stay = 1.0 - sum(probs)
        for _ in range(counts[i]):
            u = draws[k]
            k += 1
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
    fast, moves = walk_tokens(counts, g, alpha, g.speeds, np.random.default_rng(9))
    slow = naive_walk(counts, g, alpha, g.speeds, np.random.default_rng(9))
    np.testing.assert_array_equal(fast, slow)
    assert fast.sum() == counts.sum() and moves.sum() <= counts.sum()


def test_walk_tokens_follows_column_of_M_statistically():
    # Seeded chi-square test: 40000 tokens on node 0 move by column 0 of M.
    g = make_graph("star:5").with_speeds(np.array([1.5, 0.8, 1.0, 1.2, 0.9, 1.1]))
    alpha = edge_coefficients(g, 1.5)
    counts = np.zeros(6, dtype=np.int64)
    counts[0] = 40000
    new, _ = walk_tokens(counts, g, alpha, g.speeds, np.random.default_rng(123))
    expected = 40000 * diffusion_matrix(g, alpha, g.speeds).toarray()[:, 0]
    chi2 = float(((new - expected) ** 2 / expected).sum())
    assert chi2 < 20.5  # 5 degrees of freedom: p ~ 0.001


def test_lemma2_walk_reaches_speed_proportional_distribution():
    g = make_graph("torus:4x4").with_speeds(np.random.default_rng(3).uniform(0.8, 1.2, 16))
    alpha = edge_coefficients(g, 2.0)
    rng = np.random.default_rng(4)
    counts = np.zeros(16, dtype=np.int64)
    counts[5] = 30000
    for _ in range(150):
        counts, _ = walk_tokens(counts, g, alpha, g.speeds, rng)
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
