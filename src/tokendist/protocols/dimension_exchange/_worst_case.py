"""Worst-case initial distributions of Houle, Symvonis and Wood (2004) as init specs.

* ``distance[:V]`` -- ``load(w) = dist(w, V)``; with V an end of a diametral path (the default) it
  is stable under THRESHOLD-2 with discrepancy equal to the diameter (proof of Theorem 5).

The other worst case of the paper, ``msd-stable`` (the distribution of the proof of Theorem 12), is
built from the stable gaps and so lives with that theory: :mod:`tokendist.analysis._worst_case`.
"""

from __future__ import annotations

import numpy as np

from ...engine import initial
from ...errors import SpecError
from ...graphs import bfs_distances, eccentricities

__all__: list[str] = []


@initial("distance", "distance or distance:V",
         "load = hop distance to V (default: an end of a diametral path): THRESHOLD-2 stable, "
         "discrepancy = diameter (Houle et al. 2004, Theorem 5)")
def _distance(arg, graph, rng):
    if arg:
        if not arg.isdigit() or int(arg) >= graph.n:
            raise SpecError(f"bad initial distribution 'distance:{arg}': expected a node 0..{graph.n - 1}")
        v = int(arg)
    else:
        v = int(np.argmax(eccentricities(graph)))
    d = bfs_distances(graph, [v])[0]
    if d.min() < 0:
        raise SpecError("distance: the graph is not connected")
    return d.astype(np.int64)
