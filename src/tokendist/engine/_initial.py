"""Initial load distributions as spec strings (``point:1000``, ``uniform:5000``, ``file:loads.txt``).

Each family registers ``build(argument_string, graph, rng) -> int64 array``; :func:`make_loads`
parses a spec and draws from the run's ``init`` sub-stream. Protocol families register their
worst-case distributions here too (for example the stable distributions of Houle et al.).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Callable

import numpy as np

from .._files import DATA_FILE_LIMIT, read_text
from .._random import stream
from ..errors import SpecError, TokendistError
from ..registry import Registry

__all__ = ["InitialDistribution", "INITIAL", "initial", "make_loads", "read_loads_file", "parse_range"]


@dataclass(frozen=True)
class InitialDistribution:
    name: str
    syntax: str
    summary: str
    build: Callable
    randomized: bool = False


INITIAL: Registry[InitialDistribution] = Registry("initial distribution")


def initial(name: str, syntax: str, summary: str, *, randomized: bool = False):
    """Register ``build(arg, graph, rng) -> ndarray`` as initial distribution ``name``."""

    def deco(build):
        INITIAL.add(name, InitialDistribution(name, syntax, summary, build, randomized))
        return build

    return deco


# ASCII digits only (\d would take '٤' for 4), as every spec number.
_NUM = re.compile(r"^[+]?[0-9]+$")
_INT64_MAX = 2**63 - 1


def _int(spec: str, text: str) -> int:
    """A non-negative integer of a spec that fits in int64 (the loads' type), else a one-line error."""
    text = text.strip()
    if not _NUM.match(text):
        raise SpecError(f"bad initial distribution {spec!r}: {text[:40]!r} is not a non-negative integer")
    if len(text) > 20 or int(text) > _INT64_MAX:
        raise SpecError(f"bad initial distribution {spec!r}: {text[:30]} is more than int64 holds "
                        f"(2**63 - 1 = {_INT64_MAX})")
    return int(text)


def parse_range(spec: str, text: str, cast=int) -> tuple:
    """Parse ``"A..B"`` (A <= B)."""
    lo, sep, hi = text.partition("..")
    if not sep:
        raise SpecError(f"bad spec {spec!r}: expected a range A..B")
    if cast is int:
        # Loads: ASCII digits, within int64 (int() also takes '1_0', ' 5' and non-ASCII digits).
        for part in (lo, hi):
            if not _NUM.match(part.strip()):
                raise SpecError(f"bad spec {spec!r}: {part.strip()[:40]!r} is not a non-negative integer")
        a, b = _int(spec, lo), _int(spec, hi)
        if a > b:
            raise SpecError(f"bad spec {spec!r}: empty range {text}")
        return a, b
    try:
        if not text.isascii() or "_" in text:  # float() also reads non-ASCII digits, and '1_0' as 10
            raise ValueError(text)
        a, b = cast(lo), cast(hi)
    except (ValueError, OverflowError):
        raise SpecError(f"bad spec {spec!r}: {text!r} is not a range A..B") from None
    if a > b:
        raise SpecError(f"bad spec {spec!r}: empty range {text}")
    return a, b


def make_loads(spec, graph, seed=None) -> np.ndarray:
    """Initial loads for ``graph`` from a spec string, or from an array (validated and copied).

    Examples
    --------
    >>> from tokendist.graphs import make_graph
    >>> make_loads("point:7@2", make_graph("path:4")).tolist()
    [0, 0, 7, 0]
    """
    if not isinstance(spec, str):
        return _checked_total(_loads_from_array(spec, graph))
    name, _, arg = spec.strip().partition(":")
    entry = INITIAL.get(name.strip().lower())
    if name.strip().lower() != "file" and not arg.isascii():
        # Numbers in specs are ASCII: int() and str.isdigit() read 'distance:\u0664' as distance:4.
        token = next(t for t in re.split(r"[,@=]|\.\.", arg) if not t.isascii()).strip()
        raise SpecError(f"bad initial distribution {spec!r}: {token[:40]!r} is not a non-negative integer "
                        "(ASCII digits 0-9)")
    loads = entry.build(arg.strip(), graph, stream(seed, "init"))
    loads = np.asarray(loads)
    assert loads.shape == (graph.n,), f"{name} built {loads.shape} loads for {graph.n} nodes"
    return _checked_total(loads)


def _loads_from_array(values, graph) -> np.ndarray:
    # An array given by the caller: numbers, one per node, finite and non-negative; integral
    # values become int64 (token counts), others stay float64 (for the divisible schemes).
    loads = np.array(values)
    if loads.shape != (graph.n,):
        raise TokendistError(f"expected {graph.n} initial loads, got shape {loads.shape}")
    if loads.dtype.kind not in "iuf":  # bool, str, object, complex: not token counts
        raise TokendistError(f"initial loads must be numbers, got {loads.dtype} values")
    if loads.dtype.kind == "f":
        if not np.all(np.isfinite(loads)):
            raise TokendistError("initial loads must be finite")
        if np.all(loads == np.round(loads)) and np.all(np.abs(loads) <= _INT64_MAX):
            loads = loads.astype(np.int64)
    elif loads.dtype.kind == "u" and loads.size and int(loads.max()) > _INT64_MAX:
        raise TokendistError(f"an initial load of {int(loads.max()):,} tokens is more than int64 holds")
    elif loads.dtype.kind in "iu":
        loads = loads.astype(np.int64)
    if loads.size and loads.min() < 0:
        raise TokendistError("initial loads must be non-negative")
    return loads


def _checked_total(loads: np.ndarray) -> np.ndarray:
    """``loads``, once their total is known to fit in int64 (the engine's conservation check and
    metrics keep it there; ``constant:2**62`` on five nodes once reported -2**63 tokens)."""
    if loads.dtype.kind == "i" and loads.size:
        # Exact in int64: the high and low 32-bit halves summed separately (n < 2**31).
        total = (int((loads >> 32).sum()) << 32) + int((loads & 0xFFFFFFFF).sum())
        if total > _INT64_MAX:
            raise TokendistError(f"the initial loads hold {total:,} tokens in all, more than int64 holds "
                                 f"({_INT64_MAX:,})")
    return loads


@initial("point", "point:T or point:T@V", "all T tokens on node 0 (or on node V)")
def _point(arg, graph, rng):
    spec = f"point:{arg}"
    total, at, node = arg.partition("@")
    t = _int(spec, total)
    if at and not node.strip():
        raise SpecError(f"bad initial distribution {spec!r}: a node id must follow '@'")
    v = _int(spec, node) if at else 0
    if v >= graph.n:
        raise SpecError(f"bad initial distribution {spec!r}: node {v} does not exist (n={graph.n})")
    loads = np.zeros(graph.n, dtype=np.int64)
    loads[v] = t
    return loads


@initial("uniform", "uniform:T", "T tokens, each placed on a node chosen uniformly at random", randomized=True)
def _uniform(arg, graph, rng):
    t = _int(f"uniform:{arg}", arg)
    return rng.multinomial(t, np.full(graph.n, 1.0 / graph.n)).astype(np.int64)


@initial("random", "random:A..B", "each node's load uniform in [A, B], independently", randomized=True)
def _random(arg, graph, rng):
    a, b = parse_range(f"random:{arg}", arg)
    if b == _INT64_MAX:  # b + 1 does not fit int64 (the same draws: integers takes [a, b] either way)
        return rng.integers(a, b, size=graph.n, dtype=np.int64, endpoint=True)
    return rng.integers(a, b + 1, size=graph.n, dtype=np.int64)


@initial("ramp", "ramp:A..B", "loads rising linearly from A on node 0 to B on node n-1 (rounded down)")
def _ramp(arg, graph, rng):
    a, b = parse_range(f"ramp:{arg}", arg)
    if graph.n == 1:
        return np.array([a], dtype=np.int64)
    # a + floor(i (b - a) / (n - 1)) in exact integers: i (b - a) overflowed int64 (ramp:0..2**63-1
    # gave negative loads). With b - a = q (n - 1) + r: floor(i (b - a) / (n - 1)) = i q + floor(i r / (n - 1)),
    # and i q <= b - a, i r < n**2 both fit.
    q, r = divmod(b - a, graph.n - 1)
    i = np.arange(graph.n, dtype=np.int64)
    return a + i * q + (i * r) // (graph.n - 1)


@initial("constant", "constant:K", "K tokens on every node (already balanced)")
def _constant(arg, graph, rng):
    return np.full(graph.n, _int(f"constant:{arg}", arg), dtype=np.int64)


@initial("file", "file:PATH", "one non-negative integer per line, one line per node ('#' comments)")
def _file(arg, graph, rng):
    return read_loads_file(arg, graph.n)


def read_loads_file(path: str, n: int | None = None, *, what: str = "loads", per: str = "nodes") -> np.ndarray:
    """Read one non-negative integer per line; blank lines and ``#`` comments are skipped.

    ``what`` names the values in messages (``"colours"`` for an edge-colouring file, whose ``n``
    counts ``per="edges"``).

    Raises
    ------
    TokendistError
        Naming the file and line for a malformed or negative value, or a wrong line count.
    """
    lines = read_text(path, what, DATA_FILE_LIMIT).splitlines()
    values = []
    for lineno, line in enumerate(lines, 1):
        text = line.split("#", 1)[0].strip()
        if not text:
            continue
        if not _NUM.match(text):
            kind = f"negative value ({what})" if re.match(r"^-[0-9]+$", text) else "not a non-negative integer"
            raise TokendistError(f"{path}:{lineno}: {kind}: {text[:40]!r}")
        if len(text) > 20 or int(text) > _INT64_MAX:
            raise TokendistError(f"{path}:{lineno}: {text[:30]} is more than int64 holds (2**63 - 1)")
        values.append(int(text))
    if n is not None and len(values) != n:
        raise TokendistError(f"{path}: {len(values)} {what} for a graph of {n} {per}")
    return np.array(values, dtype=np.int64)
