"""Sec. 3 of Subramanian-Scherson (1994): spectrum of P, conductances, Theorem 3.1, mesh formulas."""

import itertools
import math

import networkx as nx
import numpy as np
import pytest
from hypothesis import given, settings

from tokendist.analysis import (diffusion_bounds, diffusion_eigenvalues, diffusion_electrical_conductance,
                                diffusion_fluid_conductance, diffusion_gamma, diffusion_lambda2, effective_resistances,
                                error_bound, iterations_to_tolerance, mesh_dimensions, mesh_eigenvalues,
                                mesh_fluid_conductance, mesh_lambda2, mesh_max_resistance, predict,
                                running_time_bound)
from tokendist.errors import TokendistError
from tokendist.graphs import make_graph
from tokendist.protocols.diffusion._diffusivity import diffusivity

from ..protocols.test_diffusion import connected_graphs


def _naive_fluid(graph, alpha):
    """min over all cuts of CAP(S, S-bar) / min(|S|, |S-bar|), by itertools."""
    best = math.inf
    for k in range(1, graph.n):
        for s in itertools.combinations(range(graph.n), k):
            inside = np.zeros(graph.n, dtype=bool)
            inside[list(s)] = True
            cap = alpha[inside[graph.u] != inside[graph.v]].sum()
            best = min(best, cap / min(k, graph.n - k))
    return best


def _naive_resistance(graph, alpha, a, b):
    """Effective resistance by networkx (resistance 1/P_ij on edge ij)."""
    g = nx.Graph()
    for e in range(graph.m):
        g.add_edge(int(graph.u[e]), int(graph.v[e]), weight=1.0 / float(alpha[e]))  # a resistance
    return nx.resistance_distance(g, a, b, weight="weight", invert_weight=True)


@pytest.mark.parametrize("spec", ["ring:6", "star:4", "grid:2x3", "complete:4", "hypercube:3"])
def test_fluid_conductance_matches_naive_enumeration(spec):
    g = make_graph(spec)
    a = diffusivity(g)
    assert diffusion_fluid_conductance(g) == pytest.approx(_naive_fluid(g, a))


@pytest.mark.parametrize("spec", ["ring:7", "star:4", "grid:3x3", "hypercube:3"])
def test_effective_resistance_matches_networkx(spec):
    g = make_graph(spec)
    a = diffusivity(g)
    r = effective_resistances(g)
    for x, y in [(0, g.n - 1), (0, 1), (1, g.n // 2)]:
        if x != y:
            assert r[x, y] == pytest.approx(_naive_resistance(g, a, x, y), rel=1e-9)


@pytest.mark.parametrize("dims", [(8,), (9,), (4, 4), (3, 5), (4, 4, 4), (2, 2, 2, 2)])
def test_sec32_mesh_formulas_match_the_dense_computation(dims):
    spec = "hypercube:4" if dims == (2, 2, 2, 2) else ("ring:%d" % dims[0] if len(dims) == 1 else "torus:" + "x".join(map(str, dims)))
    g = make_graph(spec)
    assert mesh_dimensions(g) == dims
    ev = diffusion_eigenvalues(g)
    np.testing.assert_allclose(ev, mesh_eigenvalues(dims), atol=1e-12)
    assert ev[1] == pytest.approx(mesh_lambda2(dims))  # lambda_2 = 1 - (1/d) sin^2(pi / max n_i)
    assert 1 / diffusion_electrical_conductance(g) == pytest.approx(mesh_max_resistance(dims))
    if g.n <= 16 and all(x % 2 == 0 for x in dims):
        assert diffusion_fluid_conductance(g) == pytest.approx(mesh_fluid_conductance(dims))


def test_mesh_dimensions_only_where_the_default_P_is_the_papers_mesh_P():
    assert mesh_dimensions(make_graph("torus:2x5")) is None
    assert mesh_dimensions(make_graph("grid:4x4")) is None
    assert mesh_dimensions(make_graph("hypercube:3")) == (2, 2, 2)


@given(connected_graphs(max_n=12))
@settings(max_examples=30, deadline=None)
def test_theorem31_eigenvalue_brackets_from_conductances(graph):
    # 1 - 2 Gamma <= |lambda_2| <= 1 - Gamma / N and 1 - 2 Phi <= |lambda_2| <= 1 - Phi^2 / 2.
    lam = diffusion_gamma(graph)
    gam = diffusion_electrical_conductance(graph)
    phi = diffusion_fluid_conductance(graph)
    eps = 1e-9
    assert 1 - 2 * gam - eps <= lam <= 1 - gam / graph.n + eps
    assert 1 - 2 * phi - eps <= lam <= 1 - phi ** 2 / 2 + eps
    assert diffusion_lambda2(graph) == pytest.approx(lam)  # P_ii >= 1/2: P is PSD


def test_gamma_differs_from_lambda2_when_the_diagonal_is_small():
    g = make_graph("ring:4")
    assert diffusion_lambda2(g, matrix="uniform:1/3", min_diag=1 / 3) == pytest.approx(1 / 3)
    assert diffusion_gamma(g, matrix="uniform:1/3", min_diag=1 / 3) == pytest.approx(1 / 3)
    assert diffusion_gamma(g, matrix="uniform:0.45", min_diag=0.1) == pytest.approx(0.8)  # |1 - 4 * 0.45|


def test_iterations_and_running_time_formulas():
    assert iterations_to_tolerance(100.0, 0.5, 1.0) == 7  # 0.5^7 * 100 < 1 <= 0.5^6 * 100
    assert iterations_to_tolerance(0.5, 0.5, 1.0) == 0
    assert running_time_bound(100.0, 0.5, 1.0, c=2.0) == pytest.approx(2 * 7 + 2 * 100 / 0.5)
    np.testing.assert_allclose(error_bound(8.0, 0.5, 3), [8, 4, 2, 1])


def test_predictions_are_registered_for_every_diffusion_scheme():
    g = make_graph("torus:4x4")
    loads = np.zeros(16)
    loads[0] = 160
    for algo in ["diffusion", "diffusion-floor", "diffusion-ceil", "diffusion-random", "diffusion-oriented"]:
        out = predict(algo, g, loads, {})
        assert out["gamma"] == pytest.approx(0.75) and out["mesh_lambda2"] == pytest.approx(0.75)
        assert out["electrical_iterations_low"] <= out["error_bound_iterations"] <= out["electrical_iterations_high"]
    out = diffusion_bounds(make_graph("path:5"), [10, 0, 0, 0, 0])
    assert "mesh_lambda2" not in out and out["fluid_conductance"] > 0


def test_dense_limits_are_clear_errors():
    with pytest.raises(TokendistError, match="enumerates"):
        diffusion_fluid_conductance(make_graph("ring:30"))
