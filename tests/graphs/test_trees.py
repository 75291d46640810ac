"""Spanning trees, centroids and biconnectivity against brute force and networkx."""

import itertools

import networkx as nx
import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from tokendist.errors import TokendistError
from tokendist.graphs import (Graph, bfs_tree, biconnected_components, cut_vertices, diameter, from_networkx,
                              is_biconnected, make_graph, min_diameter_spanning_tree, parents, subtree_sizes,
                              tree_centroid)


@st.composite
def connected_graphs(draw, max_n=9):
    n = draw(st.integers(2, max_n))
    # A random spanning tree plus random extra edges: always connected.
    edges = {(draw(st.integers(0, i - 1)), i) for i in range(1, n)}
    pairs = [(a, b) for a in range(n) for b in range(a + 1, n)]
    edges |= set(draw(st.lists(st.sampled_from(pairs), max_size=2 * n)))
    perm = draw(st.permutations(range(n)))
    return Graph.from_edges(n, [(perm[a], perm[b]) for a, b in edges], spec="hypothesis")


@st.composite
def trees(draw, max_n=30):
    n = draw(st.integers(1, max_n))
    return Graph.from_edges(n, [(draw(st.integers(0, i - 1)), i) for i in range(1, n)], spec="tree")


def brute_force_min_tree_diameter(g):
    best = None
    for sub in itertools.combinations(range(g.m), g.n - 1):
        mask = np.zeros(g.m, bool)
        mask[list(sub)] = True
        t = g.edge_subgraph(mask)
        if t.is_tree:
            d = diameter(t)
            best = d if best is None else min(best, d)
    return best


@given(connected_graphs(max_n=7))
def test_min_diameter_spanning_tree_is_optimal_against_all_spanning_trees(g):
    t = min_diameter_spanning_tree(g, exact=True)
    assert t.is_tree and t.n == g.n
    assert np.all(g.edge_index(t.u, t.v) >= 0)  # a subgraph of g
    if g.m <= 11:
        assert diameter(t) == brute_force_min_tree_diameter(g)


def test_min_diameter_spanning_tree_beats_every_centre_bfs_tree_when_the_centre_is_an_edge():
    # The documented example: every BFS tree from a centre node has diameter 4, the optimum is 3.
    g = Graph.from_edges(9, [(0, 2), (0, 8), (1, 4), (1, 7), (2, 3), (2, 4), (2, 5), (2, 6), (2, 7), (5, 6),
                             (6, 7), (6, 8), (7, 8)])
    from tokendist.graphs import centre
    assert all(diameter(bfs_tree(g, int(c))) == 4 for c in centre(g))
    assert diameter(min_diameter_spanning_tree(g)) == 3 == brute_force_min_tree_diameter(g)


def test_heuristic_spanning_tree_is_a_bfs_tree_within_twice_the_eccentricity():
    g = make_graph("torus:12x12")
    t = min_diameter_spanning_tree(g, exact=False)
    assert t.is_tree and diameter(t) <= 2 * 12
    assert diameter(min_diameter_spanning_tree(g, exact=True)) == 23  # 2 * radius(=12) - 1: the edge centre


@given(connected_graphs(max_n=12), st.data())
def test_bfs_tree_preserves_distances_from_the_root(g, data):
    root = data.draw(st.integers(0, g.n - 1))
    t = bfs_tree(g, root)
    assert t.is_tree
    G, T = g.to_networkx(), t.to_networkx()
    assert nx.single_source_shortest_path_length(G, root) == nx.single_source_shortest_path_length(T, root)
    p = parents(g, root)
    dist = nx.single_source_shortest_path_length(G, root)
    assert p[root] == -1
    for x in range(g.n):
        if x != root:
            assert T.has_edge(x, int(p[x])) and dist[int(p[x])] == dist[x] - 1


@given(trees())
def test_centroid_and_subtree_sizes_against_naive_removal(g):
    G = g.to_networkx()
    weights = []
    for x in range(g.n):
        H = G.copy()
        H.remove_node(x)
        weights.append(max((len(c) for c in nx.connected_components(H)), default=0))
    expect = [x for x in range(g.n) if weights[x] == min(weights)]
    assert tree_centroid(g).tolist() == expect
    assert 1 <= len(expect) <= 2 and min(weights) <= g.n / 2
    sizes = subtree_sizes(g, 0)
    for x in range(g.n):
        below = nx.descendants(nx.bfs_tree(G, 0), x)
        assert sizes[x] == len(below) + 1


@given(connected_graphs(max_n=10))
def test_biconnectivity_against_networkx(g):
    G = g.to_networkx()
    assert cut_vertices(g).tolist() == sorted(nx.articulation_points(G))
    assert is_biconnected(g) == nx.is_biconnected(G)
    assert sorted(map(tuple, map(np.ndarray.tolist, biconnected_components(g)))) == \
        sorted(tuple(sorted(c)) for c in nx.biconnected_components(G))


def test_known_trees_and_errors():
    assert tree_centroid(make_graph("path:6")).tolist() == [2, 3]
    assert tree_centroid(make_graph("star:5")).tolist() == [0]
    assert tree_centroid(make_graph("kary:2,3")).tolist() == [0]
    assert subtree_sizes(make_graph("kary:2,2"), 0).tolist() == [7, 3, 3, 1, 1, 1, 1]
    assert is_biconnected(make_graph("torus:4x4")) and not is_biconnected(make_graph("kary:2,2"))
    disconnected = from_networkx(nx.disjoint_union(nx.path_graph(3), nx.path_graph(3)))
    with pytest.raises(TokendistError, match="disconnected"):
        bfs_tree(disconnected)
    with pytest.raises(TokendistError, match="tree"):
        tree_centroid(make_graph("ring:5"))
    with pytest.raises(TokendistError, match="out of range"):
        bfs_tree(make_graph("ring:5"), 7)
