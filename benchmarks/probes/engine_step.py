"""What the engine itself costs a step: a run of a protocol whose step costs next to nothing.

    python benchmarks/probes/engine_step.py --graph torus:16x16 --steps 10000 --reps 5

The probe protocol alternates between two precomputed load vectors (one token moves back and
forth) and reports its outflow, so a step of :func:`tokendist.simulate` is the engine's loop, its
compiled pass (conservation, feasibility, the metrics of every recorded step) and, with cycle
detection, the cycle key of the loads and a short state. Prints the best CPU microseconds a step
over ``--reps`` runs (after one warm-up run), for int64 and float64 loads, without and with the
cycle key, and the protocol's step alone for comparison. Run it alternately on two trees to
compare them: the machine is shared and identical runs vary.
"""

from __future__ import annotations

import argparse
import time

import numpy as np

import tokendist as td
from tokendist.engine import make_loads
from tokendist.engine._protocol import Protocol, Step
from tokendist.graphs import make_graph


class _BackAndForth(Protocol):
    name = "engine-step-probe"
    model = "flow"

    def __init__(self, keyed: bool, **params):
        super().__init__(**params)
        self.keyed = keyed

    def reset(self, graph, loads, rng):
        self.pair = (loads.copy(), loads.copy())
        self.pair[0][0] += 1
        self.pair[0][1] -= 1  # (node 1 sends one token to node 0, then node 0 sends it back)
        self.sent = (np.zeros(graph.n, loads.dtype), np.zeros(graph.n, loads.dtype))
        self.sent[0][1] = 1
        self.sent[1][0] = 1
        self.clock = 0

    def step(self, t, graph, loads):
        i = t & 1
        return Step(self.pair[i], moved=1, messages=1, outflow=self.sent[i])

    def state_key(self):
        # A state that never repeats (the clock): every step pays the cycle key, no run stops on it.
        self.clock += 1
        return self.clock.to_bytes(8, "little") if self.keyed else None


def main(argv=None):
    ap = argparse.ArgumentParser()
    ap.add_argument("--graph", default="torus:16x16")
    ap.add_argument("--steps", type=int, default=10_000)
    ap.add_argument("--reps", type=int, default=5)
    args = ap.parse_args(argv)
    graph = make_graph(args.graph, seed=0)
    base = np.asarray(make_loads("random:0..200", graph, 0))
    for kind in ("int64", "float64"):
        loads = base.astype(kind)
        row = []
        for keyed in (False, True):
            best = float("inf")
            for _ in range(args.reps + 1):
                c = time.process_time()
                r = td.simulate(graph, _BackAndForth(keyed), loads, seed=0, max_steps=args.steps)
                best = min(best, time.process_time() - c)
            row.append(f"{'with' if keyed else 'no'} cycle key {best / r.steps * 1e6:.2f}")
        probe = _BackAndForth(False)
        probe.reset(graph, loads, None)
        c = time.process_time()
        for t in range(args.steps):
            probe.step(t, graph, loads)
        row.append(f"step alone {(time.process_time() - c) / args.steps * 1e6:.2f}")
        print(f"{kind}: us a step: " + ", ".join(row))


if __name__ == "__main__":
    main()
