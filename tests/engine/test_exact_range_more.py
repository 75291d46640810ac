"""Exact answers at the int64 edges, beyond the rounding kernels of test_exact_range.py.

Loads near 2**62 and 2**63 - 1, totals just under 2**63, and integers of mixed magnitude (2**53 + 1
next to 0, where float64 cannot hold the average) through every registered integer protocol, the
engine's metrics, stopping rules, trace columns and feasibility check, and what consumes a run
(the compare verdict, the sweep's rows and statistics, the analysis figures). Each value is
compared with Python integers and fractions; a run either gives the exact answer or refuses in one
line (:class:`TokendistError`).
"""

from __future__ import annotations

import math
from fractions import Fraction
from itertools import combinations

import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

from tokendist.analysis._offline import offline_optimum
from tokendist.analysis._tree_transport import min_exchanges, transport_cost
from tokendist.engine import PROTOCOLS, EdgeFailures, make_protocol, simulate
from tokendist.engine._injection import parse_injection
from tokendist.engine._metrics import at_most, errors, measure, summary, target_reached
from tokendist.engine._pass import FLOWS, StepPass, _step_pass, _step_pass_numpy
from tokendist.engine._simulate import _outflow
from tokendist.errors import TokendistError
from tokendist.experiments._verdict import settle_step
from tokendist.experiments.sweep._report import _numbers, describe
from tokendist.experiments.sweep._run import level_steps
from tokendist.experiments.sweep._spec import level_name
from tokendist.experiments.sweep._store import _column, _trace_column
from tokendist.graphs import make_graph
from tokendist.protocols.modern._matching import RandomMatching

from .test_pass import pass_columns

M = 2**63 - 1
INTEGER_PROTOCOLS = [name for name in PROTOCOLS.names() if not PROTOCOLS.get(name).divisible]
# Magnitudes at the edges: the int32 and float64 boundaries, 2**62, int64's top.
BIG = [0, 1, 2**31 - 1, 2**31 + 3, 2**53 - 1, 2**53, 2**53 + 1, 2**53 + 3, 2**62 - 1, 2**62, 2**62 + 5, M - 7]


def exact_metrics(graph, loads) -> dict:
    """Every summary metric of ``loads`` in Python integers and fractions (speeds as exact binary fractions)."""
    w = [int(x) for x in loads]
    total, n = sum(w), len(w)
    if graph.speeds is None:
        ideal = [Fraction(total, n)] * n
        weighted = [Fraction(x) for x in w]
    else:
        s = [Fraction(float(x)) for x in graph.speeds]
        ideal = [total * si / sum(s) for si in s]
        weighted = [x / (si * n / sum(s)) for x, si in zip(w, s)]
    e = [x - i for x, i in zip(w, ideal)]
    local = max((abs(w[a] - w[b]) for a, b in zip(graph.u.tolist(), graph.v.tolist())), default=0)
    potential = sum(x * x for x in e)
    return {"discrepancy": max(w) - min(w), "max": max(w), "min": min(w), "local_discrepancy": local,
            "l1_error": sum(abs(x) for x in e), "l2_error": math.sqrt(potential), "linf_error": max(abs(x) for x in e),
            "potential": potential, "max_weighted_load": max(weighted)}


def assert_metrics(got: dict, graph, loads, what=""):
    for name, want in exact_metrics(graph, loads).items():
        value = got[name]
        if isinstance(want, int):
            assert type(value) is int and value == want, (what, name, value, want)
        else:
            # A float metric: within a few units of the last places of the exact value (and of 2**-30
            # of a token where the exact value is 0: the double-double ideal with speeds).
            assert abs(value - float(want)) <= 1e-14 * abs(float(want)) + 1e-9, (what, name, value, float(want))


def _loads(graph, rng, top):
    picks = [b for b in BIG if b <= top]
    loads = np.array([picks[int(rng.integers(0, len(picks)))] for _ in range(graph.n)], dtype=np.int64)
    while sum(int(x) for x in loads) > M:  # a total beyond int64 is refused: not a case here
        loads[int(np.argmax(loads))] //= 2
    return loads


# --- the metrics -------------------------------------------------------------------------------------

def test_errors_of_loads_beside_2_62_are_exact():
    # float64 ideal of [2**62 + 1, 2**62 - 1] is 2**62 and both loads rounded to it: every error was 0.
    graph = make_graph("path:2")
    m = summary(graph, np.array([2**62 + 1, 2**62 - 1]))
    assert (m["l1_error"], m["linf_error"], m["potential"]) == (2.0, 1.0, 2.0)
    q = M // 8
    loads = np.array([q + (M - 8 * q)] + [q] * 7)  # total 2**63 - 1: the ideal is q + 7/8
    assert_metrics(summary(make_graph("ring:8"), loads), make_graph("ring:8"), loads)


@settings(max_examples=40, deadline=None)
@given(spec=st.sampled_from(["ring:8", "torus:3x3", "star:4", "hypercube:3"]), speeds=st.booleans(),
       top=st.sampled_from([2**31 + 3, 2**53 + 3, 2**62 + 5, M - 7]), seed=st.integers(0, 2**32 - 1))
def test_every_metric_form_equals_the_fraction_reference(spec, speeds, top, seed):
    rng = np.random.default_rng(seed)
    graph = make_graph(spec)
    if speeds:
        graph = graph.with_speeds(rng.uniform(0.5, 4.0, graph.n))
    loads = _loads(graph, rng, top)
    assert_metrics(summary(graph, loads), graph, loads, "summary")
    assert_metrics({k: measure(graph, loads, [k])[k] for k in exact_metrics(graph, loads)}, graph, loads, "one by one")
    for form, cols in zip(("compiled pass", "numpy pass"), pass_columns(graph, loads)):  # the engine's trace
        assert_metrics({k: v[0].item() for k, v in cols.items()}, graph, loads, form)
    e = errors(graph, loads)
    want = exact_metrics(graph, loads)
    assert abs(float(np.abs(e).sum()) - float(want["l1_error"])) <= 1e-12 * float(want["l1_error"]) + 1e-9


@pytest.mark.parametrize("total", [10**6 + 3, 2**40 + 3, 2**53, 2**53 + 7, 2**62 + 3, M])
@pytest.mark.parametrize("seed", [1, 2])
def test_errors_near_balance_with_speeds_are_exact(total, seed):
    # Each load within one token of its ideal W s_i / S: the error terms are smaller than a token, so
    # only an ideal right to far below a token gives them (float64 was 2**9 off; a double-double sum
    # that added the load's low half last, 2**-20).
    rng = np.random.default_rng(seed)
    graph = make_graph("torus:4x4").with_speeds(rng.uniform(1.0, 4.0, 16))
    s = [Fraction(float(x)) for x in graph.speeds]
    ideal = [total * x / sum(s) for x in s]
    loads = np.array([math.floor(i) for i in ideal], dtype=np.int64)
    loads[: total - sum(int(x) for x in loads)] += 1
    want = [float(int(w) - i) for w, i in zip(loads, ideal)]
    assert np.abs(errors(graph, loads) - want).max() <= 1e-12
    assert_metrics(summary(graph, loads), graph, loads)
    for cols in pass_columns(graph, loads):
        assert abs(cols["linf_error"][0] - max(abs(x) for x in want)) <= 1e-12


def test_pass_forms_agree_bit_for_bit_at_large_loads():
    rng = np.random.default_rng(3)
    for graph in (make_graph("torus:4x4"), make_graph("torus:4x4").with_speeds(rng.uniform(1, 3, 16))):
        cols = pass_columns(graph, _loads(graph, rng, M - 7))
        for name in cols[0]:
            assert cols[0][name].tobytes() == cols[1][name].tobytes(), name


# --- stopping rules and thresholds -------------------------------------------------------------------

@pytest.mark.parametrize("level", [2.0**53, 1e16, 2.0**62])
def test_a_real_level_is_compared_exactly_with_an_integer_discrepancy(level):
    # numpy rounds the int64 to float64 first: 2**53 + 1 <= 2.0**53 was True.
    graph = make_graph("path:2")
    above = int(level) + 1
    assert not target_reached(graph, np.array([above, 0]), until_discrepancy=level)
    assert target_reached(graph, np.array([int(level), 0]), until_discrepancy=level)
    assert not at_most(np.int64(above), level) and at_most(np.int64(above), level * 2)
    col = np.array([above, above, int(level) - 1], dtype=np.int64)
    assert at_most(col, level).tolist() == [False, False, True]
    assert settle_step(np.arange(3), col, level) == 2
    assert list(level_steps(np.arange(3), col, [level]).values()) == [2, 2]  # (the sweep's steps_to, settled)


def test_run_until_a_real_level_stops_where_the_integer_level_does():
    # multi-port moves one token per edge a step: the discrepancy falls by at most 2 a step, so the
    # step at which it reaches 2**53 is well defined and the same for the level as int and as float.
    loads = np.array([2**53 + 9, 0, 0, 0])
    by_int = simulate("ring:4", "multi-port", loads, max_steps=50, until_discrepancy=2**53 + 2)
    by_float = simulate("ring:4", "multi-port", loads, max_steps=50, until_discrepancy=float(2**53 + 2))
    assert by_int.steps == by_float.steps and by_int.final["discrepancy"] <= 2**53 + 2
    assert by_float.steps_to("discrepancy", float(2**53 + 2)) == by_int.steps_to("discrepancy", 2**53 + 2)


# --- trace columns and totals ------------------------------------------------------------------------

def test_tokens_moved_past_int64_stay_exact_in_the_trace():
    # 2**63 - 8 tokens from one node of ring:8: more than 2**63 token moves within 30 steps. The
    # trace column became float64 (np.asarray of Python ints past int64).
    loads = np.array([M - 7] + [0] * 7)
    r = simulate("ring:8", "diffusion-floor", loads, max_steps=30)
    col = r.trace["tokens_moved"]
    assert r.tokens_moved > M and col.dtype.kind != "f"
    assert int(col[-1]) == r.tokens_moved and r.to_json()["tokens_moved"] == r.tokens_moved
    assert _trace_column(col).to_pylist()[-1] == str(r.tokens_moved)  # the sweep's trace file: exact text
    assert _column([r.tokens_moved, 1]).to_pylist() == [str(r.tokens_moved), "1"]


def test_total_just_under_int64_runs_and_just_over_is_refused():
    q = M // 8
    loads = np.array([q + (M - 8 * q)] + [q] * 7)
    r = simulate("ring:8", "diffusion-floor", loads, max_steps=5)
    assert r.tokens == M and sum(int(x) for x in r.loads) == M
    loads[0] += 1
    with pytest.raises(TokendistError, match="int64"):
        simulate("ring:8", "diffusion-floor", loads, max_steps=5)


# --- protocols ---------------------------------------------------------------------------------------

@settings(max_examples=200, deadline=None)
@given(x=st.integers(0, M), y=st.integers(0, M), odd=st.booleans())
def test_matching_pair_average_never_wraps(x, y, odd):
    # An unmatched node is its own partner: its pair sum 2x wrapped past 2**63 for x >= 2**62.
    loads = np.array([x, y], dtype=np.int64)
    partner = np.array([0, 1]) if x + y > M else np.array([1, 0])  # a real pair only when its sum fits
    odd_here = np.array([odd, not odd])
    step = RandomMatching._balance_nodes(loads, partner, odd_here, np.zeros(0, np.int64), np.zeros(0, np.int64),
                                         np.zeros(0, np.int64))
    for i in range(2):
        pair_sum = int(loads[i]) + int(loads[partner[i]])  # (Python ints: no wrap)
        assert int(step.loads[i]) == (pair_sum + int(odd_here[i])) // 2


@pytest.mark.parametrize("algo", ["random-matching", "balancing-circuit", "pairwise-averaging"])
@pytest.mark.parametrize("seed", [1, 2])
def test_pairwise_rules_conserve_a_load_beyond_2_62(algo, seed):
    loads = np.array([2**62 + 1] + [0] * 14 + [2**62 - 5])
    for params in ({"kernel": "numpy"}, {}):
        r = simulate("ring:16", algo, loads, max_steps=60, seed=seed, params=params)
        assert sum(int(x) for x in r.loads) == 2**63 - 4 and int(r.loads.min()) >= 0


def _live_reference(graph, live, loads, mode):
    """One rounded step (Sec. 4) on the live edges ``live`` of ``graph`` in Python integers."""
    deg = graph.degrees
    new = [int(x) for x in loads]
    for e in live:
        u, v = int(graph.u[e]), int(graph.v[e])
        lu, lv = int(loads[u]), int(loads[v])
        hi, lo = (u, v) if lu > lv else (v, u)
        x = Fraction(1, 2 * int(max(deg[u], deg[v]))) * abs(lu - lv)
        amount = math.floor(x) if mode == "floor" else math.ceil(x)
        new[hi] -= amount
        new[lo] += amount
    return new


@pytest.mark.parametrize("mode", ["floor", "ceil"])
@pytest.mark.parametrize("spec", ["torus:4x4", "hypercube:3", "ring:8"])
def test_sec4_dynamic_step_equals_the_integer_reference(mode, spec):
    # The step graph of an edge-failure run summed flows per node in float64: 32 tokens lost at 2**62.
    graph = make_graph(spec)
    rng = np.random.default_rng(7)
    loads = _loads(graph, rng, 2**62 + 5)
    dyn = EdgeFailures(0.3)
    dyn.reset(graph, np.random.default_rng(1))
    proto = make_protocol(f"diffusion-{mode}")
    proto.reset(graph, loads.copy(), np.random.default_rng(0))
    for t in range(3):
        g = dyn.graph_at(t)
        got = proto.step(t, g, loads).loads
        want = _live_reference(graph, g.base_edges.tolist(), loads, mode)
        assert got.tolist() == want
        loads = np.asarray(got, dtype=np.int64)


def test_a_load_growing_past_the_exact_range_is_refused_in_one_line():
    # sos-iou overshoots: 6 leaves of 2**53 - 1 on star:6 put more than 2**53 on the centre, where
    # its float64 rule is no longer exact.
    loads = np.array([0] + [2**53 - 1] * 6)
    with pytest.raises(TokendistError, match=r"exact for loads below 2\*\*53; a load reached \d+ after step"):
        simulate("star:6", "sos-iou", loads, max_steps=50, seed=1)
    r = simulate("star:6", "sos-iou", loads // 8, max_steps=50, seed=1)  # well inside: unaffected
    assert sum(int(x) for x in r.loads) == int((loads // 8).sum())


@pytest.mark.parametrize("fn", [_step_pass, _step_pass_numpy])
def test_feasibility_of_integer_flows_is_exact_past_2_53(fn):
    # 2**54 + 1 held, 2**54 + 2 sent: both round to 2**54 in float64 and the step passed as feasible.
    graph = make_graph("path:2")
    old, flows = np.array([2**54 + 1, 0]), np.array([2**54 + 2])
    new = old + np.array([-1, 1]) * (2**54 + 2)
    rec = StepPass(graph, old.dtype, 2, small=False)
    rec._ready[(new.dtype.num, flows.dtype.num)] = fn
    assert rec.check(new, old, FLOWS, flows, 0, False)[2] == 0
    assert rec.check(old, old, FLOWS, np.array([2**54 + 1]), 0, False)[2] == -1  # exactly what it held
    assert int(_outflow(graph, flows)[0]) == 2**54 + 2


# --- consumers ---------------------------------------------------------------------------------------

def test_sweep_statistics_of_large_integers_are_exact():
    d = describe([2**62 + 1])
    assert d["median"] == 2**62 + 1 and d["mean"] == float(2**62 + 1)
    d = describe([2**62 + 1, 2**62 + 3, 2**62 + 8])
    assert d["median"] == 2**62 + 3 and d["std"] == pytest.approx(math.sqrt(13))
    assert describe([10, 12, 14, None])["median"] == 12.0  # ordinary values: as before


def test_tree_optimum_past_int64_equals_brute_force():
    # The optimum of [2**62, 0, 0, 0, 0] on path:5 is 2**63 - 2 exchanges: the int64 knapsack wrapped.
    for spec, loads in (("path:5", [2**62, 0, 0, 0, 0]), ("star:4", [0, 2**62 + 3, 2**61, 7, 2**60]),
                        ("path:4", [M - 7, 0, 0, 0])):
        tree = make_graph(spec)
        total, n = sum(loads), len(loads)
        a, r = divmod(total, n)
        best = min(transport_cost(tree, loads, [a + (i in c) for i in range(n)]) for c in combinations(range(n), r))
        assert min_exchanges(tree, loads) == best
        assert best > 0


def test_offline_optimum_of_a_total_past_int64_is_balanced_already():
    # numpy's sum of three loads of 2**62 wrapped to -2**62: the optimum was refused as billions of steps.
    assert offline_optimum(make_graph("path:3"), [2**62] * 3).steps == 0


# --- every protocol at the edges ---------------------------------------------------------------------

def _cases(n, limit):
    top = limit - 1 if limit else M - 7
    q = M // n
    yield "single", [top] + [0] * (n - 1)
    yield "total 2**63-1", [q + (M - q * n)] + [q] * (n - 1)
    yield "2**53+1 beside 0", [2**53 + 1] + [0] * (n - 1)
    yield "2**53+1 and +2", [2**53 + 1 + (i % 2) for i in range(n)]


@pytest.mark.slow
@pytest.mark.parametrize("spec", ["ring:8", "kary:2,2", "random-regular:8,3", "torus:3x3@speeds"])
@pytest.mark.parametrize("algo", INTEGER_PROTOCOLS)
def test_every_integer_protocol_is_exact_or_refuses(algo, spec):
    cls = PROTOCOLS.get(algo)
    spec, _, hetero = spec.partition("@")
    if hetero and not cls.uses_speeds:
        pytest.skip("a heterogeneous graph is for the protocols that use speeds")
    limit = cls.exact_load_limit
    graph = make_graph(spec, seed=1)
    for name, loads in _cases(graph.n, limit):
        loads = np.array(loads, dtype=np.int64)
        total = sum(int(x) for x in loads)
        try:
            r = simulate(spec, algo, loads, max_steps=25, seed=3, speeds="uniform:1..4" if hetero else None,
                         allow_infeasible=True)
        except TokendistError as exc:
            # Only the declared limits: a total past int64, or a load (initial or grown) past a
            # protocol's exact range.
            assert limit is not None or total > M, (name, str(exc))
            assert "\n" not in str(exc)
            continue
        assert r.tokens == total and sum(int(x) for x in r.loads) + int(r.in_transit) == total, name
        assert r.stop_reason in ("max-steps", "stable", "cycle", "fixed-point"), name
        assert_metrics(r.initial, r.graph, loads, name)
        assert_metrics(r.final, r.graph, r.loads, name)
        assert r.trace["discrepancy"][-1] == r.final["discrepancy"] or r.trace["step"][-1] != r.steps
        assert r.trace["tokens_moved"].dtype.kind != "f" and int(r.trace["tokens_moved"][-1]) == r.tokens_moved


def test_injection_past_int64_is_refused_in_one_line():
    # The network's total wrapped: a run reported -2**63 + 4192 tokens and a negative backlog.
    loads = np.array([M - 800] + [0] * 7)
    with pytest.raises(TokendistError, match="more than int64 holds"):
        simulate("ring:8", "diffusion-floor", loads, max_steps=5, injection=parse_injection("rate=1000"), seed=1)
    r = simulate("ring:8", "diffusion-floor", loads, max_steps=5, injection=parse_injection("rate=100"), seed=1)
    assert r.tokens == M - 800 + 500 and sum(int(x) for x in r.loads) == r.tokens


def test_sweep_levels_past_2_53_are_distinct_columns_and_text_figures_are_numbers():
    # Six significant digits named 2**53 + 1 and 2**53 + 2 alike (refused as one level twice), and a
    # column mixing integers past 2**53 with reals is exact text that the report took as text.
    assert level_name(2**53 + 1) != level_name(2**53 + 2) and level_name(2**53 + 1) == str(2**53 + 1)
    assert (level_name(2), level_name(2.0), level_name(0.5)) == ("2", "2", "0.5")
    row = _numbers({"final_discrepancy": str(2**62 + 1), "steps_to_1": "7", "final_l1_error": "0.5", "algo": "x"})
    assert row == {"final_discrepancy": 2**62 + 1, "steps_to_1": 7, "final_l1_error": 0.5, "algo": "x"}
