"""What a small graph's CSR arrays cost: one stable sort against scipy's counting conversions.

    python benchmarks/probes/csr_build.py --nodes 64,256,1024,4096 --reps 5

A mobility run (``RandomWaypoint``) builds a new disc graph, and its CSR arrays, after every
movement step. For disc graphs of each ``--nodes`` size (radius chosen for about 8 neighbours a
node, positions from seed 0), prints the edges, the best microseconds of ``Graph._csr_sorted`` (one
stable sort of the 2m slots, the path below ``_SORTED_CSR_EDGES`` edges) and of
``Graph._csr_counting`` (scipy's csr -> csc conversion, the path from there on) over ``--reps``
rounds of 200 builds each, their ratio, and whether both gave the arrays of ``Graph._csr_lexsort``.
Wall-clock microseconds of one process: run it on an idle machine or compare ratios.
"""

from __future__ import annotations

import argparse
import math
import time

import numpy as np

from tokendist.engine._mobility import disc_graph
from tokendist.graphs import Graph
from tokendist.graphs._model import _SORTED_CSR_EDGES


def _best(build, reps: int, number: int = 200) -> float:
    best = math.inf
    for _ in range(reps):
        started = time.perf_counter()
        for _ in range(number):
            build()
        best = min(best, (time.perf_counter() - started) / number)
    return best * 1e6


def main(argv=None):
    ap = argparse.ArgumentParser()
    ap.add_argument("--nodes", default="64,256,1024,4096", help="disc graph sizes, comma-separated")
    ap.add_argument("--reps", type=int, default=5)
    args = ap.parse_args(argv)
    print(f"sorted path below {_SORTED_CSR_EDGES} edges; best us a build")
    print(f"{'n':>6} {'m':>7} {'sorted':>9} {'counting':>9} {'ratio':>6}  same arrays")
    for n in (int(x) for x in args.nodes.split(",")):
        positions = np.random.default_rng(0).random((n, 2))
        g = disc_graph(positions, math.sqrt(8 / (math.pi * n)), wrap=True)
        reference = Graph(g.n, g.u, g.v)._csr_lexsort()
        same = all(np.array_equal(x, y) and x.dtype == y.dtype
                   for built in (Graph(g.n, g.u, g.v)._csr_sorted(), Graph(g.n, g.u, g.v)._csr_counting())
                   for x, y in zip(built, reference))
        sorted_us = _best(lambda: Graph(g.n, g.u, g.v)._csr_sorted(), args.reps)
        counting_us = _best(lambda: Graph(g.n, g.u, g.v)._csr_counting(), args.reps)
        print(f"{n:>6} {g.m:>7} {sorted_us:>9.1f} {counting_us:>9.1f} {sorted_us / counting_us:>6.2f}  {same}")


if __name__ == "__main__":
    main()
