"""What the engine's per-step pass costs on a small graph: its compilation, and a recorded step.

    python benchmarks/probes/pass_cost.py --graph torus:16x16 --steps 5000 --reps 5

In a fresh numba cache folder (a child process, so nothing is loaded yet) it times compiling the
pass (``tokendist.engine._pass._step_pass``) for int64 loads, then the best of ``--reps`` rounds of
``--steps`` recorded steps of the compiled pass and of its numpy form, in microseconds a step,
and their ratio.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile

CHILD = """
import sys, time
import numpy as np
from tokendist.engine import make_loads
from tokendist.engine._pass import OUTFLOW, StepPass, _step_pass, _step_pass_numpy
from tokendist.graphs import make_graph

spec, steps, reps = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
g = make_graph(spec, seed=0)
loads = np.asarray(make_loads("random:0..200", g, 0))
sent = np.zeros(g.n, dtype=np.int64)
t = time.perf_counter()
rec = StepPass(g, loads.dtype, 2, small=False)
rec.add(loads)
print(f"compile {time.perf_counter() - t:.3f}")
for name, fn in (("compiled", _step_pass), ("numpy", _step_pass_numpy)):
    rec = StepPass(g, loads.dtype, steps + 2, small=False)
    rec._ready[(loads.dtype.num, sent.dtype.num)] = fn
    best = float("inf")
    for _ in range(reps):
        rec.count = 0
        t = time.perf_counter()
        for _ in range(steps):
            rec.check(loads, loads, OUTFLOW, sent, 0, True)
        best = min(best, (time.perf_counter() - t) / steps)
    print(f"{name} {best * 1e6:.2f}")
"""


def main(argv=None):
    ap = argparse.ArgumentParser()
    ap.add_argument("--graph", default="torus:16x16")
    ap.add_argument("--steps", type=int, default=5000)
    ap.add_argument("--reps", type=int, default=5)
    args = ap.parse_args(argv)
    with tempfile.TemporaryDirectory() as cache:
        out = subprocess.run([sys.executable, "-c", CHILD, args.graph, str(args.steps), str(args.reps)],
                             env={**os.environ, "NUMBA_CACHE_DIR": cache}, capture_output=True, text=True,
                             check=True).stdout
    got = dict(line.split() for line in out.splitlines())
    compiled, numpy_form = float(got["compiled"]), float(got["numpy"])
    print(f"pass on {args.graph}: compiling (int64 loads) {float(got['compile']):.2f} s")
    print(f"  a recorded step: compiled {compiled:.2f} us, numpy form {numpy_form:.2f} us, "
          f"numpy / compiled {numpy_form / compiled:.1f}")


if __name__ == "__main__":
    main()
