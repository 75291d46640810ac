"""``cube_dimension``: which graphs are the hypercube in its binary labelling."""

import numpy as np
import pytest

from tokendist.graphs import Graph, make_graph
from tokendist.graphs._cube import cube_dimension


@pytest.mark.parametrize("d", range(1, 11))
def test_the_hypercubes_are_found(d):
    g = make_graph(f"hypercube:{d}")
    assert cube_dimension(g) == d == g.cube_dimension


def test_other_graphs_are_not_cubes():
    for spec in ["hypercube:0", "ring:4", "ring:8", "torus:4x4", "complete:4", "path:4", "star:3", "kary:2,2"]:
        assert cube_dimension(make_graph(spec)) is None, spec
    # The 2x2 torus is the 4-cycle 0-1-3-2-0: the 2-cube, labelled as one.
    assert cube_dimension(make_graph("torus:2x2")) == 2


def test_a_missing_edge_or_another_labelling_is_not_the_cube():
    g = make_graph("hypercube:6")
    u, v = g.u.astype(np.int64), g.v.astype(np.int64)
    assert cube_dimension(Graph(g.n, u[1:], v[1:])) is None
    # xor with a constant maps the cube onto itself: still the labelling.
    c = 0b101101
    assert cube_dimension(Graph(g.n, u ^ c, v ^ c)) == 6
    # A random relabelling is not (the edges join labels differing in more than one bit).
    perm = np.random.default_rng(0).permutation(g.n)
    assert cube_dimension(Graph(g.n, perm[u], perm[v])) is None
    # The right count of one-bit edges but the nodes not a power of two: not a cube.
    assert cube_dimension(Graph(3, [0], [1])) is None


def test_the_check_runs_in_chunks(monkeypatch):
    from tokendist.graphs import _cube

    monkeypatch.setattr(_cube, "_CHUNK", 7)  # hypercube:6 has 192 edges: 28 chunks
    g = make_graph("hypercube:6")
    assert cube_dimension(g) == 6
    edges = np.column_stack([g.u, g.v]).astype(np.int64)
    assert edges[-1].tolist() == [62, 63]
    # (62, 63) -> (61, 62), labels differing in two bits: it sorts into the last chunk.
    edges[-1] = [61, 62]
    h = Graph.from_edges(g.n, edges)
    assert h.m == g.m and int(np.flatnonzero((h.u == 61) & (h.v == 62))[0]) >= 189
    assert cube_dimension(h) is None
