"""The lower-bound network G' of Ghosh et al. (1995), Sec. 4, and its initial distributions.

G' has levels ``L_0 .. L_k`` and ``R_0 .. R_k`` with ``R_k = L_k`` (2k + 1 distinct sets) of sizes
``|L_i| = |R_i| = (1 + mu)^i``; an expander inside each level; every node of ``L_{i+1}`` joined to
the same number of nodes of ``L_i`` (and likewise on the R side); ``L_0 = {u}`` adjacent to all of
``L_1``; and one extra edge ``e = (u, v)`` with ``R_0 = {v}``. From the distributions of Secs. 4.1
and 4.2, which are globally balanced to within O(d log n / mu), reaching local balance forces about
``|L_0| + ... + |L_{k/2-1}| >= sqrt(n)/2`` tokens across the single edge e: Omega(sqrt n) steps.

Integer construction (the paper "ignores integrality constraints"); the parameters it picks:

* ``|L_i| = max(1, round((1 + mu)^i))``, so ``|L_0| = 1`` as the paper requires;
* inside a level of size s: a random ``min(inner, s - 1)``-regular graph (an expander w.h.p.; degree
  lowered by one when ``s * inner`` is odd), from the run's topology stream;
* between levels: node j of ``L_{i+1}`` is joined to ``L_i`` nodes ``(j*b + r) mod |L_i|`` for
  ``r < b``, ``b = min(down, |L_i|)``: every ``L_{i+1}`` node has exactly b neighbours in ``L_i``
  and ``L_i`` nodes have ``floor`` or ``ceil`` of ``b |L_{i+1}| / |L_i|`` in ``L_{i+1}`` (exactly
  equal when the sizes divide, e.g. mu = 1);
* ``L_0`` is joined to every node of ``L_1`` (as in the paper).

Spec: ``ghosh-lower-bound:K,MU[,INNER[,DOWN]]`` with K even >= 2, 0 < MU <= 1, INNER default 4,
DOWN default 2. Node numbering: ``L_0 .. L_{k-1}``, then ``L_k``, then ``R_0 .. R_{k-1}``; so
u = 0 and v = ``sum_{i<=k} |L_i|``.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..errors import SpecError, TokendistError
from ._model import Graph
from ._specs import check_size, topology

__all__ = ["LowerBoundLayout", "lower_bound_layout", "lower_bound_graph", "lower_bound_loads"]

_SYNTAX = "ghosh-lower-bound:K,MU[,INNER[,DOWN]]"


@dataclass(frozen=True)
class LowerBoundLayout:
    """Levels of G': ``side`` (0 = L, 1 = R; the shared level k is on side 0) and ``level`` per node."""

    k: int
    mu: float
    inner: int
    down: int
    sizes: tuple
    side: np.ndarray
    level: np.ndarray

    @property
    def n(self) -> int:
        return int(self.side.size)

    @property
    def u(self) -> int:
        return 0

    @property
    def v(self) -> int:
        return int(sum(self.sizes))

    def nodes(self, side: str, i: int) -> np.ndarray:
        """Nodes of ``L_i`` (side "L") or ``R_i`` (side "R"; ``R_k`` is ``L_k``)."""
        if i == self.k:
            return np.flatnonzero((self.side == 0) & (self.level == self.k))
        s = 0 if side == "L" else 1
        return np.flatnonzero((self.side == s) & (self.level == i))

    def group_sizes(self) -> dict:
        """Sizes of the groups of Sec. 4: script-L, script-R (k/2 levels each) and script-M (k + 1 levels)."""
        half = self.k // 2
        left = int(sum(self.sizes[:half]))
        return {"L": left, "R": left, "M": self.n - 2 * left}


def _parse(arg: str) -> tuple[int, float, int, int]:
    spec = f"ghosh-lower-bound:{arg}"
    parts = [p.strip() for p in arg.split(",")] if arg else []
    if len(parts) not in (2, 3, 4):
        raise SpecError(f"bad spec {spec!r}: expected {_SYNTAX}")
    try:
        k, mu = int(parts[0]), float(parts[1])
        inner = int(parts[2]) if len(parts) > 2 else 4
        down = int(parts[3]) if len(parts) > 3 else 2
    except ValueError:
        raise SpecError(f"bad spec {spec!r}: expected {_SYNTAX}") from None
    if k < 2 or k % 2:
        raise SpecError(f"bad spec {spec!r}: K must be even and >= 2")
    if not 0 < mu <= 1:
        raise SpecError(f"bad spec {spec!r}: MU must be in (0, 1]")
    if inner < 0 or down < 1:
        raise SpecError(f"bad spec {spec!r}: INNER must be >= 0 and DOWN >= 1")
    if (1 + mu) ** k > 5_000_000:
        raise SpecError(f"bad spec {spec!r}: (1 + MU)^K is too large")
    return k, mu, inner, down


def lower_bound_layout(k: int, mu: float, inner: int = 4, down: int = 2) -> LowerBoundLayout:
    """The level sizes and the level of every node of G' (no edges)."""
    sizes = tuple(max(1, int(round((1 + mu) ** i))) for i in range(k + 1))
    n = 2 * sum(sizes[:k]) + sizes[k]
    # At most: INNER / 2 expander edges per node, DOWN edges from each node to the level below
    # (twice from the shared level L_k, once from each side), and the edge e.
    # The build is Python loops and networkx: about 40 us per edge (ghosh-lower-bound:14,1, 229k
    # edges, 8.7 s on this machine); ghosh-lower-bound:22,1 would have run for about 40 minutes.
    check_size(f"ghosh-lower-bound:{k},{mu:g},{inner},{down}", n, n * inner // 2 + (n + sizes[k]) * down + 1,
               seconds_per_edge=40e-6)
    side = np.concatenate([np.zeros(sum(sizes), np.int64), np.ones(sum(sizes[:k]), np.int64)])
    level = np.concatenate([np.repeat(np.arange(k + 1), sizes), np.repeat(np.arange(k), sizes[:k])])
    return LowerBoundLayout(k, mu, inner, down, sizes, side, level)


def _regular(s: int, deg: int, rng) -> list[tuple[int, int]]:
    deg = min(deg, s - 1)
    if deg <= 0:
        return []
    if (s * deg) % 2:
        deg -= 1
    if deg <= 0:
        return []
    if deg == s - 1:
        return [(a, b) for a in range(s) for b in range(a + 1, s)]
    import networkx as nx

    g = nx.random_regular_graph(deg, s, seed=int(rng.integers(0, 2**31 - 1)))
    return [(min(a, b), max(a, b)) for a, b in g.edges()]


def lower_bound_graph(k: int, mu: float, inner: int = 4, down: int = 2, rng=None) -> Graph:
    """Build G' (Sec. 4) with the integer choices listed in the module docstring."""
    rng = np.random.default_rng(rng)
    lay = lower_bound_layout(k, mu, inner, down)
    edges = set()
    for s_side, name in ((0, "L"), (1, "R")):
        levels = [lay.nodes(name, i) for i in range(k + 1)]
        for i, nodes in enumerate(levels):
            if s_side == 1 and i == k:
                continue  # the shared level L_k = R_k is built once
            for a, b in _regular(nodes.size, inner, rng) if i > 0 else []:
                edges.add((int(nodes[a]), int(nodes[b])))
        for i in range(k):
            lo, hi = levels[i], levels[i + 1]
            b = min(down, lo.size)
            for j in range(hi.size):
                for r in range(b):
                    x, y = int(lo[(j * b + r) % lo.size]), int(hi[j])
                    edges.add((min(x, y), max(x, y)))
    edges.add((lay.u, lay.v))  # the edge e
    spec = f"ghosh-lower-bound:{k},{mu:g},{inner},{down}"
    return Graph.from_edges(lay.n, sorted(edges), spec=spec)


@topology("ghosh-lower-bound", _SYNTAX,
          "Ghosh et al. 1995 Sec. 4 graph G': levels of size (1+MU)^i, expanders inside, joined by one edge",
          randomized=True)
def _build(arg, rng):
    k, mu, inner, down = _parse(arg)
    return lower_bound_graph(k, mu, inner, down, rng)


# ---------------------------------------------------------------------------------------------------
# Initial distributions of Secs. 4.1 and 4.2
# ---------------------------------------------------------------------------------------------------
def _layout_of(graph) -> LowerBoundLayout:
    spec = graph.spec or ""
    name, _, arg = spec.partition(":")
    if name.strip().lower() != "ghosh-lower-bound":
        raise TokendistError(f"this initial distribution needs a ghosh-lower-bound graph, not {spec or 'this graph'}")
    lay = lower_bound_layout(*_parse(arg))
    if lay.n != graph.n:
        raise TokendistError(f"graph {spec} has {graph.n} nodes, its layout {lay.n}")
    return lay


def lower_bound_loads(graph, section: str, m: int | None = None) -> np.ndarray:
    """The initial loads of Sec. 4.1 (multi-port) or Sec. 4.2 (single-port) on G'.

    Sec. 4.1 (d = maximum degree of G'): ``m + 1`` on script-R; ``m - 2(i - k/2)d`` on ``R_i`` in
    script-M; ``m - 2(3k/2 - i)d`` on ``L_i`` in script-M; ``m - 2(i + k/2 + 1)d`` on ``L_i`` in
    script-L; default m = 2kd (the paper's minimum).
    Sec. 4.2: ``m + 1`` on ``R_{k/2-1}``; ``m - (k/2 - i - 1)`` on ``R_i``, i <= k/2 - 2; ``m - 1``
    on ``R_{k/2}``; ``m - (i - k/2)`` on ``R_i``, i >= k/2 + 1; ``m - (3k/2 - i)`` on ``L_i`` in
    script-M; ``m - (k/2 + i)`` on ``L_i`` in script-L; default m = k.
    """
    lay = _layout_of(graph)
    k, half, d = lay.k, lay.k // 2, graph.max_degree
    w = np.zeros(graph.n, dtype=np.int64)
    if section == "4.1":
        m = 2 * k * d if m is None else m
        if m < 2 * k * d:
            raise TokendistError(f"Sec. 4.1 needs m >= 2kd = {2 * k * d}")
        for i in range(k + 1):
            L, R = lay.nodes("L", i), lay.nodes("R", i)
            if i < half:
                w[R] = m + 1
                w[L] = m - 2 * (i + half + 1) * d
            else:
                w[R] = m - 2 * (i - half) * d
                w[L] = m - 2 * (3 * half - i) * d
    elif section == "4.2":
        m = k if m is None else m
        if m < k:
            raise TokendistError(f"Sec. 4.2 needs m >= k = {k}")
        for i in range(k + 1):
            L, R = lay.nodes("L", i), lay.nodes("R", i)
            if i == half - 1:
                w[R] = m + 1
            elif i <= half - 2:
                w[R] = m - (half - i - 1)
            elif i == half:
                w[R] = m - 1
            else:
                w[R] = m - (i - half)
            if i < half:
                w[L] = m - (half + i)
            else:
                w[L] = m - (3 * half - i)
        # L_k = R_k: both formulas give m - k/2; the R formula was written last for i = k.
    else:
        raise TokendistError(f"unknown section {section!r}")
    return w
