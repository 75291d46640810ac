"""Is a hypercube step bound by memory? The same kernels on cubes from L2-sized to L3-sized.

For each ``hypercube:d`` of ``--dims``, times in one process, alternated over ``--rounds`` rounds:

* ``row``: random-walk's phase-1 row loop (``fos_pair_regular``: d neighbours gathered per node);
* ``cube``: the same step by dimensions (``fos_pair_cube``, the same bits);
* ``floor``: the bench's gather floor (each node sums its neighbours' loads over its CSR row).

If the row loop were bound by memory traffic, its ns per edge would grow with d as the arrays leave
L2 (2 MB per core: about d = 15 for the 7 arrays of n float64 the step touches); a flat row
shows that the per-node work bounds it. Prints median (min) ns per edge, e.g.::

    python benchmarks/hypercube_scaling.py --dims 12,14,16,18,20 --rounds 5
"""

from __future__ import annotations

import argparse
import time

import numpy as np

from tokendist.experiments._bench import gather_floor_step
from tokendist.graphs import make_graph
from tokendist.graphs._model import unsigned_view
from tokendist.protocols.heterogeneous.kernels._walk_cube import fos_pair_cube
from tokendist.protocols.heterogeneous.kernels._walk_serial import fos_pair_regular


def _cases(d):
    """The three timed calls on hypercube:d (each repeated so that a call covers about 2^20 nodes)."""
    g = make_graph(f"hypercube:{d}")
    rng = np.random.default_rng(1)
    loads = rng.integers(0, 100, g.n).astype(np.int64)
    est = loads + rng.random(g.n)
    a0, total, ssum = 1.0 / (d + 1), float(loads.sum()), float(g.n)
    ix = unsigned_view(g.indices)
    dst, out, outflow = np.empty(g.n), np.empty(g.n, np.int64), np.empty(g.n, np.int64)
    floats, sums = loads.astype(np.float64), np.empty(g.n)
    reps = max(1, (1 << 20) // g.n)

    def row():
        for _ in range(reps):
            fos_pair_regular(ix, d, a0, None, ssum, total, loads, loads, est, est, dst, out, outflow)

    def cube():
        for _ in range(reps):
            fos_pair_cube(d, a0, None, ssum, total, loads, loads, est, est, dst, out, outflow)

    def floor():
        for _ in range(reps):
            gather_floor_step(g.indptr, ix, floats, sums)

    return g.m * reps, {"row": row, "cube": cube, "floor": floor}


def main(argv=None) -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--dims", default="12,14,16,18,20")
    p.add_argument("--rounds", type=int, default=5)
    args = p.parse_args(argv)
    cases = {d: _cases(d) for d in (int(x) for x in args.dims.split(","))}
    for _, calls in cases.values():
        for f in calls.values():
            f()  # compile and warm up
    times = {}
    for _ in range(args.rounds):
        for d, (edges, calls) in cases.items():
            for name, f in calls.items():
                t0 = time.perf_counter()
                f()
                times.setdefault((d, name), []).append((time.perf_counter() - t0) / edges * 1e9)
    print("ns per edge, median (min) of", args.rounds, "rounds")
    print(f"{'graph':>14}  {'row':>14}  {'cube':>14}  {'floor':>14}")
    for d in cases:
        cells = [f"{np.median(times[d, k]):6.2f} ({min(times[d, k]):5.2f})" for k in ("row", "cube", "floor")]
        print(f"{'hypercube:' + str(d):>14}  " + "  ".join(f"{c:>14}" for c in cells))


if __name__ == "__main__":
    main()
