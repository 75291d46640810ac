"""The bounds of Ghosh et al. (1995) in terms of edge expansion alpha and node expansion mu.

For ``single-port``, ``multi-port``, ``ds`` and ``async-multi-port`` this gives, next to a run
(``tokendist bounds``):

* the graph quantities: n, d (maximum degree), Delta = max |w(v) - rho| (the paper's imbalance),
  alpha and mu from :mod:`tokendist.graphs` (value, bounds, whether exact);
* the **orders** of Theorems 3.1-3.4 and 5.1 *without constants* (labelled ``order_*``: the value of
  the O(.) expression with constant 1, a shape to compare against, not a guarantee);
* the **explicit** figures that the proofs give with their stated constants (labelled
  ``explicit_*``): groups ``S_i`` of width 1 (single-port) or 2d (multi-port) and
  ``J = 2 ceil(log_{1 + alpha/(2d)} n)`` (Sec. 2): after the proof's time no node lies in a group
  beyond J above or 2J below the average, i.e. final discrepancy at most ``2J`` (single-port,
  Sec. 3.1) or ``6Jd + 2d - 1`` (multi-port, Sec. 3.2); multi-port time
  ``2 ceil(4 ceil(ln Phi_0) / (eps nu^2 d^2))`` with ``nu = alpha/(c d^2)``, ``c = 25``,
  ``eps = 1/24`` and ``ln Phi_0 <= ln n + (Delta + 1) ln(1 + nu) - ln nu`` (Sec. 3.2);
* the off-line figures of Sec. 6: ``ceil(Delta / alpha)`` (Lemma 6.3: ceil(rho) + d reachable
  within it, multi-port) and, on graphs up to :data:`OFFLINE_MAX_N` nodes, the exact off-line
  optimum by max-flow (:mod:`._offline`).
"""

from __future__ import annotations

import math

import numpy as np

from ..engine._metrics import errors, exact_total
from ._bounds import register_bounds
from ._offline import lemma_6_3_time, offline_optimum
from .. import graphs

__all__ = ["ghosh_bounds", "expansions", "OFFLINE_MAX_N"]

#: Largest graph on which ``tokendist bounds`` also computes the off-line optimum by max-flow.
OFFLINE_MAX_N = 1000


def _estimate_dict(est) -> dict:
    if est is None:
        return {"value": None, "lower": None, "upper": None, "exact": False, "method": "unavailable"}
    return {"value": float(est.value), "lower": float(est.lower), "upper": float(est.upper),
            "exact": bool(est.exact), "method": str(est.method)}


def expansions(graph) -> dict:
    """Edge expansion alpha and node expansion mu from ``tokendist.graphs`` (as plain dicts)."""

    out = {}
    for key, fname in (("alpha", "edge_expansion"), ("mu", "node_expansion")):
        fn = getattr(graphs, fname, None)
        out[key] = _estimate_dict(fn(graph) if fn is not None else None)
    return out


def _log_base(x: float, base: float) -> float:
    return math.log(x) / math.log(base)


def ghosh_bounds(graph, loads, algo: str) -> dict:
    """The predicted figures for ``algo`` on ``graph`` from ``loads`` (see the module docstring)."""
    loads = np.asarray(loads)
    n, d = graph.n, max(graph.max_degree, 1)
    if loads.dtype.kind in "iu" and n and graph.speeds is None:  # exact past 2**53 (engine._metrics.errors)
        rho, delta = exact_total(loads) / n, float(np.abs(errors(graph, loads.astype(np.int64))).max())
    else:
        rho = float(loads.sum()) / n
        delta = float(np.abs(loads - rho).max()) if n else 0.0
    ex = expansions(graph)
    alpha, mu = ex["alpha"]["value"], ex["mu"]["value"]
    # With only bounds known, the lower bound on the expansion gives valid (larger) predictions.
    if alpha is not None and not ex["alpha"]["exact"]:
        alpha = ex["alpha"]["lower"]
    if mu is not None and not ex["mu"]["exact"]:
        mu = ex["mu"]["lower"]
    out = {"paper": "Ghosh et al. 1995", "n": n, "d": d, "rho": rho, "Delta": delta,
           "alpha": ex["alpha"], "mu": ex["mu"], "alpha_used": alpha, "mu_used": mu,
           "expansion_note": "figures use the exact expansion, or its lower bound when only bounds are known"}
    if not alpha or n < 2:
        out["note"] = "edge expansion unavailable or zero: no expansion bounds"
        return out
    ln = math.log(max(n, 2))
    J = 2 * math.ceil(_log_base(n, 1 + alpha / (2 * d)))
    if algo == "single-port":
        out.update({
            "basis": "Theorem 3.1 (alpha), Theorem 3.3 (mu); w.h.p.",
            "order_final_discrepancy_d_logn_over_alpha": d * ln / alpha,
            "order_time_d_Delta_over_alpha": d * delta / alpha,
            "order_time_full_d_Delta_over_alpha_plus_d2_logn_over_alpha2": d * delta / alpha + d * d * ln / alpha ** 2,
            "explicit_final_discrepancy_2J": 2 * J,
        })
        if mu:
            out["order_final_discrepancy_logn_over_mu"] = ln / mu
            out["order_time_d_Delta_over_mu"] = d * delta / mu
    else:
        c, eps = 25.0, 1.0 / 24.0
        nu = alpha / (c * d * d)
        ln_phi0 = ln + (delta + 1) * math.log1p(nu) - math.log(nu)
        out.update({
            "basis": ("Theorem 3.2 (alpha), Theorem 3.4 (mu)" if algo == "multi-port" else
                      "Theorem 5.1 (live edges with expansion alpha every step)"),
            "order_final_discrepancy_d2_logn_over_alpha": d * d * ln / alpha,
            "order_time_Delta_over_alpha": delta / alpha,
            "order_time_full_Delta_over_alpha_plus_d2_logn_over_alpha2": delta / alpha + d * d * ln / alpha ** 2,
        })
        if algo == "multi-port":
            out["explicit_final_discrepancy_6Jd_plus_2d_minus_1"] = 6 * J * d + 2 * d - 1
            out["explicit_time_c25_eps1_24"] = 2 * math.ceil(4 * math.ceil(ln_phi0) / (eps * nu * nu * d * d))
            out["local_balance_at_fixed_point"] = 2 * d
        if mu:
            out["order_final_discrepancy_d_logn_over_mu"] = d * ln / mu
            out["order_time_Delta_over_mu"] = delta / mu
    out["lemma_6_3_offline_time_to_ceil_rho_plus_d"] = lemma_6_3_time(delta, alpha)
    if n <= OFFLINE_MAX_N and graph.is_connected and loads.dtype.kind in "iu":
        model = "single-port" if algo == "single-port" else "multi-port"
        # Keep every time-expanded network below ~2e6 arcs so that `tokendist bounds` stays quick.
        horizon = max(1, 2_000_000 // (2 * graph.m + 3 * n))
        try:
            r = offline_optimum(graph, loads, slack=0, model=model, max_steps=horizon)
            out["offline_steps_to_ceil_rho"] = r.steps
            out["offline_exact"] = r.exact
            r_d = offline_optimum(graph, loads, slack=d, model=model, max_steps=horizon)
            out["offline_steps_to_ceil_rho_plus_d"] = r_d.steps
        except Exception as exc:  # too large a time-expanded network: report, do not fail
            out["offline_note"] = str(exc)
    return out


def _provider(algo: str):
    def predict(graph, loads, params):
        return ghosh_bounds(graph, loads, algo)

    predict.__name__ = f"predict_{algo.replace('-', '_')}"
    predict.__doc__ = f"Ghosh et al. 1995 bounds for {algo}."
    return predict


# One provider per algorithm (the registry's predict() does not hand the algorithm's name over).
for _algo in ("single-port", "multi-port", "ds", "async-multi-port"):
    register_bounds(_algo)(_provider(_algo))
del _algo
