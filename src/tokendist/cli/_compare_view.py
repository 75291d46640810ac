"""How ``tokendist compare`` prints a comparison: comparable runs, the marked section, the verdict.

Three sections, each fitting the terminal (:mod:`._layout`):

1. the comparable runs (integer loads, no infeasible step): steps to *reach* and to *settle at*
   each level, final discrepancy, cost and wall time;
2. a marked section for the runs that are never in the verdict: real-valued schemes (fractions of
   a token) and runs with infeasible steps (stopped there, or continued with negative loads under
   ``--allow-infeasible``), then the protocols that did not run on this graph, with the reason;
3. the verdict (:func:`tokendist.experiments._verdict.verdict`).
"""

from __future__ import annotations

import sys

from rich.console import Console

from ..experiments._verdict import exclusion
from ._layout import Col, Group, print_fitted, terminal_width
from ._output import fmt

__all__ = ["render", "PERFECT_TREE_NOTE"]

#: Where the user sees the perfect tree's curve rise before it falls (Margara et al., Theorem 2).
PERFECT_TREE_NOTE = ("perfect-tree: the discrepancy rises before it falls to 1. Phase 2 sends every "
                     "subtree's surplus towards the root, which at the end of the phase holds "
                     "Avg + (T mod N) tokens while every other node holds Avg = floor(T/N) (Margara, "
                     "Pistocchi, Vassura, Theorem 2); phase 3 then hands those extra tokens down.")


def _lv(level) -> str:
    return fmt(level)


def _secs(x) -> str:
    if x is None:
        return "-"
    return f"{x:.3f}" if x < 10 else f"{x:,.1f}"


def _level_groups(rows, levels) -> list[Group]:
    return [
        Group("steps to reach each level", [Col(f"r<={_lv(lv)}", [fmt(r.steps_to_level.get(lv)) for r in rows])
                                            for lv in levels]),
        Group("steps to settle at each level", [Col(f"s<={_lv(lv)}", [fmt(r.settled_at_level.get(lv)) for r in rows])
                                                for lv in levels]),
    ]


def _final_groups(rows, offline) -> list[Group]:
    def step_seconds(r):
        return None if r.result is None or r.result.clock is None else float(r.result.clock[-1])

    groups = [
        Group("final state", [
            Col("disc.", [fmt(r.final_discrepancy) for r in rows]),
            Col("local", [fmt(r.final_local_discrepancy) for r in rows]),
            Col("stop", [r.stop_reason or r.status for r in rows], justify="left"),
            Col("steps", [fmt(r.steps) for r in rows]),
        ]),
        Group("cost", [
            Col("moved", [fmt(r.tokens_moved) for r in rows]),
            Col("messages", [fmt(r.messages) for r in rows]),
            Col("wall s", [_secs(step_seconds(r)) for r in rows]),
        ]),
    ]
    if any(r.stream for r in rows):
        def metric(r, key):
            return None if not r.stream else r.stream[key]

        groups.append(Group("stream", [
            Col("avg disc.", [fmt(None if metric(r, "discrepancy_time_average") is None
                                  else round(metric(r, "discrepancy_time_average"), 2)) for r in rows]),
            Col("peak load", [fmt(metric(r, "max_load_peak")) for r in rows]),
            Col("backlog", [fmt(metric(r, "backlog_final")) for r in rows]),
        ]))
    if offline:
        groups.append(Group("off-line optimum", [
            Col(f"to max<={offline['target_max_load']}", [fmt(r.steps_to_target) for r in rows]),
            Col("x off-line", [fmt(None if r.offline_ratio is None else round(r.offline_ratio, 2)) for r in rows]),
        ]))
    return groups


def _names(algorithms, limit=4) -> str:
    if len(algorithms) <= limit:
        return ", ".join(algorithms)
    return ", ".join(algorithms[:limit]) + f" and {len(algorithms) - limit} more"


def _answer(entry) -> str:
    by_steps, by_time = entry["by_steps"], entry["by_wall_time"]
    if by_steps is None:
        return "no comparable run"
    steps = by_steps["steps"]
    text = f"{_names(by_steps['algorithms'])}: {fmt(steps)} steps ({_secs(by_steps['seconds'][0])} s)"
    if by_time is not None and by_time["algorithm"] != by_steps["algorithms"][0]:
        text += (f"; quickest in wall time: {by_time['algorithm']}, {_secs(by_time['seconds'])} s "
                 f"({fmt(by_time['steps'])} steps)")
    return text


def verdict_rows(v: dict) -> tuple[list[str], list[str]]:
    """The verdict as (question, answer) cells."""
    questions, answers = [], []
    for entry in v["levels"]:
        lv = _lv(entry["level"])
        questions += [f"reach <={lv}", f"settle <={lv}"]
        answers += [_answer(entry["reached"]), _answer(entry["settled"])]
    best = v["best_final_discrepancy"]
    questions.append("best final disc.")
    answers.append("no comparable run" if best is None else f"{fmt(best['discrepancy'])}: {_names(best['algorithms'], 6)}")
    for key, label in (("fewest_tokens_moved", "fewest moved*"), ("fewest_messages", "fewest messages*"),
                       ("lowest_time_averaged_discrepancy", "lowest avg disc."), ("lowest_peak_load", "lowest peak load")):
        if key not in v:
            continue
        e = v[key]
        questions.append(label)
        answers.append("-" if e is None else f"{_names(e['algorithms'])}: {fmt(e['value'])}")
    return questions, answers


def _why(r) -> str:
    if r.status == "infeasible":
        return f"stopped: {r.reason}"
    return exclusion(r)


def render(result, *, wide: bool = False, width: int | None = None, file=None) -> None:
    """Print ``result`` (a :class:`~tokendist.experiments.Comparison`) fitting ``width`` columns."""
    file = sys.stdout if file is None else file
    width = terminal_width(file) if width is None else width
    sc, g = result.scenario, result.graph
    console = Console(width=width, file=file, highlight=False)
    infeasible = "continue with negative loads (--allow-infeasible)" if sc.allow_infeasible else "stop a run"
    console.print(f"compare: {g.spec} (n={g.n:,}, m={g.m:,}), init {sc.init}, {result.tokens:,} tokens; "
                  f"seed {sc.seed}, max steps {sc.max_steps:,}, infeasible steps {infeasible}"
                  + (f", injection {sc.inject}" if getattr(sc, "inject", None) else "")
                  + (f", edge failure {sc.edge_failure}" if sc.edge_failure is not None else ""), markup=False)
    levels = sc.levels
    ok = [r for r in result.rows if r.status == "ok" and exclusion(r) is None]
    marked = [r for r in result.rows if r.status in ("ok", "infeasible") and exclusion(r) is not None]
    skipped = [r for r in result.rows if r.status not in ("ok", "infeasible")]
    notes = ["r<=K: first step with discrepancy (max - min) <= K; s<=K: first step from which it stays <= K to "
             "the end; -: never. disc.: final discrepancy; local: final largest load difference across an edge; "
             "stop: why the run ended, after 'steps' steps; moved: tokens moved; wall s: seconds of stepping "
             "(building the graph, setup and compilation excluded)."]
    if any(r.stream for r in result.rows):
        notes.append("With tokens arriving and leaving: avg disc.: discrepancy averaged over the steps; peak load: "
                     "the heaviest any node got; backlog: tokens in the network at the end.")
    if ok:
        print_fitted("comparable runs (integer loads, no infeasible step)", Col("algorithm", [r.algorithm for r in ok],
                                                                                 justify="left"),
                     _level_groups(ok, levels) + _final_groups(ok, result.offline), wide=wide, width=width, file=file)
    if marked:
        console.print()
        print_fitted("NOT COMPARABLE, never in the verdict: real-valued loads or infeasible steps",
                     Col("algorithm", [r.algorithm for r in marked], justify="left"),
                     [Group("why", [Col("why", [_why(r) for r in marked], justify="left", wrap=True)])]
                     + _level_groups(marked, levels)[:1] + _final_groups(marked, None),
                     wide=wide, width=width, file=file)
    if skipped:
        console.print()
        print_fitted("not run on this graph", Col("algorithm", [r.algorithm for r in skipped], justify="left"),
                     [Group("", [Col("reason", [r.reason for r in skipped], justify="left", wrap=True)])],
                     wide=wide, width=width, file=file)
    if any(r.algorithm == "perfect-tree" and r.status == "ok" for r in result.rows):
        notes.append(PERFECT_TREE_NOTE)
    if result.offline:
        off = result.offline
        notes.append(f"off-line optimum (multi-port, exact max-flow): {off['steps']} steps to bring every node to at "
                     f"most {off['target_max_load']} tokens; 'x off-line' is a run's time to that level over it.")
    for note in notes:
        console.print(note, markup=False)
    console.print()
    v = result.verdict()
    questions, answers = verdict_rows(v)
    n_cmp, n_all = len(v["comparable"]), len(result.rows)
    print_fitted(f"VERDICT over the {n_cmp} comparable runs of {n_all} (fastest by steps, its wall time; "
                 "ties named together)", Col("question", questions, justify="left"),
                 [Group("", [Col("answer", answers, justify="left", wrap=True)])], wide=wide, width=width, file=file,
                 notes=["* among the runs that end at the best final discrepancy."])
