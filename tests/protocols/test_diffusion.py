"""Continuous diffusion (Subramanian-Scherson 1994, Sec. 2-3): the matrix P and the Error Bound."""

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tokendist.analysis import diffusion_gamma, error_bound, iterations_to_tolerance
from tokendist.engine import simulate
from tokendist.errors import TokendistError
from tokendist.graphs import Graph, make_graph
from tokendist.protocols.diffusion._diffusivity import diffusion_matrix, diffusivity


@st.composite
def connected_graphs(draw, max_n=14):
    """A random tree plus random extra edges: connected, any shape."""
    n = draw(st.integers(2, max_n))
    parents = [draw(st.integers(0, i - 1)) for i in range(1, n)]
    edges = {(p, i) for i, p in zip(range(1, n), parents)}
    extra = draw(st.lists(st.tuples(st.integers(0, n - 1), st.integers(0, n - 1)), max_size=2 * n))
    edges |= {(min(a, b), max(a, b)) for a, b in extra if a != b}
    return Graph.from_edges(n, sorted(edges), spec="hypothesis")


# ---------------------------------------------------------------------- the matrix P (Sec. 2)
@pytest.mark.parametrize("spec", ["ring:9", "star:6", "torus:4x4", "hypercube:3", "complete:5", "grid:3x4"])
def test_sec2_default_P_meets_the_papers_conditions(spec):
    g = make_graph(spec)
    p = diffusion_matrix(g, diffusivity(g)).toarray()
    off = p - np.diag(np.diag(p))
    adj = g.adjacency.toarray() > 0
    np.testing.assert_allclose(p, p.T)
    np.testing.assert_allclose(p.sum(axis=1), 1.0)
    assert np.all(np.diag(p) >= 0.5 - 1e-12)
    assert np.all(off[adj] > 0) and np.all(off[~adj] == 0)


def test_sec3_mesh_P_is_the_default_on_tori_and_hypercubes():
    # Sec. 3.2: diagonal 1/2 and 1/(4d) per edge on the n1 x ... x nd mesh with wrap-around.
    assert np.allclose(diffusivity(make_graph("torus:4x5x6")), 1 / 12)
    assert np.allclose(diffusivity(make_graph("hypercube:4")), 1 / 8)


def _write(tmp_path, text):
    path = tmp_path / "p.txt"
    path.write_text(text)
    return f"file:{path}"


def test_matrix_file_dense_and_edge_list(tmp_path):
    g = make_graph("ring:4")
    dense = "\n".join(" ".join(str(x) for x in row) for row in
                      [[0.5, 0.25, 0, 0.25], [0.25, 0.5, 0.25, 0], [0, 0.25, 0.5, 0.25], [0.25, 0, 0.25, 0.5]])
    np.testing.assert_allclose(diffusivity(g, _write(tmp_path, dense)), 0.25)
    edges = "0 1 1/4\n1 2 0.2\n2 3 0.25\n3 0 1/4  # a comment\n"
    np.testing.assert_allclose(diffusivity(g, _write(tmp_path, edges)), [0.25, 0.25, 0.2, 0.25])


@pytest.mark.parametrize("rows,message", [
    ([[0.5, 0.3, 0, 0.25], [0.25, 0.5, 0.25, 0], [0, 0.25, 0.5, 0.25], [0.25, 0, 0.25, 0.5]], "not symmetric"),
    ([[0.6, 0.25, 0, 0.25], [0.25, 0.5, 0.25, 0], [0, 0.25, 0.5, 0.25], [0.25, 0, 0.25, 0.5]], "not stochastic"),
    ([[0.75, 0, 0, 0.25], [0, 0.75, 0.25, 0], [0, 0.25, 0.5, 0.25], [0.25, 0, 0.25, 0.5]], "needs P_ij > 0"),
    ([[0.4, 0.2, 0.2, 0.2], [0.2, 0.6, 0.2, 0], [0.2, 0.2, 0.4, 0.2], [0.2, 0, 0.2, 0.6]], "not an edge"),
    ([[0.4, 0.3, 0, 0.3], [0.3, 0.4, 0.3, 0], [0, 0.3, 0.4, 0.3], [0.3, 0, 0.3, 0.4]], "< 0.5"),
])
def test_sec2_invalid_P_is_refused_with_a_clear_error(tmp_path, rows, message):
    g = make_graph("ring:4")
    text = "\n".join(" ".join(map(str, r)) for r in rows)
    with pytest.raises(TokendistError, match=message):
        diffusivity(g, _write(tmp_path, text))
    with pytest.raises(TokendistError, match=message):
        diffusivity(g, np.array(rows))


def test_invalid_specs_and_the_diagonal_bound_parameter(tmp_path):
    g = make_graph("ring:4")
    for bad in ["nonsense", "uniform:", "uniform:x", "file:"]:
        with pytest.raises(TokendistError, match="diffusivity matrix|not a number"):
            diffusivity(g, bad)
    with pytest.raises(TokendistError, match="no such file"):
        diffusivity(g, f"file:{tmp_path / 'missing.txt'}")
    with pytest.raises(TokendistError, match="not an edge"):
        diffusivity(g, _write(tmp_path, "0 2 0.25\n"))
    with pytest.raises(TokendistError, match="no value for edge"):
        diffusivity(g, _write(tmp_path, "0 1 0.25\n"))
    # uniform:1/3 on a ring leaves P_ii = 1/3: refused by default, accepted with a lower bound
    with pytest.raises(TokendistError, match=r"P\[0,0\] = 0.333333 < 0.5"):
        diffusivity(g, "uniform:1/3")
    np.testing.assert_allclose(diffusivity(g, "uniform:1/3", min_diag=1 / 3), 1 / 3)
    with pytest.raises(TokendistError, match="min_diag must be positive"):
        diffusivity(g, "uniform:1/4", min_diag=0)
    with pytest.raises(TokendistError, match="< 0.5"):
        simulate("ring:4", "diffusion", "point:8", params={"matrix": "uniform:0.3"})


def test_user_matrix_drives_the_run():
    r = simulate("ring:6", "diffusion", "point:60", params={"matrix": "uniform:0.1"}, max_steps=1)
    np.testing.assert_allclose(r.loads, [48, 6, 0, 0, 0, 6])


# ---------------------------------------------------------------------- Theorem 3.1 and the Error Bound
@given(connected_graphs(), st.integers(0, 2**31), st.sampled_from(["degree", "uniform:1/(2dmax)"]))
@settings(max_examples=30, deadline=None)
def test_theorem31_error_bound_holds_and_diffusion_converges(graph, seed, matrix):
    if matrix.startswith("uniform"):
        matrix = f"uniform:{1 / (2 * graph.max_degree)}"
    loads = np.random.default_rng(seed).integers(0, 50, graph.n).astype(np.float64)
    loads[0] += 100
    gamma = diffusion_gamma(graph, matrix=matrix)
    assert gamma < 1  # connected
    r = simulate(graph, "diffusion", loads, params={"matrix": matrix}, max_steps=60, detect_cycles=False,
                 keep_loads_every=1)
    b = loads.mean()
    err = np.linalg.norm(r.load_history - b, axis=1)
    bound = error_bound(err[0], gamma, len(err) - 1)
    assert np.all(err <= bound * (1 + 1e-9) + 1e-9)
    # Convergence (lim l(t) = b): after the T iterations the Error Bound asks for, ||e(T)|| <= tol.
    tol = 1e-6
    T = iterations_to_tolerance(err[0], gamma, tol)
    r = simulate(graph, "diffusion", loads, params={"matrix": matrix}, max_steps=T, detect_cycles=False,
                 until_discrepancy=0.0)
    assert np.linalg.norm(r.loads - b) <= tol * (1 + 1e-6)
    np.testing.assert_allclose(r.loads.sum(), loads.sum())


@given(connected_graphs(max_n=10))
@settings(max_examples=20, deadline=None)
def test_theorem31_error_bound_is_tight_for_the_second_eigenvector(graph):
    from tokendist.protocols.diffusion._diffusivity import diffusion_matrix as dm

    p = dm(graph, diffusivity(graph)).toarray()
    w, v = np.linalg.eigh(p)
    order = np.argsort(-np.abs(w))
    v2, lam = v[:, order[1]], abs(w[order[1]])
    loads = 100.0 + 10.0 * v2 / np.abs(v2).max()
    r = simulate(graph, "diffusion", loads, max_steps=5, detect_cycles=False, keep_loads_every=1)
    err = np.linalg.norm(r.load_history - 100.0, axis=1)
    np.testing.assert_allclose(err, err[0] * lam ** np.arange(len(err)), rtol=1e-8, atol=1e-10)


def test_continuous_diffusion_node_rule_is_line_7():
    # Per-node: send P_ij (load[i] - load[j]) to each lighter neighbour; compare with P l on a star.
    from tokendist.engine import run_node_rules

    hist, _ = run_node_rules("star:4", "diffusion", "point:40", 3, params={"matrix": "uniform:1/8"})
    p = diffusion_matrix(make_graph("star:4"), np.full(4, 1 / 8)).toarray()
    x = np.array([40.0, 0, 0, 0, 0])
    for t in range(4):
        np.testing.assert_allclose(hist[t], x)
        x = p @ x
