"""The engine's per-step pass (engine._pass): the values of the separate checks and of summary()."""

import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

from tokendist import simulate
from tokendist.engine import measure
from tokendist.engine._metrics import summary, sum_min
from tokendist.engine import _pass
from tokendist.engine._pass import FLOWS, OUTFLOW, SIGN, StepPass, _step_pass, _step_pass_numpy
from tokendist.engine._simulate import _outflow
from tokendist.graphs import make_graph

GRAPHS = {spec: make_graph(spec, seed=1) for spec in ("torus:6x5", "ring:9", "random-regular:12,3", "star:5")}


def _expected(graph, new, old, mode, sent, tol):
    """What the engine's loop computed before the pass: sum_min, then the feasibility check."""
    total, low = sum_min(new)
    if mode == FLOWS:
        sent = _outflow(graph, sent)
    if mode == SIGN:
        bad = np.flatnonzero(new < -tol) if low < -tol else np.zeros(0, dtype=np.int64)
    else:
        bad = np.flatnonzero(sent > (old + tol if tol else old))
    return total, low, int(bad[0]) if bad.size else -1


@settings(max_examples=40, deadline=None)
@given(spec=st.sampled_from(sorted(GRAPHS)), real=st.booleans(), speeds=st.booleans(),
       mode=st.sampled_from([SIGN, OUTFLOW, FLOWS]), numpy_form=st.booleans(), seed=st.integers(0, 2**32 - 1))
def test_the_pass_gives_the_separate_checks_and_summary(spec, real, speeds, mode, numpy_form, seed):
    rng = np.random.default_rng(seed)
    graph = GRAPHS[spec]
    if speeds:
        graph = graph.with_speeds(rng.uniform(0.5, 2.0, graph.n))
    old = rng.integers(-3, 40, graph.n)
    new = rng.integers(-3, 40, graph.n)
    sent = {SIGN: None, OUTFLOW: rng.integers(0, 45, graph.n), FLOWS: rng.integers(-4, 5, graph.m).astype(np.int8)}[mode]
    tol = 0
    if real:
        old, new = old + rng.random(graph.n), new + rng.random(graph.n)
        sent = None if sent is None else sent + rng.random(sent.size)
        tol = 1e-9 * (abs(float(old.sum())) + graph.n)
    rec = StepPass(graph, new.dtype, 4, small=False)
    if numpy_form:  # the cold-cache form: numpy calls, the same values
        rec._ready[(new.dtype.num, (old if sent is None else sent).dtype.num)] = _step_pass_numpy
    total, low, bad = rec.check(new, old, mode, sent, tol, True)
    want_total, want_low, want_bad = _expected(graph, new, old, mode, sent, tol)
    assert (low, bad) == (want_low, want_bad)
    assert total == want_total if not real else abs(total - want_total) <= 1e-9 * abs(want_total) + 1e-9
    got = {k: v[0] for k, v in rec.columns().items()}
    # summary() takes the integer total the engine found; real loads: numpy's own sum.
    want = summary(graph, new, None if real else int(want_total))
    for name, value in want.items():
        assert got[name] == value, name  # the same floats, not just close ones


def pass_columns(graph, loads) -> list[dict]:
    """The trace columns of one record of ``loads``: by the compiled pass, then by its numpy form."""
    outs = []
    for fn in (_step_pass, _step_pass_numpy):
        rec = StepPass(graph, loads.dtype, 2, small=False)
        rec._ready[(loads.dtype.num, loads.dtype.num)] = fn
        rec.add(loads)
        outs.append(rec.columns())
    return outs


@pytest.mark.parametrize("spec", ["torus:6x5", "random-regular:12,3"])
@pytest.mark.parametrize("speeds", [False, True])
def test_numpy_form_is_the_compiled_pass_bit_for_bit(spec, speeds):
    graph = GRAPHS[spec]
    rng = np.random.default_rng(5)
    if speeds:
        graph = graph.with_speeds(rng.uniform(0.5, 2.0, graph.n))
    for dtype in (np.int64, np.float64):
        new = (rng.integers(0, 100, graph.n) + (rng.random(graph.n) if dtype is np.float64 else 0)).astype(dtype)
        outs = pass_columns(graph, new)
        for name in outs[0]:
            assert outs[0][name].dtype == outs[1][name].dtype
            assert outs[0][name].tobytes() == outs[1][name].tobytes(), name


@settings(max_examples=30, deadline=None)
@given(real=st.booleans(), mode=st.sampled_from([SIGN, OUTFLOW, FLOWS]), record=st.booleans(),
       seed=st.integers(0, 2**32 - 1))
def test_numpy_form_checks_a_step_as_the_compiled_pass(real, mode, record, seed):
    """Sum, minimum and first infeasible node: the same numbers from both forms, recorded or not."""
    graph = GRAPHS["torus:6x5"]
    rng = np.random.default_rng(seed)
    old, new = rng.integers(-3, 40, graph.n), rng.integers(-3, 40, graph.n)
    sent = {SIGN: None, OUTFLOW: rng.integers(0, 45, graph.n), FLOWS: rng.integers(-4, 5, graph.m)}[mode]
    tol = 0
    if real:
        old, new = old + rng.random(graph.n), new + rng.random(graph.n)
        sent = None if sent is None else sent + rng.random(sent.size)
        tol = 1e-9 * (abs(float(old.sum())) + graph.n)
    results = []
    for fn in (_step_pass, _step_pass_numpy):
        rec = StepPass(graph, new.dtype, 2, small=False)
        rec._ready[(new.dtype.num, (old if sent is None else sent).dtype.num)] = fn
        results.append((rec.check(new, old, mode, sent, tol, record), rec.count))
    (got, count), (want, want_count) = results
    assert count == want_count == int(record)
    assert [float(x) for x in got] == [float(x) for x in want] and got[2] == want[2]


@pytest.mark.parametrize("algo", ["single-port", "random-matching", "pairwise-averaging", "diffusion"])
def test_record_every_and_targets_keep_the_trace_of_measure(algo):
    """The fused records, the ones made after a stop rule fired, and measure() agree."""
    r = simulate("torus:6x6", algo, "random:0..50", seed=2, max_steps=300, record_every=7, until_discrepancy=4)
    assert r.trace["step"][-1] == r.steps
    final = measure(r.graph, r.loads)
    for name in ("discrepancy", "max", "min", "local_discrepancy"):
        assert r.trace[name][-1] == final[name]


def test_a_cold_small_run_compiles_the_pass_once_the_numpy_form_has_cost_enough(monkeypatch):
    """The numpy form while the pass is not compiled, the compiled pass past NUMPY_PASS_LIMIT."""
    graph = GRAPHS["ring:9"]
    loads = np.arange(graph.n, dtype=np.int64)
    monkeypatch.setattr(_pass, "kernel_ready", lambda kernel, args: False)  # as on a cold cache
    monkeypatch.setattr(_pass, "_numpy_passes", [0])
    rec = StepPass(graph, loads.dtype, 8, small=True)
    rec.add(loads)
    assert rec._ready[(loads.dtype.num, loads.dtype.num)] is _step_pass_numpy
    assert _pass._numpy_passes[0] == 1
    _pass._numpy_passes[0] = _pass.NUMPY_PASS_LIMIT
    rec.add(loads)
    assert rec._ready[(loads.dtype.num, loads.dtype.num)] is _step_pass
    assert rec.columns()["l1_error"][0] == rec.columns()["l1_error"][1]


@pytest.mark.parametrize("fn", [_step_pass, _step_pass_numpy])
def test_columns_past_the_first_buffer_keep_every_record(fn):
    """Records beyond the buffer's first size (it doubles, and the pass's packed arguments with it)."""
    graph = GRAPHS["torus:6x5"]
    rng = np.random.default_rng(11)
    rec = StepPass(graph, np.dtype(np.int64), 2, small=False)
    rec._ready[(np.dtype(np.int64).num, np.dtype(np.int64).num)] = fn
    steps = [rng.integers(0, 50, graph.n) for _ in range(9)]
    for loads in steps:
        rec.check(loads, loads, OUTFLOW, np.zeros(graph.n, dtype=np.int64), 0, True)
    columns = rec.columns()
    assert rec.ext.shape[1] >= len(steps) and len(columns["max"]) == len(steps)
    for k, loads in enumerate(steps):
        want = summary(graph, loads, int(loads.sum()))
        assert {name: columns[name][k] for name in want} == want, k
