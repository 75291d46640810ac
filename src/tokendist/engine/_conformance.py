"""The protocol contract as a check anyone can run on a protocol, built-in or a user's own.

The test suite runs it on every registered protocol; a user runs it on hers::

    >>> import tokendist as td
    >>> from tokendist.engine import check_protocol
    >>> [c for c in check_protocol("multi-port", graphs=["ring:6"]) if not c.passed]
    []
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..errors import TokendistError
from ..graphs import make_graph
from ._simulate import simulate
from ._user import make_protocol

__all__ = ["check_protocol", "ConformanceCheck", "CONFORMANCE_GRAPHS"]

#: Small graphs of many shapes: trees, rings, meshes, tori, hypercubes, dense graphs.
CONFORMANCE_GRAPHS = ("path:7", "star:6", "kary:2,3", "random-tree:12", "ring:9", "grid:3x4", "torus:4x4",
                      "hypercube:3", "complete:5")


@dataclass(frozen=True)
class ConformanceCheck:
    """One check of one protocol on one graph: what was checked, whether it held, and why not."""

    check: str
    graph: str
    passed: bool
    detail: str = ""


def check_protocol(algo, params: dict | None = None, *, graphs=CONFORMANCE_GRAPHS, steps: int = 120,
                   seed: int = 7) -> list[ConformanceCheck]:
    """Run the conformance checks of the protocol contract on ``algo``.

    On each graph the protocol applies to: tokens are conserved and, unless the protocol declares
    ``may_go_negative``, no node sends more than it holds (the engine's feasibility check) and no
    load goes negative; the declared communication model holds on every step (``check=True``);
    the same seed gives the same loads at every step; a balanced distribution stays balanced
    (unless the protocol declares ``keeps_balance = False``: its published rule moves tokens from a
    balanced start, and that check is not made).

    Parameters
    ----------
    algo : str, Protocol subclass or instance factory
        A registry name, a ``file.py:Class`` / ``module:Class`` reference, or a Protocol class.
    params : dict, optional
        Protocol parameters.
    graphs : sequence of str
        Graph specs to try (those the protocol does not apply to are skipped).
    steps, seed : int
        Steps per run and the seed.

    Returns
    -------
    list of ConformanceCheck
        Every check made; an empty list means the protocol applies to none of ``graphs``.
    """
    out: list[ConformanceCheck] = []
    for spec in graphs:
        graph = make_graph(spec, seed=5)
        proto = make_protocol(algo, params)
        try:
            proto.check_graph(graph)
        except TokendistError:
            continue
        allow = bool(proto.may_go_negative)

        def run(init, s, **kw):
            return simulate(graph, make_protocol(algo, params), init, seed=s, max_steps=steps, check=True,
                            allow_infeasible=allow, **kw)

        out.extend(_checks(spec, run, proto.may_go_negative, graph.speeds is None and proto.keeps_balance))
    return out


def _checks(spec, run, may_go_negative, balance_check):
    try:
        r = run("random:0..40", seed_a := 7)
    except TokendistError as exc:
        return [ConformanceCheck("conservation, feasibility and model", spec, False, str(exc))]
    except Exception as exc:  # noqa: BLE001 - a broken rule may raise anything; report it
        return [ConformanceCheck("conservation, feasibility and model", spec, False, f"{type(exc).__name__}: {exc}")]
    checks = [ConformanceCheck("conservation", spec, bool(np.isclose(r.loads.sum(), r.tokens)
                                                          and r.tokens == r.initial_loads.sum()))]
    if not may_go_negative:
        ok = bool(r.loads.min() >= 0 and r.infeasible_steps == 0)
        checks.append(ConformanceCheck("no negative loads", spec, ok, "" if ok else f"min load {r.loads.min()}"))
    a = run("uniform:200", 11, keep_loads_every=1)
    b = run("uniform:200", 11, keep_loads_every=1)
    same = a.steps == b.steps and np.array_equal(a.load_history, b.load_history)
    checks.append(ConformanceCheck("same seed, same trace", spec, bool(same)))
    if balance_check:
        c = run("constant:6", seed_a)
        ok = bool(np.allclose(c.loads, 6))
        checks.append(ConformanceCheck("balanced stays balanced", spec, ok, "" if ok else "loads moved from a balanced start"))
    return checks
