"""``tokendist reproduce NAME|all``: regenerate the papers' tables, figures and worked examples."""

from __future__ import annotations

from pathlib import Path

from .._files import atomic_write_text
from ..experiments import REPRODUCTIONS, ReproContext, run_reproduction
from ._app import Command, command
from ._common import nonneg_int
from ._output import console, print_json, progress_bar, table

__all__ = ["ReproduceCommand"]


@command
class ReproduceCommand(Command):
    name = "reproduce"
    help = "regenerate a paper's table or figure (or 'all'); 'list' shows the entries"

    def add_arguments(self, p):
        p.add_argument("name", help="entry name, 'all', or 'list'")
        p.add_argument("--out", type=Path, default=None, help="folder for figures (PNG) and JSON")
        p.add_argument("--quick", action="store_true", help="a smaller, faster version where the entry has one")
        p.add_argument("--seed", type=nonneg_int, default=0, help="seed (default 0)")
        p.add_argument("--json", action="store_true", help="print JSON")

    def run(self, args):
        from ..experiments import _modules  # noqa: F401

        if args.name == "list":
            entries = [{"name": e.name, "title": e.title, "paper": e.paper} for _, e in REPRODUCTIONS.items()]
            if args.json:
                print_json(entries)
            else:
                table("reproduce entries", ["name", "title", "paper"], [[e["name"], e["title"], e["paper"]] for e in entries])
            return 0
        names = REPRODUCTIONS.names() if args.name == "all" else [REPRODUCTIONS.get(args.name).name]
        results = []
        failed = 0
        for name in names:
            with progress_bar(f"reproduce {name}", None, enabled=not args.json) as update:
                ctx = ReproContext(out=args.out, quick=args.quick, seed=args.seed, progress=update)
                rep = run_reproduction(name, ctx)
            results.append(rep)
            failed += sum(not c.holds for c in rep.claims)
            if args.out is not None:
                import json

                from ._output import to_jsonable
                args.out.mkdir(parents=True, exist_ok=True)
                atomic_write_text(args.out / f"{name}.json", json.dumps(to_jsonable(rep.to_json()), indent=2) + "\n")
            if not args.json:
                _show(rep)
        if args.json:
            print_json(results[0].to_json() if len(results) == 1 and args.name != "all" else [r.to_json() for r in results])
        return 0


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
