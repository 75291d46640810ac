"""How much of a protocol's step its numba kernels take.

Runs ``--algo`` on ``--graph`` from the bench's loads (uniform in 0..99, seed 0): one warm-up step,
then ``--steps`` timed steps. Every numba function the protocol modules call is wrapped with a
timer, so the output splits each step's wall time into its kernels and the rest (Python, numpy).
Prints ns per edge for the step and for each kernel (min - max over the steps), e.g.::

    python benchmarks/kernel_share.py --graph hypercube:20 --algo random-walk --steps 10
"""

from __future__ import annotations

import argparse
import importlib
import pkgutil
import time
from collections import defaultdict

import numpy as np

import tokendist.protocols
from tokendist._random import stream
from tokendist.engine import make_protocol
from tokendist.graphs import make_graph


def _wrap_kernels(spent, step):
    """Replace every numba dispatcher in the protocol modules by a timing wrapper; return an undo list.

    A call adds its time to ``spent[name][step[0]]`` (``step``: a one-item list, the current step).
    """
    undo = []
    for info in pkgutil.walk_packages(tokendist.protocols.__path__, "tokendist.protocols."):
        module = importlib.import_module(info.name)
        for name, obj in list(vars(module).items()):
            if hasattr(obj, "py_func"):  # a numba dispatcher, as this module sees it
                def timed(*args, _kernel=obj, _name=name, **kwargs):
                    t0 = time.perf_counter()
                    try:
                        return _kernel(*args, **kwargs)
                    finally:
                        spent[_name][step[0]] += time.perf_counter() - t0
                setattr(module, name, timed)
                undo.append((module, name, obj))
    return undo


def main(argv=None) -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--graph", default="hypercube:20")
    p.add_argument("--algo", default="random-walk")
    p.add_argument("--steps", type=int, default=10)
    args = p.parse_args(argv)
    graph = make_graph(args.graph)
    loads = stream(0, "init").integers(0, 100, size=graph.n).astype(np.int64)
    protocol = make_protocol(args.algo, {})
    if protocol.divisible:
        loads = loads.astype(np.float64)
    protocol.reset(graph, loads.copy(), stream(0, "protocol"))
    loads = protocol.step(0, graph, loads).loads.copy()  # warm-up: compilation, caches
    spent = defaultdict(lambda: np.zeros(args.steps))
    current = [0]
    undo = _wrap_kernels(spent, current)
    steps = []
    try:
        for t in range(1, args.steps + 1):
            current[0] = t - 1
            t0 = time.perf_counter()
            out = protocol.step(t, graph, loads)
            steps.append(time.perf_counter() - t0)
            loads = out.loads.copy() if out.loads is loads else out.loads
    finally:
        for module, name, obj in undo:
            setattr(module, name, obj)
    per_edge = 1e9 / max(graph.m, 1)
    print(f"{args.algo} on {args.graph}: ns per edge, min - max over {args.steps} steps")
    print(f"  {'whole step':28s} {min(steps) * per_edge:7.2f} - {max(steps) * per_edge:7.2f}")
    for name, per_step in sorted(spent.items()):
        print(f"  {name:28s} {per_step.min() * per_edge:7.2f} - {per_step.max() * per_edge:7.2f}")


if __name__ == "__main__":
    main()
