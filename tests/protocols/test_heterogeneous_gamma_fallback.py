"""gamma of M when Lanczos does not converge: the fallback estimates from inside the spectrum."""

import numpy as np
import pytest

from tokendist.graphs import make_graph
from tokendist.protocols.heterogeneous import _matrix as hm


@pytest.mark.parametrize("spec", ["torus:30x30", "hypercube:9", "random-regular:600,4"])
def test_fallback_lanczos_is_an_inner_estimate_close_to_dense(spec, monkeypatch):
    g = make_graph(spec, seed=2)
    s = np.random.default_rng(1).uniform(0.8, 1.2, g.n)
    alpha = hm.edge_coefficients(g, 2.0)
    exact = hm.diffusion_norm(g, alpha, s)
    monkeypatch.setattr(hm, "ARPACK_MAX_N", 0)  # force the fallback
    est = hm.diffusion_norm(g, alpha, s, dense_limit=10)
    assert est["method"].startswith("lanczos-")
    # Ritz values lie inside the spectrum: gamma is never over-estimated, so beta is never too large.
    assert est["mu_2"] <= exact["mu_2"] + 1e-12 and est["mu_n"] >= exact["mu_n"] - 1e-12
    assert est["gamma"] <= exact["gamma"] + 1e-12
    assert est["gamma"] == pytest.approx(exact["gamma"], abs=2e-3)
    assert hm.sos_beta(est["gamma"]) <= hm.sos_beta(exact["gamma"]) + 1e-9


@pytest.mark.parametrize("spec,speeds", [("hypercube:8", False), ("torus:12x10", True), ("random-regular:300,3", True),
                                         ("grid:9x11", False)])
def test_lemma1_numba_lanczos_both_ends_in_one_run(spec, speeds):
    # The numba Lanczos (one run for mu_2 and mu_n, on the graph's CSR arrays) against dense eigvalsh.
    from tokendist.protocols.heterogeneous._gamma import lanczos_extremes

    g = make_graph(spec, seed=3)
    s = np.random.default_rng(4).uniform(1.0, 2.0, g.n) if speeds else np.ones(g.n)
    alpha = hm.edge_coefficients(g, 2.0)
    lam = np.linalg.eigvalsh(hm._symmetric(g, alpha, s).toarray())
    exact_mu2, exact_mun = 1 - lam[1], 1 - lam[-1]
    uniform = bool(np.all(alpha == alpha[0]))
    for coefs in ([(0, float(alpha[0]), np.zeros(0), np.zeros(0))] if uniform else []) + [(2, 0.0, np.zeros(0), alpha)]:
        mu2, mun, method = lanczos_extremes(g, coefs, s, max_steps=400, tol=1e-10)
        assert mu2 <= exact_mu2 + 1e-12 and mun >= exact_mun - 1e-12  # Ritz values: inside the spectrum
        if method.endswith("(converged)"):
            assert mu2 == pytest.approx(exact_mu2, abs=1e-8) and mun == pytest.approx(exact_mun, abs=1e-8)
        else:
            assert mu2 == pytest.approx(exact_mu2, abs=2e-3)
    # Few steps: an inner estimate, reported as such.
    mu2, _, method = lanczos_extremes(g, (2, 0.0, np.zeros(0), alpha), s, max_steps=5, tol=1e-10)
    assert method == "lanczos-5 (inner estimate)" and mu2 <= exact_mu2 + 1e-12


@pytest.mark.parametrize("spec", ["torus:12x10", "torus:9x9", "ring:40"])
def test_lanczos_stencil_step_is_the_csr_step_bit_for_bit(spec):
    # On a torus or ring with unit speeds the Lanczos step walks the offset stencil's runs
    # (graphs/_stencil.py): the same (alpha_k, beta_k) and vectors as the CSR step, bit for bit.
    from tokendist.graphs._model import unsigned_view
    from tokendist.graphs._stencil import find_stencil
    from tokendist.protocols.heterogeneous._gamma import _lanczos_stencil_step, _lanczos_step

    g = make_graph(spec)
    st = find_stencil(g, min_coverage=0.0)
    n, a0 = g.n, 1 / (2.0 * 4)
    q = np.ones(n) / np.sqrt(n)
    start = np.random.default_rng(5).normal(size=n)
    start -= q * (q @ start)
    runs = []
    for stencil in (False, True):
        v, v_prev, w, beta, trace = start / np.linalg.norm(start), np.zeros(n), np.empty(n), 0.0, []
        for _ in range(12):
            if stencil:
                a, beta = _lanczos_stencil_step(g.indptr, unsigned_view(g.indices), st.starts, st.ends, st.lower,
                                                st.upper, a0, q, v, v_prev, w, beta)
            else:
                a, beta = _lanczos_step(g.indptr, g.indices, g.csr_edges, 0, a0, np.zeros(0), np.zeros(0),
                                        np.zeros(0), q, v, v_prev, w, beta)
            trace.append((a, beta))
        runs.append((trace, v.copy()))
    assert runs[0][0] == runs[1][0] and np.array_equal(runs[0][1], runs[1][1])
