"""Experiments described as data: a TOML scenario, resolved and validated before the first step.

A scenario names a graph, an initial distribution, a seed, the algorithms to run (empty: every
applicable one), per-algorithm parameters, the step limit and the discrepancy levels to report::

    [scenario]
    name = "default"
    graph = "torus:16x16"
    init = "point:25600"
    seed = 1
    max_steps = 3000
    levels = [1000, 100, 10, 2]
    algos = []

    [params.discrepancy1]
    stop_cycles = 3

Keys left out take the shared defaults of :mod:`tokendist.experiments.defaults` (seed 0, 10,000
steps, levels 100, 20, 10, 4, 2, 1, infeasible steps stop a run), the same as ``tokendist run``.

A relative ``file:`` path (loads, speeds, a graph, an injection schedule, a parameter such as
``colouring = "file:colours.txt"``) is read next to the scenario file, not in the working directory.

Everything is checked up front (the graph builds, the loads fit it, every algorithm and parameter
exists) so a typo fails in a second, not after an hour of runs.
"""

from __future__ import annotations

import tomllib
from dataclasses import dataclass, field
from importlib import resources
from pathlib import Path

from ..errors import TokendistError
from ..engine._injection import parse_injection
from .defaults import DEFAULT_ALLOW_INFEASIBLE, DEFAULT_LEVELS, DEFAULT_MAX_STEPS, DEFAULT_SEED

__all__ = ["Scenario", "load_scenario", "default_scenario", "SCENARIO_KEYS"]

SCENARIO_KEYS = {"name", "description", "graph", "init", "seed", "max_steps", "levels", "algos", "speeds",
                 "edge_failure", "allow_infeasible", "record_every", "offline_slack", "inject"}


@dataclass
class Scenario:
    name: str
    graph: str
    init: str
    seed: int = DEFAULT_SEED
    max_steps: int = DEFAULT_MAX_STEPS
    levels: list = field(default_factory=lambda: list(DEFAULT_LEVELS))
    algos: list = field(default_factory=list)
    params: dict = field(default_factory=dict)
    description: str = ""
    speeds: str | None = None
    edge_failure: float | None = None
    allow_infeasible: bool = DEFAULT_ALLOW_INFEASIBLE
    record_every: int = 1
    offline_slack: int | None = None
    #: Tokens arriving and leaving every step, as ``--inject`` takes it (docs/guide/dynamic-load.md).
    inject: str | None = None

    def validate(self) -> "Scenario":
        """Resolve every name now; raise TokendistError naming the first problem."""
        from ..engine import make_loads, make_protocol, resolve_protocol
        from ..graphs import make_graph

        if not isinstance(self.seed, int) or self.seed < 0:
            raise TokendistError(f"scenario {self.name}: seed must be a non-negative integer")
        if not isinstance(self.max_steps, int) or self.max_steps < 0:
            raise TokendistError(f"scenario {self.name}: max_steps must be a non-negative integer")
        if self.offline_slack is not None and (not isinstance(self.offline_slack, int) or self.offline_slack < 0):
            raise TokendistError(f"scenario {self.name}: offline_slack must be a non-negative integer")
        if not all(isinstance(x, (int, float)) for x in self.levels):
            raise TokendistError(f"scenario {self.name}: levels must be numbers")
        injection = None
        if self.inject is not None:
            if not isinstance(self.inject, str):
                raise TokendistError(f"scenario {self.name}: inject must be a string such as \"rate=5,consume=4\"")
            injection = parse_injection(self.inject)
        graph = make_graph(self.graph, seed=self.seed)
        if injection is not None:
            injection.reset(graph, None)  # its nodes exist in this graph (no draw happens here)
        make_loads(self.init, graph, self.seed)
        for a in self.algos:
            resolve_protocol(a)
        for a, p in self.params.items():
            if not isinstance(p, dict):
                raise TokendistError(f"scenario {self.name}: [params.{a}] must be a table")
            make_protocol(a, {k: str(v) if not isinstance(v, str) else v for k, v in p.items()})
        return self


def _from_dict(data: dict, origin: str) -> Scenario:
    if "scenario" not in data or not isinstance(data["scenario"], dict):
        raise TokendistError(f"{origin}: missing [scenario] table")
    s = data["scenario"]
    unknown = set(s) - SCENARIO_KEYS
    if unknown:
        raise TokendistError(f"{origin}: unknown scenario key(s) {', '.join(sorted(unknown))}")
    for key in ("graph", "init"):
        if key not in s:
            raise TokendistError(f"{origin}: scenario needs '{key}'")
    extra = set(data) - {"scenario", "params"}
    if extra:
        raise TokendistError(f"{origin}: unknown table(s) {', '.join(sorted(extra))}")
    return Scenario(params=dict(data.get("params", {})), **{k: v for k, v in s.items()})


def load_scenario(path) -> Scenario:
    """Read and validate a scenario TOML file."""
    path = Path(path)
    try:
        data = tomllib.loads(path.read_text(encoding="utf-8"))
    except OSError as exc:
        raise TokendistError(f"{path}: cannot read scenario ({exc.strerror or exc})") from None
    except (tomllib.TOMLDecodeError, UnicodeDecodeError) as exc:
        raise TokendistError(f"{path}: not valid TOML ({exc})") from None
    try:
        return _relative_to(_from_dict(data, str(path)), path.parent).validate()
    except TypeError as exc:
        raise TokendistError(f"{path}: {exc}") from None


def _resolve(value, folder: Path):
    # "file:PATH" with a relative PATH means next to the scenario file, wherever it is run from.
    if isinstance(value, str) and value.startswith("file:") and value[5:] and not Path(value[5:]).is_absolute():
        return "file:" + str(folder / value[5:])
    return value


def _relative_to(sc: Scenario, folder: Path) -> Scenario:
    """Resolve the relative ``file:`` paths of a scenario (graph, init, speeds, inject, parameters) against ``folder``."""
    for key in ("graph", "init", "speeds", "inject"):
        setattr(sc, key, _resolve(getattr(sc, key), folder))
    sc.params = {a: ({k: _resolve(v, folder) for k, v in p.items()} if isinstance(p, dict) else p)
                 for a, p in sc.params.items()}
    return sc


def default_scenario() -> Scenario:
    """The embedded default scenario that ``tokendist compare`` runs with no options."""
    text = resources.files("tokendist.experiments").joinpath("scenarios/default.toml").read_text(encoding="utf-8")
    return _from_dict(tomllib.loads(text), "default scenario")
