"""``tokendist offline``: the off-line optimum of Ghosh et al. (1995, Sec. 6) by max-flow."""

from __future__ import annotations

from ._app import Command, command
from ._common import nonneg_int, slack_int
from ._output import print_json, progress_bar, table

__all__ = ["OfflineCommand"]


@command
class OfflineCommand(Command):
    name = "offline"
    help = "fewest steps in which any algorithm can bring every node to <= ceil(rho) + K tokens (max-flow)"
    description = ("Binary search on T over max-flows in the time-expanded network of Lemma 6.3 "
                   "(Ghosh et al. 1995). multi-port: exact; single-port: a lower bound (flow relaxation).")

    def add_arguments(self, p):
        p.add_argument("--graph", required=True, help="topology spec, e.g. torus:16x16")
        p.add_argument("--init", required=True, help="initial loads spec, e.g. point:1000")
        p.add_argument("--model", choices=("multi-port", "single-port"), default="multi-port",
                       help="communication model (default multi-port)")
        p.add_argument("--slack", type=slack_int, default=0, help="K: target max load ceil(rho) + K (default 0)")
        p.add_argument("--seed", type=nonneg_int, default=0, help="seed for random graphs and loads (default 0)")
        p.add_argument("--max-steps", type=nonneg_int, default=None, help="give up beyond this T")
        p.add_argument("--json", action="store_true", help="print one JSON object instead of a table")

    def run(self, args):
        from ..analysis._offline import offline_optimum
        from ..engine import make_loads
        from ..graphs import make_graph

        graph = make_graph(args.graph, seed=args.seed)
        loads = make_loads(args.init, graph, args.seed)
        with progress_bar(f"off-line optimum on {graph.spec} (max-flow per T)", None, enabled=not args.json) as update:
            r = offline_optimum(graph, loads, slack=args.slack, model=args.model, max_steps=args.max_steps,
                                progress=lambda checks, T: update(checks))
        payload = {"graph": graph.spec, "init": args.init, "n": graph.n, **r.to_json()}
        if args.json:
            print_json(payload)
            return 0
        table(f"off-line optimum on {graph.spec} ({args.model})", ["quantity", "value"],
              [[k, v] for k, v in payload.items()])
        return 0
