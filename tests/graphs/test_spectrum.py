"""Laplacian spectra against dense references and closed forms."""

import math

import networkx as nx
import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from tokendist.errors import TokendistError
from tokendist.graphs import (Graph, fiedler_vector, from_networkx, lambda2, laplacian, laplacian_spectrum,
                              make_graph, second_largest_abs_eigenvalue)
from tokendist.graphs import _spectrum


def close(a, b):
    return abs(a - b) <= 1e-8 * max(1.0, abs(b))


@pytest.mark.parametrize("d", [2, 3, 5, 7])
def test_hypercube_lambda2_is_2_with_multiplicity_d(d):
    lam, mult = lambda2(make_graph(f"hypercube:{d}"))
    assert close(lam, 2.0) and mult == d


@pytest.mark.parametrize("n", [3, 5, 8])
def test_complete_graph_lambda2_is_n_with_multiplicity_n_minus_1(n):
    lam, mult = lambda2(make_graph(f"complete:{n}"))
    assert close(lam, n) and mult == n - 1


@pytest.mark.parametrize("n", [4, 9, 20])
def test_path_and_ring_closed_forms(n):
    lam, mult = lambda2(make_graph(f"path:{n}"))
    assert close(lam, 2 - 2 * math.cos(math.pi / n)) and mult == 1
    lam, mult = lambda2(make_graph(f"ring:{n}"))
    assert close(lam, 2 - 2 * math.cos(2 * math.pi / n)) and mult == (1 if n == 3 else 2)


@pytest.mark.parametrize("a, b", [(4, 4), (5, 7), (8, 8)])
def test_torus_and_grid_closed_forms(a, b):
    # Product graphs: the spectrum is every sum of one eigenvalue of each factor.
    ring = lambda k: 2 - 2 * np.cos(2 * np.pi * np.arange(k) / k)  # noqa: E731
    path = lambda k: 2 - 2 * np.cos(np.pi * np.arange(k) / k)  # noqa: E731
    for spec, fa, fb in [(f"torus:{a}x{b}", ring, ring), (f"grid:{a}x{b}", path, path)]:
        expect = np.sort(np.add.outer(fa(a), fb(b)).ravel())
        lam, mult = lambda2(make_graph(spec))
        assert close(lam, expect[1])
        assert mult == int(np.sum(np.abs(expect - expect[1]) < 1e-9))
        assert np.allclose(laplacian_spectrum(make_graph(spec)), expect)


@st.composite
def connected_graphs(draw, max_n=12):
    n = draw(st.integers(2, max_n))
    edges = {(draw(st.integers(0, i - 1)), i) for i in range(1, n)}
    pairs = [(a, b) for a in range(n) for b in range(a + 1, n)]
    edges |= set(draw(st.lists(st.sampled_from(pairs), max_size=2 * n)))
    return Graph.from_edges(n, sorted(edges))


@given(connected_graphs(), st.lists(st.floats(0.5, 4.0), min_size=12, max_size=12))
def test_generalized_lambda2_is_the_second_eigenvalue_of_L_S_inverse(g, speeds):
    s = np.array(speeds[:g.n])
    gs = g.with_speeds(s)
    lam, _ = lambda2(gs, generalized=True)
    ls_inv = laplacian(gs, generalized=True, symmetric=False).toarray()
    w = np.sort(np.linalg.eigvals(ls_inv).real)
    assert abs(lam - w[1]) <= 1e-7 * max(1.0, w[-1])
    # The paper's eigenvector for eigenvalue 0 of L S^-1 is (s_1, ..., s_n).
    assert np.allclose(ls_inv @ s, 0.0, atol=1e-9)
    # Without speeds and capacities it is the plain Laplacian.
    assert close(lambda2(g, generalized=True)[0], lambda2(g)[0])


@given(connected_graphs())
def test_lambda2_and_fiedler_against_networkx(g):
    G = g.to_networkx()
    lam, _ = lambda2(g)
    assert abs(lam - nx.algebraic_connectivity(G, method="tracemin_lu", tol=1e-12)) < 1e-6
    x = fiedler_vector(g)
    assert np.allclose(laplacian(g) @ x, lam * x, atol=1e-8) and abs(x.sum()) < 1e-8


def test_sparse_solver_counts_multiplicities_like_the_dense_one(monkeypatch):
    monkeypatch.setattr(_spectrum, "DENSE_LIMIT", 50)
    for spec, expect in [("hypercube:7", (2.0, 7)), ("torus:10x10", (2 - 2 * math.cos(2 * math.pi / 10), 4)),
                         ("grid:8x9", (2 - 2 * math.cos(math.pi / 9), 1))]:
        lam, mult, method = lambda2(make_graph(spec), return_method=True)
        assert "Lanczos" in method
        assert close(lam, expect[0]) and mult == expect[1]
    x = fiedler_vector(make_graph("grid:8x9"))
    assert np.allclose(laplacian(make_graph("grid:8x9")) @ x, (2 - 2 * math.cos(math.pi / 9)) * x, atol=1e-7)


def test_disconnected_graph_has_lambda2_zero():
    g = from_networkx(nx.disjoint_union(nx.cycle_graph(4), nx.path_graph(3)))
    assert lambda2(g) == (0.0, 2)
    with pytest.raises(TokendistError):
        lambda2(make_graph("path:1"))


def test_diffusion_norm_gamma():
    # M = I - L / (2 Delta) on the hypercube: eigenvalues 1 - 2k/(2d); gamma = 1 - 1/d (mu_2).
    g = make_graph("hypercube:4")
    m = np.eye(g.n) - laplacian(g).toarray() / 8
    assert close(second_largest_abs_eigenvalue(m), 0.75)
    # A bipartite graph with M = I - L / Delta has mu_n = -1: gamma = 1 (no convergence).
    m = np.eye(g.n) - laplacian(g).toarray() / 4
    assert close(second_largest_abs_eigenvalue(m), 1.0)
    # A non-symmetric M = I - L S^-1 (Elsässer et al. 2006, Sec. 2) has the same spectrum as
    # I - S^-1/2 L S^-1/2.
    gs = g.with_speeds(np.linspace(1, 2, g.n))
    lsym = laplacian(gs, generalized=True).toarray() / 8
    lns = laplacian(gs, generalized=True, symmetric=False)
    assert close(second_largest_abs_eigenvalue(np.eye(g.n) - lns.toarray() / 8),
                 second_largest_abs_eigenvalue(np.eye(g.n) - lsym))


@pytest.mark.parametrize("spec, expect", [("hypercube:12", (2.0, 12)),
                                          ("torus:60x60", (2 - 2 * math.cos(2 * math.pi / 60), 4))])
def test_sparse_lambda2_counts_full_multiplicity_on_large_graphs(spec, expect):
    # n > DENSE_LIMIT: the sparse path, which must find every copy (single-vector Lanczos finds few).
    g = make_graph(spec)
    assert g.n > _spectrum.DENSE_LIMIT
    lam, mult = lambda2(g)
    assert close(lam, expect[0]) and mult == expect[1]


@pytest.mark.parametrize("limit", [0, 10**12])  # force "flip" (c I - L) / allow shift-invert
@given(connected_graphs(max_n=60), st.integers(0, 2**32 - 1))
def test_both_sparse_solvers_match_dense_eigenvalues(limit, g, seed):
    # Generalised form too: random speeds and capacities, the sparse solvers against dense eigvalsh.
    rng = np.random.default_rng(seed)
    gw = Graph.from_edges(g.n, list(zip(g.u.tolist(), g.v.tolist())), capacities=rng.uniform(0.5, 3.0, g.m))
    gw = gw.with_speeds(rng.uniform(0.5, 4.0, g.n))
    for graph, gen in [(g, False), (gw, True)]:
        w = np.linalg.eigvalsh(laplacian(graph, generalized=gen).toarray())
        eps = 1e-8 * max(1.0, 2 * float(np.abs(np.diag(laplacian(graph, generalized=gen).toarray())).max()))
        with pytest.MonkeyPatch.context() as mp:
            mp.setattr(_spectrum, "DENSE_LIMIT", 1)
            mp.setattr(_spectrum, "SHIFT_INVERT_PROFILE_LIMIT", limit)
            if g.n < 8:
                continue
            lam, mult = lambda2(graph, generalized=gen)
        assert abs(lam - w[1]) <= 1e-7 * max(1.0, w[-1])
        assert mult == int(np.count_nonzero(np.abs(w - w[1]) <= eps))



# Trees whose Lanczos runs broke down with ARPACK error 3 ("no shifts could be applied") on the
# sparse path (found by the test above in CI: 5 of 400 random 9-node trees).
BREAKDOWN_TREES = [[(0, 1), (0, 7), (0, 8), (1, 2), (1, 3), (1, 5), (1, 6), (2, 4)],
                   [(0, 1), (1, 2), (1, 4), (2, 3), (2, 5), (2, 6), (3, 7), (3, 8)],
                   [(0, 1), (0, 2), (0, 6), (0, 8), (1, 3), (1, 4), (2, 5), (2, 7)]]


@pytest.mark.parametrize("edges", BREAKDOWN_TREES)
@pytest.mark.parametrize("limit", [0, 10**12])
def test_sparse_path_finishes_a_lanczos_breakdown_densely(edges, limit, monkeypatch):
    g = Graph.from_edges(9, edges)
    w = np.linalg.eigvalsh(laplacian(g).toarray())
    monkeypatch.setattr(_spectrum, "DENSE_LIMIT", 1)
    monkeypatch.setattr(_spectrum, "SHIFT_INVERT_PROFILE_LIMIT", limit)
    lam, mult = lambda2(g)
    assert abs(lam - w[1]) <= 1e-9 * w[-1]
    assert mult == int(np.count_nonzero(np.abs(w - w[1]) <= 1e-8 * 2 * g.max_degree))


@pytest.mark.parametrize("limit", [0, 10**12])
@pytest.mark.parametrize("spec, expect", [("complete:30", (30.0, 29)), ("star:30", (1.0, 29)), ("complete:9", (9.0, 8))])
def test_sparse_multiplicity_counts_every_copy_up_to_n_minus_1(spec, expect, limit, monkeypatch):
    # K_n: lambda2 = n with multiplicity n - 1, every eigenpair but the kernel's (the sparse loop
    # stopped at n - 2 and reported 28 for complete:30). star:30 has 31 nodes: 1 with multiplicity 29.
    monkeypatch.setattr(_spectrum, "DENSE_LIMIT", 1)
    monkeypatch.setattr(_spectrum, "SHIFT_INVERT_PROFILE_LIMIT", limit)
    lam, mult = lambda2(make_graph(spec))
    assert close(lam, expect[0]) and mult == expect[1]


def test_a_breakdown_too_large_to_finish_densely_is_a_clear_error(monkeypatch):
    monkeypatch.setattr(_spectrum, "COMPLEMENT_DENSE_LIMIT", 5)
    g = make_graph("complete:9")
    with pytest.raises(TokendistError, match="broke down"):
        _spectrum._complement_smallest(laplacian(g), _spectrum._kernel(g, False)[:, None], 1)


def test_shift_invert_is_chosen_for_meshes_and_flip_for_expanders():
    assert _spectrum._solver(make_graph("torus:50x50"), False).mode == "shift-invert"
    assert _spectrum._solver(make_graph("hypercube:12"), False).mode == "flip"
    lam, mult, method = lambda2(make_graph("torus:50x50"), return_method=True)
    assert "shift-invert" in method and mult == 4 and close(lam, 2 - 2 * math.cos(2 * math.pi / 50))


def test_laplacian_of_a_graph_without_edges_is_float_and_quiet():
    import warnings

    from tokendist.graphs import Graph, laplacian

    with warnings.catch_warnings():
        warnings.simplefilter("error")  # scipy warned about int64 degrees when m = 0
        lap = laplacian(Graph.from_edges(3, []))
    assert lap.dtype == np.float64 and lap.nnz == 0
