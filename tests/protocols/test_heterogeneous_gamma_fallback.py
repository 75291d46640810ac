"""gamma of M when Lanczos does not converge: the fallback estimates from inside the spectrum."""

import numpy as np
import pytest

from tokendist.graphs import make_graph
from tokendist.protocols import _heterogeneous_matrix as hm


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
