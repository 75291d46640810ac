"""Statistics and plots of a sweep's results: ``tokendist sweep report DIR``.

Rows are grouped by (graph, initial distribution, variant), a variant being an algorithm with the
parameters the sweep sets (``sos beta=1.5``). For each group and each metric (the steps to each
discrepancy level, first reached and settled, and the final discrepancy) the report gives the
number of runs that have a value, the mean, the median and the 95% confidence interval of the mean
by Student's t distribution (``mean +- t(0.975, k-1) * s / sqrt(k)``, ``s`` the sample standard
deviation with ``ddof=1``; none for fewer than two values).

The steps to a level are averaged over the runs that reached it; ``reached`` says how many did,
so a protocol that reaches a level in 3 runs of 20 is not mistaken for a fast one.

The plots:

* ``scaling-L.png|svg`` for each level L: mean steps to L against n, log-log, one line per variant
  and graph family, a band for the 95% interval, the least-squares slope of log(steps) against
  log(n) in the legend (steps ~ n^slope); a hollow marker where not every run reached L;
* ``final-discrepancy.png|svg``: the distribution over seeds of the final discrepancy, one box per
  variant for each graph;
* ``wins.png|svg``: for each level, graph and initial distribution, the share of seeds in which each
  variant was the first to reach the level (ties count for each tied variant).
"""

from __future__ import annotations

import json
import math
import numbers
from collections import Counter
from dataclasses import dataclass, field
from fractions import Fraction
from pathlib import Path

import numpy as np
from scipy.special import stdtrit

from ...errors import TokendistError
from ._store import RUNS, read_rows, to_table, write_table

__all__ = ["Report", "summarize", "wins", "describe", "write_report", "read_report_rows"]


def describe(values) -> dict:
    """Count, mean, median, sample standard deviation and 95% t-interval of the mean of ``values``.

    ``None`` values (a level not reached) are left out; the interval needs two values.

    Examples
    --------
    >>> d = describe([10, 12, 14, None])
    >>> d["count"], d["mean"], d["median"], d["std"], round(d["ci_low"], 3), round(d["ci_high"], 3)
    (3, 12.0, 12.0, 2.0, 7.032, 16.968)
    """
    values = [v for v in values if v is not None]
    if any(isinstance(v, numbers.Integral) and abs(v) > 2**53 for v in values):
        return _describe_exact(values)
    a = np.asarray(values, dtype=np.float64)
    k = int(a.size)
    out = {"count": k, "mean": None, "median": None, "std": None, "ci_low": None, "ci_high": None}
    if k == 0:
        return out
    mean = float(a.mean())
    out.update(mean=mean, median=float(np.median(a)))
    if k >= 2:
        s = float(a.std(ddof=1))
        # stdtrit(df, q) is the t quantile that scipy.stats.t.ppf(q, df) returns (the same float),
        # without importing scipy.stats: half a second of every report.
        half = float(stdtrit(k - 1, 0.975)) * s / math.sqrt(k)
        out.update(std=s, ci_low=mean - half, ci_high=mean + half)
    return out


def _describe_exact(values) -> dict:
    """:func:`describe` of integers beyond 2**53 (discrepancies of loads near 2**62), from exact sums.

    float64 rounds such an integer (a median of 2**62 + 1 came out 2**62): here the mean, the
    standard deviation and the interval are the correctly rounded floats of the exact rationals,
    and the median is exact (a Python int where it is an integer).
    """
    k = len(values)
    xs = sorted(Fraction(v) for v in values)
    mean = sum(xs) / k
    mid = xs[k // 2] if k % 2 else (xs[k // 2 - 1] + xs[k // 2]) / 2
    out = {"count": k, "mean": float(mean), "median": int(mid) if mid.denominator == 1 else float(mid),
           "std": None, "ci_low": None, "ci_high": None}
    if k >= 2:
        s = math.sqrt(sum((x - mean) ** 2 for x in xs) / (k - 1))
        half = float(stdtrit(k - 1, 0.975)) * s / math.sqrt(k)
        out.update(std=s, ci_low=float(mean) - half, ci_high=float(mean) + half)
    return out


def _levels(rows) -> list[str]:
    names = []
    for r in rows[:1]:
        names = [k[len("steps_to_"):] for k in r if k.startswith("steps_to_")]
    return names


def _metrics(levels) -> list[str]:
    return [f"steps_to_{lv}" for lv in levels] + [f"settled_{lv}" for lv in levels] + ["final_discrepancy"]


def summarize(rows: list[dict]) -> list[dict]:
    """One entry per (graph, init, variant): run and failure counts and :func:`describe` of each metric."""
    levels = _levels(rows)
    groups: dict[tuple, list[dict]] = {}
    for r in rows:
        groups.setdefault((r["graph"], r["init"], r["variant"]), []).append(r)
    out = []
    for (graph, init, variant), rs in groups.items():
        ok = [r for r in rs if r["status"] == "ok"]
        reasons = Counter(f"{r['status']}: {r['reason']}" for r in rs if r["status"] != "ok")
        entry = {"graph": graph, "n": next((r["n"] for r in rs if r["n"] is not None), None), "init": init,
                 "algo": rs[0]["algo"], "variant": variant, "runs": len(rs), "ok": len(ok),
                 "failures": len(rs) - len(ok), "failure_reasons": dict(reasons.most_common(3)), "metrics": {}}
        for metric in _metrics(levels):
            entry["metrics"][metric] = describe(r.get(metric) for r in ok)
        out.append(entry)
    return out


def wins(rows: list[dict]) -> list[dict]:
    """For each (graph, init, level): in how many seeds each variant was first to reach the level."""
    levels = _levels(rows)
    cells: dict[tuple, dict] = {}
    variants: dict[tuple, list] = {}
    for r in rows:
        gi = (r["graph"], r["init"])
        variants.setdefault(gi, [])
        if r["variant"] not in variants[gi]:
            variants[gi].append(r["variant"])
        if r["status"] == "ok":
            cells.setdefault(gi, {}).setdefault(r["seed"], []).append(r)
    out = []
    for gi, vs in variants.items():
        for lv in levels:
            col = f"steps_to_{lv}"
            count = Counter({v: 0 for v in vs})
            seeds = 0
            for seed, rs in sorted(cells.get(gi, {}).items()):
                reached = [(r[col], r["variant"]) for r in rs if r.get(col) is not None]
                if not reached:
                    continue
                seeds += 1
                best = min(s for s, _ in reached)
                count.update(v for s, v in reached if s == best)
            winner = max(vs, key=lambda v: count[v]) if seeds else None
            out.append({"graph": gi[0], "init": gi[1], "level": lv, "seeds": seeds, "winner": winner,
                        "wins": dict(count)})
    return out


def _long_rows(summary) -> list[dict]:
    rows = []
    for g in summary:
        for metric, d in g["metrics"].items():
            rows.append({"graph": g["graph"], "n": g["n"], "init": g["init"], "algo": g["algo"],
                         "variant": g["variant"], "runs": g["runs"], "failures": g["failures"],
                         "metric": metric, **d})
    return rows


@dataclass
class Report:
    """A sweep's statistics: per-group summaries, the win table, and the files written."""

    folder: str
    runs: int
    summary: list
    wins: list
    files: list = field(default_factory=list)

    def to_json(self) -> dict:
        return {"folder": self.folder, "runs": self.runs, "summary": self.summary, "wins": self.wins,
                "files": self.files}


def read_report_rows(folder) -> list[dict]:
    path = Path(folder) / RUNS
    if not path.is_file():
        raise TokendistError(f"{folder}: no {RUNS} (run 'tokendist sweep FILE --out {folder}' first)")
    rows = read_rows(path)
    if not rows:
        raise TokendistError(f"{path}: no rows")
    return [_numbers(r) for r in rows]


_NUMERIC = ("steps_to_", "settled_", "final_", "initial_", "tokens", "messages")


def _numbers(row: dict) -> dict:
    """A row with its figures as numbers again: a column that mixed integers past 2**53 with reals
    (``diffusion`` beside ``diffusion-floor``) is stored as exact text (:func:`._store._column`),
    and the statistics and plots took the text (a sweep stopped with a traceback in its report)."""
    out = dict(row)
    for k, v in row.items():
        if isinstance(v, str) and k.startswith(_NUMERIC):
            try:
                out[k] = int(v)
            except ValueError:
                try:
                    out[k] = float(v)
                except ValueError:
                    pass
    return out


def write_report(folder, *, plots: bool = True) -> Report:
    """Compute the statistics of ``folder/runs.parquet``; write report.json, summary.parquet and the plots."""
    folder = Path(folder)
    rows = read_report_rows(folder)
    summary, table = summarize(rows), wins(rows)
    report = Report(str(folder), len(rows), summary, table)
    (folder / "report.json").write_text(json.dumps({"summary": summary, "wins": table}, indent=2) + "\n")
    write_table(to_table(_long_rows(summary)), folder / "summary.parquet")
    report.files = [str(folder / "report.json"), str(folder / "summary.parquet")]
    if plots:
        # matplotlib only when drawing (half a second of imports); _plots imports nothing from here.
        from ._plots import plot_all

        report.files += plot_all(folder, rows, summary, table, _levels(rows))
    return report
