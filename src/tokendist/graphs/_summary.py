"""One dictionary with every graph quantity the papers' theorems use (what ``tokendist graph info`` prints)."""

from __future__ import annotations

import numpy as np

from ..errors import TokendistError
from ._colouring import edge_colouring
from ._expansion import electrical_conductance, edge_expansion, fluid_conductance, node_expansion
from ._properties import connected_components, degree_stats, eccentricities, girth, is_bipartite
from ._spectrum import lambda2

__all__ = ["graph_summary", "DISTANCE_WORK_LIMIT", "SPECTRAL_NODE_LIMIT"]

#: BFS steps ``n (n + m)`` above which girth, diameter and radius are skipped unless ``full``
#: (about 50 ns a step on the reference machine: some 25 s).
DISTANCE_WORK_LIMIT = 500_000_000
#: Nodes above which lambda2, the expansion bounds and the conductances are skipped unless ``full``
#: (covers every graph of Elsässer et al. 2006, Table 1; the sparse solver is slow on large meshes).
SPECTRAL_NODE_LIMIT = 6_000

_STAGES = ("degrees", "colouring", "distances", "girth", "spectrum", "expansion", "conductance")


def graph_summary(graph, *, exact_limit: int = 20, full: bool = False, progress=None) -> dict:
    """Every quantity of :mod:`tokendist.graphs` analysis for one graph, as a JSON-ready dict.

    Keys: ``spec, n, m, degree_min, degree_avg, degree_max, connected, components, bipartite,
    is_tree, girth, diameter, radius, lambda2, lambda2_multiplicity, lambda2_method,
    edge_expansion, node_expansion, electrical_conductance, fluid_conductance`` (each of the last
    four ``{value, lower, upper, exact, method}``), ``chromatic_index_used, colouring_method``,
    and ``notes``: one line for every quantity skipped or not defined, saying why. A skipped
    quantity is None.

    Parameters
    ----------
    exact_limit : int
        Largest n for exhaustive expansion (see :func:`edge_expansion`).
    full : bool
        Compute the distance quantities beyond ``DISTANCE_WORK_LIMIT`` BFS steps and the spectral
        ones beyond ``SPECTRAL_NODE_LIMIT`` nodes (may take very long).
    progress : callable or None
        ``progress(done, total, stage)`` after each stage.

    Conductances use the diffusivity ``P_ij = 1 / (2 max(d_i, d_j))`` (see
    :func:`fluid_conductance`).
    """
    n, m = graph.n, graph.m
    notes: list[str] = []
    out: dict = {"spec": graph.spec, "n": n, "m": m}
    step = [0]

    def done(stage):
        step[0] += 1
        if progress is not None:
            progress(step[0], len(_STAGES), stage)

    ds = degree_stats(graph)
    comps = len(connected_components(graph))
    out.update(degree_min=ds["min"], degree_avg=ds["avg"], degree_max=ds["max"], connected=comps == 1,
               components=comps, bipartite=is_bipartite(graph), is_tree=bool(graph.is_tree))
    done("degrees")

    try:
        colours = edge_colouring(graph)
        out["chromatic_index_used"] = int(colours.max()) + 1 if m else 0
        out["colouring_method"] = ("tree" if graph.is_tree else "bipartite" if out["bipartite"] else "misra-gries")
    except TokendistError as exc:
        out["chromatic_index_used"], out["colouring_method"] = None, None
        notes.append(f"edge colouring skipped: {exc}")
    done("colouring")

    work = n * (n + m)
    distances_ok = full or graph.is_tree or work <= DISTANCE_WORK_LIMIT
    out["diameter"] = out["radius"] = None
    if not out["connected"]:
        notes.append("diameter and radius: not defined (disconnected graph)")
    elif not distances_ok:
        notes.append(f"diameter and radius skipped: {work:.2g} BFS steps > {DISTANCE_WORK_LIMIT:.0e}; use --full")
    else:
        ecc = eccentricities(graph)
        out["diameter"], out["radius"] = int(ecc.max()), int(ecc.min())
    done("distances")

    out["girth"] = None
    if graph.m == n - comps:
        notes.append("girth: none (a forest has no cycle)")
    elif not (full or work <= DISTANCE_WORK_LIMIT):
        notes.append(f"girth skipped: {work:.2g} BFS steps > {DISTANCE_WORK_LIMIT:.0e}; use --full")
    else:
        out["girth"] = girth(graph)
    done("girth")

    spectral_ok = full or n <= SPECTRAL_NODE_LIMIT
    out["lambda2"] = out["lambda2_multiplicity"] = out["lambda2_method"] = None
    if n < 2:
        notes.append("lambda2: not defined for one node")
    elif not spectral_ok:
        notes.append(f"lambda2, expansion and conductance skipped: n > {SPECTRAL_NODE_LIMIT}; use --full")
    else:
        try:
            lam, mult, method = lambda2(graph, return_method=True)
            out.update(lambda2=lam, lambda2_multiplicity=mult, lambda2_method=method)
        except TokendistError as exc:
            spectral_ok = False
            notes.append(f"lambda2, expansion and conductance skipped: {exc}")
    done("spectrum")

    expansion_ok = spectral_ok and n >= 2 and out["connected"]
    if n >= 2 and not out["connected"]:
        notes.append("expansion and conductance: 0 (disconnected graph)")
    for key, f in (("edge_expansion", edge_expansion), ("node_expansion", node_expansion)):
        out[key] = f(graph, exact_limit=exact_limit).to_dict() if expansion_ok else None
    done("expansion")
    out["fluid_conductance"] = fluid_conductance(graph, exact_limit=exact_limit).to_dict() if expansion_ok else None
    out["electrical_conductance"] = electrical_conductance(graph).to_dict() if expansion_ok else None
    done("conductance")
    out["notes"] = notes
    return {k: (v.item() if isinstance(v, np.generic) else v) for k, v in out.items()}
