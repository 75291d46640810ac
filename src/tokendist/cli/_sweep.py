"""``tokendist sweep FILE --out DIR`` and ``tokendist sweep report DIR``."""

from __future__ import annotations

import contextlib
import os
import sys
from pathlib import Path

from ..errors import TokendistError
from ._app import Command, UsageError, command
from ._common import path_arg, positive_int
from ._output import console, fmt, print_json, table

__all__ = ["SweepCommand"]


def _sweep_api():
    # dask and pyarrow are the `sweep` extra: imported when a sweep runs, not by every command.
    try:
        from ..experiments import sweep
    except ImportError as exc:
        raise TokendistError(f"tokendist sweep needs dask[distributed] and pyarrow ({exc.name or exc} is "
                             f"missing): pip install 'tokendist[sweep]'") from None
    return sweep


@contextlib.contextmanager
def _progress(description: str, enabled: bool):
    """A rich bar on stderr: tasks done / total, failures, elapsed, estimated remaining."""
    if not enabled or not sys.stderr.isatty():
        yield lambda done, total, failures: None
        return
    from rich.console import Console
    from rich.progress import (BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn,
                               TimeRemainingColumn)

    with Progress(TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(),
                  TextColumn("{task.fields[failures]} failed"), TimeElapsedColumn(), TextColumn("eta"),
                  TimeRemainingColumn(), console=Console(stderr=True), transient=True) as p:
        task = p.add_task(description, total=None, failures=0)

        def update(done, total, failures):
            p.update(task, completed=done, total=total, failures=failures)

        yield update


def _ci(d) -> str:
    if d["ci_low"] is None:
        return "-"
    return f"[{fmt(d['ci_low'])}, {fmt(d['ci_high'])}]"


def print_report(report) -> None:
    rows = []
    for g in report.summary:
        for metric, d in g["metrics"].items():
            if metric.startswith("settled_"):
                continue  # in report.json and summary.parquet; the console shows first hits
            rows.append([g["graph"], g["init"], g["variant"], g["runs"], g["failures"], metric,
                         f"{d['count']}/{g['ok']}", d["mean"], d["median"], _ci(d)])
    table(f"sweep results in {report.folder} ({report.runs} runs): mean, median and 95% CI (t) over seeds",
          ["graph", "init", "variant", "runs", "failed", "metric", "reached", "mean", "median", "95% CI"], rows)
    if report.wins:
        table("first to each discrepancy level, in how many seeds (ties count for each)",
              ["graph", "init", "level", "winner", "wins", "all"],
              [[w["graph"], w["init"], w["level"], w["winner"] or "-",
                f"{w['wins'].get(w['winner'], 0)}/{w['seeds']}" if w["winner"] else "-",
                ", ".join(f"{v} {k}" for v, k in w["wins"].items())] for w in report.wins])
    failed = [g for g in report.summary if g["failures"]]
    for g in failed:
        for reason, k in g["failure_reasons"].items():
            console().print(f"{g['graph']} {g['init']} {g['variant']}: {k} x {reason}")


@command
class SweepCommand(Command):
    name = "sweep"
    help = "run a sweep file (graphs x inits x algos x params x seeds) on Dask; or 'sweep report DIR'"
    description = ("tokendist sweep FILE.toml --out DIR: run every task of the sweep not yet in DIR/runs.parquet "
                   "on a local Dask cluster (or --scheduler ADDRESS), then write the report. "
                   "tokendist sweep report DIR: the statistics and plots of DIR/runs.parquet again.")

    def add_arguments(self, p):
        p.usage = ("tokendist sweep FILE.toml --out DIR [--workers N | --scheduler ADDRESS] [--force] [--traces] "
                   "[--json]\n       tokendist sweep report DIR [--json]")
        p.add_argument("target", nargs="+", metavar="FILE | report DIR",
                       help="a sweep TOML file, or the word 'report' and a results folder")
        p.add_argument("--out", type=path_arg, default=None, help="results folder (runs.parquet, report, plots)")
        p.add_argument("--workers", type=positive_int, default=None,
                       help="local worker processes (default: one per core)")
        p.add_argument("--scheduler", default=None, metavar="ADDRESS",
                       help="submit to an existing Dask scheduler, e.g. tcp://10.0.0.5:8786")
        p.add_argument("--force", action="store_true", help="re-run tasks already in runs.parquet")
        p.add_argument("--traces", action="store_true", help="also write each run's per-step trace (DIR/traces/)")
        p.add_argument("--json", action="store_true", help="print one JSON object instead of tables")

    def run(self, args):
        if args.target[0] == "report":
            if len(args.target) != 2:
                raise UsageError("tokendist sweep report: expected one results folder: tokendist sweep report DIR")
            for flag in ("out", "workers", "scheduler"):
                if getattr(args, flag) is not None:
                    raise UsageError(f"tokendist sweep report: --{flag} applies to running a sweep")
            return self.report(args, Path(args.target[1]))
        if len(args.target) != 1:
            raise UsageError(f"tokendist sweep: expected one sweep file, got {' '.join(args.target)}")
        if args.out is None:
            raise UsageError("tokendist sweep: --out DIR is required")
        if args.workers is not None and args.scheduler is not None:
            raise UsageError("tokendist sweep: choose --workers (a local cluster) or --scheduler, not both")
        api = _sweep_api()
        sweep = api.load_sweep(args.target[0])
        if args.out.exists() and not args.out.is_dir():
            raise TokendistError(f"{args.out}: is a file, not a folder")
        workers = args.workers if args.workers is not None else (os.cpu_count() or 1)
        where = f"scheduler {args.scheduler}" if args.scheduler else f"local cluster of {workers} worker(s)"
        with _progress(f"sweep {sweep.name}", not args.json) as update:
            # The report's plotting imports (matplotlib) while the workers start, not after the runs.
            outcome = api.run_sweep(sweep, args.out, workers=workers if not args.scheduler else None,
                                    scheduler=args.scheduler, force=args.force, traces=args.traces,
                                    progress=update, while_starting=api.prepare_report)
        if outcome.interrupted:
            left = outcome.total - outcome.already_done - outcome.ran
            if outcome.ran:
                print(f"interrupted: {outcome.ran} task(s) finished and saved in {args.out / 'runs.parquet'}; "
                      f"run the same command again to finish the other {left}", file=sys.stderr)
            else:
                print(f"interrupted before a task finished; run the same command again to run the {left} task(s)",
                      file=sys.stderr)
            return 130
        report = api.write_report(args.out)
        if args.json:
            print_json({"sweep": outcome.to_json(), "report": report.to_json()})
            return 0
        out = console()
        if outcome.already_done:
            out.print(f"{outcome.already_done} of {outcome.total} task(s) already in {args.out / 'runs.parquet'}: skipped")
        if outcome.rerun:
            out.print(f"{outcome.rerun} task(s) already in {args.out / 'runs.parquet'} re-run (--force)")
        if outcome.ran or not outcome.already_done:
            out.print(f"sweep {sweep.name}: ran {outcome.ran} task(s) on a {where} in {outcome.seconds:.1f} s, "
                      f"{outcome.failures} failed")
        else:
            out.print(f"sweep {sweep.name}: every task is done; nothing to run")
        print_report(report)
        for f in report.files:
            out.print(f"wrote {f}")
        return 0

    def report(self, args, folder: Path):
        api = _sweep_api()
        report = api.write_report(folder)
        if args.json:
            print_json(report.to_json())
            return 0
        print_report(report)
        for f in report.files:
            console().print(f"wrote {f}")
        return 0
