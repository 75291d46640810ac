"""Messages per second of the message-passing executor, against a plain-Python event heap.

Runs ``--algo`` (a message protocol, default ``perfect-tree``) on ``--graph`` from ``--init`` with
``--seed`` to the end (or ``--max-steps`` time units), ``--reps`` times each, alternating:

* ``whole run (compiled)``: :func:`tokendist.engine.simulate` on its event-driven path (what
  ``tokendist run`` does), which runs the protocol's compiled program where it has one
  (``perfect-tree``: ``protocols/perfect_tree/kernels``);
* ``compiled program``: that compiled program alone, started and run to the end (no engine);
* ``whole run (handlers)``: the same engine path on the per-node handlers (the readable reference;
  ``use_kernels = False``);
* ``whole run (sync loop)``: the same run through the engine's synchronous loop, one time unit per
  step with every check and metric over all nodes (``event_path=False``; with ``--sync-loop``);
* ``executor + handlers``: the protocol's executor alone, run to the end (no engine);
* ``plain heapq baseline``: the same messages (recorded from one run: delivery time, sender,
  receiver, tokens) pushed onto a ``heapq`` of ``(time, seq, src, dst, tokens)`` tuples and popped
  in order, moving the tokens and calling an empty handler: the floor of a Python event heap.

Prints medians (seconds of CPU time of this process, which the other processes on a shared
machine disturb less than wall time), messages per second and the ratio to the baseline, e.g.::

    python benchmarks/probes/message_executor.py --graph random-tree:3000 --reps 3

Every variant must send the recorded number of messages, or the probe stops. The compiled program
is loaded (or compiled) once before the timed runs.
"""

from __future__ import annotations

import argparse
import heapq
import statistics
import time

import numpy as np

from tokendist._random import stream
from tokendist.engine import make_loads, make_protocol, simulate
from tokendist.graphs import make_graph


def _protocol(args, graph, use_kernels=False):
    p = make_protocol(args.algo, dict(kv.split("=", 1) for kv in args.param))
    p.use_kernels = use_kernels
    p.reset(graph, make_loads(args.init, graph, args.seed), stream(args.seed, "protocol"))
    return p


def _record(args, graph):
    """The run's messages as ``(delivery time, src, dst, tokens)``, in the order they were sent."""
    p = _protocol(args, graph)
    ex, sent = p.executor, []
    send = ex.send

    def recording_send(src, dst, message, tokens=0, on_delivery=None):
        when = send(src, dst, message, tokens, on_delivery)
        sent.append((when, src, dst, int(tokens)))
        return when

    ex.send = recording_send
    ex.run(until=args.max_steps)
    return sent


def _baseline(sent, n):
    heap, loads = [], [0] * n

    def handler(dst, src, tokens):  # what a handler that does nothing costs
        return None

    for seq, (when, src, dst, tokens) in enumerate(sent):
        loads[src] -= tokens
        heapq.heappush(heap, (when, seq, src, dst, tokens))
    while heap:
        _, _, src, dst, tokens = heapq.heappop(heap)
        loads[dst] += tokens
        handler(dst, src, tokens)
    return len(sent)


def _executor(args, graph):
    p = _protocol(args, graph)
    p.executor.run(until=args.max_steps)
    return p.executor.messages


def _compiled(args, graph):
    p = _protocol(args, graph, use_kernels=True)
    kr = p.kernel_run
    kr.start()
    kr.advance(args.max_steps)
    return kr.messages


def _whole(args, graph, event_path, use_kernels=True):
    p = make_protocol(args.algo, dict(kv.split("=", 1) for kv in args.param))
    p.use_kernels = use_kernels
    r = simulate(graph, p, args.init, seed=args.seed, max_steps=args.max_steps, event_path=event_path)
    return r.messages


def main(argv=None) -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--graph", default="random-tree:3000")
    p.add_argument("--algo", default="perfect-tree")
    p.add_argument("--init", default="random:0..9")
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--param", action="append", default=[], metavar="KEY=VALUE")
    p.add_argument("--max-steps", type=int, default=10**7)
    p.add_argument("--reps", type=int, default=3)
    p.add_argument("--sync-loop", action="store_true", help="also time the engine's synchronous loop")
    args = p.parse_args(argv)
    graph = make_graph(args.graph, seed=args.seed)
    sent = _record(args, graph)
    compiled = getattr(_protocol(args, graph, use_kernels=True), "kernel_run", None) is not None
    variants = {}
    if compiled:
        _compiled(args, graph)  # load (or compile) the kernels outside the timed runs
        variants["whole run (compiled)"] = lambda: _whole(args, graph, None)
        variants["compiled program"] = lambda: _compiled(args, graph)
    variants["whole run (handlers)"] = lambda: _whole(args, graph, None, use_kernels=False)
    if args.sync_loop:
        variants["whole run (sync loop)"] = lambda: _whole(args, graph, False, use_kernels=False)
    variants["executor + handlers"] = lambda: _executor(args, graph)
    variants["plain heapq baseline"] = lambda: _baseline(sent, graph.n)
    times = {k: [] for k in variants}
    for _ in range(args.reps):  # alternated, so that a busy moment hits every variant alike
        for name, fn in variants.items():
            c0 = time.process_time()
            count = fn()
            times[name].append(time.process_time() - c0)
            if count != len(sent):
                raise SystemExit(f"{name}: {count} messages, expected {len(sent)}")
    print(f"{args.algo} on {args.graph} (n={graph.n:,}): {len(sent):,} messages, "
          f"last delivery at time {max((s[0] for s in sent), default=0):,}; medians of {args.reps}, CPU seconds")
    base = statistics.median(times["plain heapq baseline"])
    print(f"{'variant':<24}{'seconds':>10}{'messages/s':>14}{'x baseline':>12}")
    for name, ts in times.items():
        med = statistics.median(ts)
        rate = len(sent) / med if med > 0 else float("inf")
        print(f"{name:<24}{med:>10.3f}{rate:>14,.0f}{med / base if base > 0 else np.inf:>12.2f}")


if __name__ == "__main__":
    main()
