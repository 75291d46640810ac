"""The four roundings of Sec. 4 of Subramanian-Scherson (1994) for indivisible tasks.

Every kernel is compared with a deliberately naive reference: a Python loop over nodes and
neighbours in exact rational arithmetic (``fractions.Fraction``).
"""

from collections import Counter
from fractions import Fraction

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tokendist._random import counter_uniform_scalar, stream, stream_key
from tokendist.engine import make_protocol, run_node_rules, simulate
from tokendist.errors import InfeasibleStepError
from tokendist.graphs import biconnected_supergraph, make_graph, st_orientation

from .test_diffusion import connected_graphs

ROUNDED = ["diffusion-floor", "diffusion-ceil", "diffusion-random", "diffusion-oriented"]
THIRD = {"matrix": "uniform:1/3", "min_diag": 1 / 3}


def naive_step(graph, loads, rounding, *, key=0, t=0, coin="pij"):
    """Line (7) of Figure 2 rounded as Sec. 4 says, node by node, in exact arithmetic.

    Uses the default P = 1/(2 max(d_i, d_j)) of the graph it is given (H for the oriented rule on a
    graph that is not biconnected).
    """
    orient = st_orientation(graph) if rounding == "oriented" else None
    new = [int(x) for x in loads]
    for i in range(graph.n):
        for j in graph.neighbours(i).tolist():
            if loads[i] <= loads[j]:
                continue  # line (6): only the heavier end sends
            e = int(graph.edge_index(i, j))
            p = Fraction(1, 2 * max(int(graph.degrees[i]), int(graph.degrees[j])))
            x = p * int(loads[i] - loads[j])
            lo, hi = x.numerator // x.denominator, -(-x.numerator // x.denominator)
            if rounding == "floor":
                amt = lo
            elif rounding == "ceil":
                amt = hi
            elif rounding == "random":
                head = counter_uniform_scalar(key, t, e) < (float(p) if coin == "pij" else float(x - lo))
                amt = hi if head else lo
            else:
                along = (orient[e] > 0) == (i < j)  # directed from i to j
                amt = hi if along else lo
            new[i] -= amt
            new[j] += amt
    return np.array(new)


@given(connected_graphs(max_n=12), st.integers(0, 2**31), st.sampled_from(ROUNDED),
       st.sampled_from(["numba", "numpy"]), st.sampled_from(["pij", "fraction"]))
@settings(max_examples=60, deadline=None)
def test_sec4_kernels_match_the_naive_rule(graph, seed, algo, kernel, coin):
    rng = np.random.default_rng(seed)
    loads = rng.integers(-3, 60, graph.n)
    params = {"kernel": kernel}
    if algo == "diffusion-random":
        params["coin"] = coin
    p = make_protocol(algo, params)
    p.reset(graph, loads.copy(), stream(seed, "protocol"))
    rounding = algo.split("-")[1]
    key = stream_key(stream(seed, "protocol"))
    for t in range(3):
        out = p.step(t, graph, loads)
        if rounding == "oriented":
            h, _ = biconnected_supergraph(graph)
            expected = naive_step(h, loads, rounding)
        else:
            expected = naive_step(graph, loads, rounding, key=key, t=t, coin=coin)
        np.testing.assert_array_equal(out.loads, expected)
        assert out.loads.sum() == loads.sum()  # tokens are sacred
        loads = out.loads.copy()


# ---------------------------------------------------------------------- Figure 3: the floor
def test_sec4_figure3_floor_converges_to_an_unbalanced_fixed_point():
    # Neighbours differ by one, weight 1/3 on every edge: floor(1/3) = 0, nothing moves.
    r = simulate("ring:4", "diffusion-floor", [1, 2, 3, 2], params=THIRD, max_steps=10)
    assert r.stop_reason == "stable" and r.steps == 1
    assert r.loads.tolist() == [1, 2, 3, 2] and r.final["discrepancy"] == 2
    # The same with the paper's P_ii >= 1/2 (P_ij = 1/4 on a ring): a staircase that never moves.
    r = simulate("ring:8", "diffusion-floor", [1, 2, 3, 4, 5, 4, 3, 2], max_steps=10)
    assert r.stop_reason == "stable" and r.final["discrepancy"] == 4


@given(connected_graphs(), st.integers(0, 2**31))
@settings(max_examples=30, deadline=None)
def test_sec4_floor_never_overdraws_and_stops_where_no_floor_is_positive(graph, seed):
    loads = np.random.default_rng(seed).integers(0, 80, graph.n)
    r = simulate(graph, "diffusion-floor", loads, max_steps=3000)
    assert r.infeasible_steps == 0 and r.loads.min() >= 0 and r.loads.sum() == loads.sum()
    assert r.stop_reason == "stable"
    p = 1.0 / (2 * np.maximum(graph.degrees[graph.u], graph.degrees[graph.v]))
    assert np.all(p * np.abs(r.loads[graph.u] - r.loads[graph.v]) < 1 + 1e-12)


# ---------------------------------------------------------------------- Figure 4: the ceiling
def test_sec4_figure4_ceiling_oscillates():
    # Neighbours differ by two, weight 1/3: 2/3 of a task is due, a whole task moves, forever.
    r = simulate("ring:4", "diffusion-ceil", [0, 2, 0, 2], params=THIRD, max_steps=10, keep_loads_every=1)
    assert r.stop_reason == "cycle" and r.cycle_length == 2
    assert r.load_history[:3].tolist() == [[0, 2, 0, 2], [2, 0, 2, 0], [0, 2, 0, 2]]
    r = simulate("ring:4", "diffusion-ceil", [0, 2, 0, 2], max_steps=10)  # P_ij = 1/4 as well
    assert r.stop_reason == "cycle" and r.cycle_length == 2


def test_sec4_ceiling_overdraws_infeasible_unless_allowed():
    # "A processor may not have enough tasks for all its neighbors": the centre of a star holds 1
    # and owes ceil(1/6) = 1 to each of 3 leaves.
    with pytest.raises(InfeasibleStepError, match="node 0 holds 1 tokens but rule 'diffusion-ceil' sends 3"):
        simulate("star:3", "diffusion-ceil", [1, 0, 0, 0], max_steps=5)
    r = simulate("star:3", "diffusion-ceil", [1, 0, 0, 0], max_steps=5, allow_infeasible=True)
    assert r.infeasible_steps >= 1 and r.report["min_load"] == -2 and r.report["negative_load_steps"] >= 1
    assert r.loads.sum() == 1


def test_sec4_ceiling_never_stops_unless_flat():
    # Any difference sends at least one task, so every fixed point is constant; runs end in cycles.
    reasons = Counter()
    for seed in range(10):
        r = simulate("torus:4x4", "diffusion-ceil", "random:0..30", seed=seed, max_steps=2000, allow_infeasible=True)
        reasons[r.stop_reason] += 1
        if r.stop_reason == "stable":
            assert np.ptp(r.loads) == 0
    assert reasons["cycle"] >= 8


# ---------------------------------------------------------------------- the biased coin
def test_sec4_random_coins_are_per_step_and_edge_and_shared_with_the_node_rule():
    r = simulate("torus:4x4", "diffusion-random", "random:0..30", seed=3, max_steps=20, keep_loads_every=1,
                 allow_infeasible=True)
    hist, _ = run_node_rules("torus:4x4", "diffusion-random", "random:0..30", 20, seed=3, allow_negative=True)
    np.testing.assert_array_equal(hist, r.load_history)
    other = simulate("torus:4x4", "diffusion-random", "random:0..30", seed=4, max_steps=20, allow_infeasible=True)
    assert not np.array_equal(other.loads, r.loads)


@pytest.mark.parametrize("coin", ["pij", "fraction"])
def test_sec4_random_rounding_stalls_above_balance_on_a_256_node_torus(coin):
    # The paper: "the load distribution balances to an extent, but fails to balance any further".
    # Measured: on torus:16x16 from 2560 tasks on one node the discrepancy stays >= 2 over the
    # last 500 of 1500 iterations (it does reach exact balance on small graphs: see the docs).
    r = simulate("torus:16x16", "diffusion-random", "point:2560", seed=1, max_steps=1500,
                 params={"coin": coin}, allow_infeasible=True)
    assert r.stop_reason == "max-steps"
    assert r.trace["discrepancy"][-500:].min() >= 2
    assert r.loads.sum() == 2560


def test_sec4_random_rounding_can_balance_exactly_on_small_graphs():
    # Against "very unlikely": all 10 seeds reach perfect balance on ring:8 within 3000 iterations.
    hits = [simulate("ring:8", "diffusion-random", "point:80", seed=s, max_steps=3000, until_discrepancy=0,
                     allow_infeasible=True).stop_reason for s in range(10)]
    assert hits.count("target-reached") == 10


# ---------------------------------------------------------------------- the st-orientation
def test_sec4_oriented_claim_fails_counterexample_ring4():
    # Orientation of ring:4 from s = 0, t = 1: 0->1, 0->3, 3->2, 2->1. With P_ij = 1/4 the loads
    # (0, 3, 2, 1) grow by at most 3 along every directed edge, so every heavier end sends against
    # the orientation: floor(3/4) = floor(1/4) = 0. A fixed point with discrepancy 3, not balanced.
    assert st_orientation(make_graph("ring:4")).tolist() == [1, 1, -1, -1]
    r = simulate("ring:4", "diffusion-oriented", [0, 3, 2, 1], max_steps=10)
    assert r.stop_reason == "stable" and r.loads.tolist() == [0, 3, 2, 1]


@given(connected_graphs(max_n=10), st.integers(0, 2**31))
@settings(max_examples=30, deadline=None)
def test_sec4_oriented_what_holds_fixed_points_are_monotone_along_the_orientation(graph, seed):
    # What holds instead: at a fixed point the loads do not decrease along any directed edge and
    # rise by less than 1/P_ab along it, so the discrepancy is below 1/P_st (s, t the source and
    # the sink). Runs end at such a fixed point or in a cycle of states (see the torus:8x8 test).
    loads = np.random.default_rng(seed).integers(0, 40, graph.n)
    r = simulate(graph, "diffusion-oriented", loads, max_steps=5000, allow_infeasible=True)
    assert r.loads.sum() == loads.sum()
    assert r.stop_reason in ("stable", "cycle")
    if r.stop_reason != "stable":
        return
    h, _ = biconnected_supergraph(graph)
    d = st_orientation(h)
    tail, head = np.where(d > 0, h.u, h.v), np.where(d > 0, h.v, h.u)
    rise = r.loads[head] - r.loads[tail]
    p = 1.0 / (2 * np.maximum(h.degrees[h.u], h.degrees[h.v]))
    assert np.all(rise >= 0) and np.all(rise * p < 1)
    s, t = r.report["source"], r.report["sink"]
    assert r.final["discrepancy"] == r.loads[t] - r.loads[s]
    assert r.final["discrepancy"] * p[int(h.edge_index(s, t))] < 1


def test_sec4_oriented_can_cycle_without_a_fixed_point():
    # Measured: not every run even reaches a fixed point. torus:8x8, random:0..20 with seed 2
    # enters a cycle of 12 states after 48 iterations (no overdraw), discrepancy 9.
    r = simulate("torus:8x8", "diffusion-oriented", "random:0..20", seed=2, max_steps=500)
    assert r.stop_reason == "cycle" and r.cycle_length == 12 and r.infeasible_steps == 0


def test_sec4_case2_runs_on_the_supergraph_over_real_edges():
    g = make_graph("path:5")
    h, relay = biconnected_supergraph(g)
    assert h.m == 7 and relay.tolist() == [-1, 1, -1, 2, -1, 3, -1]
    p = make_protocol("diffusion-oriented", {"kernel": "numpy"})
    p.reset(g, np.zeros(5, dtype=np.int64), np.random.default_rng(0))
    out = p.step(0, g, np.array([30, 0, 0, 0, 0]))
    # Node 0 sends on 0-1 and, relayed by 1, on the added edge 0-2: both through real edge 0-1.
    assert out.loads.sum() == 30 and out.flows.shape == (g.m,)
    assert out.flows[0] == 30 - out.loads[0]
    # The per-node rule (two exchange rounds) gives the same trace as the kernel.
    r = simulate("path:5", "diffusion-oriented", "point:30", max_steps=15, keep_loads_every=1, detect_cycles=False,
                 allow_infeasible=True)
    hist, _ = run_node_rules("path:5", "diffusion-oriented", "point:30", r.steps, schedule="async",
                             allow_negative=True)
    np.testing.assert_array_equal(hist, r.load_history)


def test_sec4_case2_refuses_a_file_matrix_on_a_graph_that_is_not_biconnected(tmp_path):
    path = tmp_path / "p.txt"
    path.write_text("0 1 0.25\n1 2 0.25\n")
    from tokendist.errors import TokendistError

    with pytest.raises(TokendistError, match="not biconnected"):
        simulate("path:3", "diffusion-oriented", "point:9", params={"matrix": f"file:{path}"})
