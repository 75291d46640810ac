"""st-numbering and st-orientation (Subramanian-Scherson 1994, Sec. 4, Cases 1 and 2)."""

import networkx as nx
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tokendist.errors import TokendistError
from tokendist.graphs import (Graph, biconnected_supergraph, make_graph, orientation_sources_sinks, st_numbering,
                              st_orientation)


@st.composite
def biconnected_graphs(draw, max_n=16):
    """A cycle plus random chords: biconnected, with s and t drawn among adjacent pairs."""
    n = draw(st.integers(3, max_n))
    perm = draw(st.permutations(list(range(n))))
    edges = {tuple(sorted((perm[i], perm[(i + 1) % n]))) for i in range(n)}
    extra = draw(st.lists(st.tuples(st.integers(0, n - 1), st.integers(0, n - 1)), max_size=2 * n))
    edges |= {(min(a, b), max(a, b)) for a, b in extra if a != b}
    g = Graph.from_edges(n, sorted(edges), spec="hypothesis")
    e = draw(st.integers(0, g.m - 1))
    s, t = (int(g.u[e]), int(g.v[e])) if draw(st.booleans()) else (int(g.v[e]), int(g.u[e]))
    return g, s, t


def _check_st_orientation(g, d, s, t):
    digraph = nx.DiGraph()
    digraph.add_nodes_from(range(g.n))
    digraph.add_edges_from(zip(np.where(d > 0, g.u, g.v).tolist(), np.where(d > 0, g.v, g.u).tolist()))
    assert nx.is_directed_acyclic_graph(digraph)  # no directed cycles
    sources, sinks = orientation_sources_sinks(g, d)
    assert sources.tolist() == [s] and sinks.tolist() == [t]  # unique minimal and maximal vertex
    assert g.edge_index(s, t) >= 0  # joined by an edge


@given(biconnected_graphs())
@settings(max_examples=60, deadline=None)
def test_sec4_case1_orientation_is_acyclic_with_one_adjacent_source_and_sink(case):
    g, s, t = case
    num = st_numbering(g, s, t)
    assert sorted(num.tolist()) == list(range(g.n)) and num[s] == 0 and num[t] == g.n - 1
    for v in range(g.n):
        if v not in (s, t):
            nb = num[g.neighbours(v)]
            assert nb.min() < num[v] < nb.max()
    _check_st_orientation(g, st_orientation(g, s, t), s, t)


@pytest.mark.parametrize("spec", ["ring:9", "torus:4x4", "hypercube:4", "complete:6", "grid:3x4", "path:2",
                                  "torus:5x3x3"])
def test_sec4_orientation_of_the_zoo(spec):
    g = make_graph(spec)
    d = st_orientation(g)
    assert set(d.tolist()) <= {-1, 1} and d.shape == (g.m,)
    _check_st_orientation(g, d, 0, int(g.neighbours(0)[0]))


def test_orientation_errors_are_clear():
    with pytest.raises(TokendistError, match="path:4 has cut vertex 1"):
        st_orientation(make_graph("path:4"))
    with pytest.raises(TokendistError, match="must be adjacent"):
        st_numbering(make_graph("ring:6"), 0, 3)
    with pytest.raises(TokendistError, match="not in the graph"):
        st_numbering(make_graph("ring:6"), 0, 9)
    g = Graph.from_edges(6, [(0, 1), (1, 2), (0, 2), (3, 4), (4, 5), (3, 5)], spec="two-triangles")
    with pytest.raises(TokendistError, match="not connected"):
        st_orientation(g)


@pytest.mark.parametrize("spec", ["path:7", "star:6", "kary:2,3", "random-tree:12", "grid:1x5"])
def test_sec4_case2_supergraph_is_biconnected_and_embeds_with_dilation_2(spec):
    g = make_graph(spec, seed=5)
    h, relay = biconnected_supergraph(g)
    assert nx.is_biconnected(h.to_networkx())
    real = relay < 0
    assert real.sum() == g.m and np.all(g.edge_index(h.u[real], h.v[real]) >= 0)
    for e in np.flatnonzero(~real):  # each added edge a-b runs over a-c-b with c a cut vertex
        c = relay[e]
        assert g.edge_index(h.u[e], c) >= 0 and g.edge_index(c, h.v[e]) >= 0
    cuts = set(nx.articulation_points(g.to_networkx()))
    assert set(relay[~real].tolist()) <= cuts
    _check_st_orientation(h, st_orientation(h), 0, int(h.neighbours(0)[0]))


def test_biconnected_graph_is_its_own_supergraph():
    g = make_graph("torus:4x4")
    h, relay = biconnected_supergraph(g)
    assert h is g and np.all(relay == -1)


@given(st.integers(2, 12), st.lists(st.tuples(st.integers(0, 11), st.integers(0, 11)), max_size=30))
@settings(max_examples=80, deadline=None)
def test_st_numbering_refuses_exactly_the_graphs_that_are_not_biconnected(n, pairs):
    edges = sorted({(min(a, b), max(a, b)) for a, b in pairs if a != b and max(a, b) < n})
    g = Graph.from_edges(n, edges, spec="hypothesis")
    if g.m == 0:
        return
    s, t = int(g.u[0]), int(g.v[0])
    ok = nx.is_biconnected(g.to_networkx()) if n > 2 else g.m == 1
    try:
        st_numbering(g, s, t)
        assert ok
    except TokendistError as exc:
        assert not ok and ("cut vertex" in str(exc) or "not connected" in str(exc))
        if "cut vertex" in str(exc):
            cut = int(str(exc).rsplit(" ", 1)[1])
            assert cut in set(nx.articulation_points(g.to_networkx()))
