"""The THRESHOLD-1 worst case of Houle, Symvonis and Wood (2004) as an init spec.

``msd-stable[:c=C,s=S,colouring=auto,tree=bfs,base=B]`` -- the distribution of the proof of
Theorem 12: ``load(S) = 0`` and ``load(v) = stability(gap_C(S, v))`` (plus B everywhere). It is
stable under THRESHOLD-1 at every time ``t = C (mod chi)`` for that colouring, i.e. from step 0
when the run uses ``colour_start=C`` and the same ``colouring``; its discrepancy is MSD(T).

It is built from the stable gaps (:mod:`._stable_gaps`), so it is registered here, with the theory,
rather than in the protocol family.
"""

from __future__ import annotations

import numpy as np

from ..engine import initial
from ..errors import SpecError
from ..protocols.dimension_exchange._schedule import resolve_colouring, spanning_tree
from ._stable_gaps import theorem12_distribution

__all__: list[str] = []


def _options(arg: str) -> dict:
    out = {}
    for part in filter(None, (p.strip() for p in arg.split(","))):
        key, sep, value = part.partition("=")
        if not sep:
            raise SpecError(f"bad initial distribution 'msd-stable:{arg}': expected key=value, got {part!r}")
        if key.strip() in out:  # the last one would silently win
            raise SpecError(f"bad initial distribution 'msd-stable:{arg}': {key.strip()} given twice")
        out[key.strip()] = value.strip()
    unknown = set(out) - {"c", "s", "colouring", "tree", "base"}
    if unknown:
        raise SpecError(f"bad initial distribution 'msd-stable:{arg}': unknown key(s) {', '.join(sorted(unknown))}"
                        " (keys: c, s, colouring, tree, base)")
    return out


@initial("msd-stable", "msd-stable[:c=C,s=S,colouring=auto,tree=bfs,base=B]",
         "THRESHOLD-1 stable distribution of discrepancy MSD(T) for colour C and node S "
         "(Houle et al. 2004, proof of Theorem 12); run threshold1 with colour_start=C")
def _msd_stable(arg, graph, rng):
    opts = _options(arg)
    try:
        if not all(opts.get(k, "0").isdigit() for k in ("c", "s", "base")):  # int() also took '1_0' and '-1'
            raise ValueError(arg)
        c, s, base = int(opts.get("c", 0)), int(opts.get("s", 0)), int(opts.get("base", 0))
    except ValueError:
        raise SpecError(f"bad initial distribution 'msd-stable:{arg}': c, s and base are non-negative "
                        "integers") from None
    if c < 0 or base < 0:
        raise SpecError(f"bad initial distribution 'msd-stable:{arg}': c and base must be >= 0")
    tree = graph if graph.is_tree else spanning_tree(graph, opts.get("tree", "bfs"))
    colours = resolve_colouring(tree, opts.get("colouring", "auto")) if tree.m else None
    chi = int(colours.max()) + 1 if colours is not None else 1
    if tree.n == 1:
        return np.full(1, base, dtype=np.int64)
    return theorem12_distribution(tree, colours, c % chi, s, base=base)
