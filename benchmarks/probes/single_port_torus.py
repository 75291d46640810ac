"""single-port on a torus: the counter kernel against the stencil kernel.

For ``torus:W x W`` (``--side``), two chains of single-port steps (Ghosh et al. 1995, Sec. 1.1,
the paper's candidate probability 1/(4d) = 1/16) run side by side from the same loads (``tokendist
bench``'s: uniform in 0..99 from seed 0) with the same coins: one with
``single_port_counter_step`` (hash every edge, then one candidate after the other), one with
``single_port_stencil_step`` (hash, partners, loads: three streaming passes; what the protocol
runs on a torus), alternating a step of each; the steps after ``--warm`` untimed ones are
timed. After every step the loads, flows, selection counts and tokens moved must be equal.

Prints the median (min) ns per edge of each chain and the counter kernel's median over the
stencil kernel's, e.g.::

    python benchmarks/single_port_torus.py --side 1000 --steps 10
"""

from __future__ import annotations

import argparse
import time

import numpy as np

from tokendist._random import stream
from tokendist.graphs import make_graph
from tokendist.graphs._stencil import lower_edge_runs
from tokendist.protocols.local.kernels._serial import BLOCK, coin_bound, single_port_counter_step
from tokendist.protocols.local.kernels._stencil import single_port_stencil_step


def main(argv=None) -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--side", type=int, default=1000, help="the torus is side x side")
    p.add_argument("--steps", type=int, default=10, help="timed steps per chain")
    p.add_argument("--warm", type=int, default=2, help="untimed steps first (the first compiles)")
    args = p.parse_args(argv)
    g = make_graph(f"torus:{args.side}x{args.side}")
    st = g.stencil
    if st is None:
        raise SystemExit(f"torus:{args.side}x{args.side} has no offset stencil (too small)")
    starts, ends, delta = lower_edge_runs(st, g.csr_edges)
    loads = stream(0, "init").integers(0, 100, size=g.n).astype(np.int64)
    bound, key = coin_bound(1.0 / (4 * g.max_degree)), 12345
    cap = g.m + BLOCK
    counter = {"w": loads, "flows": np.zeros(g.m, np.int8), "sel": np.zeros(g.m, np.int32), "nprev": 0,
               "count": np.zeros(g.n, np.uint8), "bufs": [np.zeros(cap, np.int32) for _ in range(3)]}
    stencil = {"w": loads, "flows": np.zeros(g.m, np.int8), "sel": np.zeros(g.m, np.int32),
               "flags": np.empty(g.m, np.uint8), "partner": np.empty(g.n, np.int32)}
    times = {"counter": [], "stencil": []}
    for t in range(args.warm + args.steps):
        out1 = np.empty(g.n, np.int64)
        t0 = time.perf_counter()
        m1, counter["nprev"] = single_port_counter_step(g.u, g.v, counter["w"], key, t, bound, 1, out1, counter["flows"],
                                                        counter["count"], *counter["bufs"], counter["nprev"],
                                                        counter["sel"])
        t1 = time.perf_counter()
        out2 = np.empty(g.n, np.int64)
        m2 = single_port_stencil_step(g.indptr, g.indices, g.csr_edges, starts, ends, st.lower, st.upper, delta,
                                      stencil["w"], key, t, bound, 1, out2, stencil["flows"], stencil["sel"],
                                      stencil["flags"], stencil["partner"])
        t2 = time.perf_counter()
        if t >= args.warm:
            times["counter"].append((t1 - t0) / g.m * 1e9)
            times["stencil"].append((t2 - t1) / g.m * 1e9)
        same = (m1 == m2 and np.array_equal(out1, out2) and np.array_equal(counter["flows"], stencil["flows"])
                and np.array_equal(counter["sel"], stencil["sel"]))
        if not same:
            raise SystemExit(f"the kernels disagree at step {t}")
        counter["w"], stencil["w"] = out1, out2
    print(f"torus:{args.side}x{args.side}, p = 1/{4 * g.max_degree}, ns per edge, median (min) of steps {args.warm} .. "
          f"{args.warm + args.steps - 1}; loads, flows, selection counts and tokens moved equal after every step")
    c, s = times["counter"], times["stencil"]
    print(f"{'counter':>14}  {'stencil':>14}  {'counter / stencil':>17}")
    print(f"{np.median(c):6.2f} ({min(c):5.2f})  {np.median(s):6.2f} ({min(s):5.2f})  {np.median(c) / np.median(s):17.2f}")


if __name__ == "__main__":
    main()
