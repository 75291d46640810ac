"""Metrics against naive per-node definitions; initial distributions; speeds."""

import numpy as np
import pytest
from hypothesis import given, strategies as st

from tokendist.engine import make_loads, measure
from tokendist.engine._metrics import ideal_loads
from tokendist.errors import TokendistError
from tokendist.graphs import make_graph


@given(st.lists(st.integers(0, 1000), min_size=9, max_size=9), st.booleans())
def test_metrics_match_naive_definitions(values, heterogeneous):
    g = make_graph("torus:3x3")
    if heterogeneous:
        g = g.with_speeds(np.linspace(0.5, 1.5, 9))
    w = np.array(values, dtype=np.int64)
    m = measure(g, w)
    s = np.ones(9) if g.speeds is None else g.speeds
    ideal = [w.sum() * s[i] / s.sum() for i in range(9)]
    assert m["discrepancy"] == max(values) - min(values)
    assert m["local_discrepancy"] == max(abs(values[a] - values[b]) for a, b in zip(g.u, g.v))
    assert m["l1_error"] == pytest.approx(sum(abs(values[i] - ideal[i]) for i in range(9)))
    assert m["l2_error"] == pytest.approx(sum((values[i] - ideal[i]) ** 2 for i in range(9)) ** 0.5)
    assert m["linf_error"] == pytest.approx(max(abs(values[i] - ideal[i]) for i in range(9)))
    norm = s * 9 / s.sum()
    assert m["max_weighted_load"] == pytest.approx(max(values[i] / norm[i] for i in range(9)))
    np.testing.assert_allclose(ideal_loads(g, w.sum()), ideal)


def test_initial_distributions():
    g = make_graph("ring:10")
    assert make_loads("point:50", g).tolist() == [50] + [0] * 9
    assert make_loads("point:50@3", g)[3] == 50
    u = make_loads("uniform:1000", g, seed=2)
    assert u.sum() == 1000 and (make_loads("uniform:1000", g, seed=2) == u).all()
    assert not (make_loads("uniform:1000", g, seed=3) == u).all()
    r = make_loads("random:5..7", g, seed=1)
    assert r.min() >= 5 and r.max() <= 7
    assert make_loads("ramp:0..9", g).tolist() == list(range(10))
    assert make_loads("constant:4", g).tolist() == [4] * 10


@pytest.mark.parametrize("spec", ["point:", "point:x", "point:5@99", "random:9..3", "ramp:a..b", "uniform:-1",
                                  "nosuch:3", "random:1-3"])
def test_bad_initial_specs(spec):
    with pytest.raises(TokendistError):
        make_loads(spec, make_graph("ring:10"))


@pytest.mark.parametrize("loads, message", [
    ([1.5, -2, 0, 0, 0], "non-negative"),
    ([float("nan"), 1, 1, 1, 1], "finite"),
    ([float("inf"), 1, 1, 1, 1], "finite"),
    ([True, False, True, True, False], "numbers"),
    (["1", "2", "3", "4", "5"], "numbers"),
    (np.array([2**63, 0, 0, 0, 0], dtype=np.uint64), "more than int64"),
    # Each fits in int64, their sum does not: once reported as -2**63 tokens.
    (np.array([2**62, 2**62, 0, 0, 0]), "more than int64"),
    ("constant:4611686018427387904", "more than int64"),
])
def test_initial_loads_the_engine_cannot_hold_are_refused(loads, message):
    with pytest.raises(TokendistError, match=message):
        make_loads(loads, make_graph("ring:5"))


def test_initial_load_arrays_become_token_counts_where_integral():
    g = make_graph("ring:5")
    assert make_loads([1.0, 2, 3, 4, 5], g).dtype == np.int64
    assert make_loads(np.arange(5, dtype=np.uint8), g).dtype == np.int64
    assert make_loads([0.5, 2, 3, 4, 5], g).dtype == np.float64  # for the divisible schemes
    assert make_loads(np.array([2**62, 2**62 - 1, 0, 0, 0]), g).sum() == 2**63 - 1  # the largest total


@given(st.text(max_size=30))
def test_any_text_as_initial_spec_is_a_clean_error_or_valid(text):
    g = make_graph("ring:5")
    try:
        w = make_loads(text, g, seed=0)
    except TokendistError:
        return
    assert w.shape == (5,) and w.min() >= 0


@given(st.binary(max_size=200))
def test_fuzzed_loads_file(tmp_path_factory, data):
    f = tmp_path_factory.mktemp("loads") / "l.txt"
    f.write_bytes(data)
    try:
        w = make_loads(f"file:{f}", make_graph("ring:4"))
    except TokendistError as exc:
        assert "\n" not in str(exc)
        return
    assert w.shape == (4,) and w.min() >= 0


@given(st.lists(st.integers(-50, 1000), min_size=1, max_size=30), st.booleans(), st.booleans(), st.data())
def test_fused_summary_matches_each_metric_function(values, heterogeneous, real, data):
    from tokendist.engine._metrics import METRICS, SUMMARY_METRICS, summary
    from tokendist.graphs import Graph

    n = len(values)
    edges = data.draw(st.lists(st.tuples(st.integers(0, n - 1), st.integers(0, n - 1)).filter(lambda e: e[0] != e[1]),
                               max_size=60, unique_by=lambda e: (min(e), max(e))))
    g = Graph.from_edges(n, edges)
    if heterogeneous:
        g = g.with_speeds(np.linspace(0.5, 1.5, n))
    w = np.array(values, dtype=np.float64) / 3 if real else np.array(values, dtype=np.int64)
    fused = summary(g, w)
    for name in SUMMARY_METRICS:
        one = METRICS.get(name)(g, w)
        if name in ("discrepancy", "max", "min", "local_discrepancy", "linf_error", "max_weighted_load"):
            assert fused[name] == one, name  # no summation: the same floats
            assert type(fused[name]) is (float if real or name in ("linf_error", "max_weighted_load") else int)
        else:
            assert fused[name] == pytest.approx(float(one), rel=1e-12, abs=1e-9), name


@given(st.integers(7, 14), st.integers(7, 12), st.booleans(), st.integers(0, 2**32 - 1))
def test_fused_summary_on_a_stencil_graph_matches_the_edge_loop(w, h, real, seed):
    # Tori of side >= 7 have an offset stencil: the local discrepancy then walks its runs.
    from tokendist.engine._metrics import local_discrepancy, summary

    g = make_graph(f"torus:{w}x{h}")
    assert g.stencil is not None
    rng = np.random.default_rng(seed)
    loads = rng.normal(size=g.n) * 100 if real else rng.integers(-10**12, 10**12, g.n)
    loads[rng.integers(g.n)] += 10**6  # one steep edge somewhere
    assert summary(g, loads)["local_discrepancy"] == local_discrepancy(g, loads)


@pytest.mark.parametrize("dtype", [np.int64, np.float64])
def test_sum_min_is_one_pass_of_numpys_sum_and_min(dtype):
    from tokendist.engine._metrics import sum_min

    w = np.random.default_rng(5).integers(-50, 50, size=1001).astype(dtype)
    total, low = sum_min(w)
    assert low == w.min() and total == pytest.approx(w.sum(), rel=1e-12)
    if dtype is np.int64:
        assert total == w.sum()
    assert sum_min(w[:0])[1] is None


def test_summary_with_the_callers_integer_sum_is_the_same():
    from tokendist.engine._metrics import summary

    g = make_graph("torus:7x9")
    w = np.random.default_rng(2).integers(0, 99, size=g.n)
    assert summary(g, w, int(w.sum())) == summary(g, w)
