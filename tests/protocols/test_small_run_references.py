"""The small runs' numpy steps of dimension exchange, quasirandom, rotor-router and the matchings
against the plain forms they replace.

A small run takes each protocol's numpy step instead of compiling a kernel, and there each numpy
call's overhead is the cost; these steps therefore work per node or on ``(D, n)`` buffers made once
per run. Each must give exactly what the plain whole-array form gives: loads, flows, tokens moved,
messages and every piece of state (the errors, the rotors, the random draws), including loads near
the top of their range (2**62; quasirandom and rotor-router divide in float64 elsewhere and are
limited to 2**53).
"""

import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

import tokendist as td
from tokendist._random import CounterDraws, counter_uniform
from tokendist.engine import make_protocol
from tokendist.engine._cycles import state_bytes
from tokendist.graphs import make_graph
from tokendist.kernels._rows import RowOrder
from tokendist.protocols.dimension_exchange import _rules
from tokendist.protocols.dimension_exchange.kernels._serial import (THRESHOLD1, THRESHOLD1_PLUS, THRESHOLD2,
                                                                    NodeColourStep, colour_step_numpy)
from tokendist.protocols.dimension_exchange._schedule import make_schedule
from tokendist.protocols.modern._quasirandom import RegularQuasirandomStep, quasirandom_reference_step

SPECS = ["path:9", "star:7", "random-tree:17", "ring:9", "grid:4x5", "torus:4x6", "torus:16x16", "hypercube:4",
         "complete:7", "gnp:14,0.35"]


def _graph(spec, seed):
    g = make_graph(spec, seed=seed)
    return g if g.is_connected else make_graph("random-tree:15", seed=seed)


def _protocol(name, graph, loads, **params):
    p = make_protocol(name, {"kernel": "numpy", **params})
    p.reset(graph, loads.copy(), np.random.default_rng(3))
    return p


# ---------------------------------------------------------------------------- dimension exchange
@settings(max_examples=60, deadline=None)
@given(st.sampled_from(SPECS), st.integers(0, 10**6), st.sampled_from([THRESHOLD2, THRESHOLD1, THRESHOLD1_PLUS]),
       st.booleans(), st.booleans(), st.integers(0, 7), st.sampled_from([9, 2**62]))
def test_node_colour_step_equals_colour_step_numpy(spec, seed, rule, spanning, with_halted, start, top):
    g = _graph(spec, seed)
    sched = make_schedule(g, colour_start=start, spanning="bfs", need_tree=spanning)
    rng = np.random.default_rng(seed)
    # Loads near the top too, with small differences so that every rule moves tokens.
    loads = (top - 9) + rng.integers(0, 9, g.n).astype(np.int64)
    halted = rng.random(g.n) < 0.2 if with_halted else None
    fast = NodeColourStep(sched, g.n, g.m, loads.dtype)
    for t in range(3 * sched.chi + 1):
        local_max = loads + rng.integers(0, 2, g.n)
        before = loads.copy()
        new, flows, moved, messages = fast.step(loads, sched.colour_at(t), rule, local_max, halted)
        ref, ref_flows, ref_moved = colour_step_numpy(loads, sched, t, rule, local_max, halted, g.m)
        np.testing.assert_array_equal(loads, before)  # the input is not written
        assert new is not loads and new.dtype == ref.dtype
        np.testing.assert_array_equal(new, ref)
        np.testing.assert_array_equal(flows, ref_flows)  # zero off the active colour
        lo, hi = sched.active(t)
        assert moved == ref_moved and messages == 2 * (hi - lo)
        loads = new.copy()


@pytest.mark.parametrize("spec", ["torus:16x16", "random-tree:30", "grid:4x5", "star:7"])
@pytest.mark.parametrize("name,params", [("threshold1", {}), ("threshold2", {}), ("discrepancy1", {}),
                                         ("discrepancy1", {"termination": "halt"})])
def test_dimension_exchange_runs_equal_on_both_numpy_steps(monkeypatch, spec, name, params):
    """Whole runs through NodeColourStep equal runs through colour_step_numpy (stop step, reason,
    every load, tokens moved, messages, the report: DISCREPANCY-1's cycles and stop steps)."""
    def run():
        return td.simulate(spec, name, "random:0..40", seed=4, max_steps=3000, keep_loads_every=1,
                           params={"kernel": "numpy", **params})

    fast = run()

    class Plain:  # the per-edge step, whatever colour is asked for
        def __init__(self, sched, n, m, dtype):
            self.sched, self.m = sched, m

        def step(self, loads, c, rule, local_max=None, halted=None):
            t = (c - self.sched.start) % self.sched.chi
            new, flows, moved = colour_step_numpy(loads, self.sched, t, rule, local_max, halted, self.m)
            lo, hi = self.sched.active(t)
            return new, flows, moved, 2 * (hi - lo)

    monkeypatch.setattr(_rules, "NodeColourStep", Plain)
    plain = run()
    assert (fast.steps, fast.stop_reason, fast.tokens_moved, fast.messages, fast.cycle_length) == \
        (plain.steps, plain.stop_reason, plain.tokens_moved, plain.messages, plain.cycle_length)
    np.testing.assert_array_equal(fast.load_history, plain.load_history)
    assert fast.report == plain.report


@pytest.mark.parametrize("name", ["threshold1", "discrepancy1"])
@pytest.mark.parametrize("spec", ["torus:4x6", "random-tree:17", "path:9"])
def test_tree_stability_is_all_loads_equal(name, spec):
    # A spanning tree's edges are all level exactly when all loads are: the test the engine asks.
    g = _graph(spec, 1)
    rng = np.random.default_rng(2)
    p = _protocol(name, g, np.zeros(g.n, dtype=np.int64))
    tree = p.sched.graph
    for _ in range(30):
        x = rng.integers(5, 5 + int(rng.integers(1, 3)), g.n).astype(np.int64)
        if rng.random() < 0.3:
            x[:] = x[0]
        assert p.is_stable(g, x) == bool(np.all(x[tree.u] == x[tree.v]))


# ---------------------------------------------------------------------------- quasirandom
@pytest.mark.parametrize("spec", ["torus:16x16", "torus:5x7", "hypercube:3", "hypercube:4", "ring:9"])
@pytest.mark.parametrize("ties_up", [False, True])
@pytest.mark.parametrize("low,high", [(0, 4), (0, 200), (2**52, 2**52 + 100)])
def test_regular_quasirandom_step_equals_the_reference(spec, ties_up, low, high):
    """(D, n) buffers, the shift-and-mask split (q a power of two) or divmod, against the plain
    per-slot step; small loads make nodes overdraw, so the guard's take-backs are compared too."""
    g = make_graph(spec)
    p = _protocol("quasirandom", g, np.zeros(g.n, dtype=np.int64))
    order, q = RowOrder(g), int(p._q_slot[0])
    rng = np.random.default_rng(q)
    loads = rng.integers(low, high, g.n).astype(np.int64)
    err_fast = np.zeros(p._q_slot.size, dtype=p.err_units.dtype)
    err_ref = err_fast.copy()
    fast = RegularQuasirandomStep(g, order, p._q_slot, q, ties_up, err_fast)
    held_total = 0
    for _ in range(60):
        new, moved, held = fast.step(loads, True)
        ref, sent, ref_held = quasirandom_reference_step(g, p._q_slot, loads, err_ref, ties_up, True, order, q)
        np.testing.assert_array_equal(new, ref)
        np.testing.assert_array_equal(err_fast, err_ref)
        assert (moved, held) == (int(sent.sum()), ref_held)
        held_total += held
        loads = new
    assert held_total > 0 or high > 4 or not ties_up or not spec.startswith("torus")  # (the guard ran)


# ---------------------------------------------------------------------------- rotor-router
@pytest.mark.parametrize("spec", ["torus:16x16", "torus:5x7", "hypercube:3", "hypercube:4", "ring:9"])
@pytest.mark.parametrize("lazy", [True, False])
@pytest.mark.parametrize("rotor_init", ["zero", "random"])
@pytest.mark.parametrize("top", [200, 2**52])
def test_rotor_regular_step_equals_the_general_step(spec, lazy, rotor_init, top):
    """The (D, n) step (shifts and masks when L is a power of two, remainders otherwise) against the
    per-slot step, loads and rotors, step by step."""
    g = make_graph(spec)
    rng = np.random.default_rng(7)
    loads = (top - 200) + rng.integers(0, 200, g.n).astype(np.int64)
    fast = _protocol("rotor-router", g, loads, lazy=lazy, rotor_init=rotor_init)
    plain = _protocol("rotor-router", g, loads, lazy=lazy, rotor_init=rotor_init)
    plain._slots(g, lazy)  # the per-slot constants, once per graph; on a regular graph also _regular,
    plain._regular = None  # which is taken away again: this one runs the general step
    x = loads
    for t in range(50):
        a, b = fast.step(t, g, x), plain.step(t, g, x)
        assert fast._regular is not None and plain._regular is None
        np.testing.assert_array_equal(a.loads, b.loads)
        np.testing.assert_array_equal(fast.rotor, plain.rotor)
        assert (a.moved, a.messages) == (b.moved, b.messages) and state_bytes(fast.state_key()) == state_bytes(plain.state_key())
        x = a.loads


# ---------------------------------------------------------------------------- matchings
@pytest.mark.parametrize("name", ["random-matching", "balancing-circuit"])
@pytest.mark.parametrize("spec", ["torus:16x16", "grid:4x5", "star:7", "complete:7", "random-tree:17"])
@pytest.mark.parametrize("top", [60, 2**62])
def test_matchings_per_node_equal_the_per_edge_balance(name, spec, top):
    """_balance_nodes (partner and odd token per node) against _balance on the round's edges and
    coins: loads, flows, tokens moved and messages, rounds asked for in and out of order."""
    g = make_graph(spec, seed=5)
    rng = np.random.default_rng(11)
    x = (top - 60) + rng.integers(0, 60, g.n).astype(np.int64)
    p = _protocol(name, g, x)
    for i, t in enumerate([0, 1, 2, 3, 70, 5, 63, 64, 65, 200, 4, 129]):
        step = p.step(t, g, x)
        if name == "random-matching":
            edges, ends_u, ends_v, up = p._draws.at(t)
        else:
            edges, ends_u, ends_v = p._classes[t % p.period][:3]
            up = p._coin.at(t)[edges] < 0.5
        ref = p._balance(g, x, edges, ends_u, ends_v, up)
        np.testing.assert_array_equal(step.loads, ref.loads)
        np.testing.assert_array_equal(step.flows, ref.flows)
        assert (step.moved, step.messages) == (ref.moved, ref.messages)
        x = np.array(step.loads, copy=True) if i % 2 else x


@settings(max_examples=30, deadline=None)
@given(st.integers(0, 2**63 - 1), st.integers(0, 10**6), st.integers(1, 70), st.integers(1, 40))
def test_counter_draws_pairs_are_the_rows_entries(key, first, block, width):
    draws = CounterDraws(key, np.arange(width, dtype=np.uint64) * 977, block=block)
    rng = np.random.default_rng(first)
    rows, cols = rng.integers(0, block, 50), rng.integers(0, width, 50)
    pairs = draws.pairs(first, rows, cols)
    np.testing.assert_array_equal(pairs, draws.rows(first)[rows, cols])
    for r, c, value in zip(rows[:5], cols[:5], pairs[:5]):
        assert value == counter_uniform(key, first + int(r), np.array([int(c) * 977]))[0]
