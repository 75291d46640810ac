"""``tokendist graph info`` and ``tokendist graph colour`` through the CLI."""

from __future__ import annotations

import json

import numpy as np
import pytest

from tokendist.cli import main
from tokendist.graphs import (edge_expansion, girth, graph_summary, is_proper_edge_colouring, lambda2, make_graph)
from tokendist.graphs import _summary


def run(capsys, *argv):
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


KEYS = {"n", "m", "degree_min", "degree_avg", "degree_max", "connected", "bipartite", "girth", "diameter", "radius",
        "lambda2", "lambda2_multiplicity", "edge_expansion", "node_expansion", "electrical_conductance",
        "fluid_conductance", "chromatic_index_used", "is_tree"}


def test_graph_info_json_has_every_quantity_and_matches_the_api(capsys):
    code, out, err = run(capsys, "graph", "info", "torus:4x4", "--json")
    assert code == 0 and err == ""
    s = json.loads(out)
    assert KEYS <= set(s)
    g = make_graph("torus:4x4")
    assert (s["n"], s["m"], s["girth"], s["diameter"], s["radius"]) == (16, 32, 4, 4, 4)
    assert s["lambda2"] == pytest.approx(lambda2(g)[0]) and s["lambda2_multiplicity"] == 4
    for key in ("edge_expansion", "node_expansion", "electrical_conductance", "fluid_conductance"):
        assert set(s[key]) == {"value", "lower", "upper", "exact", "method"} and s[key]["exact"]
    assert s["edge_expansion"]["value"] == edge_expansion(g).value == 1.0
    assert s["chromatic_index_used"] == 4 and s["bipartite"] and not s["is_tree"]


def test_graph_info_bounds_and_exact_limit(capsys):
    code, out, _ = run(capsys, "graph", "info", "ring:12", "--json", "--exact-limit", "4")
    s = json.loads(out)
    assert code == 0 and not s["edge_expansion"]["exact"]
    assert s["edge_expansion"]["lower"] <= 1 / 3 <= s["edge_expansion"]["upper"]  # exact: 2 / 6
    code, _, err = run(capsys, "graph", "info", "ring:12", "--exact-limit", "99")
    assert code == 2 and err.startswith("error:") and len(err.strip().splitlines()) == 1


def test_graph_info_table_trees_and_random_seeds(capsys):
    code, out, _ = run(capsys, "graph", "info", "random-tree:30", "--seed", "4")
    assert code == 0 and "girth" in out and "lambda2" in out and "forest" in out
    code, out, _ = run(capsys, "graph", "info", "random-tree:30", "--seed", "4", "--json")
    s = json.loads(out)
    assert s["is_tree"] and s["girth"] is None and s["chromatic_index_used"] == s["degree_max"]
    assert s == json.loads(run(capsys, "graph", "info", "random-tree:30", "--seed", "4", "--json")[1])


def test_graph_info_skips_expensive_parts_with_a_note(monkeypatch):
    monkeypatch.setattr(_summary, "DISTANCE_WORK_LIMIT", 10)
    monkeypatch.setattr(_summary, "SPECTRAL_NODE_LIMIT", 10)
    s = graph_summary(make_graph("torus:5x5"))
    assert s["diameter"] is None and s["girth"] is None and s["lambda2"] is None and s["edge_expansion"] is None
    assert any("--full" in note for note in s["notes"])
    s = graph_summary(make_graph("torus:5x5"), full=True)
    assert s["diameter"] == 4 and s["girth"] == 4 and s["lambda2"] is not None


def test_graph_info_disconnected_graph(tmp_path, capsys):
    f = tmp_path / "g.txt"
    f.write_text("n 6\n0 1\n1 2\n2 0\n3 4\n")
    code, out, _ = run(capsys, "graph", "info", f"file:{f}", "--json")
    s = json.loads(out)
    assert code == 0 and not s["connected"] and s["components"] == 3 and s["girth"] == 3
    assert s["diameter"] is None and s["edge_expansion"] is None and s["lambda2"] == 0.0
    assert any("disconnected" in note for note in s["notes"])


def test_graph_colour_outputs_a_verified_colouring(tmp_path, capsys):
    path = tmp_path / "colours.txt"
    code, out, _ = run(capsys, "graph", "colour", "torus:5x5", "--json", "--output", str(path))
    r = json.loads(out)
    assert code == 0 and r["proper"] and r["colours"] == 5 and sum(r["class_sizes"]) == 50
    rows = np.loadtxt(path, dtype=np.int64)
    g = make_graph("torus:5x5")
    assert np.array_equal(rows[:, 0], g.u) and np.array_equal(rows[:, 1], g.v)
    assert is_proper_edge_colouring(g, rows[:, 2])
    code, out, _ = run(capsys, "graph", "colour", "kary:3,3", "--method", "tree")
    assert code == 0 and "4 colours" in out and "proper: yes" in out
    code, _, err = run(capsys, "graph", "colour", "ring:5", "--method", "bipartite")
    assert code == 2 and "odd cycle" in err and len(err.strip().splitlines()) == 1
    code, _, err = run(capsys, "graph", "colour", "ring:5", "--output", str(tmp_path / "no" / "such" / "f"))
    assert code == 2 and "cannot write" in err


@pytest.mark.slow
def test_graph_info_on_table1_graph_matches_direct_computation(capsys):
    code, out, _ = run(capsys, "graph", "info", "lps-quotient:3,7", "--json")
    s = json.loads(out)
    g = make_graph("lps-quotient:3,7")
    assert s["girth"] == girth(g) == 4 and s["diameter"] == 5 and s["lambda2_multiplicity"] == lambda2(g)[1]
