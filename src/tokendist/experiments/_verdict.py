"""The verdict of a comparison: which protocol balanced this network fastest, best and cheapest.

Only *comparable* runs take part: integer (indivisible) loads, not a single infeasible step, and a
run that finished (``status == "ok"``). A real-valued scheme (``divisible``: diffusion, fos, sos)
moves fractions of a token and reaches discrepancies no token protocol can, and a run that was
allowed to overdraw nodes (``--allow-infeasible``) executed a rule that cannot be executed; both are
reported apart, never named in the verdict.

For each discrepancy level K the verdict names

* the protocol that *reached* K first (the first recorded step with ``max - min <= K``), and
* the protocol that *settled* at K first (the first recorded step from which the discrepancy stays
  at most K to the end of the run),

each by steps and by wall time (seconds of stepping since step 0; building the graph, the
protocol's setup and numba compilation are left out, so a cold cache does not decide),
then the best final discrepancy, and among the runs that end there the fewest tokens moved and
the fewest messages. Ties are named together. With tokens arriving and leaving (``inject``), also
the lowest time-averaged discrepancy and the lowest peak load.
"""

from __future__ import annotations

import numpy as np

from ..engine._metrics import at_most

__all__ = ["settle_step", "verdict", "exclusion"]


def settle_step(steps: np.ndarray, values: np.ndarray, level: float) -> int | None:
    """First recorded step from which ``values`` stay at most ``level`` to the end (None if they end above).

    Examples
    --------
    >>> settle_step(np.array([0, 1, 2, 3, 4]), np.array([9, 1, 5, 1, 0]), 1)
    3
    >>> settle_step(np.array([0, 1]), np.array([3, 2]), 1) is None
    True
    """
    # (exact for int64 discrepancies against a real level: numpy would round them to float64 first)
    above = np.flatnonzero(~np.asarray(at_most(np.asarray(values), level)))
    if above.size == 0:
        return int(steps[0])
    last = int(above[-1])
    return None if last == len(values) - 1 else int(steps[last + 1])


def exclusion(row) -> str | None:
    """Why ``row`` cannot take part in the verdict (None: it can)."""
    if row.status == "infeasible":
        return "infeasible: stopped where a node would send more than it holds"
    if row.status != "ok":
        return row.status
    if row.divisible:
        return "real-valued loads (fractions of a token)"
    if row.infeasible_steps:
        return f"{row.infeasible_steps:,} infeasible steps (lowest load {row.lowest_load:g})"
    return None


def _best(rows, key):
    """The rows minimising ``key`` (None values left out): ``(value, [rows])``."""
    scored = [(key(r), r) for r in rows]
    scored = [(k, r) for k, r in scored if k is not None]
    if not scored:
        return None, []
    best = min(k for k, _ in scored)
    return best, [r for k, r in scored if k == best]


def verdict(rows, levels) -> dict:
    """The verdict over ``rows`` (:class:`~tokendist.experiments.CompareRow`) at ``levels``.

    Returns a JSON-able dict: ``comparable`` (names), ``excluded`` (name -> reason) and, per level,
    ``reached``/``settled`` winners by steps and by wall time; ``best_final_discrepancy`` and, among
    the runs ending there, ``fewest_tokens_moved`` and ``fewest_messages``. A level no comparable run
    reached has ``None`` winners.
    """
    comparable = [r for r in rows if exclusion(r) is None]
    out = {"comparable": [r.algorithm for r in comparable],
           "excluded": {r.algorithm: exclusion(r) for r in rows if exclusion(r) is not None},
           "levels": []}
    for lv in levels:
        entry = {"level": lv}
        for what, steps, secs in (("reached", lambda r: r.steps_to_level.get(lv),
                                   lambda r: r.seconds_to_level.get(lv)),
                                  ("settled", lambda r: r.settled_at_level.get(lv),
                                   lambda r: r.seconds_to_settle.get(lv))):
            _, by_steps = _best(comparable, steps)
            if by_steps:
                # Among equal step counts the quicker one first.
                by_steps.sort(key=lambda r: secs(r))
            _, by_time = _best(comparable, secs)
            entry[what] = {
                "by_steps": None if not by_steps else {
                    "algorithms": [r.algorithm for r in by_steps], "steps": steps(by_steps[0]),
                    "seconds": [round(secs(r), 4) for r in by_steps]},
                "by_wall_time": None if not by_time else {
                    "algorithm": by_time[0].algorithm, "seconds": round(secs(by_time[0]), 4),
                    "steps": steps(by_time[0])},
            }
        out["levels"].append(entry)
    best, finishers = _best(comparable, lambda r: r.final_discrepancy)
    out["best_final_discrepancy"] = None if best is None else {
        "discrepancy": best, "algorithms": [r.algorithm for r in finishers]}
    for key, attr in (("fewest_tokens_moved", "tokens_moved"), ("fewest_messages", "messages")):
        value, winners = _best(finishers, lambda r, a=attr: getattr(r, a))
        out[key] = None if value is None else {
            "value": value, "algorithms": [r.algorithm for r in winners],
            "among": "runs ending at the best final discrepancy"}
    if any(r.stream for r in comparable):
        # A stream never settles: the time-averaged discrepancy and the peak load say more.
        for key, metric in (("lowest_time_averaged_discrepancy", "discrepancy_time_average"),
                            ("lowest_peak_load", "max_load_peak")):
            value, winners = _best([r for r in comparable if r.stream], lambda r, m=metric: r.stream[m])
            out[key] = None if value is None else {"value": value, "algorithms": [r.algorithm for r in winners]}
    return out
