"""Ghosh et al. 1995 bounds (Theorems 3.1-3.4, 5.1, Lemma 6.3) beside measured runs."""

import itertools
import math
from collections import namedtuple

import numpy as np
import pytest

import tokendist.graphs as graphs
from tokendist.analysis import predict
from tokendist.engine import make_loads, simulate
from tokendist.graphs import make_graph

Estimate = namedtuple("Estimate", "value lower upper exact method")


def _brute_alpha(g):
    best = math.inf
    for r in range(1, g.n // 2 + 1):
        for S in itertools.combinations(range(g.n), r):
            inside = np.zeros(g.n, bool)
            inside[list(S)] = True
            best = min(best, int((inside[g.u] != inside[g.v]).sum()) / r)
    return best


@pytest.fixture
def exact_alpha(monkeypatch):
    """Use the graphs module's expansion when it exists; else a brute-force stand-in (tiny graphs)."""
    if getattr(graphs, "edge_expansion", None) is None:
        monkeypatch.setattr(graphs, "edge_expansion", lambda g: Estimate(*(3 * [_brute_alpha(g)]), True, "brute"),
                            raising=False)


@pytest.mark.parametrize("algo", ["multi-port", "single-port", "ds", "async-multi-port"])
def test_bounds_registered_and_labelled(exact_alpha, algo):
    g = make_graph("torus:3x4")
    loads = make_loads("point:240", g)
    p = predict(algo, g, loads)
    alpha = p["alpha"]["value"]
    assert alpha == pytest.approx(_brute_alpha(g))
    assert p["Delta"] == 240 - 20
    key = "order_time_d_Delta_over_alpha" if algo == "single-port" else "order_time_Delta_over_alpha"
    expected = (4 if algo == "single-port" else 1) * 220 / alpha
    assert p[key] == pytest.approx(expected)
    assert p["lemma_6_3_offline_time_to_ceil_rho_plus_d"] == math.ceil(220 / alpha)
    assert p["offline_steps_to_ceil_rho_plus_d"] <= p["lemma_6_3_offline_time_to_ceil_rho_plus_d"]


def test_theorem3_2_explicit_bounds_hold_for_multi_port(exact_alpha):
    for spec in ("ring:10", "hypercube:3", "torus:3x4"):
        g = make_graph(spec)
        loads = make_loads("point:500", g)
        p = predict("multi-port", g, loads)
        r = simulate(g, "multi-port", loads, max_steps=50_000)
        assert r.final["discrepancy"] <= p["explicit_final_discrepancy_6Jd_plus_2d_minus_1"]
        assert r.steps <= p["explicit_time_c25_eps1_24"]
        assert r.steps >= p["offline_steps_to_ceil_rho_plus_d"] or r.final["max"] > -(-500 // g.n) + g.max_degree


def test_theorem3_1_explicit_final_discrepancy_for_single_port(exact_alpha):
    g = make_graph("torus:3x4")
    loads = make_loads("point:300", g)
    p = predict("single-port", g, loads)
    r = simulate(g, "single-port", loads, seed=2, max_steps=20_000)
    assert r.final["discrepancy"] <= p["explicit_final_discrepancy_2J"]
