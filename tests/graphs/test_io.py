"""Graph files: the edge-list format, JSON, ``file:PATH``; every bad input is one clear line."""

from __future__ import annotations

import json

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tokendist.errors import GraphFileError, TokendistError
from tokendist.graphs import (Graph, make_graph, read_edgelist, read_graph_file, read_graph_json, write_edgelist,
                              write_graph_json)
from tokendist.graphs._io import parse_edgelist, parse_graph_json


@pytest.mark.parametrize("spec", ["path:1", "star:4", "torus:4x5", "lps:3,5", "debruijn:5", "geometric:40,0.2"])
def test_edgelist_and_json_roundtrip(tmp_path, spec):
    g = make_graph(spec, seed=2)
    write_edgelist(g, tmp_path / "g.txt")
    write_graph_json(g, tmp_path / "g.json")
    for h in (read_edgelist(tmp_path / "g.txt"), read_graph_json(tmp_path / "g.json"),
              make_graph(f"file:{tmp_path / 'g.txt'}"), make_graph(f"file:{tmp_path / 'g.json'}")):
        assert h == g and h.n == g.n
    assert make_graph(f"file:{tmp_path / 'g.txt'}").spec == f"file:{tmp_path / 'g.txt'}"
    if g.positions is not None:
        assert np.allclose(read_graph_json(tmp_path / "g.json").positions, g.positions)


def test_json_keeps_speeds_and_capacities(tmp_path):
    g = make_graph("ring:5").with_speeds([1, 2, 3, 4, 5.5]).with_capacities([1, 1, 2, 2, 3])
    write_graph_json(g, tmp_path / "g.json")
    h = read_graph_file(tmp_path / "g.json")
    assert h == g and np.array_equal(h.speeds, g.speeds) and np.array_equal(h.capacities, g.capacities)


def test_edgelist_format_details():
    text = "# a comment\n\nn 6   # six nodes, node 5 isolated\n0 1\n\t1   2 # tab and spaces\n3 0\n"
    g = parse_edgelist(text, "x")
    assert g.n == 6 and g.m == 3 and g.degrees[5] == 0
    assert parse_edgelist("4 2\n", "x").n == 5                     # no header: max id + 1
    assert parse_edgelist("n 1\n", "x").n == 1                     # one node, no edges: say so with 'n 1'
    with pytest.raises(GraphFileError, match="no edges and no 'n N' header"):
        parse_edgelist("# nothing\n", "x")                         # an empty file is not a graph
    assert parse_edgelist("n 3\nm 2\n0 1\n1 2\n", "x").m == 2     # 'm M': the edge count, checked
    with pytest.raises(GraphFileError, match="header says m 3 but the file has 2 edges"):
        parse_edgelist("n 3\nm 3\n0 1\n1 2\n", "x")               # a truncated file is an error


@pytest.mark.parametrize("text,line,words", [
    ("0 1\n1 2 3\n", 2, "malformed line"),
    ("0 1\nfoo\n", 2, "malformed line"),
    ("0 1\n1 x\n", 2, "not a node id"),
    ("0 1\n\n1 -2\n", 3, "negative node id -2"),
    ("n 3\n0 1\n1 3\n", 3, "out of range 0..2"),
    ("0 1\n2 2\n", 2, "self-loop at node 2"),
    ("0 1\n1 2\n1 0\n", 3, "duplicate edge (0, 1), first given on line 1"),
    ("0 1\nn 4\n", 2, "before the first edge"),
    ("n 4\nn 4\n", 2, "second 'n' header"),
    ("n\n", 1, "malformed header"),
    ("n 0\n", 1, "at least one node"),
    ("0 1.5\n", 1, "not a node id"),
    ("0 99999999999999999999\n", 1, "too large"),
    ("n 999999999999\n", 1, "too large"),
])
def test_edgelist_errors_name_file_line_and_problem(tmp_path, text, line, words):
    p = tmp_path / "bad.txt"
    p.write_text(text)
    with pytest.raises(GraphFileError) as e:
        read_edgelist(p)
    msg = str(e.value)
    assert msg.startswith(f"{p}:{line}: ") and words in msg and "\n" not in msg


def test_missing_binary_and_directory_files(tmp_path):
    (tmp_path / "bin.dat").write_bytes(b"0 1\n\x00\x01\x02")
    (tmp_path / "latin.txt").write_bytes(b"0 1 \xe9\n")
    cases = {tmp_path / "nope.txt": "no such file", tmp_path / "bin.dat": "binary",
             tmp_path / "latin.txt": "binary or non-UTF-8", tmp_path: "is a directory"}
    for path, words in cases.items():
        with pytest.raises(TokendistError) as e:
            make_graph(f"file:{path}")
        assert str(path) in str(e.value) and words in str(e.value)
    with pytest.raises(TokendistError):
        make_graph("file:")


@pytest.mark.parametrize("obj,words", [
    ("[1, 2]", "expected a JSON object"),
    ('{"n": 3, "edges": [[0, 1], [1]]}', "edge 1"),
    ('{"n": 3, "edges": [[0, 1], [1, 1]]}', "self-loop"),
    ('{"n": 3, "edges": [[0, 1], [1, 0]]}', "duplicate edge"),
    ('{"n": 2, "edges": [[0, 5]]}', "out of range"),
    ('{"n": 2, "edges": [[0, -1]]}', "negative"),
    ('{"n": 2, "edges": [[0, 1]], "speeds": [1]}', "speeds"),
    ('{"n": 2, "edges": [[0, 1]], "speeds": [1, -1]}', "positive"),
    ('{"n": true, "edges": []}', "'n'"),
    ('{"n": 2, "edges": [[0, 1]', "invalid JSON"),
])
def test_json_errors(tmp_path, obj, words):
    p = tmp_path / "bad.json"
    p.write_text(obj)
    with pytest.raises(GraphFileError) as e:
        read_graph_json(p)
    assert str(p) in str(e.value) and words in str(e.value) and "\n" not in str(e.value)


@given(st.lists(st.tuples(st.integers(0, 40), st.integers(0, 40)), max_size=50), st.booleans())
def test_valid_edge_lists_parse_like_from_edges(pairs, header):
    simple = sorted({(min(a, b), max(a, b)) for a, b in pairs if a != b})
    n = 41 if header else (max((b for _, b in simple), default=0) + 1)
    text = (f"n {n}\n" if header else "") + "".join(f"{a} {b}\n" for a, b in simple)
    if not header and not simple:  # nothing at all: not a graph file, not a 1-node graph
        with pytest.raises(GraphFileError):
            parse_edgelist(text, "x")
        return
    assert parse_edgelist(text, "x") == Graph.from_edges(n, simple)


def _one_line_or_graph(fn, *args):
    try:
        g = fn(*args)
    except TokendistError as exc:
        assert str(exc) and "\n" not in str(exc)
    else:
        assert isinstance(g, Graph)


@settings(max_examples=200, deadline=None)
@given(st.text(alphabet=st.sampled_from(list("0123456789 n#\t\r\n-+x.,") + ["\u0663", "\x0c"]), max_size=80))
def test_edgelist_parser_arbitrary_text_never_crashes(text):
    _one_line_or_graph(parse_edgelist, text, "fuzz.txt")


@settings(max_examples=100, deadline=None)
@given(st.binary(max_size=200))
def test_edgelist_file_arbitrary_bytes_never_crashes(tmp_path_factory, data):
    p = tmp_path_factory.mktemp("fz") / "g.txt"
    p.write_bytes(data)
    _one_line_or_graph(read_edgelist, p)


_json_values = st.recursive(st.none() | st.booleans() | st.integers(-5, 10**20) | st.floats() | st.text(max_size=3),
                            lambda kids: st.lists(kids, max_size=4) | st.dictionaries(
                                st.sampled_from(["n", "edges", "speeds", "capacities", "positions"]), kids, max_size=5),
                            max_leaves=20)


@settings(max_examples=200, deadline=None)
@given(_json_values)
def test_json_parser_arbitrary_documents_never_crash(obj):
    _one_line_or_graph(parse_graph_json, json.dumps(obj), "fuzz.json")
