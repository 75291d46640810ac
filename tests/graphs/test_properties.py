"""Degrees, components, bipartiteness, distances and girth against networkx."""

import networkx as nx
import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from tokendist.errors import TokendistError
from tokendist.graphs import (Graph, bipartition, centre, connected_components, degree_stats, diameter,
                              eccentricities, from_networkx, girth, is_bipartite, make_graph, radius)


@st.composite
def graphs(draw, max_n=14):
    n = draw(st.integers(1, max_n))
    pairs = [(a, b) for a in range(n) for b in range(a + 1, n)]
    edges = draw(st.lists(st.sampled_from(pairs), unique=True, max_size=len(pairs))) if pairs else []
    return Graph.from_edges(n, edges)


def nx_girth(G):
    g = nx.girth(G)
    return None if g == float("inf") else int(g)


@given(graphs())
def test_girth_components_bipartite_against_networkx(g):
    G = g.to_networkx()
    assert girth(g) == nx_girth(G)
    assert is_bipartite(g) == nx.is_bipartite(G)
    side = bipartition(g)
    if side is not None:
        assert np.all(side[g.u] != side[g.v])
    assert [c.tolist() for c in connected_components(g)] == sorted(sorted(c) for c in nx.connected_components(G))
    ds = degree_stats(g)
    degs = [d for _, d in G.degree()]
    assert ds == {"min": min(degs), "avg": pytest.approx(sum(degs) / len(degs)), "max": max(degs)}


@given(graphs())
def test_distances_against_networkx(g):
    G = g.to_networkx()
    if not nx.is_connected(G):
        with pytest.raises(TokendistError, match="disconnected"):
            diameter(g)
        return
    ecc = nx.eccentricity(G)
    assert eccentricities(g).tolist() == [ecc[i] for i in range(g.n)]
    assert diameter(g) == nx.diameter(G) and radius(g) == nx.radius(G)
    assert centre(g).tolist() == sorted(nx.center(G))


@pytest.mark.parametrize("spec", ["random-tree:60", "kary:3,3", "path:9", "star:5"])
def test_tree_fast_path_eccentricities(spec):
    g = make_graph(spec, seed=2)
    G = g.to_networkx()
    ecc = nx.eccentricity(G)
    assert eccentricities(g).tolist() == [ecc[i] for i in range(g.n)]
    assert girth(g) is None


@pytest.mark.parametrize("spec, n, m, girth_, diam", [
    ("torus:16x16", 256, 512, 4, 16), ("grid:16x16", 256, 480, 4, 30), ("hypercube:8", 256, 1024, 4, 8),
    ("ring:9", 9, 9, 9, 4), ("ring:10", 10, 10, 10, 5), ("complete:6", 6, 15, 3, 1), ("torus:3x3", 9, 18, 3, 2),
    ("torus:5x7", 35, 70, 4, 5),
])
def test_known_girths_and_diameters(spec, n, m, girth_, diam):
    g = make_graph(spec)
    assert (g.n, g.m, girth(g), diameter(g)) == (n, m, girth_, diam)


def test_table1_graphs_against_networkx_within_seconds():
    # The ten topologies of Elsässer et al. (2006), Table 1; the largest (lps:3,17, 4896 nodes)
    # is covered by the CLI/slow tests, here a mid-size LPS graph.
    for spec in ["butterfly:6", "ccc:6", "debruijn:8", "fft:6", "shuffle-exchange:8", "lps-quotient:3,7"]:
        g = make_graph(spec)
        G = g.to_networkx()
        assert girth(g) == nx_girth(G)
        assert diameter(g) == nx.diameter(G)


def test_disconnected_quantities_raise_one_line_errors():
    g = from_networkx(nx.disjoint_union(nx.cycle_graph(4), nx.cycle_graph(3)))
    for f in (diameter, radius, centre, eccentricities):
        with pytest.raises(TokendistError, match="needs a connected graph"):
            f(g)
    assert girth(g) == 3 and not is_bipartite(g)
