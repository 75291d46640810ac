"""Time the graph helpers interpreted (the small-graph path) against their compiled form.

    python benchmarks/probes/interpreted_helpers.py --graphs "torus:16x16;torus:64x64;random-regular:500,3"

Prints, per graph, the seconds of each helper run interpreted (tokendist.graphs._interpreted)
and, compiled, its first call in this process (compilation or cache load) and its next call.
"""

from __future__ import annotations

import argparse
import os
import time

from tokendist.graphs import make_graph
from tokendist.graphs import _colouring, _interpreted, _orientation, _stencil


def helpers(g):
    return {
        "is_bipartite": lambda: _colouring._is_bipartite(g),
        "edge_colouring": lambda: _colouring.edge_colouring(g),
        "is_biconnected": lambda: _orientation._is_biconnected(g),
        "st_numbering": lambda: _orientation.st_numbering(g) if _orientation.is_biconnected(g) else None,
        "find_stencil": lambda: _stencil.find_stencil(g),
    }


def timed(f):
    t = time.perf_counter()
    f()
    return time.perf_counter() - t


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--graphs", default="torus:16x16;torus:64x64")
    args = ap.parse_args()
    graphs = [make_graph(s) for s in args.graphs.split(";")]
    print(f"{'graph':24} {'helper':16} {'interpreted':>12} {'compiled 1st':>12} {'compiled':>10}")
    rows = []
    for g in graphs:
        os.environ[_interpreted.SMALL_ENV] = "1"
        size = _interpreted.SMALL_GRAPH_SIZE
        _interpreted.SMALL_GRAPH_SIZE = 1 << 62  # force the interpreted path, whatever the size
        rows.append({k: timed(f) for k, f in helpers(g).items()})
        _interpreted.SMALL_GRAPH_SIZE = size
    os.environ[_interpreted.SMALL_ENV] = "0"
    for g, interp in zip(graphs, rows):
        for k, f in helpers(g).items():
            first, again = timed(f), timed(f)
            print(f"{g.spec:24} {k:16} {interp[k]:12.4f} {first:12.4f} {again:10.5f}")


if __name__ == "__main__":
    main()
