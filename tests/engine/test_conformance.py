"""The conformance suite every registered protocol must pass (Optuna's pytest_samplers habit).

For each protocol, on every zoo graph it applies to: tokens conserved and, unless the protocol
declares it may overdraw, no node sends more than it holds (the engine raises otherwise); the
communication model holds on every step (check mode); the same seed gives the same trace; a
balanced distribution stays balanced; and, where the protocol has a per-node rule, the per-node
code run with real messages gives the same loads step by step as the vectorised kernel.
"""

import numpy as np
import pytest

import tokendist  # noqa: F401  (registers everything)
from tokendist.engine import PROTOCOLS, run_node_rules, simulate
from tokendist.graphs import make_graph
from tokendist.protocols.heterogeneous._sos_readings import IDEAL_READINGS

from ..conftest import zoo_for

#: Parameter values that choose between readings of a paper, each run through the whole suite
#: (name -> list of params); every other protocol runs with its defaults.
VARIANTS = {"sos-iou": [{"ideal": r} for r in IDEAL_READINGS]}
CASES = [(name, spec, params) for name, cls in PROTOCOLS.items() for spec in zoo_for(cls)
         for params in VARIANTS.get(name, [{}])]
STEPS = 120


def _run(name, spec, init, seed=7, params=None, **kw):
    cls = PROTOCOLS.get(name)
    return simulate(spec, name, init, seed=seed, max_steps=STEPS, check=True, params=params or None,
                    allow_infeasible=cls.may_go_negative, **kw)


def test_every_protocol_applies_somewhere():
    for name, cls in PROTOCOLS.items():
        assert zoo_for(cls), f"{name} applies to no zoo graph"


@pytest.mark.parametrize("name,spec,params", CASES)
def test_conservation_and_model(name, spec, params):
    r = _run(name, spec, "random:0..40", params=params)
    assert r.tokens == r.initial_loads.sum()
    assert np.isclose(r.loads.sum(), r.tokens)
    assert r.steps <= STEPS
    if not PROTOCOLS.get(name).may_go_negative:
        assert r.loads.min() >= 0 and r.infeasible_steps == 0


@pytest.mark.parametrize("name,spec,params", CASES)
def test_same_seed_same_trace(name, spec, params):
    a = _run(name, spec, "uniform:200", seed=11, params=params, keep_loads_every=1)
    b = _run(name, spec, "uniform:200", seed=11, params=params, keep_loads_every=1)
    assert a.steps == b.steps and a.stop_reason == b.stop_reason
    np.testing.assert_array_equal(a.load_history, b.load_history)


@pytest.mark.parametrize("name,spec,params", CASES)
def test_balanced_stays_balanced(name, spec, params):
    g = make_graph(spec, seed=5)
    if g.speeds is not None:
        pytest.skip("heterogeneous balance is speed-weighted")
    if not getattr(PROTOCOLS.get(name), "keeps_balance", True):  # rotor walks, randomised roundings
        pytest.skip(f"{name}: a balanced distribution is not a fixed point of the published rule")
    r = _run(name, spec, "constant:6", params=params)
    np.testing.assert_allclose(r.loads, 6)


NODE_RULE_CASES = [(n, s, p) for n, s, p in CASES if PROTOCOLS.get(n).exchange_rounds > 0]


@pytest.mark.parametrize("schedule", ["sync", "async"])
@pytest.mark.parametrize("name,spec,params", NODE_RULE_CASES)
def test_node_rule_matches_kernel(name, spec, params, schedule):
    steps = 25
    cls = PROTOCOLS.get(name)
    r = simulate(spec, name, "random:0..30", seed=3, max_steps=steps, keep_loads_every=1, detect_cycles=False,
                 params=params or None, allow_infeasible=cls.may_go_negative)
    history, stats = run_node_rules(spec, name, "random:0..30", r.steps, seed=3, schedule=schedule,
                                    params=params or None, allow_negative=cls.may_go_negative)
    if cls.divisible:
        np.testing.assert_allclose(history, r.load_history, rtol=1e-9, atol=1e-9)
    else:
        np.testing.assert_array_equal(history, r.load_history)
    assert stats["messages"] > 0 or r.steps == 0
