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

import math
import tomllib
from dataclasses import dataclass, field
from importlib import resources
from pathlib import Path

from .._files import SCENARIO_FILE_LIMIT, read_text
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
        """Check every value's type and range and resolve every name now; raise TokendistError
        naming the first problem (booleans only as booleans, numbers finite and in range)."""
        from ..engine import make_loads, make_protocol, make_speeds, resolve_protocol
        from ..graphs import make_graph

        where = f"scenario {self.name}"
        for key in ("name", "graph", "init"):
            if not isinstance(getattr(self, key), str) or not getattr(self, key).strip():
                raise TokendistError(f"{where}: {key} must be a non-empty string")
        if not isinstance(self.description, str):
            raise TokendistError(f"{where}: description must be a string")
        _check_int(where, "seed", self.seed, 0)
        _check_int(where, "max_steps", self.max_steps, 0)
        _check_int(where, "record_every", self.record_every, 1)
        if self.offline_slack is not None:
            _check_int(where, "offline_slack", self.offline_slack, 0, bounded=False)  # only compared
        if not isinstance(self.allow_infeasible, bool):
            raise TokendistError(f"{where}: allow_infeasible must be true or false (a TOML boolean), "
                                 f"got {self.allow_infeasible!r}")
        if not isinstance(self.levels, list) or not all(_is_number(x) and x >= 0 for x in self.levels):
            raise TokendistError(f"{where}: levels must be a list of finite numbers >= 0, got {self.levels!r}")
        if not isinstance(self.algos, list) or not all(isinstance(a, str) for a in self.algos):
            raise TokendistError(f"{where}: algos must be a list of algorithm names, got {self.algos!r}")
        # A name or level listed twice would run twice or give two same-named columns.
        for key, values in (("algos", [a.strip().lower() for a in self.algos]), ("levels", self.levels)):
            twice = [x for i, x in enumerate(values) if x in values[:i]]
            if twice:
                raise TokendistError(f"{where}: {key} lists {twice[0]!r} twice")
        if self.edge_failure is not None and not (_is_number(self.edge_failure) and 0 <= self.edge_failure <= 1):
            raise TokendistError(f"{where}: edge_failure must be a probability in [0, 1], got {self.edge_failure!r}")
        if self.speeds is not None and not isinstance(self.speeds, str):
            raise TokendistError(f"{where}: speeds must be a spec string (uniform:A..B or file:PATH), "
                                 f"got {self.speeds!r}")
        if not isinstance(self.params, dict):
            raise TokendistError(f"{where}: params must be tables [params.ALGO]")
        injection = None
        if self.inject is not None:
            if not isinstance(self.inject, str):
                raise TokendistError(f"scenario {self.name}: inject must be a string such as \"rate=5,consume=4\"")
            injection = parse_injection(self.inject)
        graph = make_graph(self.graph, seed=self.seed)
        if injection is not None:
            injection.reset(graph, None)  # its nodes exist in this graph (no draw happens here)
        make_loads(self.init, graph, self.seed)
        if self.speeds is not None:
            make_speeds(self.speeds, graph, self.seed)
        for a in self.algos:
            resolve_protocol(a)
        for a, p in self.params.items():
            if not isinstance(p, dict):
                raise TokendistError(f"{where}: [params.{a}] must be a table")
            for k, v in p.items():
                if not isinstance(v, (str, int, float, bool)):
                    raise TokendistError(f"{where}: params.{a}.{k} must be a string, number or boolean, got {v!r}")
            make_protocol(a, {k: str(v).lower() if isinstance(v, bool) else str(v) for k, v in p.items()})
        return self


def _is_number(x) -> bool:
    return isinstance(x, (int, float)) and not isinstance(x, bool) and math.isfinite(x)


def _check_int(where: str, key: str, value, minimum: int, bounded: bool = True) -> None:
    # TOML gives bool for true/false, which is an int to Python: refused here (max_steps = true).
    if not isinstance(value, int) or isinstance(value, bool) or value < minimum:
        raise TokendistError(f"{where}: {key} must be an integer >= {minimum}, got {value!r}")
    if bounded and value > 2**63 - 1:  # Python's int is unbounded; steps, seeds and counts are int64 downstream
        raise TokendistError(f"{where}: {key} must be at most 2**63 - 1, got {value}")


def _from_dict(data: dict, origin: str) -> Scenario:
    if "scenario" not in data or not isinstance(data["scenario"], dict):
        raise TokendistError(f"{origin}: missing [scenario] table")
    s = data["scenario"]
    unknown = set(s) - SCENARIO_KEYS
    if unknown:
        raise TokendistError(f"{origin}: unknown scenario key(s) {', '.join(sorted(unknown))}")
    for key in ("name", "graph", "init"):
        if key not in s:
            raise TokendistError(f"{origin}: scenario needs '{key}'")
    extra = set(data) - {"scenario", "params"}
    if extra:
        raise TokendistError(f"{origin}: unknown table(s) {', '.join(sorted(extra))}")
    params = data.get("params", {})
    if not isinstance(params, dict):
        raise TokendistError(f"{origin}: params must be tables [params.ALGO] (after [scenario]), got {params!r}")
    return Scenario(params=dict(params), **{k: v for k, v in s.items()})


def load_scenario(path) -> Scenario:
    """Read and validate a scenario TOML file (a regular file of at most 1 MiB)."""
    text = read_text(path, "scenario", SCENARIO_FILE_LIMIT)
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise TokendistError(f"{path}: not valid TOML ({exc})") from None
    except RecursionError:
        raise TokendistError(f"{path}: not valid TOML (nested too deeply)") from None
    try:
        return _relative_to(_from_dict(data, str(path)), Path(path).parent).validate()
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
