"""Theory of Elsässer, Monien and Schamberger (2006) made computable.

* The diffusion norm ``gamma = max(|mu_2|, |mu_n|)`` of ``M = I - L S^{-1}`` and ``lambda_2`` of the
  generalised Laplacian ``L S^{-1}`` (Sec. 2).
* Lemma 1: FOS and SOS need ``Theta((d/lambda_2) ln(s_max/(eps s_min)))`` and
  ``Theta(sqrt(d/lambda_2) ln(s_max/(eps s_min)))`` steps to eps-balance. Evaluated two ways: the
  Theta expression with constant 1, and the spectral count the proof rests on: M is symmetric in the
  ``S^{-1}`` inner product, so ``||e^k||_2 <= sqrt(s_max/s_min) gamma^k ||e^0||_2`` and FOS needs at most
  ``ln(sqrt(s_max/s_min)/eps) / ln(1/gamma)`` steps; SOS contracts by ``sqrt(beta - 1)`` per step
  (up to a factor linear in k, Golub [15]), giving ``ln(sqrt(s_max/s_min)/eps) / ln(1/sqrt(beta-1))``.
* Theorem 1: integer SOS (bounded IOUs) and FOS end with ``||e||_2 = O(sqrt(n s_max) d / (sqrt(s_min)(1-gamma)))``.
* Sec. 1 ([22], [23]): integer FOS ends with ``||e||_2 = O(n d^2/lambda_2)`` and
  ``||e||_inf = O((d^2/lambda_2) log n)``.
* Theorem 2: the randomized algorithm reaches weighted max load ``wbar_i/sbar_i + O(1)`` in
  ``O((d/lambda_2)(log E + log^2 n))`` steps, ``E = max_i |w_i^0 - wbar_i|``.

The O- and Theta-figures are printed with constant 1: orders of magnitude, not predictions.
"""

from __future__ import annotations

import math

import numpy as np

from ..protocols.heterogeneous._matrix import edge_coefficients, scaled_speeds, sos_beta, spectrum
from ..engine._metrics import errors
from ._bounds import register_bounds

__all__ = ["heterogeneous_spectrum", "lemma1_iterations", "heterogeneous_bounds"]


def heterogeneous_spectrum(graph, c: float = 2.0, speed_scale: str = "raw") -> dict:
    """``gamma``, ``mu_2``, ``mu_n`` of M, ``lambda_2`` of ``L S^{-1}``, and the SOS ``beta`` (Lemma 1)."""
    s = scaled_speeds(graph, speed_scale)
    spec = spectrum(graph, edge_coefficients(graph, c), s)
    spec["beta"] = sos_beta(spec["gamma"])
    return spec


def lemma1_iterations(graph, eps: float = 1e-6, c: float = 2.0, speed_scale: str = "raw", spec=None) -> dict:
    """FOS and SOS step counts to eps-balance (Lemma 1): Theta expressions and spectral counts."""
    spec = spec or heterogeneous_spectrum(graph, c, speed_scale)
    s = scaled_speeds(graph, speed_scale)
    ratio = float(s.max() / s.min())
    d = graph.max_degree
    lam = spec["lambda_2"]
    log_term = math.log(ratio / eps)
    target = math.log(math.sqrt(ratio) / eps)
    gamma, beta = spec["gamma"], spec["beta"]
    r = math.sqrt(max(beta - 1.0, 0.0))
    return {
        "eps": eps,
        "fos_theta": (d / lam) * log_term if lam > 0 else math.inf,
        "sos_theta": math.sqrt(d / lam) * log_term if lam > 0 else math.inf,
        "fos_spectral": math.ceil(target / -math.log(gamma)) if 0 < gamma < 1 else (1 if gamma == 0 else math.inf),
        "sos_spectral": math.ceil(target / -math.log(r)) if 0 < r < 1 else (1 if r == 0 else math.inf),
    }


def heterogeneous_bounds(graph, loads, params: dict) -> dict:
    """Predicted figures for fos, sos, fos-floor, sos-iou and random-walk (registered bounds provider)."""
    c = float(params.get("c", 2.0))
    scale = str(params.get("speed_scale", "raw"))
    spec = heterogeneous_spectrum(graph, c, scale)
    it = lemma1_iterations(graph, 1e-6, c, scale, spec)
    s = scaled_speeds(graph, scale)
    n, d, lam, gamma = graph.n, graph.max_degree, spec["lambda_2"], spec["gamma"]
    loads = np.asarray(loads)
    if loads.dtype.kind in "iu" and loads.size:  # w - W s_i / sum(s), exact past 2**53 (engine._metrics.errors)
        big_e = float(np.abs(errors(graph, loads.astype(np.int64))).max())
    else:
        loads = loads.astype(np.float64)
        ideal = loads.sum() * s / s.sum()
        big_e = float(np.abs(loads - ideal).max())
    out = {
        "gamma": gamma, "mu_2": spec["mu_2"], "mu_n": spec["mu_n"], "lambda_2": lam, "beta": spec["beta"],
        "max_degree": d,
        "lemma1_fos_steps_theta(eps=1e-6)": it["fos_theta"],
        "lemma1_sos_steps_theta(eps=1e-6)": it["sos_theta"],
        "fos_steps_spectral(eps=1e-6)": it["fos_spectral"],
        "sos_steps_spectral(eps=1e-6)": it["sos_spectral"],
        "theorem1_final_l2_error_O": math.sqrt(n * s.max()) * d / (math.sqrt(s.min()) * (1 - gamma)) if gamma < 1 else math.inf,
        "integer_fos_final_l2_error_O[22]": n * d * d / lam if lam > 0 else math.inf,
        "integer_fos_final_linf_error_O[23]": d * d / lam * math.log(max(n, 2)) if lam > 0 else math.inf,
        "theorem2_random_walk_steps_O": (d / lam) * (math.log(max(big_e, 2.0)) + math.log(max(n, 2)) ** 2)
        if lam > 0 else math.inf,
        "initial_max_imbalance_E": big_e,
        "basis": "Elsässer, Monien, Schamberger 2006: Lemma 1, Theorems 1 and 2 (O/Theta with constant 1)",
    }
    return out


register_bounds("fos", "sos", "fos-floor", "sos-iou", "random-walk")(heterogeneous_bounds)
