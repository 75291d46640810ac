"""Spectral figures and Lemma 1 counts of Elsässer, Monien, Schamberger 2006."""

import numpy as np
import pytest

from tokendist import make_graph, simulate
from tokendist.analysis import predict
from tokendist.analysis._heterogeneous_bounds import heterogeneous_spectrum, lemma1_iterations


def _dense(graph, c, s):
    n = graph.n
    A = np.zeros((n, n))
    A[graph.u, graph.v] = A[graph.v, graph.u] = 1.0
    d = A.sum(1)
    C = A / (c * np.maximum.outer(d, d))
    L = np.diag(C.sum(1)) - C
    M = np.eye(n) - L @ np.diag(1 / s)
    Lu = np.diag(d) - A
    return M, Lu @ np.diag(1 / s)


@pytest.mark.parametrize("spec,c", [("torus:5x5", 2.0), ("hypercube:4", 1.5), ("grid:3x4", 1.2)])
def test_gamma_and_lambda2_match_dense_eigenvalues(spec, c):
    g = make_graph(spec)
    s = np.random.default_rng(1).uniform(1.0, 2.0, g.n)
    g = g.with_speeds(s)
    M, LS = _dense(g, c, s)
    mu = np.sort(np.linalg.eigvals(M).real)
    lam = np.sort(np.linalg.eigvals(LS).real)
    out = heterogeneous_spectrum(g, c)
    assert out["mu_2"] == pytest.approx(mu[-2], abs=1e-10)
    assert out["mu_n"] == pytest.approx(mu[0], abs=1e-10)
    assert out["gamma"] == pytest.approx(max(abs(mu[-2]), abs(mu[0])), abs=1e-10)
    assert out["lambda_2"] == pytest.approx(lam[1], abs=1e-10)
    assert out["beta"] == pytest.approx(2 / (1 + np.sqrt(1 - out["gamma"] ** 2)))


@pytest.mark.parametrize("spec", ["torus:8x8", "hypercube:5", "ring:20"])
def test_lemma1_spectral_counts_bound_measured_steps(spec):
    g = make_graph(spec)
    g = g.with_speeds(np.random.default_rng(2).uniform(1.0, 1.5, g.n))
    eps = 1e-6
    it = lemma1_iterations(g, eps)
    w0 = f"point:{g.n * 50}"
    e0 = simulate(g, "fos", w0, max_steps=0).initial["l2_error"]
    fos = simulate(g, "fos", w0, max_steps=20000).steps_to("l2_error", eps * e0)
    sos = simulate(g, "sos", w0, max_steps=20000, allow_infeasible=True).steps_to("l2_error", eps * e0)
    assert fos <= it["fos_spectral"]
    # SOS: the contraction sqrt(beta - 1) per step holds up to a factor linear in k (Golub).
    assert sos <= 2 * it["sos_spectral"]
    assert sos < fos
    assert it["sos_theta"] < it["fos_theta"]


def test_predict_registered_for_every_scheme():
    g = make_graph("torus:6x6")
    loads = np.zeros(36, dtype=np.int64)
    loads[0] = 1296
    for algo in ("fos", "sos", "fos-floor", "sos-iou", "random-walk"):
        out = predict(algo, g, loads, {"c": "1.5"})
        assert 0 < out["gamma"] < 1 and out["initial_max_imbalance_E"] == pytest.approx(1296 - 36)
