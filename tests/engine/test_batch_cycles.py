"""Blocks of steps of deterministic protocols, with cycle detection inside the block (engine/_batch.py,
engine/_cycles.py CycleTable).

Every protocol whose ``steps`` checks states is run in blocks and step by step (``BLOCK_STEPS`` 0)
and everything but the clock must agree: loads, steps, stop reason, cycle length, trace, totals,
report, variants. Runs that stop on a cycle or a fixed point inside a block, at a block's first
row, at ``max_steps`` not a multiple of the block, a run that switches to single steps half way
(the table becomes the loop's dict), a run with sha256 keys (no blocks), and the table's keys
against the loop's, lane for lane.
"""

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import tokendist as td
import tokendist.engine._batch as batch
import tokendist.engine._cycles as cycles
import tokendist.engine._simulate as simulate_module
from tokendist.engine import PROTOCOLS
from tokendist.errors import InfeasibleStepError

CYCLING = {"quasirandom": [{}, {"ties": "up"}, {"guard": "off"}, {"matrix": "max-degree"}],
           "rotor-router": [{}, {"lazy": False}, {"rotor_init": "random"}],
           # (its blocks: the stencil kernel while it may run, on tori and rings, guard on)
           "flow-imitation": [{}, {"process": "sos"}, {"guard": "off"}, {"process": "sos", "beta": 1.9}],
           "threshold1": [{}, {"colour_start": 1}, {"spanning_tree": "min-diameter"}, {"colouring": "greedy"}],
           # (its blocks: the kernel within a phase, each phase's first step through step())
           "discrepancy1": [{}, {"termination": "halt"}, {"stop_cycles": 3, "colour_start": 1},
                            {"termination": "halt", "spanning_tree": "min-diameter"}],
           # (its blocks: the serial stencil kernel with ideal=shadow and overdraw=iou, on tori and rings)
           "sos-iou": [{}, {"beta": 1.9}, {"overdraw": "allow"}, {"ideal": "sent"}]}
#: Parameters under which a protocol takes no blocks (step() runs what its block kernel does not).
DECLINED = [("flow-imitation", {"guard": "off"}), ("sos-iou", {"overdraw": "allow"}), ("sos-iou", {"ideal": "sent"})]
#: Protocols whose blocks may end before a step their block kernel does not take.
PARTIAL = {"flow-imitation", "sos-iou"}
GRAPHS = ["torus:4x4", "ring:9", "hypercube:3", "random-regular:12,3", "torus:8x8", "star:6"]


def _run(k, *args, **kwargs):
    """simulate with blocks of k steps (0: step by step); also what run_blocks returned (None: not called)."""
    ends = []
    real = simulate_module.run_blocks

    def spy(*a, **kw):
        out = real(*a, **kw)
        ends.append((out[0], out[-1]))
        return out

    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(batch, "BLOCK_STEPS", k)
        mp.setattr(simulate_module, "run_blocks", spy)
        return td.simulate(*args, **kwargs), (ends[0] if ends else None)


def assert_same_run(a, b):
    assert (a.steps, a.stop_reason, a.cycle_length, a.tokens_moved, a.messages, a.infeasible_steps) == \
        (b.steps, b.stop_reason, b.cycle_length, b.tokens_moved, b.messages, b.infeasible_steps)
    assert np.array_equal(a.loads, b.loads) and a.loads.dtype == b.loads.dtype
    assert a.trace.keys() == b.trace.keys()
    for name in a.trace:
        assert np.array_equal(a.trace[name], b.trace[name]), name
        assert a.trace[name].dtype == b.trace[name].dtype, name
    assert (a.initial, a.final, a.report, a.variants) == (b.initial, b.final, b.report, b.variants)
    assert len(a.clock) == len(b.clock) and np.all(np.diff(b.clock) >= 0)


def test_the_protocols_that_find_cycles_in_blocks():
    assert {name for name in PROTOCOLS.names() if PROTOCOLS.get(name).steps_find_cycles} == set(CYCLING)


@settings(max_examples=40, deadline=None)
@given(algo=st.sampled_from(sorted(CYCLING)), choice=st.integers(0, 3), spec=st.sampled_from(GRAPHS),
       top=st.sampled_from([0, 1, 3, 50, 1000]), seed=st.integers(0, 2**32), k=st.integers(1, 70),
       max_steps=st.integers(0, 400), record_every=st.integers(1, 7))
def test_blocks_give_the_run_of_single_steps(algo, choice, spec, top, seed, k, max_steps, record_every):
    params = CYCLING[algo][choice % len(CYCLING[algo])]
    allow = params.get("guard") == "off" or params.get("overdraw") == "allow"  # (may overdraw)
    kw = dict(seed=seed, max_steps=max_steps, record_every=record_every, params=params, allow_infeasible=allow)
    one, _ = _run(0, spec, algo, f"random:0..{top}", **kw)
    blocks, ended = _run(k, spec, algo, f"random:0..{top}", **kw)
    # The blocks ran every step, up to the stop (flow-imitation's: up to a step its stencil kernel
    # leaves to step(), if any).
    # ("max-steps" then "stable" when is_stable holds at the end)
    assert (ended[0] == blocks.steps and ended[1] in (blocks.stop_reason, "max-steps")
            or (algo in PARTIAL and ended[1] is None))
    assert_same_run(one, blocks)


def _stop(spec, algo, init, **kw):
    one, ended = _run(0, spec, algo, init, **kw)
    assert ended is None and one.stop_reason in ("cycle", "fixed-point")
    return one


@pytest.mark.parametrize("algo, spec, init", [("rotor-router", "torus:4x4", "random:0..30"),
                                              ("rotor-router", "ring:9", "random:0..100"),
                                              ("quasirandom", "ring:6", "random:0..5"),
                                              ("threshold1", "torus:4x4", "random:0..30"),
                                              ("discrepancy1", "torus:4x4", "random:0..30")])
def test_a_cycle_inside_a_block_and_at_its_first_row(algo, spec, init):
    one = _stop(spec, algo, init, seed=2, max_steps=5000)
    s = one.steps
    assert one.stop_reason == "cycle" and s > 3
    # Block sizes putting the repeated state inside a block, at the first row of a block (s a
    # multiple of k: the kernel stops before doing any step), one block holding the whole run,
    # and at the first row of the second block.
    for k in sorted({2, 3, s - 1, s, s + 1, max(1, s // 2), 70}):
        blocks, ended = _run(k, spec, algo, init, seed=2, max_steps=5000)
        assert ended == (s, "cycle"), k
        assert_same_run(one, blocks)


@pytest.mark.parametrize("algo", sorted(set(CYCLING) - {"threshold1", "discrepancy1"}))  # (theirs: stable, below)
@pytest.mark.parametrize("k", [1, 5, 64])
def test_a_fixed_point_stops_at_the_same_step(algo, k):
    # No tokens: nothing ever moves and no state changes; the state before step 1 repeats step 0's.
    # (sos-iou: its state before step 0 is none, from step 1 on its flows, IOUs and shadow loads)
    loads = np.zeros(64, dtype=np.int64)
    one = _stop("torus:8x8", algo, loads, seed=0, max_steps=100)
    blocks, ended = _run(k, "torus:8x8", algo, loads, seed=0, max_steps=100)
    assert ended == (2 if algo == "sos-iou" else 1, "fixed-point") and one.cycle_length == 1
    assert_same_run(one, blocks)


@pytest.mark.parametrize("algo", ["threshold1", "discrepancy1"])
@pytest.mark.parametrize("k", [1, 4, 5, 64])
def test_dimension_exchange_stops_stable_inside_a_block(algo, k):
    # Equal loads but for one token too many here and one too few there: the tokens meet within a
    # few steps and every load is then equal (is_stable); the steps in between that moved nothing
    # with loads unequal do not end the blocks.
    loads = np.full(9, 5)
    loads[0], loads[4] = 6, 4
    one, _ = _run(0, "ring:9", algo, loads, seed=0, max_steps=100)
    blocks, ended = _run(k, "ring:9", algo, loads, seed=0, max_steps=100)
    assert one.stop_reason == "stable" and ended == (one.steps, "stable")
    assert one.trace["tokens_moved"].tolist().count(1) >= 1 and one.steps > 2
    assert_same_run(one, blocks)


def test_a_state_at_max_steps_is_not_checked():
    # The loop checks states before steps 0 .. max_steps - 1 only: a run whose state repeats right
    # at max_steps ends there on max-steps, in blocks too.
    one = _stop("torus:4x4", "rotor-router", "random:0..30", seed=2, max_steps=5000)
    for k in (1, 7, 64, one.steps):
        a, _ = _run(0, "torus:4x4", "rotor-router", "random:0..30", seed=2, max_steps=one.steps)
        b, ended = _run(k, "torus:4x4", "rotor-router", "random:0..30", seed=2, max_steps=one.steps)
        assert a.stop_reason == "max-steps" and ended == (one.steps, "max-steps")
        assert_same_run(a, b)


# Few tokens, spread thin: SOS overshoots and a node comes to owe more than it holds.
_BINDING = np.array([0, 0, 2, 0, 4, 0, 0, 4, 0, 0, 0, 0, 0, 0, 2, 0, 0, 19, 0, 4, 2, 0, 2, 0, 2, 0, 0, 0, 2, 4, 0, 0,
                     0, 0, 4, 0, 2, 0, 0, 0, 0, 0, 0, 0, 4, 0, 0, 4, 2, 4, 4, 0, 4, 0, 0, 0, 0, 0, 0, 0, 0, 2, 4, 4])


@pytest.mark.parametrize("init, binds", [("random:0..200", False), (_BINDING, True)])
def test_flow_imitation_blocks_end_before_a_step_the_stencil_cannot_take(init, binds):
    kw = dict(seed=1, max_steps=200, params={"process": "sos"})
    one, _ = _run(0, "torus:8x8", "flow-imitation", init, **kw)
    blocks, ended = _run(64, "torus:8x8", "flow-imitation", init, **kw)
    general = "csr, serial (flow_imitation_step_uniform)"
    assert (general in one.variants) == binds
    if binds:  # the blocks stopped before the first step of the general kernel; step() took it
        assert ended[1] is None and 0 < ended[0] < 200
        assert one.variants["stencil, serial (flow_imitation_stencil_step)"] > ended[0]
    else:
        assert ended == (200, "max-steps")
    assert_same_run(one, blocks)


@pytest.mark.parametrize("algo", sorted(CYCLING))
@pytest.mark.parametrize("max_steps", [1, 63, 65, 150, 1000])
def test_max_steps_not_a_multiple_of_the_block(algo, max_steps):
    one, _ = _run(0, "torus:8x8", algo, "random:50..100", seed=3, max_steps=max_steps, record_every=4)
    blocks, ended = _run(64, "torus:8x8", algo, "random:50..100", seed=3, max_steps=max_steps, record_every=4)
    assert ended == (blocks.steps, blocks.stop_reason)
    assert_same_run(one, blocks)


@pytest.mark.parametrize("algo, spec, init", [("rotor-router", "torus:4x4", "random:0..30"),
                                              ("quasirandom", "ring:6", "random:0..5"),
                                              ("discrepancy1", "torus:4x4", "random:0..30")])
def test_a_run_that_goes_on_step_by_step_finds_the_states_of_its_blocks(monkeypatch, algo, spec, init):
    # The engine keeps the table's totals in int64 below batch._SAFE; lowered here, the run leaves
    # its blocks half way and goes on step by step with the table as its dict of visited states:
    # the cycle it then finds goes back to a state only the blocks saw.
    one = _stop(spec, algo, init, seed=2, max_steps=5000)
    first = one.steps - one.cycle_length  # (the first visit of the state the run stops on)
    monkeypatch.setattr(batch, "_SAFE", int(one.trace["tokens_moved"][first + 1]) + 1)
    blocks, ended = _run(1, spec, algo, init, seed=2, max_steps=5000)
    assert ended is not None and ended[1] is None and first < ended[0] < one.steps
    assert_same_run(one, blocks)


def test_a_protocol_that_declines_a_block_goes_on_with_the_same_states(monkeypatch):
    cls = PROTOCOLS.get("rotor-router")
    real, calls = cls.steps, []

    def steps(self, *args):
        calls.append(1)
        return None if len(calls) > 5 else real(self, *args)

    monkeypatch.setattr(cls, "steps", steps)
    one = _stop("torus:4x4", "rotor-router", "random:0..30", seed=2, max_steps=5000)
    blocks, ended = _run(8, "torus:4x4", "rotor-router", "random:0..30", seed=2, max_steps=5000)
    assert ended == (40, None) and one.steps > 40
    assert_same_run(one, blocks)


@pytest.mark.parametrize("algo", sorted(CYCLING))
def test_without_cycle_detection_blocks_run_to_max_steps(algo):
    kw = dict(seed=1, max_steps=3000, detect_cycles=False)
    one, _ = _run(0, "torus:8x8", algo, "random:50..100", **kw)
    blocks, ended = _run(64, "torus:8x8", algo, "random:50..100", **kw)
    assert one.stop_reason in ("max-steps", "stable") and ended == (one.steps, one.stop_reason)
    assert_same_run(one, blocks)


def test_a_small_run_with_sha256_keys_goes_step_by_step(monkeypatch):
    # A small run on which hash128 would compile takes sha256 keys, which no block kernel computes:
    # no blocks, the same stop.
    one = _stop("torus:4x4", "rotor-router", "random:0..30", seed=2, max_steps=5000)
    monkeypatch.setenv("TOKENDIST_SMALL_RUN_REFERENCE", "1")
    monkeypatch.setattr(cycles, "_hash_ready", lambda: False)
    monkeypatch.setattr(cycles, "_sha256_keys", [0])
    sha, ended = _run(64, "torus:4x4", "rotor-router", "random:0..30", seed=2, max_steps=5000)
    assert ended is None and cycles._sha256_keys[0] == one.steps + 1
    assert_same_run(one, sha)


@pytest.mark.parametrize("algo, params", DECLINED)
def test_parameters_whose_steps_the_blocks_do_not_take(algo, params):
    kw = dict(seed=1, max_steps=300, params=params, allow_infeasible=True)
    one, _ = _run(0, "torus:8x8", algo, "random:0..30", **kw)
    blocks, ended = _run(64, "torus:8x8", algo, "random:0..30", **kw)
    assert ended == (0, None)
    assert_same_run(one, blocks)


def test_sos_iou_blocks_keep_the_report_of_single_steps():
    # A point load and a large beta: SOS overshoots, short nodes pay in proportion (negative-load
    # events); the report's per-step series, events and largest IOU are the step-by-step run's.
    kw = dict(seed=3, max_steps=500, params={"beta": 1.9})
    one, _ = _run(0, "torus:8x8", "sos-iou", "point:1000", **kw)
    blocks, ended = _run(16, "torus:8x8", "sos-iou", "point:1000", **kw)
    assert ended == (500, "max-steps") and one.report["negative_load_events"] > 0
    assert len(one.report["iou_units_series"]) == 500
    assert_same_run(one, blocks)


def test_the_guard_off_run_counts_infeasible_steps_in_blocks():
    # guard=off overdraws from small loads: the blocks count the same infeasible steps (and raise
    # the same error without allow_infeasible).
    kw = dict(seed=7, max_steps=500, params={"guard": "off"})
    with pytest.raises(InfeasibleStepError) as one:
        _run(0, "torus:4x4", "quasirandom", "random:0..3", **kw)
    with pytest.raises(InfeasibleStepError) as blocks:
        _run(64, "torus:4x4", "quasirandom", "random:0..3", **kw)
    assert str(one.value) == str(blocks.value)
    a, _ = _run(0, "torus:4x4", "quasirandom", "random:0..3", allow_infeasible=True, **kw)
    b, ended = _run(64, "torus:4x4", "quasirandom", "random:0..3", allow_infeasible=True, **kw)
    assert ended is not None and a.infeasible_steps > 0
    assert_same_run(a, b)


def test_the_table_holds_the_loops_keys_as_it_grows():
    # seen_before fills the table under cycle_key's keys; reserve() grows it keeping every entry;
    # to_dict() is the loop's dict; a state seen again is found with its first visit.
    rng = np.random.default_rng(0)
    table = cycles.CycleTable(period=1, keys=4)
    states = [(rng.integers(0, 9, 10), rng.integers(0, 3, 7).astype(np.int8)) for _ in range(300)]
    expect = {}
    for step, (loads, state) in enumerate(states):
        table.reserve(1)
        table.start(10 * step)
        found = cycles.seen_before(*table.arrays(), loads.view(np.uint8), state.view(np.uint8), step)
        key = cycles.cycle_key(loads, state)
        assert found == (key in expect) and (table.hit() == expect.get(key))
        expect.setdefault(key, (step, 10 * step))
    assert table.keys.shape[0] >= 2 * len(expect) and table.to_dict() == expect
    assert int(table.info[cycles.COUNT]) == len(expect)


@pytest.mark.parametrize("algo, params", [(algo, params) for algo in sorted(CYCLING) for params in CYCLING[algo]
                                           if (algo, params) not in DECLINED])
def test_the_block_keys_are_the_loops_keys(monkeypatch, algo, params):
    # Lane for lane: the table the blocks fill holds the keys the step-by-step loop computes, with
    # the same first steps and totals (a key of other bytes would still find its cycles in a run
    # all in blocks, but not across a switch to single steps).
    kw = dict(seed=2, max_steps=300, params=params)
    loop = {}
    real = simulate_module.key_function

    def key_function(small):
        key_of = real(small)

        def key(loads, state):
            k = key_of(loads, state)
            loop.setdefault(k, len(loop))
            return k
        return key

    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(simulate_module, "key_function", key_function)
        one, _ = _run(0, "torus:8x8", algo, "random:0..30", **kw)
    tables = []
    real_blocks = simulate_module.run_blocks
    monkeypatch.setattr(simulate_module, "run_blocks", lambda *a, **k: tables.append(k["seen"]) or real_blocks(*a, **k))
    monkeypatch.setattr(batch, "BLOCK_STEPS", 16)
    blocks = td.simulate("torus:8x8", algo, "random:0..30", **kw)
    assert_same_run(one, blocks)
    table = tables[0].to_dict()
    assert set(table) == set(loop) and len(loop) > 1
    # (in the loop's order of first visits, with the tokens moved before them as the trace has them)
    firsts = [table[k][0] for k in sorted(loop, key=loop.get)]
    assert firsts == sorted(firsts)
    moved = dict(zip(one.trace["step"].tolist(), one.trace["tokens_moved"].tolist()))
    assert all(table[k][1] == moved[table[k][0]] for k in table)
