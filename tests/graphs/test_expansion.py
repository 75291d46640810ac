"""Expansion and conductance: exhaustive search against a naive reference, bounds that bracket it."""

import itertools

import networkx as nx
import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from tokendist.errors import TokendistError
from tokendist.graphs import (Graph, edge_expansion, effective_resistances, electrical_conductance,
                              fluid_conductance, from_networkx, make_graph, max_degree_diffusivity,
                              node_expansion)


def naive(g, weights=None):
    """Deliberately naive Ghosh et al. (Sec. 2) definitions: every set S with 1 <= |S| <= n/2."""
    w = np.ones(g.m) if weights is None else weights
    G = g.to_networkx()
    alpha = mu = np.inf
    for k in range(1, g.n // 2 + 1):
        for s in itertools.combinations(range(g.n), k):
            s = set(s)
            cut = sum(w[e] for e in range(g.m) if (int(g.u[e]) in s) != (int(g.v[e]) in s))
            nb = {y for x in s for y in G[x]} - s
            alpha, mu = min(alpha, cut / k), min(mu, len(nb) / k)
    return alpha, mu


@st.composite
def connected_graphs(draw, min_n=2, max_n=9):
    n = draw(st.integers(min_n, max_n))
    edges = {(draw(st.integers(0, i - 1)), i) for i in range(1, n)}
    pairs = [(a, b) for a in range(n) for b in range(a + 1, n)]
    edges |= set(draw(st.lists(st.sampled_from(pairs), max_size=2 * n)))
    perm = draw(st.permutations(range(n)))
    return Graph.from_edges(n, [(perm[a], perm[b]) for a, b in edges])


@given(connected_graphs())
def test_exhaustive_expansion_matches_naive_definition(g):
    alpha, mu = naive(g)
    a, m = edge_expansion(g), node_expansion(g)
    assert a.exact and m.exact
    assert a.value == pytest.approx(alpha) and m.value == pytest.approx(mu)
    p = max_degree_diffusivity(g)
    assert fluid_conductance(g).value == pytest.approx(naive(g, p)[0])
    # Ghosh et al. (Sec. 1): mu <= alpha <= d mu.
    assert m.value <= a.value + 1e-12 and a.value <= g.max_degree * m.value + 1e-12


@given(connected_graphs(min_n=4, max_n=12))
def test_cheeger_lower_le_exact_le_sweep_upper(g):
    for f in (edge_expansion, node_expansion, fluid_conductance):
        exact = f(g)
        est = f(g, exact_limit=0)
        assert not est.exact and est.lower <= exact.value + 1e-9 and exact.value <= est.upper + 1e-9
        assert est.value == est.upper
    exact = electrical_conductance(g)
    est = electrical_conductance(g, exact_limit=0)
    assert exact.exact and not est.exact
    assert est.lower <= exact.value + 1e-9 and exact.value <= est.upper + 1e-9


@pytest.mark.parametrize("spec, alpha, mu", [
    ("ring:8", 0.5, 0.5), ("ring:9", 0.5, 0.5), ("path:8", 0.25, 0.25), ("hypercube:4", 1.0, 0.75),
    ("complete:6", 3.0, 1.0), ("complete:7", 4.0, 4 / 3), ("star:6", 1.0, 1 / 3), ("torus:4x4", 1.0, 0.75),
])
def test_known_expansions(spec, alpha, mu):
    g = make_graph(spec)
    assert edge_expansion(g).value == pytest.approx(alpha)
    assert node_expansion(g).value == pytest.approx(mu)


def test_effective_resistance_closed_forms():
    # Unit resistors: ring of n nodes R(0, k) = k (n - k) / n; K_n: R = 2 / n; path: R = distance.
    r = effective_resistances(make_graph("ring:10"), weights="unit")
    assert r[0, 5] == pytest.approx(2.5) and r[0, 3] == pytest.approx(2.1)
    assert electrical_conductance(make_graph("complete:6"), weights="unit").value == pytest.approx(3.0)
    assert electrical_conductance(make_graph("path:7"), weights="unit").value == pytest.approx(1 / 6)
    # Resistances 1/P_ij scale with P: on a d-regular graph P = 1/(2d) everywhere.
    g = make_graph("torus:4x4")
    assert electrical_conductance(g).value == pytest.approx(electrical_conductance(g, weights="unit").value / 8)
    G = g.to_networkx()
    assert r[0, 5] == pytest.approx(nx.resistance_distance(nx.cycle_graph(10), 0, 5))
    assert effective_resistances(g, weights="unit")[0, 10] == pytest.approx(nx.resistance_distance(G, 0, 10))


def test_bounds_beyond_the_exact_limit_are_labelled_and_bracket_known_values():
    g = make_graph("torus:12x12")
    a = edge_expansion(g)
    assert not a.exact and "sweep" in a.method and a.value == a.upper
    # A half torus (72 nodes) has 24 cut edges, so alpha <= 1/3.
    assert a.lower <= 1 / 3
    exact = electrical_conductance(g)
    e = electrical_conductance(g, exact_limit=100)
    assert exact.exact and not e.exact and e.lower <= exact.value <= e.upper


def test_errors():
    with pytest.raises(TokendistError, match="disconnected"):
        edge_expansion(from_networkx(nx.disjoint_union(nx.path_graph(2), nx.path_graph(2))))
    with pytest.raises(TokendistError, match="too large"):
        edge_expansion(make_graph("ring:5"), exact_limit=40)
    with pytest.raises(TokendistError, match="weights"):
        fluid_conductance(make_graph("ring:5"), weights="nope")
