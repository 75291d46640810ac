"""``tokendist bounds``: each paper bound for an algorithm next to a measured run, held or not."""

from __future__ import annotations

from ..analysis import BOUNDS, predict
from ..analysis._bound_checks import bound_tables
from ..engine import PROTOCOLS, make_protocol, simulate
from ..errors import InfeasibleStepError
from ..experiments.defaults import DEFAULT_MAX_STEPS
from ._app import Command, command
from ._common import add_run_arguments, dynamics_from_args
from ._layout import Col, Group, print_fitted, terminal_width
from ._output import fmt, parse_key_values, print_json, progress_bar

__all__ = ["BoundsCommand"]

_HELD = {True: "held", False: "DID NOT HOLD", None: "-"}
_KIND = {"guarantee": "proved", "guarantee (w.h.p.)": "proved w.h.p.", "order, constant 1": "order",
         "lower bound": "lower bound"}


def _value(x) -> str:
    if isinstance(x, float):
        return fmt(round(x, 4)) if abs(x) >= 1e-3 or x == 0 else f"{x:.3g}"
    return fmt(x)


@command
class BoundsCommand(Command):
    name = "bounds"
    help = "each paper bound for an algorithm next to a measured run: predicted, measured, held or not"

    def add_arguments(self, p):
        add_run_arguments(p)
        p.add_argument("--algo", required=True, help="algorithm name")
        p.add_argument("--param", action="append", default=[], metavar="KEY=VALUE", help="protocol parameter")
        p.add_argument("--no-run", action="store_true", help="only the predictions")
        p.add_argument("--wide", action="store_true", help="every column at full width, whatever the terminal")

    def run(self, args):
        from ..analysis import _modules  # noqa: F401
        from ..engine import make_loads
        from ..graphs import make_graph

        params = parse_key_values(args.param)
        graph = make_graph(args.graph, seed=args.seed)
        if args.speeds is not None:  # '' is a bad spec, not 'no speeds'
            from ..engine import make_speeds
            graph = graph.with_speeds(make_speeds(args.speeds, graph, args.seed))
        loads = make_loads(args.init, graph, args.seed)
        BOUNDS.get(args.algo)
        if args.algo in PROTOCOLS.names():
            make_protocol(args.algo, params)  # every value checked once, here (c=nan was a LinAlgError)
        predicted = predict(args.algo, graph, loads, params)
        measured, run, stopped = None, None, None
        if not args.no_run:
            max_steps = args.max_steps if args.max_steps is not None else DEFAULT_MAX_STEPS
            try:
                with progress_bar(f"{args.algo} on {args.graph}", max_steps, enabled=not args.json) as update:
                    run = simulate(graph, args.algo, loads, seed=args.seed, params=params, max_steps=max_steps,
                                   until_discrepancy=args.until_discrepancy,
                                   until_local_discrepancy=args.until_local_discrepancy,
                                   allow_infeasible=args.allow_infeasible, dynamics=dynamics_from_args(args),
                                   progress=update)
            except InfeasibleStepError as exc:
                # The predictions do not need the run: keep them, say why nothing was measured.
                stopped = str(exc).split(" (pass")[0] + " (--allow-infeasible lets it go on)"
            if run is not None:
                measured = {"steps": run.steps, "stop_reason": run.stop_reason,
                            **{f"final_{k}": v for k, v in run.final.items()}, "report": run.report}
        tables = bound_tables(args.algo, predicted, run)
        if args.json:
            print_json({"algorithm": args.algo, "graph": graph.spec, "n": graph.n, "predicted": predicted,
                        "measured": measured, "stopped": stopped, "bounds": [t.to_json() for t in tables]})
            return 0
        from rich.console import Console

        console = Console(width=terminal_width(), highlight=False)
        head = f"bounds: {args.algo} on {graph.spec} (n={graph.n:,}), init {args.init}, seed {args.seed}"
        if run is not None:
            head += f"; the run: {run.steps:,} steps, {run.stop_reason}"
        console.print(head, markup=False)
        if stopped:
            console.print(f"no measurement: {stopped}", markup=False)
        for t in tables:
            rows = t.rows
            console.print()
            if rows:
                notes = list(dict.fromkeys(r.note for r in rows if r.note))
                marks = [_HELD[r.held] + (f" [{notes.index(r.note) + 1}]" if r.note else "") for r in rows]
                print_fitted(t.title, Col("quantity", [r.quantity for r in rows], justify="left", wrap=True),
                             [Group("", [Col("predicted", [_value(r.predicted) for r in rows]),
                                         Col("measured", [_value(r.measured) for r in rows]),
                                         Col("verdict", marks, justify="left"),
                                         Col("kind", [_KIND.get(r.kind, r.kind) for r in rows], justify="left",
                                             wrap=True)])],
                             wide=args.wide, notes=[f"[{i + 1}] {n}" for i, n in enumerate(notes)])
            else:
                console.print(t.title, markup=False)
            if t.constants:
                console.print("constants: " + "; ".join(f"{k} = {_value(v)}" for k, v in t.constants.items()),
                              markup=False)
        console.print("\nverdict: 'held' when measured <= predicted (>= for a lower bound: no protocol of the model "
                      "does better). kind: 'proved' (for every run, or w.h.p.); 'order': an O(.) or Theta(.) "
                      "expression evaluated with constant 1, a shape rather than a guarantee.", markup=False)
        return 0
