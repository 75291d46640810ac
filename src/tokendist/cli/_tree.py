"""``tokendist tree ...``: the THRESHOLD-1 theory of Houle, Symvonis and Wood (2004) for any tree.

``tree msd`` (maximum stable discrepancy and its bounds), ``tree orderings`` (c-orderings and
gaps of a coloured tree), ``tree worst-case`` (the Theorem 12 distribution) and ``tree conjecture``
(the Sec. 4.5 table for complete k-ary trees). Thin shells over :mod:`tokendist.analysis`.
"""

from __future__ import annotations

import time

import numpy as np

from .._files import atomic_path
from ..errors import TokendistError
from ._app import Command, command
from ._common import nonneg_int, path_arg, positive_int
from ._output import print_json, progress_bar, table
from ..analysis import c_ordering, gap_positions, kary_order, lemma13_bound, lemma17_bound, msd, msd_of_spec, observer_tour, stability, theorem12_distribution, theorem16_bound
from ..experiments._repro_houle import kary_msd_table
from ..graphs import make_graph
from ..graphs._specs import split_spec
from ..protocols.dimension_exchange._schedule import resolve_colouring

__all__ = ["TreeMsdCommand", "TreeOrderingsCommand", "TreeWorstCaseCommand", "TreeConjectureCommand"]


def _kary_args(spec: str):
    family, arg = split_spec(spec)
    if family != "kary":
        return None
    try:
        k, h = (int(x) for x in arg.split(","))
    except ValueError:
        return None
    return k, h


def _tree(spec: str, seed: int):
    g = make_graph(spec, seed=seed)
    if not g.is_tree:
        raise TokendistError(f"{spec} is not a tree")
    return g


@command
class TreeMsdCommand(Command):
    name = "tree msd"
    help = "maximum stable discrepancy MSD(T) under THRESHOLD-1, with the bounds of Theorem 16 and Lemma 17"
    description = ("Compute MSD(T) (Houle et al. 2004, Sec. 4.3) by a breadth-first search over Z_n with the "
                   "stable gaps SG_1 as generators. kary/star/path specs are not built as graphs.")

    def add_arguments(self, p):
        p.add_argument("spec", help="a tree spec, e.g. kary:2,18, random-tree:1000000, file:tree.txt")
        p.add_argument("--seed", type=nonneg_int, default=0, help="seed for random trees (default 0)")
        p.add_argument("--sg1", action="store_true", help="also print SG_1 (always shown for n <= 64)")
        p.add_argument("--json", action="store_true", help="print JSON")

    def run(self, args):
        t0 = time.perf_counter()
        info = msd_of_spec(args.spec, seed=args.seed)
        seconds = time.perf_counter() - t0
        kh = _kary_args(args.spec)
        out = {"spec": args.spec, "n": info["n"], "max_degree": info["max_degree"], "msd": info["msd"],
               "bound_theorem16": theorem16_bound(info["n"], info["max_degree"]),
               "bound_lemma17": lemma17_bound(*kh) if kh and kh[1] >= 1 else None,
               "bound_lemma13": lemma13_bound(info["n"]), "sg1_size": int(info["generators"].size),
               "seconds": round(seconds, 4)}
        if args.sg1 or (not args.json and info["n"] <= 64):
            out["sg1"] = info["generators"].tolist()
        if args.json:
            print_json(out)
            return 0
        rows = [[k, v if not isinstance(v, list) else " ".join(map(str, v))] for k, v in out.items() if k != "spec"]
        table(f"MSD of {args.spec} (THRESHOLD-1)", ["", "value"], rows)
        return 0


def _colouring(tree, colouring: str):
    if not colouring.strip():  # resolve_colouring reads '' as auto
        raise TokendistError("--colouring expects auto, a colouring method or file:PATH, got ''")
    return resolve_colouring(tree, colouring)


@command
class TreeOrderingsCommand(Command):
    name = "tree orderings"
    help = "the c-orderings and c-gaps of an edge-coloured tree (observer tour, Sec. 4.1)"

    def add_arguments(self, p):
        p.add_argument("spec", help="a tree spec, e.g. kary:2,3")
        p.add_argument("--seed", type=nonneg_int, default=0)
        p.add_argument("--colouring", default="auto", help="auto, tree, greedy, or file:PATH (one colour per edge)")
        p.add_argument("--from", dest="source", type=nonneg_int, default=0,
                       help="each ordering starts here; gaps are gap_c(FROM, v) (default node 0)")
        p.add_argument("--tour", action="store_true", help="also print the observer tour (arcs from FROM)")
        p.add_argument("--json", action="store_true")

    def run(self, args):
        tree = _tree(args.spec, args.seed)
        if args.source >= tree.n:
            raise TokendistError(f"node {args.source} does not exist (n={tree.n})")
        colours = _colouring(tree, args.colouring)
        chi = int(colours.max()) + 1 if colours.size else 1
        st = stability(tree)
        orderings = [c_ordering(tree, colours, c, args.source).tolist() for c in range(chi)]
        gaps = [gap_positions(tree, colours, c, args.source).tolist() for c in range(chi)]
        out = {"spec": args.spec, "n": tree.n, "chi": chi, "from": args.source,
               "edges": [[int(a), int(b), int(c)] for a, b, c in zip(tree.u, tree.v, colours)],
               "orderings": orderings, "gaps": gaps,
               "stability_of_gaps": [[int(st[p]) for p in g] for g in gaps]}
        if args.tour:
            out["tour"] = observer_tour(tree, colours, args.source, 0).tolist()
        if args.json:
            print_json(out)
            return 0
        table(f"edge colouring of {args.spec} ({chi} colours)", ["edge", "colour"],
              [[f"{a}-{b}", c] for a, b, c in out["edges"]])
        table(f"c-orderings from node {args.source}", ["c", "ordering"],
              [[c, " ".join(map(str, o))] for c, o in enumerate(orderings)])
        table(f"gap_c({args.source}, v) and its stability", ["v"] + [f"gap_{c}" for c in range(chi)]
              + [f"stab_{c}" for c in range(chi)],
              [[v] + [gaps[c][v] for c in range(chi)] + [out["stability_of_gaps"][c][v] for c in range(chi)]
               for v in range(tree.n)])
        if args.tour:
            print(" ".join(f"{a}->{b}({c})" for a, b, c in out["tour"]))
        return 0


@command
class TreeWorstCaseCommand(Command):
    name = "tree worst-case"
    help = "write the THRESHOLD-1 stable distribution of discrepancy MSD(T) (proof of Theorem 12)"

    def add_arguments(self, p):
        p.add_argument("spec", help="a tree spec")
        p.add_argument("--seed", type=nonneg_int, default=0)
        p.add_argument("--colouring", default="auto", help="the edge colouring the run will use")
        p.add_argument("--colour-start", type=nonneg_int, default=0, help="colour c: stable at times t = c mod chi")
        p.add_argument("--node", type=nonneg_int, default=0, help="the node s with load 0")
        p.add_argument("--base", type=nonneg_int, default=0, help="tokens added to every node")
        p.add_argument("--save-loads", type=path_arg, required=True, help="file for the loads, one per line")
        p.add_argument("--json", action="store_true")

    def run(self, args):
        tree = _tree(args.spec, args.seed)
        colours = _colouring(tree, args.colouring)
        chi = int(colours.max()) + 1 if colours.size else 1
        loads = theorem12_distribution(tree, colours, args.colour_start % chi, args.node, base=args.base)
        with atomic_path(args.save_loads) as tmp:  # no partial file if interrupted
            np.savetxt(tmp, loads, fmt="%d")
        value = msd(tree)
        cmd = (f"tokendist run --graph {args.spec} --algo threshold1 --init file:{args.save_loads} "
               f"--param colour_start={args.colour_start % chi}"
               + (f" --param colouring={args.colouring}" if args.colouring != "auto" else ""))
        out = {"spec": args.spec, "n": tree.n, "chi": chi, "colour_start": args.colour_start % chi, "node": args.node,
               "msd": value, "discrepancy": int(loads.max() - loads.min()), "tokens": int(loads.sum()),
               "file": str(args.save_loads), "run": cmd}
        if args.json:
            print_json(out)
            return 0
        table(f"Theorem 12 distribution on {args.spec}", ["", "value"], [[k, v] for k, v in out.items()])
        return 0


_MAX_TREE = 200_000_000
_MAX_TABLE = 1_000_000_000


def _grid_too_large(k_max: int, h_max: int) -> bool:
    """Whether some T_{h,k} of the table has more than :data:`_MAX_TREE` nodes, or all of them more
    than :data:`_MAX_TABLE` (each row costs time linear in its tree).

    Walks the grid only until the sum passes the limit: --h-max 10**6 built every k**h exactly and
    --k-max 10**18 iterated over every k, both for ever.
    """
    total = 0
    for k in range(1, k_max + 1):
        for h in range(1, h_max + 1):
            n = kary_order(k, h) if k > 1 else h + 1
            total += n
            if n > _MAX_TREE or total > _MAX_TABLE:
                return True
    return False


@command
class TreeConjectureCommand(Command):
    name = "tree conjecture"
    help = "MSD(T_{h,k}) against the Sec. 4.5 conjecture floor((k-1)h/2) or +1, for 1 <= k <= K, 1 <= h <= H"

    def add_arguments(self, p):
        p.add_argument("--k-max", type=positive_int, required=True)
        p.add_argument("--h-max", type=positive_int, required=True)
        p.add_argument("--binary-h-max", type=positive_int, default=None,
                       help="also binary trees up to this height (the paper checked h <= 18)")
        p.add_argument("--json", action="store_true")

    def run(self, args):
        if _grid_too_large(args.k_max, args.h_max) or (args.binary_h_max or 0) > 27:
            raise TokendistError(f"tree too large: keep every T_{{h,k}} under {_MAX_TREE:,} nodes and the table "
                                 f"under {_MAX_TABLE:,} nodes in all (--k-max {args.k_max} --h-max {args.h_max})")
        with progress_bar("MSD of complete k-ary trees", None, enabled=not args.json) as update:
            rows = kary_msd_table(args.k_max, args.h_max, binary_h_max=args.binary_h_max, progress=update)
        fails = [r for r in rows if not r["conjecture_holds"]]
        if args.json:
            print_json({"rows": rows, "holds": not fails, "failures": fails})
            return 0
        cols = ["k", "h", "n", "msd", "conjecture_low", "conjecture_holds", "bound_lemma17", "bound_theorem16"]
        table("MSD(T_{h,k}) and the conjecture of Sec. 4.5", cols, [[r[c] for c in cols] for r in rows])
        print("conjecture holds at every (k, h)" if not fails else
              "conjecture fails at " + ", ".join(f"(k={r['k']}, h={r['h']})" for r in fails))
        return 0
