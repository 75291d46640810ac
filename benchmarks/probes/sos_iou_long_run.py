"""sos-iou over a long run: what a step costs as more and more nodes end it short.

``tokendist bench`` times the first steps of a run. From its loads (uniform in 0..99, seed 0) on
``torus:1000x1000`` the share of nodes that owe more than they hold grows step after step (3.6%
at step 9, 81% at step 150 with the protocol's beta 1.988), and so does a step's cost: each short
node pays its edges in proportion, and every edge it pays leaves an exception (an IOU of 1 or
more) that the next step reads. This script runs the protocol itself (``protocol.step``, the
engine's checks left out) for ``--steps`` steps and prints, per window of ``--every`` steps, the
short nodes of the window's last step and the median ns per edge of the window's steps, e.g.::

    python benchmarks/sos_iou_long_run.py --side 1000 --steps 160 --every 20
    python benchmarks/sos_iou_long_run.py --side 1000 --steps 160 --every 20 --threads auto

It uses only the protocol's public construction, so the same script can time an older commit's
code: ``PYTHONPATH=/path/to/worktree/src python benchmarks/sos_iou_long_run.py ...``.
"""

from __future__ import annotations

import argparse
import time

import numpy as np

import tokendist
from tokendist._random import stream
from tokendist.engine import make_protocol
from tokendist.graphs import make_graph


def main(argv=None) -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--side", type=int, default=1000, help="torus:SIDExSIDE (default 1000)")
    p.add_argument("--steps", type=int, default=160)
    p.add_argument("--every", type=int, default=20, help="steps per printed window (default 20)")
    p.add_argument("--threads", default="1", help="the protocol's threads parameter (default 1: serial)")
    args = p.parse_args(argv)
    if args.threads == "auto":
        tokendist.allow_auto_threads()  # this script forks nothing
    graph = make_graph(f"torus:{args.side}x{args.side}")
    loads = stream(0, "init").integers(0, 100, size=graph.n).astype(np.int64)
    protocol = make_protocol("sos-iou", {"threads": args.threads})
    protocol.reset(graph, loads.copy(), stream(0, "protocol"))
    print(f"sos-iou on {graph.spec}, threads={args.threads}, {args.steps} steps; per window: steps, short nodes at "
          "its last step, median ns per edge-step")
    window, events = [], 0
    for t in range(args.steps):
        start = time.perf_counter()
        loads = protocol.step(t, graph, loads).loads
        seconds = time.perf_counter() - start
        if t > 0:  # the first step compiles
            window.append(seconds / graph.m * 1e9)
        short, events = protocol.events - events, protocol.events
        if (t + 1) % args.every == 0 or t + 1 == args.steps:
            if window:
                print(f"  {t + 2 - len(window):5d}-{t + 1:<5d} {short:9,d} {np.median(window):8.2f}")
            window = []


if __name__ == "__main__":
    main()
