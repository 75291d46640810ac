"""Per-step time of each protocol's numpy reference against its numba kernel, by graph size.

The measurement behind ``kernel = "auto"`` (:data:`tokendist.engine.KERNEL_AUTO_MIN_NODES`): below
some size the numpy path is as fast per step as the compiled kernel, and a run there need not
compile anything. For each protocol with a ``kernel`` parameter and each ``torus:RxR``, runs one
warm-up step per variant (compilation, caches), then ``--steps`` steps, alternating the variants
``--reps`` times, and prints the median microseconds per step and the ratio numpy / numba, e.g.::

    python benchmarks/probes/kernel_crossover.py --sides 8,16,32,64,128 --steps 20
"""

from __future__ import annotations

import argparse
import statistics
import time

import numpy as np

from tokendist._random import stream
from tokendist.engine import PROTOCOLS, make_protocol
from tokendist.experiments import default_scenario
from tokendist.graphs import make_graph


def _steps(name, kernel, graph, loads, steps):
    # The default scenario's parameters (threshold1 and discrepancy1 on a spanning tree, ...).
    params = {k: str(v) for k, v in default_scenario().params.get(name, {}).items()} | {"kernel": kernel}
    if any(p.name == "threads" for p in PROTOCOLS.get(name).params):
        params["threads"] = 1  # the serial kernel: what a small graph would run
    p = make_protocol(name, params)
    w = loads.astype(np.float64) if p.divisible else loads.copy()
    p.reset(graph, w.copy(), stream(0, "protocol"))
    w = p.step(0, graph, w).loads.copy()  # warm-up
    t0 = time.perf_counter()
    for t in range(1, steps + 1):
        w = p.step(t, graph, w).loads.copy()
    return (time.perf_counter() - t0) / steps


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sides", default="8,16,32,64,128")
    ap.add_argument("--algos", default=None, help="comma-separated (default: every protocol with a kernel parameter)")
    ap.add_argument("--steps", type=int, default=20)
    ap.add_argument("--reps", type=int, default=3)
    args = ap.parse_args(argv)
    names = args.algos.split(",") if args.algos else [
        n for n, cls in PROTOCOLS.items() if any(p.name == "kernel" for p in cls.params)]
    sides = [int(s) for s in args.sides.split(",")]
    print(f"{'protocol':<20}{'n':>8}{'numpy us':>11}{'numba us':>11}{'numpy/numba':>13}")
    for side in sides:
        graph = make_graph(f"torus:{side}x{side}")
        loads = stream(0, "init").integers(0, 100, size=graph.n).astype(np.int64)
        loads[0] += 100 * graph.n  # a peak, so that every rule has work to do
        for name in names:
            times = {"numpy": [], "numba": []}
            for _ in range(args.reps):
                for kernel in times:
                    times[kernel].append(_steps(name, kernel, graph, loads, args.steps))
            a, b = statistics.median(times["numpy"]), statistics.median(times["numba"])
            print(f"{name:<20}{graph.n:>8}{a * 1e6:>11.1f}{b * 1e6:>11.1f}{a / b:>13.2f}")


if __name__ == "__main__":
    main()
