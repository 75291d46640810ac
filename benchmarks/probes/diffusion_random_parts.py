"""Where a step of ``diffusion-random`` goes on a regular graph: the coin pass and the row loop.

Times, on the same loads and alternated: the HEAD pass alone (one SplitMix64 coin per edge), the
whole random-rounding step (``rounded_step``, regular path: the HEAD pass plus a row loop that
reads each slot's coin through ``csr_edges``), and the floor-rounding step (the same row loop
without coins). docs/design/kernels.md quotes it. E.g.::

    python benchmarks/diffusion_random_parts.py --graph hypercube:20 --rounds 4
"""

from __future__ import annotations

import argparse
import math
import time

import numba
import numpy as np

from tokendist.graphs import make_graph
from tokendist.graphs._model import unsigned_view
from tokendist.protocols.diffusion.kernels._serial import FLOOR, RANDOM, _fill_heads, _step_base, rounded_step


@numba.njit(cache=False, nogil=True)
def heads_only(p, heads, key, step):
    _fill_heads(_step_base(key, step), np.int64(math.ceil(p * 9007199254740992.0)), heads)


def main(argv=None) -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--graph", default="hypercube:20")
    p.add_argument("--rounds", type=int, default=4)
    args = p.parse_args(argv)
    g = make_graph(args.graph)
    degree = int(g.indptr[1] - g.indptr[0])
    if int(g.indptr[-1]) != degree * g.n:
        raise SystemExit("diffusion_random_parts: the graph must be regular")
    q = 2 * degree  # the default P_ij = 1 / (2 max(d_i, d_j))
    coef = np.array([1.0 / q])
    ratio = np.array([[1, q]])  # the same P_ij as an exact fraction
    loads = np.random.default_rng(0).integers(0, 100, g.n).astype(np.int64)
    indices, edges = unsigned_view(g.indices), unsigned_view(g.csr_edges)
    heads = np.empty(g.m, np.uint8)
    out, outflow = np.empty(g.n, np.int64), np.empty(g.n, np.int64)
    none8, none64, no_coins = np.empty(0, np.int8), np.empty(0, np.int64), np.empty(0)
    key, step = np.uint64(7), np.uint64(3)

    def rounded(mode):
        return lambda: rounded_step(g.indptr, indices, edges, coef, ratio, none8, heads, loads, mode, key, step, none64,
                                    no_coins, degree, q, out, outflow)

    parts = {"HEAD pass": lambda: heads_only(1.0 / q, heads, key, step), "random step": rounded(RANDOM),
             "floor step": rounded(FLOOR)}
    for run in parts.values():
        run()  # compile or load from the cache
    print(f"diffusion-random on {args.graph}, ns per edge (mean of 3 calls): " + " / ".join(parts))
    for _ in range(args.rounds):
        row = []
        for run in parts.values():
            t0 = time.perf_counter()
            for _ in range(3):
                run()
            row.append((time.perf_counter() - t0) / 3 / g.m * 1e9)
        print("  " + " / ".join(f"{v:6.2f}" for v in row))


if __name__ == "__main__":
    main()
