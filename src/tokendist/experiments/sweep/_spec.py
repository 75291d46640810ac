"""A sweep described as data: a TOML file -> a validated list of tasks, each with a stable key.

A sweep declares axes (graphs, initial distributions, algorithms, seeds, and any protocol parameter
given as a list) and fixed settings; every combination of the axes is one task, one call of
:func:`tokendist.simulate`::

    [sweep]
    name = "torus-scaling"
    graphs = ["torus:8x8", "torus:16x16"]
    inits = ["random:0..100", "point:10000"]
    algos = ["multi-port", "diffusion-random", "sos"]
    seeds = 5               # 0..4, or a list of seeds
    max_steps = 2000
    levels = [10, 2, 1]     # discrepancy levels whose step counts each row reports

    [params.sos]
    beta = [0, 1.5]         # a list is an axis; a scalar is a fixed setting

Everything is checked before the first run (each graph builds, each initial distribution fits each
graph, each algorithm and parameter exists and parses), with a one-line error naming the key and
the value, so that a typo fails in a second, not after an hour of runs.

A task's key is a hash of its resolved definition: the graph spec, the initial distribution, the
algorithm with *all* its options (defaults included, so ``beta = 0`` and no ``beta`` are the same
task), the seed, the step limit, the levels, the stopping level and ``allow_infeasible``. The sweep's
name is not part of it: renaming a sweep, adding a seed or a graph re-runs only what is new.
"""

from __future__ import annotations

import hashlib
import itertools
import json
import math
import numbers
import tomllib
from dataclasses import dataclass, field
from pathlib import Path

from ..._files import SCENARIO_FILE_LIMIT, read_text
from ...engine import DEFAULT_MAX_STEPS, PROTOCOLS, make_loads, make_protocol
from ...errors import TokendistError
from ...graphs import make_graph

__all__ = ["Sweep", "Task", "load_sweep", "sweep_from_dict", "SWEEP_KEYS", "level_name"]

SWEEP_KEYS = {"name", "description", "graphs", "inits", "algos", "seeds", "max_steps", "levels",
              "until_discrepancy", "allow_infeasible"}
DEFAULT_LEVELS = (10, 2, 1)
#: The most tasks a sweep may expand to (and so seeds, and one algorithm's parameter combinations):
#: the tasks are built in memory before the first run (``seeds = 10**12`` was a MemoryError).
MAX_TASKS = 1_000_000
_INT64_MAX = 2**63 - 1


def level_name(level) -> str:
    """The column suffix of a discrepancy level: ``2`` -> ``"2"``, ``0.5`` -> ``"0.5"``.

    Exact, so that distinct levels have distinct columns (six significant digits named 2**53 + 1
    and 2**53 + 2 alike, and refused them as one level listed twice).
    """
    if isinstance(level, int) or float(level).is_integer():
        return str(int(level))
    return repr(float(level))


def _param_text(value) -> str:
    # The CLI passes parameters as text (`--param beta=1.5`); a sweep does the same so that a task
    # runs exactly what `tokendist run --param` runs (TOML's true is the CLI's "true").
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)


def _plain(value):
    """A JSON-stable form of a resolved option value (for the task key and the variant label)."""
    if isinstance(value, (bool, str)) or value is None:
        return value
    if isinstance(value, numbers.Integral):
        return int(value)
    if isinstance(value, numbers.Real):
        return float(value)
    return str(value)


@dataclass(frozen=True)
class Task:
    """One run of a sweep: everything :func:`tokendist.simulate` needs, and a stable key.

    ``params`` holds the parameters the sweep file sets for this task, as text (what
    ``tokendist run --param KEY=VALUE`` would pass); ``options`` the protocol's resolved options,
    defaults included, as sorted ``(name, value)`` pairs.
    """

    key: str
    sweep: str
    graph: str
    init: str
    algo: str
    params: tuple
    options: tuple
    seed: int
    max_steps: int
    levels: tuple
    until_discrepancy: float | None = None
    allow_infeasible: bool = False

    @property
    def variant(self) -> str:
        """The algorithm and the parameters the sweep sets, e.g. ``"sos beta=1.5"``."""
        opts = dict(self.options)
        return " ".join([self.algo] + [f"{k}={opts.get(k, v)}" for k, v in self.params])

    def definition(self) -> dict:
        """The resolved definition whose hash is :attr:`key`."""
        return _definition(self.graph, self.init, self.algo, self.options, self.seed, self.max_steps,
                           self.levels, self.until_discrepancy, self.allow_infeasible)


def _definition(graph, init, algo, options, seed, max_steps, levels, until, allow) -> dict:
    return {"graph": graph, "init": init, "algo": algo, "options": {k: v for k, v in options},
            "seed": seed, "max_steps": max_steps, "levels": [float(x) for x in levels],
            "until_discrepancy": until, "allow_infeasible": allow}


def task_key(definition: dict) -> str:
    """A 16-hex-digit hash of a task definition (stable across processes and machines)."""
    text = json.dumps(definition, sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(text.encode()).hexdigest()[:16]


@dataclass
class Sweep:
    """A validated sweep: its settings and the list of tasks (every combination of the axes)."""

    name: str
    graphs: list
    inits: list
    algos: list
    seeds: list
    max_steps: int = DEFAULT_MAX_STEPS
    levels: list = field(default_factory=lambda: list(DEFAULT_LEVELS))
    params: dict = field(default_factory=dict)
    description: str = ""
    until_discrepancy: float | None = None
    allow_infeasible: bool = False
    tasks: list = field(default_factory=list)
    #: ``{graph spec: (n, m)}`` as validated (with the first seed): the runner starts big runs first.
    sizes: dict = field(default_factory=dict)

    def to_json(self) -> dict:
        return {"name": self.name, "description": self.description, "graphs": self.graphs, "inits": self.inits,
                "algos": self.algos, "seeds": self.seeds, "max_steps": self.max_steps, "levels": self.levels,
                "params": self.params, "until_discrepancy": self.until_discrepancy,
                "allow_infeasible": self.allow_infeasible, "tasks": len(self.tasks)}


def _string_list(origin, key, value) -> list:
    if isinstance(value, str):
        value = [value]
    if not isinstance(value, list) or not value or not all(isinstance(v, str) and v.strip() for v in value):
        raise TokendistError(f"{origin}: sweep.{key} must be a non-empty list of strings, got {value!r}")
    if len(set(value)) != len(value):
        dup = next(v for v in value if value.count(v) > 1)
        raise TokendistError(f"{origin}: sweep.{key} lists {dup!r} twice")
    return [v.strip() for v in value]


def _seeds(origin, value) -> list:
    if isinstance(value, int) and not isinstance(value, bool):
        if value < 1:
            raise TokendistError(f"{origin}: sweep.seeds = {value!r}: expected a count >= 1 or a list of seeds")
        if value > MAX_TASKS:
            raise TokendistError(f"{origin}: sweep.seeds = {value}: at most {MAX_TASKS:,} seeds (tasks) in a sweep")
        return list(range(value))
    if (isinstance(value, list) and value
            and all(isinstance(s, int) and not isinstance(s, bool) and 0 <= s <= _INT64_MAX for s in value)):
        if len(set(value)) != len(value):
            raise TokendistError(f"{origin}: sweep.seeds lists a seed twice")
        return list(value)
    raise TokendistError(f"{origin}: sweep.seeds = {value!r}: expected a count >= 1 or a list of non-negative integers "
                         "(at most 2**63 - 1)")


def _count(origin, key, value, minimum) -> int:
    if not isinstance(value, int) or isinstance(value, bool) or not minimum <= value <= _INT64_MAX:
        raise TokendistError(f"{origin}: sweep.{key} = {value!r}: expected an integer >= {minimum} "
                             "(at most 2**63 - 1)")
    return value


def _level(origin, key, value) -> float:
    if (not isinstance(value, (int, float)) or isinstance(value, bool) or not math.isfinite(value) or value < 0):
        raise TokendistError(f"{origin}: sweep.{key} = {value!r}: expected a number >= 0")
    return value


def _param_axes(origin, algo, table) -> list[dict]:
    """Every combination of one algorithm's parameters (a list is an axis)."""
    if not isinstance(table, dict):
        raise TokendistError(f"{origin}: params.{algo} must be a table")
    names, values = [], []
    for k, v in table.items():
        vals = v if isinstance(v, list) else [v]
        if not vals:
            raise TokendistError(f"{origin}: params.{algo}.{k} is an empty list")
        for x in vals:
            if not isinstance(x, (str, int, float, bool)):
                raise TokendistError(f"{origin}: params.{algo}.{k} = {x!r}: expected a string, number or boolean")
        names.append(k)
        values.append(vals)
    if math.prod(len(v) for v in values) > MAX_TASKS:
        raise TokendistError(f"{origin}: [params.{algo}] has {math.prod(len(v) for v in values):,} combinations; "
                             f"at most {MAX_TASKS:,} tasks in a sweep")
    return [dict(zip(names, combo)) for combo in itertools.product(*values)]


def sweep_from_dict(data: dict, origin: str = "sweep") -> Sweep:
    """Validate a parsed sweep file and expand it into its tasks (see the module docstring).

    Parameters
    ----------
    data : dict
        The parsed TOML: a ``sweep`` table and optional ``params.ALGO`` tables.
    origin : str
        Where it came from, for the error messages.

    Returns
    -------
    Sweep
        The settings and every combination of the axes as a :class:`Task`.

    Raises
    ------
    TokendistError
        A one-line message naming the first bad key and its value.

    Examples
    --------
    >>> s = sweep_from_dict({"sweep": {"name": "demo", "graphs": ["ring:8"], "inits": ["point:80"],
    ...                                "algos": ["sos"], "seeds": 2}, "params": {"sos": {"beta": [0, 1.5]}}})
    >>> len(s.tasks), s.tasks[-1].variant, s.tasks[-1].seed
    (4, 'sos beta=1.5', 1)
    >>> sweep_from_dict({"sweep": {"graphs": ["ring:8"], "inits": ["point:80"], "algos": ["nope"]}})
    Traceback (most recent call last):
    ...
    tokendist.errors.TokendistError: sweep: sweep.algos[0] = 'nope': unknown algorithm (see 'tokendist algos')
    """
    if not isinstance(data.get("sweep"), dict):
        raise TokendistError(f"{origin}: missing [sweep] table")
    extra = set(data) - {"sweep", "params"}
    if extra:
        raise TokendistError(f"{origin}: unknown table(s) {', '.join(sorted(extra))} (expected [sweep] and [params.ALGO])")
    s = data["sweep"]
    unknown = set(s) - SWEEP_KEYS
    if unknown:
        raise TokendistError(f"{origin}: unknown key(s) sweep.{', sweep.'.join(sorted(unknown))} "
                             f"(known: {', '.join(sorted(SWEEP_KEYS))})")
    for key in ("graphs", "inits", "algos"):
        if key not in s:
            raise TokendistError(f"{origin}: sweep.{key} is missing")
    name = s.get("name", Path(origin).stem)
    if not isinstance(name, str) or not name.strip():
        raise TokendistError(f"{origin}: sweep.name = {name!r}: expected a non-empty string")
    graphs = _string_list(origin, "graphs", s["graphs"])
    inits = _string_list(origin, "inits", s["inits"])
    algos = _string_list(origin, "algos", s["algos"])
    seeds = _seeds(origin, s.get("seeds", 1))
    max_steps = _count(origin, "max_steps", s.get("max_steps", DEFAULT_MAX_STEPS), 0)
    levels = s.get("levels", list(DEFAULT_LEVELS))
    if not isinstance(levels, list):
        raise TokendistError(f"{origin}: sweep.levels = {levels!r}: expected a list of numbers")
    levels = [_level(origin, "levels", x) for x in levels]
    if len({level_name(x) for x in levels}) != len(levels):
        raise TokendistError(f"{origin}: sweep.levels lists a level twice")
    until = s.get("until_discrepancy")
    if until is not None:
        until = _level(origin, "until_discrepancy", until)
    allow = s.get("allow_infeasible", False)
    if not isinstance(allow, bool):
        raise TokendistError(f"{origin}: sweep.allow_infeasible = {allow!r}: expected true or false")
    description = s.get("description", "")
    if not isinstance(description, str):
        raise TokendistError(f"{origin}: sweep.description = {description!r}: expected a string")

    for i, a in enumerate(algos):
        if a not in PROTOCOLS:
            raise TokendistError(f"{origin}: sweep.algos[{i}] = {a!r}: unknown algorithm "
                                 f"(see 'tokendist algos')")
    params = data.get("params", {})
    if not isinstance(params, dict):
        raise TokendistError(f"{origin}: params must be tables [params.ALGO]")
    for a in params:
        if a not in algos:
            raise TokendistError(f"{origin}: [params.{a}]: {a!r} is not in sweep.algos")
    # Each algorithm's parameter combinations, resolved (and so validated) once, not per task.
    variants: dict[str, list[tuple[tuple, tuple]]] = {}
    for a in algos:
        variants[a] = []
        for combo in _param_axes(origin, a, params.get(a, {})):
            text = {k: _param_text(v) for k, v in combo.items()}
            try:
                proto = make_protocol(a, text)
            except TokendistError as exc:
                bad = ", ".join(f"params.{a}.{k} = {v!r}" for k, v in combo.items())
                raise TokendistError(f"{origin}: {bad}: {exc}") from None
            except TypeError as exc:  # an unknown keyword
                raise TokendistError(f"{origin}: [params.{a}]: {exc}") from None
            options = tuple(sorted((k, _plain(v)) for k, v in proto.options.items()))
            variants[a].append((tuple(sorted(text.items())), options))

    total = len(graphs) * len(inits) * len(seeds) * sum(len(v) for v in variants.values())
    if total > MAX_TASKS:
        raise TokendistError(f"{origin}: the sweep expands to {total:,} tasks; at most {MAX_TASKS:,}")
    # Every graph builds and every initial distribution fits it (checked with the first seed; a
    # random family's other seeds build graphs of the same size).
    sizes = {}
    for i, spec in enumerate(graphs):
        try:
            g = make_graph(spec, seed=seeds[0])
        except TokendistError as exc:
            raise TokendistError(f"{origin}: sweep.graphs[{i}] = {spec!r}: {exc}") from None
        sizes[spec] = (g.n, g.m)
        for j, init in enumerate(inits):
            try:
                make_loads(init, g, seeds[0])
            except TokendistError as exc:
                raise TokendistError(f"{origin}: sweep.inits[{j}] = {init!r} on {spec}: {exc}") from None

    tasks, seen = [], {}
    for spec, init, a, seed in itertools.product(graphs, inits, algos, seeds):
        for text, options in variants[a]:
            d = _definition(spec, init, a, options, seed, max_steps, levels, until, allow)
            key = task_key(d)
            if key in seen:
                raise TokendistError(f"{origin}: [params.{a}] gives the same run twice ({dict(text)} and "
                                     f"{dict(seen[key].params)} resolve to the same options)")
            t = Task(key, name.strip(), spec, init, a, text, options, seed, max_steps, tuple(levels), until, allow)
            seen[key] = t
            tasks.append(t)
    return Sweep(name.strip(), graphs, inits, algos, seeds, max_steps, levels, params, description, until, allow, tasks,
                 sizes)


def load_sweep(path) -> Sweep:
    """Read, validate and expand a sweep TOML file (one-line :class:`TokendistError` on any problem)."""
    if not str(path).strip():  # Path('') is the current folder
        raise TokendistError("expected a sweep file (FILE.toml), got an empty path")
    path = Path(path)
    # A regular file of at most 1 MiB (read_text): /dev/zero was read until memory ran out, a named
    # pipe blocked for ever.
    text = read_text(path, "sweep", SCENARIO_FILE_LIMIT)
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise TokendistError(f"{path}: not valid TOML ({exc})") from None
    except RecursionError:
        raise TokendistError(f"{path}: not valid TOML (nested too deeply)") from None
    return sweep_from_dict(data, str(path))
