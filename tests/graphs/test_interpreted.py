"""The graph helpers interpreted (small graphs, cold cache) give what their compiled kernels give."""

from contextlib import contextmanager

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tokendist.errors import TokendistError
from tokendist.graphs import Graph, edge_colouring, is_biconnected, make_graph, st_numbering
from tokendist.graphs import _colouring, _interpreted, _orientation, _stencil, _trees

ZOO = ["ring:7", "ring:8", "path:9", "star:6", "complete:6", "complete:7", "torus:4x4", "torus:5x6", "torus:16x16",
       "hypercube:5", "grid:5x7", "kary:2,4", "random-regular:30,3", "random-tree:25", "butterfly:3", "gnp:20,0.2",
       "torus:3x3x4"]


@contextmanager
def mode(python: bool):
    """Every helper interpreted (``python``) or compiled, whatever numba's cache holds."""
    saved = _interpreted.kernel_compiled, _interpreted.INTERPRETED_BUDGET
    _interpreted.kernel_compiled = (lambda kernel, args: False) if python else (lambda kernel, args: True)
    _interpreted.INTERPRETED_BUDGET = float("inf")  # (no switch to the compiled kernel half-way)
    try:
        yield
    finally:
        _interpreted.kernel_compiled, _interpreted.INTERPRETED_BUDGET = saved


def _outcome(f):
    try:
        return ("ok", f())
    except TokendistError as exc:
        return ("error", str(exc))


def helpers(g):
    """Every public result that goes through a graph kernel, as comparable Python values."""
    out = {"bipartite": _colouring._is_bipartite(g), "biconnected": is_biconnected(g)}
    for method in ("auto", "bipartite", "tree", "misra-gries", "greedy"):
        out[method] = _outcome(lambda: edge_colouring(g, method=method).tolist())
    if g.n >= 2 and g.m:
        out["st"] = _outcome(lambda: st_numbering(g).tolist())
    stencil = _stencil.find_stencil(g, min_coverage=0.0)
    out["stencil"] = None if stencil is None else (stencil.starts.tolist(), stencil.ends.tolist(), stencil.lower,
                                                   stencil.upper, stencil.covered)
    if g.is_tree:
        out["subtree"] = _trees.subtree_sizes(g).tolist()
    return out


def same_both_ways(g):
    before = sum(_interpreted._spent.values())
    with mode(python=True):
        interpreted = helpers(g)
    assert sum(_interpreted._spent.values()) > before  # the helpers did run interpreted
    with mode(python=False):
        compiled = helpers(g)
    assert interpreted == compiled
    # The same types too: np.False_ == False, but it prints (and serialises) otherwise.
    assert _types(interpreted) == _types(compiled)


def _types(value):
    if isinstance(value, dict):
        return {k: _types(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_types(v) for v in value]
    return type(value)


@pytest.mark.parametrize("spec", ZOO)
def test_zoo_helpers_interpreted_equal_compiled(spec):
    same_both_ways(make_graph(spec))


@st.composite
def random_graphs(draw, max_n=16):
    n = draw(st.integers(1, max_n))
    pairs = [(a, b) for a in range(n) for b in range(a + 1, n)]
    edges = draw(st.lists(st.sampled_from(pairs), unique=True, max_size=len(pairs))) if pairs else []
    return Graph.from_edges(n, edges, spec="hypothesis")


@given(random_graphs())
@settings(max_examples=150, deadline=None)
def test_random_graph_helpers_interpreted_equal_compiled(g):
    same_both_ways(g)


@given(random_graphs(max_n=12), st.data())
@settings(max_examples=100, deadline=None)
def test_raw_kernels_interpreted_equal_compiled_including_failures(g, data):
    """Kernel by kernel, on arguments where they fail too (odd cycles, cut vertices, too few colours)."""
    eu, ev = np.ascontiguousarray(g.u), np.ascontiguousarray(g.v)
    k = data.draw(st.integers(1, max(1, g.max_degree + 1)))
    calls = [(_colouring._two_colouring_kernel, (g.n, g.indptr, g.indices)),
             (_colouring._bipartite_kernel, (g.n, eu, ev, k)),
             (_colouring._misra_gries_kernel, (g.n, eu, ev, k)),
             (_colouring._greedy_kernel, (g.n, eu, ev, np.arange(g.m, dtype=np.int64), k))]
    if g.m:
        s, t = int(g.u[0]), int(g.v[0])
        order, parent, low, pre, _ = _orientation._st_dfs(g.indptr, g.indices, s, t)
        calls += [(_orientation._st_dfs, (g.indptr, g.indices, s, t)),
                  (_orientation._dfs_cut_vertex, (order, parent, low, pre, s))]
        if len(order) == g.n:
            calls.append((_orientation._st_list, (order, parent, low, s, t)))
    for kernel, args in calls:
        compiled = kernel(*args)
        interpreted = _interpreted.interpreted(kernel)(*args)
        for a, b in zip(compiled if isinstance(compiled, tuple) else (compiled,),
                        interpreted if isinstance(interpreted, tuple) else (interpreted,)):
            if isinstance(a, np.ndarray):
                assert a.dtype == b.dtype and np.array_equal(a, b), kernel.__name__
            else:
                assert a == b, kernel.__name__


def test_large_graphs_and_cached_kernels_stay_compiled():
    g = make_graph("torus:64x64")
    assert g.n + g.m > _interpreted.SMALL_GRAPH_SIZE
    # The interpreted form never runs above the size: a stub that would fail shows it.
    saved = _interpreted.interpreted
    _interpreted.interpreted = None
    try:
        assert _colouring._is_bipartite(g)
    finally:
        _interpreted.interpreted = saved
    small = make_graph("ring:8")
    kernel, args = _colouring._two_colouring_kernel, (small.n, small.indptr, small.indices)
    kernel(*args)  # now compiled in this process
    assert _interpreted.kernel_compiled(kernel, args)


def test_a_kernel_interpreted_past_its_budget_is_compiled(monkeypatch):
    g = make_graph("ring:8")
    kernel = _colouring._two_colouring_kernel
    calls = []
    monkeypatch.setattr(_interpreted, "kernel_compiled", lambda k, args: False)  # taken as cold
    monkeypatch.setattr(_interpreted, "interpreted", lambda k: (lambda *a: calls.append(k) or k.py_func(*a)))
    monkeypatch.setattr(_interpreted, "_spent", {})
    assert _colouring._is_bipartite(g) and calls == [kernel]  # interpreted, its time counted
    _interpreted._spent[id(kernel)] = _interpreted.INTERPRETED_BUDGET  # as if it had run that long
    assert _colouring._is_bipartite(g) and calls == [kernel]  # now the compiled kernel
