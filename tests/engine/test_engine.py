"""The engine's own guarantees: infeasible steps, stopping rules, cycles, dynamics, seeds."""

import argparse
import subprocess
import sys

import numpy as np
import pytest

from tokendist.cli._common import nonneg_int
from tokendist.engine import PROTOCOLS, EdgeFailures, GraphSequence, Protocol, Step, simulate
from tokendist.errors import ConservationError, InfeasibleStepError, TokendistError
from tokendist.graphs import make_graph


class _Greedy(Protocol):
    """Test-only rule: every node sends 3 tokens to each neighbour, whatever it holds."""

    name = "test-greedy"
    model = "flow"

    def step(self, t, graph, loads):
        flows = np.full(graph.m, 3, dtype=np.int64)
        flows[graph.u % 2 == 1] = -3
        new = loads - np.bincount(graph.u, weights=flows, minlength=graph.n).astype(np.int64) \
            + np.bincount(graph.v, weights=flows, minlength=graph.n).astype(np.int64)
        return Step(new, moved=3 * graph.m, flows=flows)


class _Leaky(Protocol):
    name = "test-leaky"

    def step(self, t, graph, loads):
        new = loads.copy()
        new[0] -= 1
        return Step(new)


class _Swap(Protocol):
    """Test-only deterministic rule whose states cycle: the ends of a path swap all their tokens."""

    name = "test-swap"

    def step(self, t, graph, loads):
        return Step(loads[::-1].copy(), moved=int(abs(loads[0] - loads[-1])))


def test_infeasible_step_stops_with_clear_report():
    with pytest.raises(InfeasibleStepError, match=r"infeasible step 0: node \d+ holds"):
        simulate("path:4", _Greedy(), "constant:1", max_steps=3)


def test_allow_infeasible_records_and_continues():
    r = simulate("path:4", _Greedy(), "constant:1", max_steps=3, allow_infeasible=True)
    assert r.infeasible_steps == 3 and r.loads.sum() == 4 and r.loads.min() < 0


def test_conservation_violation_is_an_error():
    with pytest.raises(ConservationError):
        simulate("path:3", _Leaky(), "constant:2", max_steps=2)


def test_cycle_detected_and_reported():
    r = simulate("path:2", _Swap(), [5, 0], max_steps=100)
    assert r.stop_reason == "cycle" and r.cycle_length == 2 and r.steps == 2


def test_fixed_point_detected():
    r = simulate("path:3", _Swap(), [4, 1, 4], max_steps=100)
    assert r.stop_reason == "fixed-point"


def test_until_discrepancy_stops():
    r = simulate("ring:16", "diffusion", "point:1600", until_discrepancy=10.0, max_steps=10_000)
    assert r.stop_reason == "target-reached" and r.final["discrepancy"] <= 10
    assert r.trace["discrepancy"][-2] > 10


def test_edge_failures_change_graph_each_step():
    g = make_graph("torus:4x4")
    dyn = EdgeFailures(0.5)
    dyn.reset(g, np.random.default_rng(0))
    a, b = dyn.graph_at(0), dyn.graph_at(1)
    assert a.m < g.m and not np.array_equal(a.base_edges, b.base_edges)
    assert set(a.base_edges.tolist()) <= set(range(g.m))


def test_stable_is_a_stop_reason_of_static_networks_only():
    # random-walk finishes (phase 3) on the static cube and the run stops there as 'stable'; with
    # edge failures the run goes on to max_steps and says so (it once reported 'stable' after all
    # of its steps, stability of the last graph saying nothing of the next).
    static = simulate("hypercube:6", "random-walk", "random:0..50", seed=3, max_steps=400)
    assert static.stop_reason == "stable" and static.steps < 400 and static.report["phase"] == 3
    dynamic = simulate("hypercube:6", "random-walk", "random:0..50", seed=3, max_steps=400,
                       dynamics=EdgeFailures(0.1))
    assert dynamic.report["phase"] == 3 and dynamic.report["done_step"] < 400
    assert dynamic.stop_reason == "max-steps" and dynamic.steps == 400


@pytest.mark.parametrize("kwargs", [{"max_steps": 1.5}, {"max_steps": "10"}, {"max_steps": True},
                                    {"max_steps": -1}, {"record_every": 0}, {"until_discrepancy": -1},
                                    {"until_discrepancy": float("nan")}, {"until_local_discrepancy": "x"}])
def test_bad_stopping_arguments_are_clear_errors(kwargs):
    # They were TypeErrors from inside the step loop (max_steps=1.5) or silently never met (-1).
    name = next(iter(kwargs))
    with pytest.raises(TokendistError, match=name):
        simulate("ring:5", "multi-port", "point:10", **kwargs)
    assert simulate("ring:5", "multi-port", "point:10", max_steps=np.int64(5)).steps <= 5


def test_static_protocol_refuses_dynamics():
    # The reason is part of the one line: the colouring fixed at the start.
    with pytest.raises(TokendistError, match="dynamic networks: the schedule is an edge colouring"):
        simulate("ring:8", "threshold2", "point:10", dynamics=EdgeFailures(0.1))
    for name, cls in PROTOCOLS.items():
        assert cls.dynamic or cls.static_reason, name


def test_graph_sequence_checks_sizes():
    with pytest.raises(TokendistError):
        GraphSequence([make_graph("ring:5")]).reset(make_graph("ring:6"), None)


def test_speeds_spec_is_seeded_and_validated():
    from tokendist.engine import make_speeds

    g = make_graph("ring:10")
    a, b = make_speeds("uniform:0.8..1.2", g, 3), make_speeds("uniform:0.8..1.2", g, 3)
    np.testing.assert_array_equal(a, b)
    assert a.min() >= 0.8 and a.max() <= 1.2
    with pytest.raises(TokendistError):
        make_speeds("uniform:-1..2", g, 3)


def test_same_seed_same_result_in_a_fresh_process():
    code = ("import tokendist as td, json; r = td.simulate('random-tree:30', 'multi-port', 'uniform:500', seed=9);"
            "print(json.dumps(r.loads.tolist()))")
    outs = [subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
            for _ in range(2)]
    assert outs[0] == outs[1]
    import tokendist as td
    assert outs[0].strip() == str(td.simulate("random-tree:30", "multi-port", "uniform:500", seed=9).loads.tolist()).replace(" ", "").replace(",", ", ")


@pytest.mark.parametrize("seed", [-5, "abc", 1.5, True, [1, 2]])
def test_a_bad_seed_is_named_as_such(seed):
    # A negative seed once surfaced from the topology stream as "bad spec 'ring:5'".
    with pytest.raises(TokendistError, match="seed must be a non-negative integer"):
        simulate("ring:5", "sos", "point:10", seed=seed)


@pytest.mark.parametrize("seed", [0, np.int64(3), np.uint64(2**63 - 1), 2**63 - 1, None])
def test_integer_seeds_up_to_the_clis_limit_are_accepted(seed):
    assert simulate("ring:5", "multi-port", "point:10", seed=seed).tokens == 10


@pytest.mark.parametrize("seed", [2**63, np.uint64(2**63), 2**70])
def test_a_seed_the_cli_cannot_take_is_refused_by_the_api_too(seed):
    # Else a run made from Python could not be replayed with tokendist run --seed.
    with pytest.raises(TokendistError, match=r"seed must be at most 2\*\*63 - 1"):
        simulate("ring:5", "multi-port", "point:10", seed=seed)
    with pytest.raises(argparse.ArgumentTypeError, match=r"at most 2\*\*63 - 1"):  # the CLI's, alike
        nonneg_int(str(int(seed)))


@pytest.mark.parametrize("name", sorted(PROTOCOLS))
def test_step_before_reset_says_so(name):
    import copy

    from tokendist.engine import make_protocol
    from tokendist.errors import NotResetError

    p = make_protocol(name, {})
    copy.deepcopy(p)  # an un-reset protocol still copies (dunder lookups stay AttributeErrors)
    assert getattr(p, "_no_such_state", "default") == "default"
    with pytest.raises(NotResetError, match=f"{name}: call reset"):
        p.step(0, make_graph("ring:6"), np.arange(6))
