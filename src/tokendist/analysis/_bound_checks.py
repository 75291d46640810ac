"""Bounds as a verdict: each paper's bound next to what a run measured, and whether it held.

:func:`tokendist.analysis.predict` returns the figures a paper predicts as a flat dict with
technical keys (``order_time_full_Delta_over_alpha_plus_d2_logn_over_alpha2``). :func:`bound_tables`
turns them into tables, one per bound (a theorem, a lemma, a section), each row a quantity with a
readable name, the predicted value, the measured one, the relation that should hold and the
verdict, plus the constants the figures were computed with. ``tokendist bounds`` prints them.

Kinds of rows:

* ``guarantee`` -- the paper proves it for every run (or w.h.p.); "did not hold" is a finding;
* ``order, constant 1`` -- an O(.) or Theta(.) expression evaluated with constant 1: a shape to compare
  against, not a guarantee (a run may exceed it by the hidden constant);
* ``lower bound`` -- no protocol of the model can do better (the off-line optimum).

The predictions do not need a run: when the run stops (an infeasible step) they are kept and the
measured column says why it is empty.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np

__all__ = ["BoundRow", "BoundTable", "bound_tables"]

GUARANTEE, WHP, ORDER, LOWER = "guarantee", "guarantee (w.h.p.)", "order, constant 1", "lower bound"


@dataclass
class BoundRow:
    quantity: str
    predicted: float | None
    measured: float | None = None
    relation: str | None = None      # "<=" (measured <= predicted) or ">=" ; None: a figure, nothing to hold
    kind: str = GUARANTEE
    note: str = ""

    @property
    def held(self) -> bool | None:
        if self.relation is None or self.measured is None or self.predicted is None:
            return None
        if isinstance(self.predicted, float) and not math.isfinite(self.predicted):
            return None
        tol = 1e-9 * max(1.0, abs(float(self.predicted)))
        if self.relation == "<=":
            return bool(self.measured <= self.predicted + tol)
        return bool(self.measured >= self.predicted - tol)

    def to_json(self) -> dict:
        return {"quantity": self.quantity, "predicted": self.predicted, "measured": self.measured,
                "relation": self.relation, "kind": self.kind, "held": self.held, "note": self.note}


@dataclass
class BoundTable:
    title: str
    rows: list = field(default_factory=list)
    constants: dict = field(default_factory=dict)

    def to_json(self) -> dict:
        return {"bound": self.title, "constants": self.constants, "rows": [r.to_json() for r in self.rows]}


class _Measured:
    """What the tables read from a run (None when there is no run)."""

    def __init__(self, run):
        self.run = run

    def __bool__(self):
        return self.run is not None

    def final(self, key):
        return None if self.run is None else self.run.final[key]

    def steps_to(self, metric, level):
        if self.run is None or level is None or not math.isfinite(level):
            return None
        return self.run.steps_to(metric, level)

    @property
    def stable(self) -> bool:
        return self.run is not None and self.run.stop_reason in ("stable", "fixed-point")


def _time_row(quantity, predicted, m: _Measured, metric, target, kind, what):
    """Steps to bring ``metric`` to ``target``, against a time bound (empty when never reached)."""
    steps = m.steps_to(metric, target)
    note = ""
    if m and steps is None:
        note = f"{what} not reached in the run's {m.run.steps:,} steps"
    return BoundRow(quantity, predicted, steps, "<=", kind, note)


def _ghosh(algo, p, m):
    tables = []
    sp = algo == "single-port"
    consts = {"n": p["n"], "d (max degree)": p["d"], "rho (average load)": p["rho"],
              "Delta (max |load - rho|)": p["Delta"]}
    for key, label in (("alpha", "alpha (edge expansion)"), ("mu", "mu (node expansion)")):
        e = p.get(key) or {}
        if e.get("value") is not None:
            consts[label] = (f"{e['value']:.4g} exact" if e.get("exact") else
                             f"between {e['lower']:.4g} and {e['upper']:.4g}; the figures use {e['lower']:.4g}")
    if "note" in p:
        tables.append(BoundTable(f"Ghosh et al. 1995: {p['note']}", [], consts))
        return tables
    kind = WHP if sp else GUARANTEE
    basis = p.get("basis", "")
    rows = []
    if sp:
        fd_order, t_order, t_full = ("order_final_discrepancy_d_logn_over_alpha", "order_time_d_Delta_over_alpha",
                                     "order_time_full_d_Delta_over_alpha_plus_d2_logn_over_alpha2")
        rows.append(BoundRow("final discrepancy <= 2J (explicit, Sec. 3.1)", p["explicit_final_discrepancy_2J"],
                             m.final("discrepancy"), "<=", kind))
        rows.append(BoundRow("final discrepancy <= d log n / alpha", p[fd_order], m.final("discrepancy"), "<=", ORDER))
        rows.append(_time_row("steps to that discrepancy <= d Delta / alpha", p[t_order], m, "discrepancy",
                              p[fd_order], ORDER, "the discrepancy d log n / alpha"))
        rows.append(_time_row("... <= d Delta / alpha + d^2 log n / alpha^2", p[t_full], m, "discrepancy",
                              p[fd_order], ORDER, "the discrepancy d log n / alpha"))
        if "order_final_discrepancy_logn_over_mu" in p:
            rows.append(BoundRow("final discrepancy <= log n / mu (Theorem 3.3)",
                                 p["order_final_discrepancy_logn_over_mu"], m.final("discrepancy"), "<=", ORDER))
            rows.append(_time_row("steps to that discrepancy <= d Delta / mu", p["order_time_d_Delta_over_mu"], m,
                                  "discrepancy", p["order_final_discrepancy_logn_over_mu"], ORDER,
                                  "the discrepancy log n / mu"))
        consts["J = 2 ceil(log_{1+alpha/(2d)} n)"] = p["explicit_final_discrepancy_2J"] // 2
    else:
        fd_order = "order_final_discrepancy_d2_logn_over_alpha"
        if "explicit_final_discrepancy_6Jd_plus_2d_minus_1" in p:
            target = p["explicit_final_discrepancy_6Jd_plus_2d_minus_1"]
            rows.append(BoundRow("final discrepancy <= 6Jd + 2d - 1 (explicit, Sec. 3.2)", target,
                                 m.final("discrepancy"), "<=", kind))
            rows.append(_time_row("steps to that discrepancy (explicit: c = 25, eps = 1/24)",
                                  p["explicit_time_c25_eps1_24"], m, "discrepancy", target, kind,
                                  "the discrepancy 6Jd + 2d - 1"))
            consts.update({"c (proof constant)": 25, "eps (proof constant)": "1/24"})
        rows.append(BoundRow("final discrepancy <= d^2 log n / alpha", p[fd_order], m.final("discrepancy"), "<=",
                             ORDER))
        rows.append(_time_row("steps to that discrepancy <= Delta / alpha", p["order_time_Delta_over_alpha"], m,
                              "discrepancy", p[fd_order], ORDER, "the discrepancy d^2 log n / alpha"))
        rows.append(_time_row("... <= Delta / alpha + d^2 log n / alpha^2",
                              p["order_time_full_Delta_over_alpha_plus_d2_logn_over_alpha2"], m, "discrepancy",
                              p[fd_order], ORDER, "the discrepancy d^2 log n / alpha"))
        if "order_final_discrepancy_d_logn_over_mu" in p:
            rows.append(BoundRow("final discrepancy <= d log n / mu (Theorem 3.4)",
                                 p["order_final_discrepancy_d_logn_over_mu"], m.final("discrepancy"), "<=", ORDER))
            rows.append(_time_row("steps to that discrepancy <= Delta / mu", p["order_time_Delta_over_mu"], m,
                                  "discrepancy", p["order_final_discrepancy_d_logn_over_mu"], ORDER,
                                  "the discrepancy d log n / mu"))
        if "local_balance_at_fixed_point" in p:
            rows.append(BoundRow("local discrepancy at a fixed point <= 2d (Sec. 4.3)",
                                 p["local_balance_at_fixed_point"],
                                 m.final("local_discrepancy") if m.stable else None, "<=", GUARANTEE,
                                 "" if m.stable or not m else "the run did not reach a fixed point"))
        if "explicit_final_discrepancy_6Jd_plus_2d_minus_1" in p:
            consts["J = 2 ceil(log_{1+alpha/(2d)} n)"] = (
                (p["explicit_final_discrepancy_6Jd_plus_2d_minus_1"] - 2 * p["d"] + 1) // (6 * p["d"]))
    tables.append(BoundTable(f"Ghosh et al. 1995, {basis}", rows, consts))
    rho = p["rho"]
    off = []
    model = "single-port" if sp else "multi-port"
    for key, extra, label in (("offline_steps_to_ceil_rho", 0, "ceil(rho)"),
                              ("offline_steps_to_ceil_rho_plus_d", p["d"], "ceil(rho) + d")):
        if key in p:
            off.append(BoundRow(f"steps until every node holds <= {label} (off-line optimum, exact max-flow)",
                                p[key], m.steps_to("max", math.ceil(rho) + extra), ">=", LOWER,
                                "" if not m or m.steps_to("max", math.ceil(rho) + extra) is not None
                                else f"max load <= {label} not reached in the run"))
    if "offline_steps_to_ceil_rho_plus_d" in p:
        off.append(BoundRow("Lemma 6.3: the off-line optimum to ceil(rho) + d <= ceil(Delta / alpha)",
                            p["lemma_6_3_offline_time_to_ceil_rho_plus_d"], p["offline_steps_to_ceil_rho_plus_d"],
                            "<=", GUARANTEE, "measured: the exact off-line optimum above"))
    elif "lemma_6_3_offline_time_to_ceil_rho_plus_d" in p:
        off.append(BoundRow("Lemma 6.3: off-line time to ceil(rho) + d (multi-port)",
                            p["lemma_6_3_offline_time_to_ceil_rho_plus_d"], None, None, GUARANTEE,
                            p.get("offline_note", "graph too large for the exact off-line optimum")))
    if off:
        tables.append(BoundTable(f"Ghosh et al. 1995, Sec. 6: the off-line optimum ({model}); no protocol of the "
                                 "model is faster", off, {}))
    return tables


def _diffusion(algo, p, m):
    rows = []
    tol = p.get("tolerance", 1.0)
    divisible = algo == "diffusion"
    kind = GUARANTEE if divisible else "none in the paper"
    for name, label in (("error_bound_iterations", "|lambda_2| of P"), ("mesh_iterations_high", "mesh lambda"),
                        ("electrical_iterations_high", "electrical conductance"),
                        ("fluid_iterations_high", "fluid conductance")):
        if name in p:
            row = _time_row(f"steps until ||e(t)||_2 <= {tol:g} (Error Bound, {label})", p[name], m, "l2_error", tol,
                            kind, f"||e||_2 <= {tol:g}")
            if not divisible:
                row.relation, row.note = None, "the roundings of Sec. 4 have no bound in the paper"
            rows.append(row)
    consts = {k: p[k] for k in ("sigma", "lambda2", "gamma", "electrical_conductance", "fluid_conductance") if k in p}
    consts["tolerance"] = tol
    return [BoundTable("Subramanian, Scherson 1994, Sec. 3: Error Bound ||e(t)|| <= |lambda_2|^t ||e(0)||", rows,
                       consts)]


def _heterogeneous(algo, p, m):
    rows = []
    eps = 1e-6
    l2_0 = None if not m else float(m.run.initial["l2_error"])
    target = None if l2_0 is None else eps * l2_0
    divisible = algo in ("fos", "sos")
    for key, label, kind in (("fos_steps_spectral(eps=1e-6)", "FOS, spectral count (gamma)", GUARANTEE),
                             ("sos_steps_spectral(eps=1e-6)", "SOS, spectral count (beta)", GUARANTEE),
                             ("lemma1_fos_steps_theta(eps=1e-6)", "FOS, Theta(d / lambda_2 log(1/eps))", ORDER),
                             ("lemma1_sos_steps_theta(eps=1e-6)", "SOS, Theta(sqrt(d / lambda_2) log(1/eps))", ORDER)):
        scheme = label[:3].lower()
        applies = divisible and algo == scheme
        row = _time_row(f"steps until ||e(t)|| <= 1e-6 ||e(0)|| (Lemma 1, {label})", p[key], m if applies else
                        _Measured(None), "l2_error", target if target is not None else math.nan, kind,
                        "the error 1e-6 ||e(0)||")
        if not applies:
            row.relation, row.note = None, f"for the real-valued {scheme}"
        rows.append(row)
    t1 = BoundRow("final ||e||_2 <= sqrt(n s_max) d / (sqrt(s_min) (1 - gamma)) (Theorem 1, integer SOS)",
                  p["theorem1_final_l2_error_O"], m.final("l2_error") if algo == "sos-iou" else None,
                  "<=" if algo == "sos-iou" else None, ORDER, "" if algo == "sos-iou" else "for sos-iou")
    f22 = BoundRow("final ||e||_2 <= n d^2 / lambda_2 (integer FOS, [22])", p["integer_fos_final_l2_error_O[22]"],
                   m.final("l2_error") if algo == "fos-floor" else None, "<=" if algo == "fos-floor" else None, ORDER,
                   "" if algo == "fos-floor" else "for fos-floor")
    f23 = BoundRow("final ||e||_inf <= d^2 log n / lambda_2 (integer FOS, [23])", p["integer_fos_final_linf_error_O[23]"],
                   m.final("linf_error") if algo == "fos-floor" else None, "<=" if algo == "fos-floor" else None, ORDER,
                   "" if algo == "fos-floor" else "for fos-floor")
    rw = BoundRow("steps of the random-walk scheme (Theorem 2)", p["theorem2_random_walk_steps_O"],
                  m.run.steps if (m and algo == "random-walk") else None, None, ORDER,
                  "the run's length, for reference (Theorem 2 bounds the time to constant error)")
    consts = {"gamma (second largest |eigenvalue| of M)": p["gamma"], "lambda_2 of L S^-1": p["lambda_2"],
              "beta (SOS)": p["beta"], "d (max degree)": p["max_degree"], "E (initial max imbalance)":
              p["initial_max_imbalance_E"]}
    return [BoundTable("Elsässer, Monien, Schamberger 2006, Lemma 1: steps to eps-balance", rows[:4], consts),
            BoundTable("Elsässer, Monien, Schamberger 2006, Theorems 1-2 and [22, 23]: integer schemes",
                       [t1, f22, f23, rw], {})]


def _dimension_exchange(algo, p, m):
    stable_note = ("" if m.stable or not m or algo == "discrepancy1" else
                   "the bound is for the stable distribution; the run did not reach one")
    rows = [BoundRow("final discrepancy", p["final_discrepancy_bound"], m.final("discrepancy"), "<=", GUARANTEE,
                     stable_note)]
    consts = {}
    if algo == "threshold2":
        title = "Houle, Symvonis, Wood 2004, Theorem 5: THRESHOLD-2 ends within the diameter"
        consts["diameter"] = p["final_discrepancy_bound"]
    elif algo == "threshold1":
        title = "Houle, Symvonis, Wood 2004, Theorem 12: THRESHOLD-1 ends within MSD(T)"
        consts["MSD(T)"] = p["msd"]
        rows.append(BoundRow("MSD(T) <= Theorem 16's bound", p["bound_theorem16"], p["msd"], "<=", GUARANTEE,
                             "measured: MSD(T), computed exactly"))
    else:
        title = "Houle, Symvonis, Wood 2004, Theorem 18: DISCREPANCY-1 within 2 (Delta_0 - 1) chi n steps"
        consts["chi (colours)"] = p["chi"]
        rows.append(_time_row("steps to discrepancy <= 1", p["time_bound"], m, "discrepancy", 1, GUARANTEE,
                              "discrepancy 1"))
    return [BoundTable(title, rows, consts)]


def _perfect_tree(algo, p, m):
    exchanges = None if not m else m.run.tokens_moved
    rows = [
        BoundRow("final discrepancy (every node Avg or Avg + 1)", 1, m.final("discrepancy"), "<=", GUARANTEE),
        BoundRow("steps <= T D", p["time_bound_TD"], None if not m else m.run.steps, "<=", ORDER),
        BoundRow("token exchanges - optimum <= 2 D (T mod N)", p["excess_bound_with_constant"],
                 None if exchanges is None else exchanges - p["optimum_token_exchanges"], "<=", GUARANTEE,
                 "constant 2 derived in docs/margara-pistocchi-vassura.md"),
        BoundRow("token exchanges - optimum <= D min{T, N}", p["excess_bound_D_min_T_N"],
                 None if exchanges is None else exchanges - p["optimum_token_exchanges"], "<=", ORDER),
    ]
    consts = {"T (tokens)": p["T"], "N (nodes)": p["N"], "D (tree diameter)": p["D"], "T mod N": p["T_mod_N"],
              "optimum token exchanges": p["optimum_token_exchanges"]}
    return [BoundTable("Margara, Pistocchi, Vassura, Sec. 5: perfect distribution, time and exchanges", rows, consts)]


_FAMILIES = {"single-port": _ghosh, "multi-port": _ghosh, "ds": _ghosh, "async-multi-port": _ghosh,
             "threshold2": _dimension_exchange, "threshold1": _dimension_exchange, "discrepancy1": _dimension_exchange,
             "perfect-tree": _perfect_tree, "fos": _heterogeneous, "sos": _heterogeneous,
             "fos-floor": _heterogeneous, "sos-iou": _heterogeneous, "random-walk": _heterogeneous}


def _plain(v):
    if isinstance(v, np.generic):
        return v.item()
    return v


def bound_tables(algo: str, predicted: dict, run=None) -> list[BoundTable]:
    """The bounds of ``algo`` (``predicted`` from :func:`~tokendist.analysis.predict`) against ``run``.

    ``run`` is a :class:`~tokendist.engine.RunResult` or None (no run, or a run that stopped): the
    predicted column is filled either way.
    """
    fn = _FAMILIES.get(algo)
    if fn is None and algo.startswith("diffusion"):
        fn = _diffusion
    if fn is None:
        rows = [BoundRow(k.replace("_", " "), _plain(v)) for k, v in predicted.items()
                if isinstance(v, (int, float, np.generic)) and not isinstance(v, bool)]
        return [BoundTable(str(predicted.get("basis", algo)), rows, {})]
    return fn(algo, predicted, _Measured(run))
