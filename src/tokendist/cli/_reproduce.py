"""``tokendist reproduce NAME|all``: regenerate the papers' tables, figures and worked examples."""

from __future__ import annotations

import contextlib
import json

from .._files import atomic_write_text
from ..experiments import REPRODUCTIONS, ReproContext, run_reproduction
from ..errors import TokendistError
from ._app import Command, UsageError, command
from ._common import check_outputs, nonneg_int, path_arg, positive_int
from ._layout import Col, Group, print_fitted
from ._output import console, print_json, progress_bar, table, to_jsonable

__all__ = ["ReproduceCommand"]


@command
class ReproduceCommand(Command):
    name = "reproduce"
    help = "regenerate a paper's table or figure (or 'all'); 'list' shows the entries"

    def add_arguments(self, p):
        p.add_argument("name", help="entry name, 'all', or 'list'")
        p.add_argument("--out", type=path_arg, default=None, help="folder for figures (PNG) and JSON")
        p.add_argument("--quick", action="store_true", help="a smaller, faster version where the entry has one")
        p.add_argument("--seed", type=nonneg_int, default=0, help="seed (default 0)")
        p.add_argument("--workers", type=positive_int, default=None,
                       help="run the entry's independent runs on a local Dask cluster of N worker processes "
                            "(same results as without; default: one after the other in this process)")
        p.add_argument("--scheduler", default=None, metavar="ADDRESS",
                       help="run them on an existing Dask scheduler instead, e.g. tcp://127.0.0.1:8786")
        p.add_argument("--wide", action="store_true", help="list: every column at full width, whatever the terminal")
        p.add_argument("--json", action="store_true", help="print JSON")

    def run(self, args):
        from ..experiments import _modules  # noqa: F401

        if args.name == "list":
            given = [f"--{k}" for k in ("out", "workers", "scheduler") if getattr(args, k) is not None]
            if given or args.quick:  # silently ignored, they would look as if they had done something
                raise UsageError(f"tokendist reproduce list: {(given or ['--quick'])[0]} applies to running entries")
            entries = [{"name": e.name, "title": e.title, "paper": e.paper, "seconds": e.seconds,
                        "quick_seconds": e.quick_seconds} for _, e in REPRODUCTIONS.items()]
            if args.json:
                print_json(entries)
            else:
                # Measured once and stored with the entries (docs/performance.md says how), not timed here.
                print_fitted("reproduce entries", Col("name", [e["name"] for e in entries], justify="left"),
                             [Group("", [Col("time", [duration(e["seconds"]) for e in entries]),
                                         Col("--quick", [duration(e["quick_seconds"]) for e in entries]),
                                         Col("title", [e["title"] for e in entries], justify="left", wrap=True),
                                         Col("paper", [e["paper"] for e in entries], justify="left", wrap=True)])],
                             wide=args.wide)
            return 0
        names = REPRODUCTIONS.names() if args.name == "all" else [REPRODUCTIONS.get(args.name).name]
        if args.workers is not None and args.scheduler is not None:
            raise UsageError("tokendist reproduce: choose --workers (a local cluster) or --scheduler, not both")
        if args.out is not None:
            check_outputs(args.out)  # before the runs, not after them
        results = []
        with contextlib.ExitStack() as stack:
            client = None
            if args.workers is not None or args.scheduler is not None:
                client = stack.enter_context(_sweep_api().open_client(args.workers, args.scheduler))
            for name in names:
                with progress_bar(f"reproduce {name}", None, enabled=not args.json) as update:
                    ctx = ReproContext(out=args.out, quick=args.quick, seed=args.seed, progress=update, client=client)
                    rep = run_reproduction(name, ctx)
                results.append(rep)
                if args.out is not None:
                    args.out.mkdir(parents=True, exist_ok=True)
                    atomic_write_text(args.out / f"{name}.json",
                                      json.dumps(to_jsonable(rep.to_json()), indent=2) + "\n")
                if not args.json:
                    _show(rep)
        if args.json:
            print_json(results[0].to_json() if len(results) == 1 and args.name != "all" else [r.to_json() for r in results])
            return 0
        if len(results) > 1:
            _summary(results, wide=args.wide)
        return 0


def duration(seconds: float | None) -> str:
    """A measured wall time as a reader wants it: ``8 s``, ``2.5 min``, ``27 min``; ``-`` when unmeasured.

    Examples
    --------
    >>> [duration(x) for x in (None, 7.6, 150, 1620)]
    ['-', '8 s', '2.5 min', '27 min']
    """
    if seconds is None:
        return "-"
    if seconds < 90:
        return f"{seconds:.0f} s"
    minutes = seconds / 60
    return f"{minutes:.1f} min" if minutes < 9.95 else f"{minutes:.0f} min"  # never "10.0 min"


def _sweep_api():
    # dask is the `sweep` extra: imported only when --workers or --scheduler asks for it.
    try:
        from ..experiments import sweep
    except ImportError as exc:
        raise TokendistError(f"tokendist reproduce --workers/--scheduler needs dask[distributed] ({exc.name or exc} "
                             f"is missing): pip install 'tokendist[sweep]'") from None
    return sweep


def _summary(results, *, wide: bool = False) -> None:
    """One line per entry: how many of its claims held; the entries with a claim that did not, named."""
    held = [sum(c.holds for c in r.claims) for r in results]
    failed = [len(r.claims) - h for r, h in zip(results, held)]
    console().print()
    print_fitted("summary of the claims", Col("entry", [r.name for r in results], justify="left"),
                 [Group("", [Col("claims", [str(len(r.claims)) for r in results]),
                             Col("held", [str(h) for h in held]),
                             Col("did not hold", [str(f) for f in failed]),
                             Col("paper", [r.paper for r in results], justify="left", wrap=True)])], wide=wide)
    bad = [r.name for r, f in zip(results, failed) if f]
    console().print(f"{sum(held)} of {sum(held) + sum(failed)} claims held in {len(results)} entries"
                    + (f"; did not hold in: {', '.join(bad)}" if bad else "; every claim held"), markup=False)


def _show(rep) -> None:
    c = console()
    c.rule(f"[bold]{rep.name}[/bold]: {rep.title}  ({rep.paper})")
    for t in rep.tables:
        table(t.title, t.columns, t.rows)
    for claim in rep.claims:
        mark = "[green]holds[/green]" if claim.holds else "[red]does not hold[/red]"
        c.print(f"  {mark}: {claim.statement}" + (f" -- {claim.detail}" if claim.detail else ""))
    for note in rep.notes:
        c.print(f"  note: {note}")
    for f in rep.figures:
        c.print(f"  wrote {f}")
