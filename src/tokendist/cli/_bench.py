"""``tokendist bench``: nanoseconds per edge-step of each vectorised protocol, against a naive loop."""

from __future__ import annotations

import argparse

from ..engine import PROTOCOLS, make_protocol, resolve_protocol
from ..errors import TokendistError
from ..experiments._bench import DEFAULT_BENCH_GRAPHS, bench
from ._app import Command, command
from ._common import name_list, nonneg_int, parse_key_values, positive_int
from ._output import print_json, progress_bar, table

__all__ = ["BenchCommand", "graph_list"]


#: Longest --timeout accepted: a week. Beyond about 9e9 s the child-process wait overflows the C
#: time type (``--timeout 10**20`` was an OverflowError).
MAX_TIMEOUT = 7 * 24 * 3600


def timeout_seconds(text: str) -> int:
    """``--timeout``: a positive integer of seconds, at most :data:`MAX_TIMEOUT`."""
    v = positive_int(text)
    if v > MAX_TIMEOUT:
        raise argparse.ArgumentTypeError(f"expected at most {MAX_TIMEOUT} seconds (a week), got {text!r}")
    return v


def graph_list(text: str) -> list[str]:
    """The specs of ``--graphs``: separated by ';' (a spec's own arguments use commas)."""
    if not text.strip():
        raise TokendistError(f"bench: --graphs {text!r} names no graph (specs are separated by ';')")
    return name_list(text, "--graphs", ";")


@command
class BenchCommand(Command):
    name = "bench"
    help = "time one synchronous step per edge for each vectorised protocol, with the ratio to a naive loop"

    def add_arguments(self, p):
        p.add_argument("--graphs", default=";".join(DEFAULT_BENCH_GRAPHS),
                       help=f"graph specs separated by ';' (default: {';'.join(DEFAULT_BENCH_GRAPHS)})")
        p.add_argument("--algos", default=None, help="comma-separated algorithms (default: every synchronous one)")
        p.add_argument("--steps", type=positive_int, default=5, help="timed steps per case (median and best reported; default 5)")
        p.add_argument("--skip", type=nonneg_int, default=0,
                       help="untimed steps after the warm-up step, before the timed ones (default 0): a later "
                            "stretch of the run, e.g. --skip 140 for sos-iou's many short nodes")
        p.add_argument("--naive-graph", default="torus:100x100", help="graph for the naive networkx reference")
        p.add_argument("--timeout", type=timeout_seconds, default=300, help="seconds allowed per case (default 300)")
        p.add_argument("--param", action="append", default=[], metavar="KEY=VALUE",
                       help="protocol parameter for the protocols that declare it (repeatable), e.g. threads=2")
        p.add_argument("--json", action="store_true")

    def run(self, args):
        graphs = graph_list(args.graphs)
        algos = name_list(args.algos, "--algos") if args.algos is not None else None
        for name in algos or ():
            resolve_protocol(name)  # an unknown name is a one-line error now, not a skipped row per graph
        params = parse_key_values(args.param)
        # Each value checked once, here, by every protocol that declares the parameter: a bad
        # value is one line and exit 2, not a skipped row per case (bench --param threads=abc).
        for name in algos or PROTOCOLS.names():
            declared = {p.name for p in resolve_protocol(name).params}
            make_protocol(name, {k: v for k, v in params.items() if k in declared})
        unused = sorted(k for k in params if not any(k in {p.name for p in resolve_protocol(a).params}
                                                     for a in (algos or PROTOCOLS.names())))
        if unused:
            raise TokendistError(f"--param {unused[0]}: no protocol benchmarked declares this parameter")
        with progress_bar("bench", None, enabled=not args.json) as update:
            rows, naive = bench(graphs, algos, steps=args.steps, params=params,
                                naive_graph=args.naive_graph, skip=args.skip,
                                timeout=args.timeout, progress=update)
        if args.json:
            print_json({"naive_ns_per_edge_step": naive, "naive_graph": args.naive_graph, "steps": args.steps,
                        "skip": args.skip,
                        "rows": [r.__dict__ for r in rows]})
            return 0
        timed = f"median and best of {args.steps}"
        if args.skip:
            timed += f": steps {args.skip + 1}-{args.skip + args.steps} of the run"
        table(f"one synchronous step ({timed}); naive networkx loop on {args.naive_graph}: "
              f"{naive:.0f} ns per edge-step",
              ["algorithm", "graph", "m", "ns / edge-step", "best ns", "CPU ns", "floor ns", "x floor",
               "engine ns", "metrics ns", "run / step", "recorded", "x faster than naive", "bytes / edge", "of which transient", "reset s",
               "variant", "note"],
              [[r.algorithm, r.graph, r.m, None if r.ns_per_edge_step is None else round(r.ns_per_edge_step, 2),
                None if r.best_ns_per_edge_step is None else round(r.best_ns_per_edge_step, 2),
                None if r.cpu_ns_per_edge_step is None else round(r.cpu_ns_per_edge_step, 2),
                None if r.floor_ns_per_edge_step is None else round(r.floor_ns_per_edge_step, 2),
                None if r.ratio_vs_floor is None else round(r.ratio_vs_floor, 2),
                None if r.engine_ns_per_edge_step is None else round(r.engine_ns_per_edge_step, 2),
                None if r.metrics_ns_per_edge_step is None else round(r.metrics_ns_per_edge_step, 2),
                None if r.run_over_step is None else round(r.run_over_step, 2),
                None if r.recorded_run_over_step is None else round(r.recorded_run_over_step, 2),
                None if r.ratio_vs_naive is None else round(r.ratio_vs_naive),
                None if r.bytes_per_edge is None else round(r.bytes_per_edge, 1),
                None if r.transient_bytes_per_edge is None else round(r.transient_bytes_per_edge, 1),
                None if r.reset_seconds is None else round(r.reset_seconds, 2), r.variant, r.note] for r in rows])
        return 0
