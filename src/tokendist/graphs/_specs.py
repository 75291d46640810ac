"""Topology spec strings: ``family:arguments`` -> :class:`Graph`.

A spec string is the one name of a topology, shared by the Python API, the CLI and experiment
files (``torus:16x16``, ``kary:2,5``, ``file:net.txt``). Each family registers a builder with
:func:`topology`; :func:`make_graph` parses a spec and builds the graph, drawing any randomness from
the run's ``topology`` sub-stream so that the same seed builds the same graph in every command.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Callable

import numpy as np

from .._random import stream
from ..errors import SpecError, TokendistError
from ..registry import Registry
from ._model import Graph

__all__ = ["Topology", "TOPOLOGIES", "topology", "make_graph", "parse_ints", "parse_dims", "split_spec"]


@dataclass(frozen=True)
class Topology:
    """A registered family of graphs.

    Attributes
    ----------
    name : str
        The family name, the part of the spec before ``:``.
    syntax : str
        The spec syntax, e.g. ``"torus:AxBx..."``.
    summary : str
        One line saying what it builds (and where the papers use it).
    build : callable
        ``build(argument_string, rng) -> Graph``.
    randomized : bool
        Whether the family draws from the seed.
    """

    name: str
    syntax: str
    summary: str
    build: Callable[[str, np.random.Generator], Graph]
    randomized: bool = False


TOPOLOGIES: Registry[Topology] = Registry("topology")


def topology(name: str, syntax: str, summary: str, *, randomized: bool = False):
    """Register ``build(arg, rng) -> Graph`` as the family ``name``."""

    def deco(build):
        TOPOLOGIES.add(name, Topology(name, syntax, summary, build, randomized))
        return build

    return deco


def split_spec(spec: str) -> tuple[str, str]:
    """Split ``"family:args"`` into its two parts (``args`` may be empty)."""
    if not isinstance(spec, str) or not spec.strip():
        raise SpecError("empty graph spec; try 'tokendist graphs' for the list of families")
    name, _, arg = spec.strip().partition(":")
    return name.strip().lower(), arg.strip()


_INT = re.compile(r"^[+]?[0-9]+$")  # ASCII digits (\d takes any Unicode digit)


def parse_ints(spec: str, arg: str, count: int | None = None, *, sep: str = ",", minimum: int = 0) -> list[int]:
    """Parse ``"3,17"`` into ints, with a one-line error naming the spec when malformed."""
    parts = [p.strip() for p in arg.split(sep)] if arg else []
    if count is not None and len(parts) != count:
        raise SpecError(f"bad spec {spec!r}: expected {count} integer argument(s) separated by '{sep}'")
    out = []
    for p in parts:
        if not _INT.match(p):
            raise SpecError(f"bad spec {spec!r}: {p!r} is not a non-negative integer")
        x = int(p)
        if x < minimum:
            raise SpecError(f"bad spec {spec!r}: {x} is below the minimum {minimum}")
        out.append(x)
    return out


def parse_dims(spec: str, arg: str, *, minimum: int = 1) -> list[int]:
    """Parse ``"16x16"`` (any number of dimensions)."""
    dims = parse_ints(spec, arg.lower(), sep="x", minimum=minimum)
    if not dims:
        raise SpecError(f"bad spec {spec!r}: expected dimensions like 16x16")
    return dims


_MAX_NODES = 2**31 - 1


def make_graph(spec, seed=None) -> Graph:
    """Build the graph named by ``spec``.

    Parameters
    ----------
    spec : str or Graph or networkx.Graph
        A spec string (see ``tokendist graphs``), or a graph (returned as is / converted).
    seed : int, Generator or None
        The run's seed; random families draw from its ``topology`` sub-stream.

    Examples
    --------
    >>> make_graph("torus:4x4").m
    32
    >>> make_graph("random-tree:10", seed=1) == make_graph("random-tree:10", seed=1)
    True
    """
    if isinstance(spec, Graph):
        return spec
    if not isinstance(spec, str):
        try:
            import networkx as nx
        except ImportError:  # pragma: no cover
            nx = None
        if nx is not None and isinstance(spec, nx.Graph):
            from ._convert import from_networkx

            return from_networkx(spec)
        raise TokendistError(f"cannot make a graph from {type(spec).__name__}")
    name, arg = split_spec(spec)
    if name != "file" and (not arg.isascii() or "_" in arg):
        # Numbers in specs are ASCII: int() and float() would read 'torus:\u0664x\u0664' as torus:4x4,
        # and float() 'geometric:10,0_3' as radius 3.
        raise SpecError(f"bad spec {spec!r}: the arguments must be ASCII digits (0-9), without '_'")
    family = TOPOLOGIES.get(name)
    rng = stream(seed, "topology")  # outside the try: a bad seed is not a bad spec
    try:
        g = family.build(arg, rng)
    except (TokendistError, MemoryError):
        raise
    except (ValueError, OverflowError) as exc:
        raise SpecError(f"bad spec {spec!r}: {exc}") from None
    g.spec = spec.strip()
    return g


#: The largest graphs tokendist builds. A graph keeps about 24 bytes per edge (int32 ends, CSR
#: indices and edge ids), but building one peaks far higher: see :data:`BUILD_BYTES_PER_EDGE`.
MAX_NODES = 200_000_000
MAX_EDGES = 300_000_000

#: Peak memory while a graph is built, per edge and per node: the peak resident set of
#: ``python -c "from tokendist.graphs import make_graph; make_graph(SPEC, seed=1)"`` under
#: ``/usr/bin/time -f %M`` (the whole process, Python and imports' 0.12 GB included): hypercube:22
#: 5.0 GB for 46M edges, torus:4000x4000 3.9 GB for 32M edges and 16M nodes, complete:6000 2.0 GB
#: for 18M edges, path:20000000 2.2 GB for 20M of each, random-regular:4000000,4 0.79 GB for 8M
#: edges: 99-121 bytes per edge. So 300M edges would need about 36 GB.
BUILD_BYTES_PER_EDGE = 120
BUILD_BYTES_PER_NODE = 8
#: The longest build accepted: a builder that gives its time per edge (the ones with Python-level
#: loops) is refused beyond this, in one line with the estimate, instead of running for hours.
MAX_BUILD_SECONDS = 120


def check_size(spec: str, n: int, m: int | None = None, *, seconds_per_edge: float = 0.0) -> None:
    """Refuse absurd sizes (``n`` nodes, ``m`` edges when known) with a clear message, not an out-of-memory kill.

    Two checks: the fixed limits :data:`MAX_NODES` and :data:`MAX_EDGES`, then, for graphs whose
    construction would take more than 1 GB, the memory the machine has available now
    (``MemAvailable`` of ``/proc/meminfo``; skipped where that cannot be read). A builder that
    states its time per edge (``seconds_per_edge``, measured) is also refused when the build would
    take more than :data:`MAX_BUILD_SECONDS`.
    """
    if n > MAX_NODES:
        raise SpecError(f"bad spec {spec!r}: {_count(n)} nodes is more than tokendist builds ({MAX_NODES:,})")
    if m is not None and m > MAX_EDGES:
        raise SpecError(f"bad spec {spec!r}: {_count(m)} edges is more than tokendist builds ({MAX_EDGES:,})")
    need = BUILD_BYTES_PER_EDGE * (m or 0) + BUILD_BYTES_PER_NODE * n
    if need > 2**30:
        free = available_memory()
        if free is not None and need > free:
            what = f"{_count(m)} edges" if m else f"{_count(n)} nodes"
            raise SpecError(f"bad spec {spec!r}: building {what} takes about {need / 2**30:.1f} GB of memory; "
                            f"{free / 2**30:.1f} GB is available")
    seconds = seconds_per_edge * (m or 0)
    if seconds > MAX_BUILD_SECONDS:
        raise SpecError(f"bad spec {spec!r}: building {_count(m)} edges takes about {seconds:,.0f} s "
                        f"(limit {MAX_BUILD_SECONDS} s)")


def available_memory() -> int | None:
    """Bytes of memory available to a new allocation now (Linux ``MemAvailable``), or None if unknown."""
    try:
        with open("/proc/meminfo") as f:
            for line in f:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        pass
    return None


def _count(x: int) -> str:
    # Exact with thousands separators while readable; a closed-form count such as kary:50,50's
    # (85 digits) in scientific notation, so that the message stays one short line.
    # From the digits, not a float: such an int may exceed float64 (kary:1000,1000).
    if x < 10**15:
        return f"{x:,}"
    digits = str(x)
    return f"about {digits[0]}.{digits[1:3]}e{len(digits) - 1}"
