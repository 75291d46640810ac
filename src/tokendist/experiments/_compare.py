"""Every applicable protocol on the same graph, loads and seed: ``tokendist compare``.

The answer to an engineer's question "which protocol balances my network fastest, and how well?":
for each protocol, the steps (and wall time) to reach each discrepancy level and to settle there
(stay at or below it to the end), the final discrepancy and local discrepancy, tokens moved and
messages, in one table and one overlay plot, and a verdict (:mod:`._verdict`) over the runs that
are comparable: integer loads, no infeasible step.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from ..engine import PROTOCOLS, EdgeFailures, make_loads, make_protocol, make_speeds, simulate
from ..engine._injection import parse_injection
from ..engine._pass import small_run, summary_row
from ..errors import InfeasibleStepError, TokendistError
from ..graphs import make_graph
from ._scenario import Scenario
from ._verdict import exclusion, settle_step, verdict
from ._workers import run_each

__all__ = ["compare", "Comparison", "CompareRow"]


@dataclass
class CompareRow:
    algorithm: str
    status: str                      # "ok", "skipped", "infeasible"
    reason: str = ""
    divisible: bool = False          # real-valued loads: never in the verdict
    steps: int | None = None
    stop_reason: str | None = None
    steps_to_level: dict = field(default_factory=dict)
    settled_at_level: dict = field(default_factory=dict)
    seconds_to_level: dict = field(default_factory=dict)
    seconds_to_settle: dict = field(default_factory=dict)
    final_discrepancy: float | None = None
    final_local_discrepancy: float | None = None
    tokens_moved: float | None = None
    messages: int | None = None
    infeasible_steps: int | None = None
    lowest_load: float | None = None
    steps_to_target: int | None = None
    offline_ratio: float | None = None
    seconds: float | None = None
    stream: dict | None = None       # with an injection: backlog, peak load, time-averaged discrepancy
    variants: dict = field(default_factory=dict)  # which kernel (or the reference) ran how many steps
    result: object = None

    @property
    def comparable(self) -> bool:
        """Integer loads, a finished run, no infeasible step: the runs the verdict compares."""
        return exclusion(self) is None

    def to_json(self) -> dict:
        d = {k: v for k, v in self.__dict__.items() if k != "result"}
        for key in ("steps_to_level", "settled_at_level", "seconds_to_level", "seconds_to_settle"):
            d[key] = {str(k): v for k, v in getattr(self, key).items()}
        d["comparable"] = self.comparable
        d["excluded_because"] = exclusion(self)
        return d


@dataclass
class Comparison:
    scenario: Scenario
    graph: object
    tokens: int
    rows: list
    offline: dict | None = None

    def verdict(self) -> dict:
        """Fastest to reach and to settle at each level, best final discrepancy, cheapest (comparable runs only)."""
        return verdict(self.rows, self.scenario.levels)

    def to_json(self) -> dict:
        s = self.scenario
        return {"scenario": {"name": s.name, "graph": s.graph, "init": s.init, "seed": s.seed,
                             "max_steps": s.max_steps, "levels": s.levels, "allow_infeasible": s.allow_infeasible,
                             "inject": s.inject, "edge_failure": s.edge_failure,
                             "params": s.params},
                "graph": {"spec": self.graph.spec, "n": self.graph.n, "m": self.graph.m},
                "tokens": self.tokens, "offline": self.offline, "rows": [r.to_json() for r in self.rows],
                "verdict": self.verdict()}


def compare(scenario: Scenario, *, progress=None, workers: int = 1, compiling=None) -> Comparison:
    """Run every applicable (or every named) protocol of ``scenario`` and tabulate the results.

    A protocol that does not apply to the graph is listed as skipped with the reason; one whose
    rule sends more tokens than a node holds is listed as infeasible (unless the scenario allows
    infeasible steps), never silently repaired.

    Parameters
    ----------
    scenario : Scenario
        The graph, loads, seed, step limit, levels and protocols.
    progress : callable, optional
        ``progress(done, total, name)`` as the runs start (one process) or finish (workers).
    workers : int
        Processes running the protocols side by side (:mod:`._workers`); every run is independent
        and seeded alike, so the rows are the same for any number (but their wall times).
    compiling : callable, optional
        With workers: ``compiling(True)`` while a worker compiles a kernel, ``compiling(False)``
        after (in one process, numba's own events reach the caller's listener directly).

    Examples
    --------
    >>> from tokendist.experiments import Scenario, compare
    >>> c = compare(Scenario("demo", "ring:8", "point:80", algos=["diffusion", "multi-port"], max_steps=500))
    >>> [r.status for r in c.rows]
    ['ok', 'ok']
    """
    graph = make_graph(scenario.graph, seed=scenario.seed)
    loads = make_loads(scenario.init, graph, scenario.seed)
    names = list(scenario.algos) or PROTOCOLS.names()
    if workers > 1 and graph.n > 0 and np.ndim(loads) == 1:
        # Every run records its trace through the engine's compiled pass. Loading it from numba's
        # cache first costs a process a fifth of a second (numba sets up its typing registries):
        # paid here once, before the workers are forked, instead of in every worker.
        summary_row(graph, np.asarray(loads), small_run(graph, scenario.max_steps))
    rows = run_each(names, lambda name: _row(scenario, graph, loads, name), shared=graph, workers=workers,
                    progress=progress, compiling=compiling)
    offline = None
    if scenario.offline_slack is not None:
        offline = _offline_ratios(graph, loads, scenario.offline_slack, rows)
    return Comparison(scenario, graph, int(np.asarray(loads).sum()), rows, offline)


def _row(scenario: Scenario, graph, loads, name: str) -> CompareRow:
    """One protocol's row: its run, or why it was skipped or stopped infeasible."""
    params = {k: (v if isinstance(v, str) else str(v)) for k, v in scenario.params.get(name, {}).items()}
    dynamics = None
    try:
        proto = make_protocol(name, params)
        if getattr(proto, "use_kernels", False) is None:
            # A compiled form kept for large graphs by default (perfect-tree's event loop): a row
            # hands out no protocol whose handlers someone would read, so it runs on any graph
            # once compiled (and on a cold cache the handlers, compiled after the command).
            proto.use_kernels = "if-compiled"
        g = graph
        if scenario.speeds is not None:
            g = graph.with_speeds(make_speeds(scenario.speeds, graph, scenario.seed))
        proto.check_graph(g)
        if scenario.speeds is not None and not proto.uses_speeds:  # not run as if it used them
            raise TokendistError(f"{name} does not use node speeds")
        if scenario.edge_failure is not None:
            if not proto.dynamic:
                why = f": {proto.static_reason}" if proto.static_reason else ""
                raise TokendistError(f"{name} does not run on dynamic networks{why}")
            dynamics = EdgeFailures(scenario.edge_failure)
    except TokendistError as exc:
        return CompareRow(name, "skipped", reason=str(exc))
    try:
        # A fresh stream for every protocol: the same arrivals (same seed), its own counters.
        injection = parse_injection(scenario.inject) if scenario.inject is not None else None
        r = simulate(g, proto, loads, seed=scenario.seed, max_steps=scenario.max_steps,
                     allow_infeasible=scenario.allow_infeasible, dynamics=dynamics,
                     record_every=scenario.record_every, injection=injection)
    except InfeasibleStepError as exc:
        return CompareRow(name, "infeasible", reason=str(exc).split(" (pass")[0], divisible=proto.divisible,
                          steps=exc.step)
    except TokendistError as exc:
        return CompareRow(name, "skipped", reason=str(exc))
    return CompareRow(
        name, "ok", divisible=proto.divisible, steps=r.steps, stop_reason=r.stop_reason,
        **_level_times(r, scenario.levels),
        final_discrepancy=r.final["discrepancy"], final_local_discrepancy=r.final["local_discrepancy"],
        tokens_moved=r.tokens_moved, messages=r.messages, infeasible_steps=r.infeasible_steps,
        lowest_load=r.trace["min"].min().item() if r.trace["min"].size else None, seconds=r.seconds,
        stream=r.stream, variants=r.variants, result=r)


def _level_times(r, levels) -> dict:
    """Steps and wall time to reach each level and to settle at it (stay at or below it to the end)."""
    steps, disc, clock = r.trace["step"], r.trace["discrepancy"], r.clock
    out = {"steps_to_level": {}, "settled_at_level": {}, "seconds_to_level": {}, "seconds_to_settle": {}}
    for lv in levels:
        reach = r.steps_to("discrepancy", lv)
        settle = settle_step(steps, disc, lv)
        out["steps_to_level"][lv] = reach
        out["settled_at_level"][lv] = settle
        out["seconds_to_level"][lv] = None if reach is None else float(clock[np.searchsorted(steps, reach)])
        out["seconds_to_settle"][lv] = None if settle is None else float(clock[np.searchsorted(steps, settle)])
    return out


def _offline_ratios(graph, loads, slack: int, rows) -> dict:
    """Each run's time to bring every node to at most ceil(rho) + slack, over the off-line optimum.

    The optimum is the exact multi-port one (max-flow on the time-expanded network, Ghosh et al.
    Lemma 6.3, :func:`tokendist.analysis.offline_optimum`): no algorithm that moves at most one token
    per edge per step can do better, so every ratio of a multi-port or single-port protocol is >= 1.
    Diffusion schemes move any amount per edge and are not bound by it.
    """
    from ..analysis import offline_optimum

    best = offline_optimum(graph, np.asarray(loads), slack=slack, model="multi-port")
    target = best.target
    for r in rows:
        if r.status != "ok":
            continue
        r.steps_to_target = r.result.steps_to("max", target)
        if r.steps_to_target is not None and best.steps > 0:
            r.offline_ratio = r.steps_to_target / best.steps
    return {**best.to_json(), "target_max_load": target}
