"""Offset stencils (graphs/_stencil.py): runs of nodes whose CSR rows are ``i + offsets``."""

import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

from tokendist.experiments._bench import gather_floor_stencil_step, gather_floor_step
from tokendist.graphs import Graph, make_graph
from tokendist.graphs._model import unsigned_view
from tokendist.graphs._stencil import affine_edge_runs, find_stencil, lower_edge_runs


def _row_matches(g, i, offsets):
    return np.array_equal(g.neighbours(i).astype(np.int64), i + np.asarray(offsets, dtype=np.int64))


def _check_runs(g, s, min_coverage):
    starts, ends = s.starts, s.ends
    assert np.all(starts < ends)
    assert np.all(ends[:-1] < starts[1:])  # ascending, disjoint, and maximal runs are not adjacent
    assert s.covered == int((ends - starts).sum()) >= min_coverage * g.n
    assert all(o < 0 for o in s.lower) and all(o > 0 for o in s.upper)
    assert list(s.offsets) == sorted(s.offsets)
    inside = np.zeros(g.n, dtype=bool)
    for a, b in zip(starts, ends):
        inside[a:b] = True
    for i in range(g.n):
        # Every node in a run has exactly the stencil's neighbours, in CSR order; runs are maximal.
        assert _row_matches(g, i, s.offsets) == inside[i]


@pytest.mark.parametrize("spec, lower, upper, covered", [
    ("torus:8x8", (-8, -1), (1, 8), 36),
    ("torus:10x7", (-7, -1), (1, 7), 8 * 5),
    ("ring:12", (-1,), (1,), 10),
])
def test_stencil_of_tori_and_rings(spec, lower, upper, covered):
    g = make_graph(spec)
    s = g.stencil
    assert (s.lower, s.upper, s.covered, s.degree) == (lower, upper, covered, len(lower) + len(upper))
    _check_runs(g, s, 0.5)
    assert g.stencil is s  # found once


@pytest.mark.parametrize("spec", ["hypercube:6", "random-regular:200,4", "complete:6", "grid:6x6", "star:5",
                                  "torus:6x6"])
def test_no_stencil_where_it_would_not_pay(spec):
    # Irregular graphs, graphs whose rows follow no common pattern, and small tori whose seams
    # are more than half of the nodes.
    assert make_graph(spec).stencil is None


def test_forced_stencil_on_a_small_torus():
    g = make_graph("torus:6x6")
    s = find_stencil(g, min_coverage=0.0)
    assert s.covered == 16
    _check_runs(g, s, 0.0)


def test_empty_graph_has_no_stencil():
    assert find_stencil(Graph.from_edges(3, []), min_coverage=0.0) is None


@settings(max_examples=40, deadline=None)
@given(st.integers(3, 9), st.integers(3, 9), st.integers(0, 2**32 - 1))
def test_stencil_floor_equals_csr_floor_bit_for_bit(w, h, seed):
    g = make_graph(f"torus:{w}x{h}")
    s = find_stencil(g, min_coverage=0.0)
    loads = np.random.default_rng(seed).normal(size=g.n) * 1e3
    csr, sten = np.empty(g.n), np.empty(g.n)
    ix = unsigned_view(g.indices)
    gather_floor_step(g.indptr, ix, loads, csr)
    if s is None:  # 3x3 tori: every node is on a seam (its rows wrap in both directions)
        return
    _check_runs(g, s, 0.0)
    gather_floor_stencil_step(g.indptr, ix, s.starts, s.ends, s.lower, s.upper, loads, sten)
    assert np.array_equal(csr, sten)


@settings(max_examples=30, deadline=None)
@given(st.integers(4, 30), st.sets(st.integers(1, 6), min_size=1, max_size=3))
def test_circulant_graphs_are_one_run(n, jumps):
    # A circulant graph (i ~ i +- j mod n) follows one pattern away from its wrap-around band.
    edges = {(min(i, (i + j) % n), max(i, (i + j) % n)) for i in range(n) for j in jumps if (i + j) % n != i}
    g = Graph.from_edges(n, sorted(edges))
    s = find_stencil(g, min_coverage=0.0)
    if s is not None:
        _check_runs(g, s, 0.0)


# ---------------------------------------------------------------------- edge ids along the runs
FORCED = ["torus:6x6", "torus:5x7", "torus:8x8", "torus:12x12", "torus:4x4x4", "ring:7", "ring:9", "ring:16"]


def _forced(spec):
    g = make_graph(spec)
    s = find_stencil(g, min_coverage=0.0)
    assert s is not None
    return g, s


@pytest.mark.parametrize("spec", FORCED)
@pytest.mark.parametrize("view", [False, True])
def test_affine_edge_runs_give_every_run_slot_its_edge(spec, view):
    g, s = _forced(spec)
    D, nu = s.degree, len(s.upper)
    ce = g.csr_edges.reshape(g.n, D)
    starts, ends, ebase = affine_edge_runs(s, unsigned_view(g.csr_edges) if view else g.csr_edges)
    covered = np.concatenate([np.arange(a, b) for a, b in zip(starts, ends)])
    assert np.array_equal(covered, np.concatenate([np.arange(a, b) for a, b in zip(s.starts, s.ends)]))
    for r, (a, b) in enumerate(zip(starts, ends)):
        i = np.arange(a, b)
        assert np.array_equal(ce[a:b], ebase[r][None, :] + nu * i[:, None])


@pytest.mark.parametrize("spec", FORCED + ["torus:1x5", "torus:2x6", "torus:3x9"])
def test_lower_edge_runs_equal_csr_edges(spec):
    g = make_graph(spec)
    s = find_stencil(g, min_coverage=0.0)
    if s is None:
        return
    starts, ends, delta = lower_edge_runs(s, g.csr_edges)
    nl, nu = len(s.lower), len(s.upper)
    ce = [int(v) for v in g.csr_edges]
    # The running counter of the CSR kernels: the number of edges (u, v) with u < i.
    counter = [sum(1 for u in g.u.tolist() if u < i) for i in range(g.n)]
    assert np.all(starts[1:] > ends[:-1])  # disjoint, touching stretches joined
    for r in range(starts.shape[0]):
        # Every kept row lies inside one of the stencil's runs ...
        assert np.any((s.starts <= starts[r]) & (ends[r] <= s.ends))
        for i in range(int(starts[r]), int(ends[r])):
            # ... its upper slots are the counter's next edges, its lower slot k the edge counter + delta[k].
            assert counter[i] == counter[int(starts[r])] + nu * (i - int(starts[r]))
            assert [ce[s.degree * i + nl + k] for k in range(nu)] == [counter[i] + k for k in range(nu)]
            assert [ce[s.degree * i + k] for k in range(nl)] == [counter[i] + d for d in delta]
    # And no row of the stencil's runs with that delta is left out.
    kept = np.zeros(g.n, bool)
    for a, b in zip(starts, ends):
        kept[a:b] = True
    for a, b in zip(s.starts, s.ends):
        for i in range(int(a), int(b)):
            fits = [ce[s.degree * i + k] for k in range(nl)] == [counter[i] + d for d in delta]
            assert kept[i] == fits


def test_lower_edge_runs_cut_the_first_row_of_torus_runs():
    # torus:6x6: the edge (12, 13) is 30, (13, 14) is 33 (node 12, a seam node, has three upper
    # slots), so row 13's lower edges are counter + (-11, -3) and row 14's counter + (-11, -2).
    # The first run's rows i - 6 are the seam row: their edges have other offsets again.
    g, s = _forced("torus:6x6")
    starts, ends, delta = lower_edge_runs(s, g.csr_edges)
    assert s.starts.tolist() == [7, 13, 19, 25] and s.ends.tolist() == [11, 17, 23, 29]
    assert starts.tolist() == [14, 20, 26] and ends.tolist() == [17, 23, 29] and delta == (-11, -2)
    assert int(g.csr_edges[4 * 13 + 1]) == 30 and int(g.csr_edges[4 * 14 + 1]) == 33

