"""``tokendist graphs``, ``tokendist graph export`` and ``tokendist reproduce table1`` through the CLI."""

from __future__ import annotations

import json

import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st

from tokendist.cli import main
from tokendist.graphs import TOPOLOGIES, make_graph, read_graph_file


def run(capsys, *argv):
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def test_graphs_lists_every_family(capsys):
    code, out, _ = run(capsys, "graphs", "--json")
    assert code == 0
    rows = json.loads(out)
    assert [r["name"] for r in rows] == TOPOLOGIES.names()
    for name in ("butterfly", "fft", "ccc", "debruijn", "shuffle-exchange", "lps", "lps-quotient",
                 "random-regular", "gnp", "geometric", "file"):
        assert name in TOPOLOGIES
    assert {r["name"] for r in rows if r["randomized"]} >= {"random-regular", "gnp", "geometric", "random-tree"}
    code, out, _ = run(capsys, "graphs")
    assert code == 0 and "lps-quotient:P,Q" in out and "geometric:N,R[,wrap]" in out


def test_export_edgelist_to_stdout_reads_back(capsys, tmp_path):
    code, out, err = run(capsys, "graph", "export", "ccc:3")
    assert code == 0 and err == ""
    p = tmp_path / "ccc.txt"
    p.write_text(out)
    assert read_graph_file(p) == make_graph("ccc:3")


@pytest.mark.parametrize("fmt", ["edgelist", "json"])
def test_export_to_file_same_seed_same_graph(capsys, tmp_path, fmt):
    ext = "json" if fmt == "json" else "txt"
    a, b, c = (tmp_path / f"{k}.{ext}" for k in "abc")
    for path, seed in ((a, 4), (b, 4), (c, 5)):
        code, _, err = run(capsys, "graph", "export", "random-regular:30,3", "--format", fmt, "--seed", str(seed),
                           "--output", str(path))
        assert code == 0 and "wrote" in err
    assert a.read_text() == b.read_text() != c.read_text()
    g = make_graph(f"file:{a}")
    assert g == make_graph("random-regular:30,3", seed=4)
    code, out, _ = run(capsys, "graph", "export", "random-regular:30,3", "--seed", "4", "--json")
    assert json.loads(out)["edges"] == [[int(x), int(y)] for x, y in zip(g.u, g.v)]


@pytest.mark.parametrize("argv", [
    ["graph", "export", "torus:0x4"], ["graph", "export", "nosuch:3"], ["graph", "export", "lps:3,8"],
    ["graph", "export", "ring:5", "--format", "xml"], ["graph", "export", "ring:5", "--seed", "-1"],
    ["graph", "export", "file:/nonexistent/g.txt"], ["graph", "export", "ring:5", "--output", "/nonexistent/dir/g.txt"],
    ["graph", "export"], ["graphs", "--bogus"], ["reproduce", "no-such-entry"],
])
def test_bad_input_is_one_stderr_line_and_exit_2(capsys, argv):
    code, out, err = run(capsys, *argv)
    assert code == 2 and out == ""
    assert err.startswith("error: ") and err.count("\n") == 1


def test_bad_file_error_names_file_and_line(capsys, tmp_path):
    p = tmp_path / "g.txt"
    p.write_text("0 1\n1 1\n")
    code, _, err = run(capsys, "graph", "export", f"file:{p}")
    assert code == 2 and f"{p}:2: self-loop at node 1" in err


@settings(max_examples=60, deadline=None)
@given(st.one_of(st.text(alphabet="abcdefghijklmnopqrstuvwxyz-:0123456789,x. ", max_size=14),
                 st.tuples(st.sampled_from(TOPOLOGIES.names()), st.text(alphabet="0123456789,x.w ", max_size=6))
                 .map(":".join)))
def test_export_arbitrary_spec_never_tracebacks(spec):
    import contextlib
    import io
    import re

    # Single-digit numbers only, so that every spec that parses builds in milliseconds.
    assume(spec.strip() and not spec.startswith("-") and not re.search(r"\d\d", spec))
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = main(["graph", "export", spec])
    assert code in (0, 2)
    if code == 2:
        assert err.getvalue().startswith("error: ") and err.getvalue().count("\n") == 1


@pytest.mark.slow
def test_reproduce_table1(capsys):
    code, out, _ = run(capsys, "reproduce", "table1", "--json")
    assert code == 0
    rep = json.loads(out)
    rows = {r["graph"]: r for r in rep["data"]["rows"]}
    assert len(rows) == 10
    # values that follow from the definitions alone (not from the paper, whose values are withheld)
    assert (rows["HYP(8)"]["n"], rows["HYP(8)"]["m"], rows["HYP(8)"]["lambda2"]) == (256, 1024, pytest.approx(2.0))
    assert rows["TORUS(16x16)"]["diameter"] == 16 and rows["GRID(16x16)"]["diameter"] == 30
    assert (rows["BFLY(6)"]["n"], rows["CCC(6)"]["n"], rows["FFT(6)"]["n"]) == (384, 384, 448)
    assert (rows["RAMAN-C(3,7)"]["n"], rows["RAMAN-C(3,7)"]["degree_min"], rows["RAMAN-C(3,7)"]["degree_max"]) == (336, 4, 4)
    assert rows["RAMAN-Q(3,17)"]["n"] == 17 * 18
    assert all(c["holds"] for c in rep["claims"])
