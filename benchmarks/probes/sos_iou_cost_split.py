"""Where a step of ``sos-iou`` goes: per-edge work, unpaid IOUs, short nodes.

Runs ``sos-iou`` from the bench's loads (uniform in 0..99, seed 0) for ``--steps`` steps, captures
the arguments of the step's kernel call, and times that kernel on copies of them, alternated:

* ``as captured`` -- the real step;
* ``no short node`` -- loads raised by 10**6, so that nobody owes more than it holds;
* ``no pay`` -- short nodes found and counted but not paid (``pay_iou`` off);
* ``no short, no exception`` -- also last step's exceptions (IOUs of at least 1) read as ordinary IOUs.

The last three change the results; they only show what each part costs. Prints medians and
minima in ns per edge, e.g.::

    python benchmarks/sos_iou_cost_split.py --graph torus:1000x1000 --steps 8 --reps 9
"""

from __future__ import annotations

import argparse
import inspect
import time

import numpy as np

import tokendist.protocols.heterogeneous._rules as heterogeneous
from tokendist._random import stream
from tokendist.engine import make_protocol
from tokendist.graphs import make_graph


def capture(graph, steps: int):
    """The kernel and its arguments at step ``steps`` of a run from the bench's loads."""
    loads = stream(0, "init").integers(0, 100, size=graph.n).astype(np.int64)
    protocol = make_protocol("sos-iou", {})
    protocol.reset(graph, loads.copy(), stream(0, "protocol"))
    captured = {}
    originals = {name: getattr(heterogeneous, name) for name in ("sos_iou_stencil", "sos_iou_step")}

    def grabbing(kernel):
        def call(*args):
            captured["call"] = (kernel, [a.copy() if isinstance(a, np.ndarray) else a for a in args])
            return kernel(*args)
        return call

    try:
        for name, kernel in originals.items():
            setattr(heterogeneous, name, grabbing(kernel))
        for t in range(steps):
            loads = protocol.step(t, graph, loads).loads
    finally:
        for name, kernel in originals.items():
            setattr(heterogeneous, name, kernel)
    return captured["call"]


def main(argv=None) -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--graph", default="torus:1000x1000")
    p.add_argument("--steps", type=int, default=8, help="capture the kernel call of this step (default 8)")
    p.add_argument("--reps", type=int, default=9, help="alternated calls per variant (default 9)")
    args = p.parse_args(argv)
    graph = make_graph(args.graph)
    kernel, captured = capture(graph, args.steps)
    names = list(inspect.signature(kernel.py_func).parameters)
    at = {name: names.index(name) for name in ("loads", "pay_iou", "has_exc")}
    rich = captured[at["loads"]] + 10**6
    variants = {"as captured": {}, "no short node": {at["loads"]: rich}, "no pay": {at["pay_iou"]: False},
                "no short, no exception": {at["loads"]: rich, at["has_exc"]: False}}

    def timed(changes):
        call = [a.copy() if isinstance(a, np.ndarray) else a for a in captured]
        for index, value in changes.items():
            call[index] = value
        t0 = time.perf_counter()
        result = kernel(*call)
        return (time.perf_counter() - t0) / graph.m * 1e9, result

    short = timed({})[1][1]
    times = {name: [] for name in variants}
    for _ in range(args.reps):
        for name, changes in variants.items():
            times[name].append(timed(changes)[0])
    print(f"sos-iou on {args.graph}, kernel {kernel.__name__} at step {args.steps} ({short:,} short nodes); "
          f"ns per edge, median / min of {args.reps}:")
    for name, values in times.items():
        print(f"  {name:24s} {np.median(values):6.2f} / {min(values):6.2f}")


if __name__ == "__main__":
    main()
