"""``tokendist graph info`` (every quantity the theorems use) and ``tokendist graph colour``.

Thin shells: the numbers come from :func:`tokendist.graphs.graph_summary` and
:func:`tokendist.graphs.edge_colouring`; this module only parses, shows progress and prints.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from .._files import atomic_path
from ..errors import TokendistError
from ..graphs import (COLOURING_METHODS, colour_classes, edge_colouring, graph_summary, is_proper_edge_colouring,
                      make_graph)
from ..graphs._expansion import MAX_EXACT_LIMIT
from ._app import Command, command
from ._common import nonneg_int, path_arg
from ._output import console, fmt, print_json, progress_bar

__all__ = ["GraphInfoCommand", "GraphColourCommand"]


def _estimate_text(est) -> tuple[str, str]:
    if est is None:
        return "-", ""
    if est["exact"]:
        return fmt(est["value"]), f"exact ({est['method']})"
    return f"{fmt(est['lower'])} .. {fmt(est['upper'])}", f"bounds ({est['method']})"


@command
class GraphInfoCommand(Command):
    name = "graph info"
    help = "degrees, girth, diameter, lambda2, expansion, conductance, colouring of a graph"
    description = ("Print every graph quantity the papers' theorems use: degrees, connectivity, bipartiteness, "
                   "girth, diameter, radius, lambda2 and its multiplicity, edge and node expansion (Ghosh et al.), "
                   "electrical and fluid conductance (Subramanian-Scherson) marked exact or bounds, and the number "
                   "of colours of tokendist's edge colouring. Definitions: docs/guide/graph-analysis.md.")

    def add_arguments(self, p):
        p.add_argument("spec", help="topology spec, e.g. torus:16x16 (see 'tokendist graphs')")
        p.add_argument("--seed", type=nonneg_int, default=0, help="seed for random families (default 0)")
        p.add_argument("--json", action="store_true", help="print one JSON object")
        p.add_argument("--exact-limit", type=nonneg_int, default=20,
                       help=f"largest n for exhaustive expansion (default 20, at most {MAX_EXACT_LIMIT})")
        p.add_argument("--full", action="store_true",
                       help="also compute distances and spectra of very large graphs (may take long)")

    def run(self, args):
        if args.exact_limit > MAX_EXACT_LIMIT:
            raise TokendistError(f"--exact-limit {args.exact_limit} is too large (at most {MAX_EXACT_LIMIT})")
        graph = make_graph(args.spec, seed=args.seed)
        with progress_bar("analysing", total=7, enabled=not args.json) as update:
            summary = graph_summary(graph, exact_limit=args.exact_limit, full=args.full,
                                    progress=lambda done, total, stage: update(done, total))
        if args.json:
            print_json(summary)
            return 0
        from rich.table import Table

        s = summary
        t = Table(title=f"graph {s['spec']}", title_justify="left")
        t.add_column("quantity", justify="left")
        t.add_column("value", justify="right")
        t.add_column("how", justify="left")
        rows = [
            ("nodes n", fmt(s["n"]), ""), ("edges m", fmt(s["m"]), ""),
            ("degree min / avg / max", f"{s['degree_min']} / {fmt(s['degree_avg'])} / {s['degree_max']}", ""),
            ("connected", fmt(s["connected"]), f"{s['components']} component(s)"),
            ("bipartite", fmt(s["bipartite"]), ""), ("tree", fmt(s["is_tree"]), ""),
            ("girth", fmt(s["girth"]), "exact"), ("diameter", fmt(s["diameter"]), "exact"),
            ("radius", fmt(s["radius"]), "exact"),
            ("lambda2", fmt(s["lambda2"]), s["lambda2_method"] or ""),
            ("lambda2 multiplicity", fmt(s["lambda2_multiplicity"]), ""),
        ]
        for key, label in (("edge_expansion", "edge expansion alpha"), ("node_expansion", "node expansion mu"),
                           ("electrical_conductance", "electrical conductance Gamma"),
                           ("fluid_conductance", "fluid conductance Phi")):
            value, how = _estimate_text(s[key])
            rows.append((label, value, how))
        rows.append(("edge colours used", fmt(s["chromatic_index_used"]), s["colouring_method"] or ""))
        for r in rows:
            t.add_row(*r)
        c = console()
        c.print(t)
        for note in s["notes"]:
            c.print(f"note: {note}")
        return 0


@command
class GraphColourCommand(Command):
    name = "graph colour"
    help = "a proper edge colouring (the dimension-exchange schedule)"
    description = ("Colour the edges of a graph properly: Delta colours on trees and bipartite graphs (König), at "
                   "most Delta+1 on any graph (Misra-Gries). Prints the number of colours and the colour class "
                   "sizes, verified proper; --output writes 'u v colour' lines.")

    def add_arguments(self, p):
        p.add_argument("spec", help="topology spec, e.g. torus:16x16")
        p.add_argument("--seed", type=nonneg_int, default=0, help="seed for random families (default 0)")
        p.add_argument("--method", default="auto", choices=("auto",) + COLOURING_METHODS,
                       help="auto (default): tree, bipartite or misra-gries by the graph")
        p.add_argument("--output", type=path_arg, default=None, metavar="FILE", help="write 'u v colour' lines to FILE")
        p.add_argument("--json", action="store_true", help="print one JSON object")

    def run(self, args):
        graph = make_graph(args.spec, seed=args.seed)
        colours = edge_colouring(graph, method=args.method)
        sizes = [int(c.size) for c in colour_classes(graph, colours)]
        result = {"spec": graph.spec, "n": graph.n, "m": graph.m, "max_degree": graph.max_degree,
                  "method": args.method, "colours": len(sizes), "class_sizes": sizes,
                  "proper": is_proper_edge_colouring(graph, colours)}
        if args.output:
            try:
                with atomic_path(Path(args.output)) as tmp:  # no partial file if interrupted
                    np.savetxt(tmp, np.column_stack([graph.u, graph.v, colours]), fmt="%d",
                               header=f"{graph.spec}: u v colour ({len(sizes)} colours)")
            except OSError as exc:
                raise TokendistError(f"{args.output}: cannot write ({exc.strerror or exc})") from None
            result["output"] = str(args.output)
        if args.json:
            print_json(result)
            return 0
        c = console()
        c.print(f"{graph.spec}: {len(sizes)} colours (max degree {graph.max_degree}), "
                f"proper: {fmt(result['proper'])}")
        c.print("class sizes: " + " ".join(str(x) for x in sizes))
        if args.output:
            c.print(f"wrote {args.output}")
        return 0
