"""``tokendist bench``: nanoseconds per edge-step of each vectorised protocol, against a naive loop."""

from __future__ import annotations

from ..experiments._bench import DEFAULT_BENCH_GRAPHS, bench
from ._app import Command, command
from ._common import parse_key_values, positive_int
from ._output import print_json, progress_bar, table

__all__ = ["BenchCommand"]


@command
class BenchCommand(Command):
    name = "bench"
    help = "time one synchronous step per edge for each vectorised protocol, with the ratio to a naive loop"

    def add_arguments(self, p):
        p.add_argument("--graphs", default=",".join(DEFAULT_BENCH_GRAPHS).replace(",1000000", ";1000000"),
                       help="graph specs separated by ';' (default: torus:1000x1000;hypercube:20;random-regular:1000000,4)")
        p.add_argument("--algos", default=None, help="comma-separated algorithms (default: every synchronous one)")
        p.add_argument("--steps", type=positive_int, default=5, help="timed steps per case (median and best reported; default 5)")
        p.add_argument("--naive-graph", default="torus:100x100", help="graph for the naive networkx reference")
        p.add_argument("--timeout", type=positive_int, default=300, help="seconds allowed per case (default 300)")
        p.add_argument("--param", action="append", default=[], metavar="KEY=VALUE",
                       help="protocol parameter for the protocols that declare it (repeatable), e.g. threads=2")
        p.add_argument("--json", action="store_true")

    def run(self, args):
        graphs = [g.strip() for g in args.graphs.replace(",1000000", ";1000000").split(";") if g.strip()]
        # Split "a;b" and also "a,b" where a comma separates whole specs (spec arguments use commas too).
        algos = [a.strip() for a in args.algos.split(",")] if args.algos else None
        with progress_bar("bench", None, enabled=not args.json) as update:
            rows, naive = bench(graphs, algos, steps=args.steps, params=parse_key_values(args.param),
                                naive_graph=args.naive_graph,
                                timeout=args.timeout, progress=update)
        if args.json:
            print_json({"naive_ns_per_edge_step": naive, "naive_graph": args.naive_graph,
                        "rows": [r.__dict__ for r in rows]})
            return 0
        table(f"one synchronous step (median and best of {args.steps}); naive networkx loop on {args.naive_graph}: "
              f"{naive:.0f} ns per edge-step",
              ["algorithm", "graph", "m", "ns / edge-step", "best ns", "CPU ns", "floor ns", "x floor",
               "x faster than naive", "bytes / edge", "of which transient", "reset s", "note"],
              [[r.algorithm, r.graph, r.m, None if r.ns_per_edge_step is None else round(r.ns_per_edge_step, 2),
                None if r.best_ns_per_edge_step is None else round(r.best_ns_per_edge_step, 2),
                None if r.cpu_ns_per_edge_step is None else round(r.cpu_ns_per_edge_step, 2),
                None if r.floor_ns_per_edge_step is None else round(r.floor_ns_per_edge_step, 2),
                None if r.ratio_vs_floor is None else round(r.ratio_vs_floor, 2),
                None if r.ratio_vs_naive is None else round(r.ratio_vs_naive),
                None if r.bytes_per_edge is None else round(r.bytes_per_edge, 1),
                None if r.transient_bytes_per_edge is None else round(r.transient_bytes_per_edge, 1),
                None if r.reset_seconds is None else round(r.reset_seconds, 2), r.note] for r in rows])
        return 0
