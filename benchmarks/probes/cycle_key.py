"""What a cycle key costs: the engine's 128-bit hash of arrays against sha256 of their bytes.

    python benchmarks/probes/cycle_key.py --graph torus:16x16 --reps 7

For the loads of ``--graph`` (int64) and float64 states of 0, 1, 2 and 5 values per node (the
sizes of the deterministic protocols' states: rotor-router and quasirandom hold about one word a
node, flow-imitation three, sos-iou five), prints the best microseconds a key over ``--reps``
rounds of 20,000 keys, the forms alternating within each round: ``array`` is
:func:`tokendist.engine._cycles.cycle_key` of the state array (what the deterministic protocols
return), ``copy+sha256`` the reference: the state copied into ``bytes`` and the sha256 of the loads'
bytes and of those, ``bytes`` the key of a state given as ``bytes`` (sha256, a user's protocol). Wall-clock microseconds of one process: run it on an idle machine or compare ratios.
"""

from __future__ import annotations

import argparse
import hashlib
import time

import numpy as np

from tokendist.engine import make_loads
from tokendist.engine._cycles import cycle_key
from tokendist.graphs import make_graph


def _old(loads, state):
    digest = hashlib.sha256(loads.data)
    digest.update(state.tobytes())
    return digest.digest()


def main(argv=None):
    ap = argparse.ArgumentParser()
    ap.add_argument("--graph", default="torus:16x16")
    ap.add_argument("--reps", type=int, default=7)
    args = ap.parse_args(argv)
    graph = make_graph(args.graph, seed=0)
    loads = np.asarray(make_loads("random:0..200", graph, 0)).astype(np.int64)
    rng = np.random.default_rng(0)
    n_keys = 20_000
    cycle_key(loads, np.ones(1))  # (compiled or loaded from the cache before the clock starts)
    for per_node in (0, 1, 2, 5):
        state = rng.random(per_node * graph.n)
        as_bytes = state.tobytes()
        forms = {"array": lambda: cycle_key(loads, state), "copy+sha256": lambda: _old(loads, state),
                 "bytes": lambda: cycle_key(loads, as_bytes)}
        best = dict.fromkeys(forms, float("inf"))
        for _ in range(args.reps):
            for name, key in forms.items():
                c = time.perf_counter()
                for _ in range(n_keys):
                    key()
                best[name] = min(best[name], (time.perf_counter() - c) / n_keys)
        print(f"state {state.nbytes:6d} B + loads {loads.nbytes} B: "
              + ", ".join(f"{name} {t * 1e6:.2f} us" for name, t in best.items()))


if __name__ == "__main__":
    main()
