"""FOS, SOS, fos-floor and sos-iou (Elsässer, Monien, Schamberger 2006, Sec. 2-3)."""

import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

from tokendist import TokendistError, make_graph, simulate
from tokendist.engine import EdgeFailures, make_protocol

from ..strategies import random_connected_graph
from tokendist.protocols.heterogeneous._matrix import (diffusion_matrix, edge_coefficients, scaled_speeds,
                                                       sos_beta, spectrum)


def naive_M(graph, c=2.0, speeds=None):
    """M from equation (3), entry by entry with Python loops (the deliberately naive reference)."""
    n = graph.n
    s = np.ones(n) if speeds is None else np.asarray(speeds, float)
    nbrs = [set() for _ in range(n)]
    for a, b in zip(graph.u.tolist(), graph.v.tolist()):
        nbrs[a].add(b)
        nbrs[b].add(a)
    M = np.zeros((n, n))
    for i in range(n):
        M[i, i] = 1.0
        for j in nbrs[i]:
            cij = 1.0 / (c * max(len(nbrs[i]), len(nbrs[j])))
            M[i, j] += cij / s[j]
            M[i, i] -= cij / s[i]
    return M


@st.composite
def heterogeneous_graphs(draw, max_n=12):
    n = draw(st.integers(2, max_n))
    rng = np.random.default_rng(draw(st.integers(0, 2**31)))
    g = random_connected_graph(rng, n, draw(st.integers(0, 2 * n)))
    return g, rng.integers(0, 200, n)


def _error_sinv(graph, w):
    s = graph.speeds
    e = w - w.sum() * s / s.sum()
    return float(np.sqrt((e * e / s).sum()))


def test_fos_step_matches_naive_matrix():
    g = make_graph("grid:3x4").with_speeds(np.linspace(1.0, 2.1, 12))
    w0 = np.arange(12, dtype=float) * 7
    r = simulate(g, "fos", w0, max_steps=5, keep_loads_every=1)
    M = naive_M(g, 2.0, g.speeds)
    w = w0.copy()
    for k in range(1, 6):
        w = M @ w
        np.testing.assert_allclose(r.load_history[k], w, rtol=1e-12, atol=1e-9)
    np.testing.assert_allclose(diffusion_matrix(g, edge_coefficients(g, 2.0), g.speeds).toarray(), M, atol=1e-15)
    np.testing.assert_allclose(M.sum(axis=0), 1.0)          # column-stochastic: load is conserved
    np.testing.assert_allclose(M @ g.speeds, g.speeds)      # s is the fixed point (eq. (2))


@settings(max_examples=25, deadline=None)
@given(heterogeneous_graphs())
def test_lemma1_fos_converges_to_speed_weighted_ideal(case):
    g, w0 = case
    s = g.speeds
    spec = spectrum(g, edge_coefficients(g, 2.0), s)
    gamma = spec["gamma"]
    assert gamma < 1
    eps = 1e-7
    k = int(np.ceil(np.log(eps) / np.log(gamma))) + 1 if gamma > 0 else 2
    r = simulate(g, "fos", w0, max_steps=min(k, 20000), keep_loads_every=1)
    ideal = w0.sum() * s / s.sum()
    # ||e^k|| in the S^{-1} norm shrinks at least by gamma each step (M is symmetric in that norm).
    e = [_error_sinv(g, w) for w in r.load_history]
    for a, b in zip(e, e[1:]):
        assert b <= gamma * a * (1 + 1e-9) + 1e-9
    np.testing.assert_allclose(r.loads, ideal, atol=max(1e-6, 10 * eps * w0.sum()))
    assert r.loads.sum() == pytest.approx(w0.sum())


def test_sos_beta_is_as_stated():
    g = make_graph("torus:6x6").with_speeds(np.random.default_rng(1).uniform(1, 2, 36))
    p = make_protocol("sos")
    p.check_graph(g)
    p.reset(g, np.zeros(36), np.random.default_rng(0))
    eig = np.sort(np.abs(np.linalg.eigvals(naive_M(g, 2.0, g.speeds))))
    gamma = eig[-2]
    assert p.spectrum["gamma"] == pytest.approx(gamma, abs=1e-10)
    assert p.beta == pytest.approx(2 / (1 + np.sqrt(1 - gamma**2)))
    assert sos_beta(0.0) == 1.0
    assert make_protocol("sos", {"beta": "1.5"}).options["beta"] == 1.5


def test_sos_first_step_is_fos_and_then_eq4():
    g = make_graph("ring:10").with_speeds(np.linspace(1, 2, 10))
    w0 = np.arange(10.0) ** 2
    r = simulate(g, "sos", w0, max_steps=6, keep_loads_every=1, allow_infeasible=True)
    M = naive_M(g, 2.0, g.speeds)
    beta = r.report["beta"]
    h = [w0, M @ w0]
    for _ in range(5):
        h.append(beta * M @ h[-1] + (1 - beta) * h[-2])
    np.testing.assert_allclose(r.load_history, np.array(h), rtol=1e-10, atol=1e-8)


@pytest.mark.parametrize("spec", ["ring:24", "torus:12x12"])
def test_lemma1_sos_faster_than_fos(spec):
    g = make_graph(spec)
    g = g.with_speeds(np.random.default_rng(2).uniform(1, 1.5, g.n))
    init = f"point:{g.n * 100}"
    target = 1e-6 * g.n * 100
    steps = {}
    for algo in ("fos", "sos"):
        r = simulate(g, algo, init, max_steps=20000, allow_infeasible=True)
        steps[algo] = r.steps_to("l2_error", target)
    gamma = spectrum(g, edge_coefficients(g, 2.0), g.speeds)["gamma"]
    # FOS needs ~ 1/(1-gamma) steps per e-fold, SOS ~ 1/sqrt(1-gamma): a large factor when gamma ~ 1.
    assert steps["sos"] * 3 < steps["fos"], steps
    assert steps["fos"] <= np.log(np.sqrt(g.speeds.max() / g.speeds.min()) / 1e-6) / -np.log(gamma) + 1


def test_negative_diagonal_is_refused_unless_allowed():
    g = make_graph("torus:4x4").with_speeds(np.full(16, 0.5))
    with pytest.raises(TokendistError, match="negative diagonal"):
        simulate(g, "fos", "point:100", max_steps=3, params={"c": "1.5"})
    r = simulate(g, "fos", "point:100", max_steps=3, params={"c": "1.5", "speed_scale": "min"})
    assert r.tokens == 100
    r = simulate(g, "fos", "point:100", max_steps=3, params={"c": "1.5", "allow_invalid": "true"},
                 allow_infeasible=True)
    assert r.loads.sum() == pytest.approx(100)
    with pytest.raises(TokendistError, match="negative diagonal"):
        simulate(g, "random-walk", "point:100", max_steps=3, params={"c": "1.5"})


def test_speed_scale_leaves_ideal_loads_unchanged():
    g = make_graph("hypercube:4").with_speeds(np.random.default_rng(3).uniform(0.8, 1.2, 16))
    finals = [simulate(g, "fos", "point:1600", max_steps=3000, params={"speed_scale": sc}).loads
              for sc in ("raw", "min", "mean")]
    for f in finals[1:]:
        np.testing.assert_allclose(f, finals[0], rtol=1e-8)
    np.testing.assert_allclose(scaled_speeds(g, "mean").mean(), 1.0)


def test_fos_floor_matches_naive_loop_and_fixed_point():
    g = make_graph("grid:4x4").with_speeds(np.random.default_rng(4).uniform(0.8, 1.2, 16))
    w0 = np.random.default_rng(5).integers(0, 300, 16)
    r = simulate(g, "fos-floor", w0, max_steps=400, keep_loads_every=1)
    s, n = g.speeds, g.n
    w = w0.copy()
    for k in range(1, min(r.steps, 30) + 1):
        nw = w.copy()
        for a, b in zip(g.u.tolist(), g.v.tolist()):
            cab = 1.0 / (2.0 * max(g.degrees[a], g.degrees[b]))
            y = cab * (w[a] / s[a] - w[b] / s[b])
            t = int(np.floor(abs(y))) * (1 if y > 0 else -1)
            nw[a] -= t
            nw[b] += t
        w = nw
        np.testing.assert_array_equal(r.load_history[k], w)
    assert r.stop_reason == "stable" and r.loads.sum() == w0.sum() and r.loads.min() >= 0
    alpha = edge_coefficients(g, 2.0)
    x = r.loads / s
    assert np.all(np.abs(alpha * (x[g.u] - x[g.v])) < 1)


def test_dynamic_fos_conserves_and_converges_under_edge_failures():
    g = make_graph("torus:8x8").with_speeds(np.random.default_rng(6).uniform(0.8, 1.2, 64))
    r = simulate(g, "fos", "point:4096", seed=3, max_steps=1500, dynamics=EdgeFailures(0.1))
    assert r.loads.sum() == pytest.approx(4096)
    assert r.final["l2_error"] < 1e-6


def _manual_sos_iou(g, w0, steps, **params):
    # The per-edge flows come from the numpy reference; the numba kernel equals it step by step
    # (test_heterogeneous_kernels.py), IOUs included.
    params.setdefault("kernel", "numpy")
    p = make_protocol("sos-iou", params)
    p.check_graph(g)
    p.reset(g, w0.copy(), np.random.default_rng(0))
    w = w0.copy()
    ideal_total = np.zeros(g.m)
    sent_total = np.zeros(g.m)
    for t in range(steps):
        out = p.step(t, g, w)
        ideal_total += p._prev
        sent_total += out.flows
        assert out.loads.sum() == w0.sum()
        w = out.loads
    return p, w, ideal_total, sent_total


def test_sos_iou_accounting_is_total_ideal_minus_total_sent():
    g = make_graph("torus:6x6").with_speeds(np.random.default_rng(7).uniform(0.8, 1.2, 36))
    w0 = np.zeros(36, dtype=np.int64)
    w0[0] = 36 * 36
    p, w, ideal_total, sent_total = _manual_sos_iou(g, w0, 200)
    np.testing.assert_allclose(p._iou, ideal_total - sent_total, atol=1e-6)
    rep = p.report()
    assert rep["negative_load_events"] > 0       # SOS overdraws here; the IOUs absorb it
    assert w.min() >= 0
    assert rep["iou_units"] == np.floor(np.abs(p._iou)).sum()
    assert len(rep["iou_units_series"]) == 200


def test_sos_iou_overdraw_allow_goes_negative():
    g = make_graph("torus:6x6")
    r = simulate(g, "sos-iou", "point:1296", max_steps=60, params={"overdraw": "allow"}, allow_infeasible=True)
    assert r.infeasible_steps > 0
    assert r.loads.sum() == 1296


def test_sos_iou_never_negative_and_conserves_on_mobile_network():
    from tokendist.engine import RandomWaypoint

    dyn = RandomWaypoint(radius=0.25, speed=(0.01, 0.05), pause=2)
    r = simulate("ring:40", "sos-iou", "point:1600", seed=2, max_steps=150, dynamics=dyn, speeds="uniform:0.8..1.2")
    assert r.tokens == 1600 and r.loads.min() >= 0 and r.infeasible_steps == 0
