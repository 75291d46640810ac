"""Graph.edge_index (binary search in CSR rows) and the structural matrix, against plain references;
what Graph.from_edges refuses."""

import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

from tokendist.errors import TokendistError
from tokendist.graphs import Graph, make_graph


@st.composite
def graphs_and_queries(draw):
    n = draw(st.integers(1, 25))
    pairs = draw(st.sets(st.tuples(st.integers(0, n - 1), st.integers(0, n - 1)), max_size=60))
    edges = sorted({(min(a, b), max(a, b)) for a, b in pairs if a != b})
    queries = draw(st.lists(st.tuples(st.integers(-2, n + 2), st.integers(-2, n + 2)), min_size=1, max_size=40))
    return Graph.from_edges(n, edges), queries


@settings(max_examples=150, deadline=None)
@given(graphs_and_queries())
def test_edge_index_is_the_position_of_the_pair_in_the_edge_list(case):
    g, queries = case
    where = {(int(a), int(b)): e for e, (a, b) in enumerate(zip(g.u, g.v))}
    a, b = np.array(queries).T
    expected = [where.get((min(x, y), max(x, y)), -1) for x, y in queries]
    assert g.edge_index(a, b).tolist() == expected
    assert g.edge_index(b, a).tolist() == expected


def test_edge_index_round_trips_every_edge_of_a_big_graph():
    g = make_graph("torus:60x50")
    assert np.array_equal(g.edge_index(g.u, g.v), np.arange(g.m))
    assert np.array_equal(g.edge_index(g.v, g.u), np.arange(g.m))
    assert "edge_keys" not in vars(g)  # no per-edge key array kept for the lookups


def test_structure_matrix_shares_the_csr_arrays_and_is_not_cached():
    g = make_graph("grid:6x7")
    a = g._structure()
    assert np.shares_memory(a.indices, g.indices)
    assert np.array_equal(a.toarray() != 0, g.adjacency.toarray() != 0)
    h = make_graph("torus:9x9")
    assert h.is_connected and "adjacency" not in vars(h)


@pytest.mark.parametrize("n, edges, message", [
    (3, [(0.5, 1)], "node ids must be integers"),   # was truncated to the edge (0, 1)
    (3, [(0, float("nan"))], "node ids must be integers"),
    (3, [("a", "b")], "node ids must be integers"),
    (3.7, [(0, 1)], "number of nodes must be an integer"),  # was truncated to 3
    (True, [], "number of nodes must be an integer"),
    (0, [], "at least one node"),
    (3, [(0, 1, 2)], "pairs"),
    (3, [(0, 3)], "out of range"),
])
def test_from_edges_refuses_what_is_not_a_graph(n, edges, message):
    with pytest.raises(TokendistError, match=message):
        Graph.from_edges(n, edges)


def test_from_edges_takes_integral_floats_and_numpy_ints():
    g = Graph.from_edges(np.int64(3), [(0.0, 1.0), (2, 1)])
    assert (g.n, g.u.tolist(), g.v.tolist()) == (3, [0, 1], [1, 2])
