"""``tokendist run`` and ``tokendist algos``."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np

from .._files import atomic_dir, atomic_path
from ..engine import PROTOCOLS, make_protocol, simulate
from ..engine._simulate import DEFAULT_MAX_STEPS
from ._app import Command, command
from ._common import add_run_arguments, check_outputs, dynamics_from_args
from ._output import fmt, parse_key_values, print_json, progress_bar, table

__all__ = ["RunCommand", "AlgosCommand"]


def write_run_outputs(result, out: Path) -> list[str]:
    """Write the per-step trace (CSV), the summary JSON and a plot into ``out``.

    The three files are written into a temporary folder and moved into ``out`` only once all are
    complete (:func:`tokendist._files.atomic_dir`): an interrupted command leaves no partial set.
    """
    from ..plotting import plot_run
    from ._output import to_jsonable

    with atomic_dir(out) as tmp:
        cols = list(result.trace)
        data = np.column_stack([result.trace[c].astype(float) for c in cols])
        np.savetxt(tmp / "trace.csv", data, delimiter=",", header=",".join(cols), comments="", fmt="%.10g")
        (tmp / "summary.json").write_text(json.dumps(to_jsonable(result.to_json()), indent=2) + "\n")
        plot_run(result, tmp / "run.png")
    return [str(out / "trace.csv"), str(out / "summary.json"), str(out / "run.png")]


def save_loads(path: Path, loads) -> None:
    """Write the loads one per line, atomically (a temporary name, then renamed over ``path``)."""
    with atomic_path(path) as tmp:
        np.savetxt(tmp, loads, fmt="%d" if loads.dtype.kind in "iu" else "%.17g")


@command
class RunCommand(Command):
    name = "run"
    help = "run one protocol on one graph and report what happened"
    description = ("Run one protocol on one network from one initial distribution, with the engine's "
                   "checks (tokens conserved, no node sends more than it holds).")

    def add_arguments(self, p):
        add_run_arguments(p)
        p.add_argument("--algo", required=True, help="algorithm name (see 'tokendist algos')")
        p.add_argument("--param", action="append", default=[], metavar="KEY=VALUE",
                       help="protocol parameter (repeatable)")
        p.add_argument("--save-loads", type=Path, default=None,
                       help="write the final loads, one per line (tokens still in transit when "
                       "a message-passing run stops are not in them: the summary's 'in transit' counts them)")
        p.add_argument("--out", type=Path, default=None, help="folder for trace.csv, summary.json and run.png")

    def run(self, args):
        max_steps = args.max_steps if args.max_steps is not None else DEFAULT_MAX_STEPS
        check_outputs(args.out, args.save_loads)
        protocol = make_protocol(args.algo, parse_key_values(args.param))
        with progress_bar(f"{args.algo} on {args.graph}", max_steps, enabled=not args.json) as update:
            result = simulate(
                args.graph, protocol, args.init, seed=args.seed,
                max_steps=max_steps, until_discrepancy=args.until_discrepancy,
                until_local_discrepancy=args.until_local_discrepancy, record_every=args.record_every,
                allow_infeasible=args.allow_infeasible, check=args.check, dynamics=dynamics_from_args(args),
                speeds=args.speeds, progress=update)
        files = []
        if args.save_loads is not None:
            save_loads(args.save_loads, result.loads)
            files.append(str(args.save_loads))
        if args.out is not None:
            files += write_run_outputs(result, args.out)
        if args.json:
            payload = result.to_json()
            if files:
                payload["files"] = files
            print_json(payload)
            return 0
        g = result.graph
        table(f"{result.algorithm} on {g.spec} (n={g.n:,}, m={g.m:,}), seed {result.seed}",
              ["metric", "initial", "final"],
              [[k, result.initial[k], result.final[k]] for k in result.initial])
        rows = [["steps", result.steps], ["stop reason", result.stop_reason], ["tokens", result.tokens],
                *([["in transit", result.in_transit]] if result.in_transit else []),
                ["tokens moved", result.tokens_moved], ["messages", result.messages],
                ["infeasible steps", result.infeasible_steps], ["seconds", round(result.seconds, 3)]]
        if result.cycle_length:
            rows.append(["cycle length", result.cycle_length])
        choice = getattr(protocol, "kernel_choice", None)  # threads=auto: which kernel ran (same results)
        if choice is not None and sum(choice.calls):
            rows.append(["threads=auto", f"threaded kernel in {choice.calls[1]} of {sum(choice.calls)} steps"])
        for k, v in result.report.items():
            if isinstance(v, (int, float, str, bool, np.generic)):
                rows.append([k, v])
        table("run", ["", "value"], rows)
        for f in files:
            print(f"wrote {f}")
        return 0


@command
class AlgosCommand(Command):
    name = "algos"
    help = "list every registered protocol with its paper, model, requirements and parameters"

    def add_arguments(self, p):
        p.add_argument("--json", action="store_true", help="print JSON")

    def run(self, args):
        infos = [cls.describe() for _, cls in PROTOCOLS.items()]
        if args.json:
            print_json(infos)
            return 0
        rows = []
        for d in infos:
            params = ", ".join(f"{p['name']}={p['default']}" for p in d["params"]) or "-"
            rows.append([d["name"], d["paper"], d["model"], ", ".join(d["requires"]) or "-",
                         fmt(d["randomized"]), params])
        table("registered protocols", ["name", "paper", "model", "requires", "random", "parameters"], rows)
        return 0
