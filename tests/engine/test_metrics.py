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
