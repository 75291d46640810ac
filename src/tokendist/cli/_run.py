"""``tokendist run`` and ``tokendist algos``."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np

from .._files import atomic_dir, atomic_path
from ..engine import PROTOCOLS, make_protocol, simulate
from ..engine._injection import INJECT_SPEC_HELP, parse_injection
from ..engine.mpi import PARTITIONS, mpi_world
from ..errors import TokendistError
from ..experiments import Scenario
from ..experiments._background import BACKGROUND_ENV, compile_later
from ..experiments.defaults import DEFAULT_MAX_STEPS
from ..kernels._choice import avoided_compiling
from ._app import Command, command
from ._common import add_run_arguments, check_outputs, dynamics_from_args, path_arg
from ._layout import Col, Group, print_fitted
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


def run_header(args, protocol, max_steps) -> str:
    """One line with everything that decides the run, defaults included (the same defaults as compare)."""
    given = parse_key_values(args.param)
    params = ", ".join(f"{k}={v}" + ("" if k in given else " (default)") for k, v in protocol.options.items())
    infeasible = "recorded, the run goes on" if args.allow_infeasible else "stop the run"
    inject = f"; injection {args.inject}" if args.inject else ""
    return (f"run: {protocol.name} on {args.graph}, init {args.init}; seed {args.seed}, max steps {max_steps:,}; "
            f"infeasible steps {infeasible}{inject}; parameters: {params or 'none'}")


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
        p.add_argument("--inject", default=None, metavar="SPEC",
                       help="tokens arriving and leaving every step: " + INJECT_SPEC_HELP
                            + " (see docs/guide/dynamic-load.md)")
        p.add_argument("--save-loads", type=path_arg, default=None,
                       help="write the final loads, one per line (tokens still in transit when "
                       "a message-passing run stops are not in them: the summary's 'in transit' counts them)")
        p.add_argument("--out", type=path_arg, default=None, help="folder for trace.csv, summary.json and run.png")
        p.add_argument("--backend", choices=("local", "mpi"), default="local",
                       help="local: this process; mpi: the graph partitioned over the ranks of 'mpiexec -n K' "
                            "(same results; rank 0 prints and writes)")
        p.add_argument("--partition", choices=PARTITIONS, default="contiguous",
                       help="with --backend mpi: contiguous node ranges (default) or metis")

    def run(self, args):
        if args.backend != "mpi":
            if args.partition != "contiguous":
                raise TokendistError("--partition needs --backend mpi")
            return self._run(args, root=True)
        root = mpi_world().Get_rank() == 0
        try:
            return self._run(args, root=root)
        except TokendistError:
            if root:
                raise
            return 2  # every rank meets the same error; rank 0 alone says it

    def _run(self, args, root):
        max_steps = args.max_steps if args.max_steps is not None else DEFAULT_MAX_STEPS
        if root:
            check_outputs(args.out, args.save_loads)
        protocol = make_protocol(args.algo, parse_key_values(args.param))
        injection = parse_injection(args.inject) if args.inject is not None else None
        with progress_bar(f"{args.algo} on {args.graph}", max_steps, enabled=root and not args.json) as update:
            result = simulate(
                args.graph, protocol, args.init, seed=args.seed,
                max_steps=max_steps, until_discrepancy=args.until_discrepancy,
                until_local_discrepancy=args.until_local_discrepancy, record_every=args.record_every,
                allow_infeasible=args.allow_infeasible, check=args.check, dynamics=dynamics_from_args(args),
                speeds=args.speeds, injection=injection, progress=update, backend=args.backend,
                partition=args.partition)
        if not root:
            return 0
        pid = self._compile_later(args, result, max_steps)
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
            payload["compiling_later"] = {"protocols": [args.algo], "pid": pid} if pid is not None else None
            print_json(payload)
            return 0
        g = result.graph
        print(run_header(args, protocol, max_steps))
        table(f"{result.algorithm} on {g.spec} (n={g.n:,}, m={g.m:,}), seed {result.seed}",
              ["metric", "initial", "final"],
              [[k, result.initial[k], result.final[k]] for k in result.initial])
        rows = [["steps", result.steps], ["stop reason", result.stop_reason], ["tokens", result.tokens],
                *([["in transit", result.in_transit]] if result.in_transit else []),
                ["tokens moved", result.tokens_moved], ["messages", result.messages],
                ["infeasible steps", result.infeasible_steps], ["seconds", round(result.seconds, 3)]]
        if result.cycle_length:
            rows.append(["cycle length", result.cycle_length])
        for variant, count in result.variants.items():  # which kernel ran (tokendist.kernels._report)
            rows.append(["variant", f"{variant}: {count} steps"])
        if result.ranks is not None:
            rows.append(["ranks", f"{result.ranks['count']} ({result.ranks['partition']}, edge cut "
                                  f"{result.ranks['edge_cut']:,})"])
        if result.stream is not None:
            inj = result.stream["injection"]
            rows += [["injected", inj["injected"]], ["consumed", inj["consumed"]]]
            rows += [[k.replace("_", " "), v] for k, v in result.stream.items() if k != "injection"]
        for k, v in result.report.items():
            if isinstance(v, (int, float, str, bool, np.generic)):
                rows.append([k, v])
        table("run", ["", "value"], rows)
        for f in files:
            print(f"wrote {f}")
        if pid is not None:
            print(f"the run took the numpy reference instead of compiling its kernels; compiling them now in the "
                  f"background at idle priority, once per install, for the next runs (process {pid}; "
                  f"{BACKGROUND_ENV}=0 turns this off)")
        return 0

    @staticmethod
    def _compile_later(args, result, max_steps):
        """A small run on the reference instead of compiling: its kernels compile after the command
        (tokendist.experiments._background), for a run the scenario form can say again."""
        if args.backend != "local" or args.mobility is not None or not avoided_compiling(result.variants):
            return None
        scenario = Scenario("run", args.graph, args.init, seed=args.seed, max_steps=max_steps, algos=[args.algo],
                            params={args.algo: parse_key_values(args.param)}, speeds=args.speeds,
                            edge_failure=args.edge_failure, allow_infeasible=args.allow_infeasible,
                            record_every=args.record_every, inject=args.inject)
        return compile_later(scenario, [args.algo])


@command
class AlgosCommand(Command):
    name = "algos"
    help = "list every registered protocol (or describe one: tokendist algos NAME)"
    description = ("With no name, one row per protocol: paper, model, requirements, whether it is randomised "
                   "and real-valued, parameters with defaults. With a name, everything about that protocol, "
                   "each parameter with its default and help.")

    def add_arguments(self, p):
        p.add_argument("name", nargs="?", default=None, help="a protocol name: describe it in full")
        p.add_argument("--wide", action="store_true", help="every column in one table, whatever the terminal's width")
        p.add_argument("--json", action="store_true", help="print JSON")

    def run(self, args):
        if args.name is not None:
            return self._one(PROTOCOLS.get(args.name).describe(), args)
        infos = [cls.describe() for _, cls in PROTOCOLS.items()]
        if args.json:
            print_json(infos)
            return 0
        key = Col("name", [d["name"] for d in infos], justify="left")
        groups = [
            Group("what", [Col("paper", [d["paper"] for d in infos], justify="left", wrap=True),
                           Col("model", [d["model"] for d in infos], justify="left"),
                           Col("requires", [", ".join(d["requires"]) or "-" for d in infos], justify="left",
                               wrap=True),
                           Col("rand.", [fmt(d["randomized"]) for d in infos], justify="left"),
                           Col("real", [fmt(d["divisible"]) for d in infos], justify="left"),
                           Col("dyn.", [fmt(d["dynamic"]) for d in infos], justify="left")]),
            Group("parameters", [Col("parameters (default)", [
                ", ".join(f"{p['name']}={p['default']}" for p in d["params"]) or "-" for d in infos],
                justify="left", wrap=True)]),
        ]
        print_fitted("registered protocols", key, groups, wide=args.wide,
                     notes=["rand.: randomised rule; real: real-valued loads (fractions of a token, never in a "
                            "compare verdict); dyn.: runs on a network that changes every step (--edge-failure, "
                            "--mobility). 'tokendist algos NAME' gives each parameter's help."])
        return 0

    @staticmethod
    def _one(d, args):
        if args.json:
            print_json(d)
            return 0
        rows = [("name", d["name"]), ("title", d["title"]), ("paper", d["paper"]), ("model", d["model"]),
                ("requires", ", ".join(d["requires"]) or "-"), ("randomised", fmt(d["randomized"])),
                ("real-valued", fmt(d["divisible"])), ("may overdraw", fmt(d["may_go_negative"])),
                ("dynamic networks", fmt(d["dynamic"]) + ("" if d["dynamic"] or not d.get("static_reason")
                                                           else f": {d['static_reason']}")),
                ("per-node rule", fmt(d["node_rule"])), ("summary", d["summary"])]
        print_fitted(f"protocol {d['name']}", Col("", [r[0] for r in rows], justify="left"),
                     [Group("", [Col("", [r[1] for r in rows], justify="left", wrap=True)])], wide=args.wide)
        if d["params"]:
            print_fitted("parameters (--param KEY=VALUE)", Col("parameter", [p["name"] for p in d["params"]],
                                                               justify="left"),
                         [Group("", [Col("default", [str(p["default"]) for p in d["params"]], justify="left"),
                                     Col("help", [p["help"] + (f" (one of: {', '.join(map(str, p['choices']))})"
                                                               if p.get("choices") else "")
                                                  for p in d["params"]], justify="left", wrap=True)])],
                         wide=args.wide)
        return 0
