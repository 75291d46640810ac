"""``tokendist bounds``: the figures a paper predicts for an algorithm, next to a measured run."""

from __future__ import annotations

from ..analysis import BOUNDS, predict
from ..engine import PROTOCOLS, make_protocol, simulate
from ..engine._simulate import DEFAULT_MAX_STEPS
from ._app import Command, command
from ._common import add_run_arguments, dynamics_from_args
from ._output import parse_key_values, print_json, progress_bar, table

__all__ = ["BoundsCommand"]


@command
class BoundsCommand(Command):
    name = "bounds"
    help = "print an algorithm's predicted figures (papers' bounds) next to a measured run"

    def add_arguments(self, p):
        add_run_arguments(p)
        p.add_argument("--algo", required=True, help="algorithm name")
        p.add_argument("--param", action="append", default=[], metavar="KEY=VALUE", help="protocol parameter")
        p.add_argument("--no-run", action="store_true", help="only the predictions")

    def run(self, args):
        from ..analysis import _modules  # noqa: F401
        from ..engine import make_loads
        from ..graphs import make_graph

        params = parse_key_values(args.param)
        graph = make_graph(args.graph, seed=args.seed)
        if args.speeds:
            from ..engine import make_speeds
            graph = graph.with_speeds(make_speeds(args.speeds, graph, args.seed))
        loads = make_loads(args.init, graph, args.seed)
        BOUNDS.get(args.algo)
        if args.algo in PROTOCOLS.names():
            make_protocol(args.algo, params)  # every value checked once, here (c=nan was a LinAlgError)
        predicted = predict(args.algo, graph, loads, params)
        measured = None
        if not args.no_run:
            max_steps = args.max_steps if args.max_steps is not None else DEFAULT_MAX_STEPS
            with progress_bar(f"{args.algo} on {args.graph}", max_steps, enabled=not args.json) as update:
                r = simulate(graph, args.algo, loads, seed=args.seed, params=params, max_steps=max_steps,
                             until_discrepancy=args.until_discrepancy,
                             until_local_discrepancy=args.until_local_discrepancy,
                             allow_infeasible=args.allow_infeasible, dynamics=dynamics_from_args(args),
                             progress=update)
            measured = {"steps": r.steps, "stop_reason": r.stop_reason, **{f"final_{k}": v for k, v in r.final.items()},
                        "report": r.report}
        if args.json:
            print_json({"algorithm": args.algo, "graph": graph.spec, "n": graph.n, "predicted": predicted,
                        "measured": measured})
            return 0
        table(f"{args.algo} on {graph.spec}: predicted", ["quantity", "value"],
              [[k, v if not isinstance(v, (dict, list)) else str(v)] for k, v in predicted.items()])
        if measured:
            table("measured", ["quantity", "value"],
                  [[k, v] for k, v in measured.items() if not isinstance(v, (dict, list))])
        return 0
