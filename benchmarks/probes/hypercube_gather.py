"""The neighbour-sum floor on a hypercube: CSR indices against computed neighbours ``i xor 2^k``.

Both loops add each node's neighbour loads (integers: the order does not matter); the second
reads no ``indices``. docs/design/engine.md explains why the
protocols' float kernels cannot take the second form. Prints ns per edge for each round, e.g.::

    python benchmarks/hypercube_gather.py --dim 20 --rounds 3
"""

from __future__ import annotations

import argparse
import time

import numba
import numpy as np

from tokendist.graphs import make_graph
from tokendist.graphs._model import unsigned_view


@numba.njit(cache=False, nogil=True)
def csr_sum(indices, loads, out, degree):
    for i in range(loads.shape[0]):
        s = 0
        base = degree * i
        for k in range(degree):
            s += loads[indices[base + k]]
        out[i] = s


@numba.njit(cache=False, nogil=True)
def xor_sum(loads, out, degree):
    for i in range(loads.shape[0]):
        s = 0
        ui = np.uint64(i)
        for k in range(degree):
            s += loads[ui ^ (np.uint64(1) << np.uint64(k))]
        out[i] = s


def main(argv=None) -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--dim", type=int, default=20)
    p.add_argument("--rounds", type=int, default=3)
    args = p.parse_args(argv)
    g = make_graph(f"hypercube:{args.dim}")
    d = args.dim
    indices = unsigned_view(g.indices)
    loads = np.random.default_rng(1).integers(0, 100, g.n).astype(np.int64)
    a, b = np.empty(g.n, np.int64), np.empty(g.n, np.int64)
    csr_sum(indices, loads, a, d)
    xor_sum(loads, b, d)
    assert np.array_equal(a, b)
    print(f"neighbour sum on hypercube:{args.dim}, ns per edge (mean of 3 calls), CSR / xor:")
    for _ in range(args.rounds):
        row = []
        for run in (lambda: csr_sum(indices, loads, a, d), lambda: xor_sum(loads, b, d)):
            t0 = time.perf_counter()
            for _ in range(3):
                run()
            row.append((time.perf_counter() - t0) / 3 / max(g.m, 1) * 1e9)
        print(f"  {row[0]:6.2f} / {row[1]:6.2f}")


if __name__ == "__main__":
    main()
