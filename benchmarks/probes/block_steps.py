"""What blocks of steps save: protocols in blocks against step by step, in one process.

    TOKENDIST_SMALL_RUN_REFERENCE=0 python benchmarks/probes/block_steps.py --reps 3

For each protocol with a ``steps`` method (``--algos``, default the thirteen of the default
``tokendist compare``: seven randomized, six deterministic whose blocks detect cycles), runs
:func:`tokendist.simulate` on ``--graph`` (``random:0..200``, seed 0, ``--steps`` steps) in
blocks (:mod:`tokendist.engine._batch`) and step by step (``BLOCK_STEPS`` set to 0 for the run),
alternating, and prints the best CPU milliseconds of each over ``--reps`` rounds (after a warm-up
run of each), their ratio and whether the two runs agree (loads, trace columns but the clock,
totals, stop reason and step, cycle length, report, variants). With
``TOKENDIST_SMALL_RUN_REFERENCE=0`` the kernels compile on a cold cache; without it a small run on
a cold cache takes the numpy reference and no block runs.
"""

from __future__ import annotations

import argparse
import time

import numpy as np

import tokendist as td
from tokendist.engine import _batch, make_loads
from tokendist.graphs import make_graph

ALGOS = "randomized-diffusion,random-matching,balancing-circuit,stratified-diffusion,pairwise-averaging," \
        "single-port,diffusion-random,quasirandom,rotor-router,flow-imitation,threshold1,discrepancy1,sos-iou"


def _run(graph, algo, loads, steps, blocks: bool):
    saved = _batch.BLOCK_STEPS
    _batch.BLOCK_STEPS = saved if blocks else 0
    try:
        c = time.process_time()
        r = td.simulate(graph, algo, loads, seed=0, max_steps=steps)
        return time.process_time() - c, r
    finally:
        _batch.BLOCK_STEPS = saved


def _same(a, b) -> bool:
    trace = all(np.array_equal(a.trace[k], b.trace[k]) for k in a.trace)
    return (trace and np.array_equal(a.loads, b.loads) and a.steps == b.steps and a.stop_reason == b.stop_reason
            and a.cycle_length == b.cycle_length and a.tokens_moved == b.tokens_moved and a.messages == b.messages
            and a.report == b.report and a.variants == b.variants)


def main(argv=None):
    ap = argparse.ArgumentParser()
    ap.add_argument("--graph", default="torus:16x16")
    ap.add_argument("--algos", default=ALGOS)
    ap.add_argument("--steps", type=int, default=10_000)
    ap.add_argument("--reps", type=int, default=3)
    args = ap.parse_args(argv)
    graph = make_graph(args.graph, seed=0)
    loads = make_loads("random:0..200", graph, 0)
    for algo in args.algos.split(","):
        best = {True: float("inf"), False: float("inf")}
        runs = {}
        for rep in range(args.reps + 1):
            for blocks in (True, False):
                cpu, runs[blocks] = _run(graph, algo, loads, args.steps, blocks)
                if rep:  # (round 0 warms up: kernels loaded or compiled)
                    best[blocks] = min(best[blocks], cpu)
        ratio = best[True] / best[False]
        print(f"{algo}: blocks {best[True] * 1e3:.1f} ms, step by step {best[False] * 1e3:.1f} ms, "
              f"ratio {ratio:.2f}, same run {_same(runs[True], runs[False])}")


if __name__ == "__main__":
    main()
