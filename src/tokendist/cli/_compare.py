"""``tokendist compare``: every applicable protocol side by side (the main job)."""

from __future__ import annotations

import csv
import json
import re
import threading
from pathlib import Path

from .._files import atomic_dir
from ..engine._injection import INJECT_SPEC_HELP
from ..errors import TokendistError
from ..experiments import compare, default_scenario, load_scenario
from ..experiments._background import BACKGROUND_ENV, avoided_rows, compile_later
from ..experiments._workers import default_workers
from ._app import Command, command
from ._common import check_outputs, name_list, nonneg_int, path_arg, positive_int, probability, slack_int
from ._compare_view import render
from ._output import print_json, progress_bar, to_jsonable

__all__ = ["CompareCommand"]


_LEVEL = re.compile(r"^[+]?([0-9]+|[0-9]*[.][0-9]+|[0-9]+[.])$")  # ASCII: int() took '1_0' and '\u0664'


def _levels(text: str) -> list:
    items = [x.strip() for x in text.split(",")]
    if not all(_LEVEL.match(x) for x in items):
        raise TokendistError(f"--levels expects numbers >= 0 separated by commas (e.g. 10,2,1), got {text!r}")
    return [float(x) if "." in x else int(x) for x in items]


class _Preload:
    """Imports matplotlib on a thread while the runs go on (this process mostly waits for its workers).

    Started from the first progress report, when the workers have been forked: a fork never copies
    a half-done import.
    """

    def __init__(self):
        self.thread = None

    def start(self):
        if self.thread is None:
            self.thread = threading.Thread(target=_import_plotting, daemon=True)
            self.thread.start()


def _import_plotting():
    try:
        import matplotlib.backends.backend_agg  # noqa: F401  (what compare.png needs; the plot imports it again)
        import matplotlib.figure  # noqa: F401
        from PIL import Image  # matplotlib writes the PNG with Pillow, which loads its format plugins on first use

        Image.preinit()
    except ImportError:  # the plot says so in one line when it is drawn
        pass


@command
class CompareCommand(Command):
    name = "compare"
    help = "run every applicable protocol on the same graph, loads and seed; table and overlay plot"
    description = ("Compare protocols on one scenario. With no options, runs the embedded default scenario "
                   "(torus:16x16, each node 0..200 tokens). Writes compare.png, compare.csv and compare.json "
                   "into --out (default ./tokendist-compare).")

    def add_arguments(self, p):
        p.add_argument("--scenario", type=path_arg, default=None, help="a scenario TOML file (see docs/guide/compare-and-scenarios.md)")
        p.add_argument("--graph", default=None, help="topology spec (overrides the scenario)")
        p.add_argument("--init", default=None, help="initial distribution spec (overrides the scenario)")
        p.add_argument("--algos", default=None, help="comma-separated algorithm names (default: every applicable one)")
        p.add_argument("--seed", type=nonneg_int, default=None)
        p.add_argument("--max-steps", type=nonneg_int, default=None)
        p.add_argument("--levels", default=None, help="discrepancy levels to time, e.g. 100,10,2,1")
        p.add_argument("--param", action="append", default=[], metavar="ALGO.KEY=VALUE",
                       help="a parameter of one algorithm, e.g. threshold1.spanning_tree=bfs (repeatable)")
        p.add_argument("--speeds", default=None, help="node speeds: uniform:A..B or file:PATH")
        p.add_argument("--edge-failure", type=probability, default=None, help="edge failure probability per step")
        p.add_argument("--inject", default=None, metavar="SPEC",
                       help="tokens arriving and leaving every step, the same stream for every protocol: "
                            + INJECT_SPEC_HELP)
        p.add_argument("--allow-infeasible", action="store_true", help="let infeasible rules run with negative loads")
        p.add_argument("--record-every", type=positive_int, default=None, help="record metrics every K steps")
        p.add_argument("--offline", type=slack_int, default=None, metavar="K",
                       help="also compute the off-line optimum (multi-port, max-flow) for max load <= ceil(rho)+K "
                            "and show each protocol's time to that level as a multiple of it")
        p.add_argument("--workers", type=positive_int, default=None,
                       help="processes running the protocols side by side (default: one per core); the rows "
                            "are the same for any number, their wall-time columns are not (--workers 1 to time "
                            "each run alone)")
        p.add_argument("--out", type=path_arg, default=None, help="output folder (default tokendist-compare)")
        p.add_argument("--no-files", action="store_true", help="write no files")
        p.add_argument("--wide", action="store_true",
                       help="every column in one table, whatever the terminal's width")
        p.add_argument("--json", action="store_true", help="print JSON (the verdict included)")

    def run(self, args):
        sc = load_scenario(args.scenario) if args.scenario else default_scenario()
        for key in ("graph", "init", "seed", "max_steps", "speeds", "edge_failure", "record_every", "inject"):
            if getattr(args, key) is not None:
                setattr(sc, key, getattr(args, key))
        if args.graph is not None and args.scenario is None:
            sc.name = "custom"
        if args.algos is not None:
            sc.algos = name_list(args.algos, "--algos")
        if args.levels is not None:
            sc.levels = _levels(args.levels)
        if args.allow_infeasible:
            sc.allow_infeasible = True
        if args.offline is not None:
            sc.offline_slack = args.offline
        given = set()  # a --param overrides the scenario's value, but not another --param
        for item in args.param:
            key, sep, value = item.partition("=")
            algo, dot, pname = key.partition(".")
            if not sep or not dot:
                raise TokendistError(f"--param expects ALGO.KEY=VALUE, got {item!r}")
            if (algo.strip(), pname.strip()) in given:
                raise TokendistError(f"--param: {algo.strip()}.{pname.strip()} given twice")
            given.add((algo.strip(), pname.strip()))
            sc.params.setdefault(algo.strip(), {})[pname.strip()] = value.strip()
        sc.validate()
        if args.no_files and args.out is not None:  # the folder would be silently left unwritten
            raise TokendistError("choose --out or --no-files, not both")
        if args.out is None:
            args.out = Path("tokendist-compare")
        if not args.no_files:
            check_outputs(args.out)
        with progress_bar("compare", None, enabled=not args.json) as update:
            workers = args.workers if args.workers is not None else default_workers()
            preload = None if args.no_files else _Preload()

            def progress(i, total, name):
                if preload is not None:
                    preload.start()
                update(i, total)

            result = compare(sc, progress=progress, workers=workers, compiling=lambda on: update(None, compiling=on))
        files = [] if args.no_files else self._write(result, args.out)
        # Runs that took the reference instead of compiling (a small run on a cold cache):
        # their kernels compile now at idle priority, for the next run (experiments._background).
        later = avoided_rows(result.rows)
        pid = compile_later(result.scenario, later)
        if args.json:
            payload = result.to_json()
            payload["files"] = files
            payload["compiling_later"] = {"protocols": later, "pid": pid} if pid is not None else None
            print_json(payload)
            return 0
        render(result, wide=args.wide)
        for f in files:
            print(f"wrote {f}")
        if pid is not None:
            print(f"{len(later)} runs took their reference step instead of compiling their kernels; compiling "
                  f"them now in the background at idle priority, once per install, for the next runs "
                  f"(process {pid}; {BACKGROUND_ENV}=0 turns this off)")
        return 0

    @staticmethod
    def _write(result, out: Path) -> list[str]:
        # Into a temporary folder, then moved into out: an interrupted write leaves no partial set.
        with atomic_dir(out) as tmp:
            files = CompareCommand._write_files(result, tmp)
        return [str(out / Path(f).name) for f in files]

    @staticmethod
    def _write_files(result, out: Path) -> list[str]:
        from ..plotting import plot_compare

        runs = [r.result for r in result.rows if r.status == "ok"]
        files = []
        if runs:
            g = result.graph
            plot_compare(runs, out / "compare.png",
                         title=f"{g.spec}, {result.scenario.init}, seed {result.scenario.seed}")
            files.append(str(out / "compare.png"))
        levels = result.scenario.levels
        with open(out / "compare.csv", "w", newline="") as fh:
            w = csv.writer(fh)
            w.writerow(["algorithm", "status", "comparable", "steps", "stop_reason",
                        *[f"steps_to_{lv}" for lv in levels], *[f"settled_at_{lv}" for lv in levels],
                        "final_discrepancy", "final_local_discrepancy", "tokens_moved", "messages",
                        "infeasible_steps", "lowest_load", "step_seconds", "steps_to_target", "offline_ratio", "reason"])
            for r in result.rows:
                clock = None if r.result is None or r.result.clock is None else round(float(r.result.clock[-1]), 4)
                w.writerow([r.algorithm, r.status, r.comparable, r.steps, r.stop_reason,
                            *[r.steps_to_level.get(lv) for lv in levels], *[r.settled_at_level.get(lv) for lv in levels],
                            r.final_discrepancy, r.final_local_discrepancy, r.tokens_moved, r.messages,
                            r.infeasible_steps, r.lowest_load, clock, r.steps_to_target, r.offline_ratio, r.reason])
        files.append(str(out / "compare.csv"))
        (out / "compare.json").write_text(json.dumps(to_jsonable(result.to_json()), indent=2) + "\n")
        files.append(str(out / "compare.json"))
        return files
