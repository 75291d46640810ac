"""``tokendist bounds`` as a verdict and ``tokendist offline``'s memory guard."""

from __future__ import annotations

import json
import time

import numpy as np
import pytest

from tokendist.analysis import predict
from tokendist.analysis._bound_checks import BoundRow, bound_tables
from tokendist.analysis._offline import (BYTES_PER_ARC, _time_expanded, available_memory, memory_limit,
                                         _lower_bound, network_arcs, offline_optimum)
from tokendist.cli import main
from tokendist.engine import make_loads, simulate
from tokendist.errors import TokendistError
from tokendist.graphs import make_graph


def _json(capsys, argv):
    assert main(argv) == 0
    return json.loads(capsys.readouterr().out)


# ------------------------------------------------------------------ bounds
@pytest.mark.parametrize("algo", ["multi-port", "single-port", "threshold1", "discrepancy1", "perfect-tree",
                                  "sos-iou", "fos", "diffusion"])
def test_bounds_json_rows_say_held_truthfully(capsys, algo):
    d = _json(capsys, ["bounds", "--graph", "torus:6x6", "--init", "random:0..40", "--algo", algo, "--max-steps",
                       "2000", "--json"])
    assert d["bounds"] and d["predicted"] and d["measured"]
    checked = 0
    for table in d["bounds"]:
        assert table["bound"] and "_" not in table["bound"].split(",")[0]
        for row in table["rows"]:
            assert row["quantity"] and "__" not in row["quantity"]
            if row["relation"] and row["measured"] is not None and row["predicted"] is not None:
                ok = row["measured"] <= row["predicted"] + 1e-9 if row["relation"] == "<=" else \
                    row["measured"] >= row["predicted"] - 1e-9
                assert row["held"] == ok, row
                checked += 1
            else:
                assert row["held"] is None
    assert checked > 0


def test_bound_rows_compare_the_right_way():
    assert BoundRow("x", 5, 4, "<=").held and not BoundRow("x", 5, 6, "<=").held
    assert BoundRow("x", 5, 6, ">=").held and not BoundRow("x", 5, 4, ">=").held
    assert BoundRow("x", 5, None, "<=").held is None and BoundRow("x", float("inf"), 3, "<=").held is None


def test_multi_port_bounds_against_the_run():
    g = make_graph("torus:8x8")
    loads = make_loads("random:0..60", g, 1)
    run = simulate(g, "multi-port", loads, seed=1)
    tables = bound_tables("multi-port", predict("multi-port", g, loads), run)
    rows = {r.quantity: r for t in tables for r in t.rows}
    explicit = rows["final discrepancy <= 6Jd + 2d - 1 (explicit, Sec. 3.2)"]
    assert explicit.measured == run.final["discrepancy"] and explicit.held
    fixed = rows["local discrepancy at a fixed point <= 2d (Sec. 4.3)"]
    assert run.stop_reason == "stable" and fixed.predicted == 2 * g.max_degree and fixed.held
    # No multi-port protocol beats the off-line optimum (a lower bound): measured >= predicted.
    lower = [r for t in tables for r in t.rows if r.kind == "lower bound" and r.measured is not None]
    assert all(r.held for r in lower)
    assert any("alpha" in k for t in tables for k in t.constants)


def test_bounds_table_is_readable_and_fits(capsys, monkeypatch):
    monkeypatch.setenv("COLUMNS", "80")
    assert main(["bounds", "--graph", "torus:6x6", "--init", "random:0..40", "--algo", "multi-port"]) == 0
    out = capsys.readouterr().out
    lines = out.splitlines()
    assert max(len(x) for x in lines) <= 80 and "…" not in out
    assert "held" in out and "constants:" in out and "predicted" in out and "measured" in out
    assert "order_time_full" not in out and "{'value'" not in out


def test_bounds_keep_predictions_when_the_run_is_infeasible(capsys):
    d = _json(capsys, ["bounds", "--graph", "torus:16x16", "--init", "point:5000", "--algo", "diffusion-ceil",
                       "--json"])
    assert d["measured"] is None and d["stopped"].startswith("infeasible step")
    assert d["predicted"]["error_bound_iterations"] > 0
    assert all(r["measured"] is None for t in d["bounds"] for r in t["rows"])
    assert main(["bounds", "--graph", "torus:16x16", "--init", "point:5000", "--algo", "diffusion-ceil"]) == 0
    out = capsys.readouterr().out
    assert "no measurement: infeasible step" in out and "Error Bound" in out


# ------------------------------------------------------------------ offline memory guard
@pytest.mark.parametrize("graph,init", [("torus:100x100", "point:100000"), ("torus:64x64", "point:40000")])
def test_offline_refuses_what_does_not_fit_in_one_line(capsys, graph, init):
    started = time.perf_counter()
    assert main(["offline", "--graph", graph, "--init", init]) == 2
    err = capsys.readouterr().err
    assert time.perf_counter() - started < 30
    assert err.startswith("error: offline:") and err.count("\n") == 1
    assert "arcs" in err and "GB" in err and "limit" in err


@pytest.mark.parametrize("model", ["multi-port", "single-port"])
def test_network_arcs_matches_the_built_network(model):
    g = make_graph("torus:4x5")
    loads = make_loads("point:300", g, 0)
    for T in (1, 3, 7):
        H = _time_expanded(g, np.asarray(loads), T, 15, model)
        assert network_arcs(g, loads, T, model) == H.nnz


def test_memory_limit_is_half_the_available_memory():
    avail = available_memory()
    assert avail > 0 and abs(memory_limit() - avail // 2) <= avail * 0.05


def test_the_search_stops_before_a_network_too_large():
    # Two 5-cliques joined by one edge, every token on one side: half of them must cross the bridge,
    # one a step, so the optimum lies well above the first T tried.
    from itertools import combinations

    from tokendist.graphs import Graph

    edges = [(a, b) for side in (0, 5) for a, b in combinations(range(side, side + 5), 2)] + [(4, 5)]
    g = Graph(10, [a for a, _ in edges], [b for _, b in edges], spec="barbell")
    loads = np.array([100, 0, 0, 0, 0, 0, 0, 0, 0, 0])
    best = offline_optimum(g, loads)
    # The first T tried is the search's lower bound: here the cut bound, 50 tokens over the bridge
    # one a step; they must also reach the bridge and spread beyond it.
    cap = -(-int(loads.sum()) // g.n)
    lo = _lower_bound(g, loads, cap, "multi-port")
    assert lo == 50 and best.steps > lo and best.flow_checks > 1
    # Memory for that first T but not for the optimum: refused mid-search, before building it.
    budget = network_arcs(g, loads, lo, "multi-port") * BYTES_PER_ARC
    with pytest.raises(TokendistError, match="more than .* steps"):
        offline_optimum(g, loads, memory=budget)
    seen = []
    again = offline_optimum(g, loads, progress=lambda checks, T: seen.append((checks, T)))
    assert again.steps == best.steps and [c for c, _ in seen] == list(range(1, len(seen) + 1))
    assert len(seen) == best.flow_checks
