"""``tokendist graphs`` (the topology zoo) and ``tokendist graph export`` (write a graph to a file).

``graph info`` and ``graph colour`` live in :mod:`tokendist.cli._graph_info`.
"""

from __future__ import annotations

import json
import sys

from ..errors import TokendistError
from ..graphs import TOPOLOGIES, make_graph
from ..graphs._io import edgelist_text, graph_to_json, write_edgelist, write_graph_json
from ._app import Command, command
from ._common import nonneg_int, path_arg
from ._output import console, print_json

__all__ = ["GraphsCommand", "GraphExportCommand"]


@command
class GraphsCommand(Command):
    name = "graphs"
    help = "list every topology family with its spec syntax"
    description = ("List every topology family: its spec syntax (the one name used by the API, the CLI and "
                   "experiment files), whether it is random (seeded by --seed), and what it builds. "
                   "Numbering of every family: docs/guide/topologies.md.")

    def add_arguments(self, p):
        p.add_argument("--json", action="store_true", help="print a JSON list instead of a table")

    def run(self, args):
        rows = [{"name": t.name, "syntax": t.syntax, "randomized": t.randomized, "summary": t.summary}
                for _, t in TOPOLOGIES.items()]
        if args.json:
            print_json(rows)
        else:
            from rich.table import Table

            t = Table(title="topology families (random families take --seed; numbering: docs/guide/topologies.md)",
                      title_justify="left")
            for col in ("syntax", "random", "summary"):
                t.add_column(col, justify="left")
            for r in rows:
                t.add_row(r["syntax"], "seeded" if r["randomized"] else "", r["summary"])
            console().print(t)
        return 0


@command
class GraphExportCommand(Command):
    name = "graph export"
    help = "write a graph as an edge list or JSON (to stdout or --output)"
    description = ("Build the graph named by SPEC (with --seed for random families: the same seed builds the "
                   "same graph as 'graph info --seed S' and 'run --seed S') and write it in the edge-list "
                   "format ('n N' header, one 'u v' pair a line) or as JSON {n, edges, speeds, capacities}. "
                   "Either form reads back with --graph file:PATH.")

    def add_arguments(self, p):
        p.add_argument("spec", help="topology spec, e.g. torus:16x16 (see 'tokendist graphs')")
        p.add_argument("--format", choices=["edgelist", "json"], default="edgelist", help="file format (default edgelist)")
        p.add_argument("--seed", type=nonneg_int, default=0, help="seed for random families (default 0)")
        p.add_argument("--output", "-o", type=path_arg, default=None, help="file to write (default: stdout)")
        p.add_argument("--json", action="store_true", help="same as --format json")

    def run(self, args):
        fmt = "json" if args.json else args.format
        g = make_graph(args.spec, seed=args.seed)
        if args.output is None:
            if fmt == "json":
                json.dump(graph_to_json(g), sys.stdout)
                sys.stdout.write("\n")
            else:
                sys.stdout.write(edgelist_text(g))
            return 0
        try:
            (write_graph_json if fmt == "json" else write_edgelist)(g, args.output)
        except OSError as exc:
            raise TokendistError(f"{args.output}: cannot write ({exc.strerror or exc})") from None
        print(f"wrote {args.output} ({fmt}, n={g.n:,}, m={g.m:,})", file=sys.stderr)
        return 0
