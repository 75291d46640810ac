"""The fast dimension-exchange step (Houle, Symvonis, Wood 2004, Sec. 1.1, 2, 5) against its references.

The numba kernel (one fused pass: copy + localMax update, clear the previous colour's int8 flows,
the active matching through int32 edge ids) must give, step by step, exactly the loads, flows,
token counts and localMax of the numpy kernel and of the deliberately naive per-node loop, on
random graphs and trees; whole runs must agree between ``kernel=numba`` and ``kernel=numpy``; the
engine must still see every step's flows (feasibility, and the single-port model with check=True).
"""

import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

import tokendist as td
from tokendist.errors import ConservationError, InfeasibleStepError
from tokendist.graphs import edge_colouring, make_graph
from tokendist.protocols.dimension_exchange import _rules as dx
from tokendist.protocols.dimension_exchange.kernels._serial import (LM_KEEP, LM_MAX, LM_SET, THRESHOLD1, THRESHOLD1_PLUS,
                                                             THRESHOLD2, colour_step_numba, colour_step_numpy,
                                                             naive_step)
from tokendist.protocols.dimension_exchange._schedule import Schedule, make_schedule

SPECS = ["path:9", "star:7", "kary:2,3", "kary:3,3", "random-tree:17", "random-tree:30", "ring:8", "ring:9",
         "grid:4x5", "torus:4x6", "hypercube:4", "complete:6", "complete:7", "gnp:14,0.35", "random-regular:12,3"]


def _graph(spec, seed):
    g = make_graph(spec, seed=seed)
    return g if g.is_connected else make_graph("random-tree:15", seed=seed)


# ---------------------------------------------------------------------------- one step, three kernels
@settings(max_examples=60, deadline=None)
@given(st.sampled_from(SPECS), st.integers(0, 10**6), st.sampled_from([THRESHOLD2, THRESHOLD1, THRESHOLD1_PLUS]),
       st.booleans(), st.booleans(), st.integers(0, 7))
def test_sec2_sec5_fast_step_equals_numpy_and_naive_step_by_step(spec, seed, rule, spanning, with_halted, start):
    g = _graph(spec, seed)
    sched = make_schedule(g, colour_start=start, spanning="bfs", need_tree=spanning)
    rng = np.random.default_rng(seed)
    edges = list(zip(sched.graph.u.tolist(), sched.graph.v.tolist()))
    colours = sched.colours.tolist()
    loads = rng.integers(0, 9, g.n).astype(np.int64)
    halted = None
    if with_halted:
        halted = rng.random(g.n) < 0.2
    flows = np.zeros(g.m, dtype=np.int8)
    prev = (0, 0)
    local_max = loads.copy()
    for t in range(3 * sched.chi + 1):
        # The localMax update the kernel fuses into its copy: set, max, or keep, at random.
        mode = int(rng.integers(0, 3))
        expect_lm = {LM_KEEP: local_max, LM_MAX: np.maximum(local_max, loads), LM_SET: loads.copy()}[mode].copy()
        if mode == LM_KEEP and rng.random() < 0.5:
            local_max = loads + rng.integers(0, 2, g.n)  # arbitrary localMax, as in the B-phase
            expect_lm = local_max.copy()
        ref = naive_step(edges, colours, sched.chi, sched.colour_at(t), loads.tolist(), rule, expect_lm.tolist(),
                         None if halted is None else halted.tolist())
        new_np, flows_np, moved_np = colour_step_numpy(loads, sched, t, rule, expect_lm, halted, g.m)
        out = np.full_like(loads, -999)
        before = loads.copy()
        # Every other step with the active range given, as the protocols pass it.
        active = sched.active(t) if t % 2 else None
        moved = colour_step_numba(loads, out, sched, t, prev, rule, local_max, halted, flows, mode, active)
        prev = sched.active(t)
        np.testing.assert_array_equal(loads, before)  # step must not modify its input
        np.testing.assert_array_equal(local_max, expect_lm)
        assert out.tolist() == ref == new_np.tolist()
        np.testing.assert_array_equal(flows, flows_np)  # only this step's edges are non-zero
        assert moved == moved_np == np.abs(flows_np).sum()
        assert out.sum() == loads.sum()
        loads = out


@pytest.mark.parametrize("algo", ["threshold2", "threshold1", "discrepancy1"])
@pytest.mark.parametrize("spec,start", [("torus:6x4", 0), ("random-tree:20", 3), ("gnp:14,0.35", 5)])
def test_protocol_colour_ranges_are_the_schedules(algo, spec, start):
    # The protocols keep each colour's edge range as Python ints: the schedule's active(t) at every t.
    g = _graph(spec, 2)
    p = td.make_protocol(algo, {"colour_start": start})
    p.reset(g, np.zeros(g.n, dtype=np.int64), np.random.default_rng(0))
    for t in range(3 * p.sched.chi + 2):
        assert p._ranges[(p.sched.start + t) % p.period] == p.sched.active(t)


@settings(max_examples=200, deadline=None)
@given(st.lists(st.integers(-3, 3), min_size=0, max_size=12))
def test_tree_protocols_stable_test_is_all_loads_equal(values):
    # THRESHOLD-1 and DISCREPANCY-1 (no node halted) are stable iff every load is equal; the test
    # answers early when the first and last loads differ.
    g = make_graph("path:12")
    loads = np.array(values + [values[-1] if values else 0] * (12 - len(values)), dtype=np.int64)
    for algo in ("threshold1", "discrepancy1"):
        p = td.make_protocol(algo, {})
        p.reset(g, loads, np.random.default_rng(0))
        assert p.is_stable(g, loads) == (len(set(loads.tolist())) == 1)


# ---------------------------------------------------------------------------- the schedule
@pytest.mark.parametrize("spec", ["torus:70x70", "path:5000", "hypercube:5", "gnp:40,0.2"])
@pytest.mark.parametrize("spanning", [False, True])
def test_schedule_derived_colours_partner_and_endpoints(spec, spanning):
    g = _graph(spec, 1)
    s = make_schedule(g, spanning="bfs", need_tree=spanning)
    tree = s.graph
    if spanning and not g.is_tree:
        assert tree is not g and tree.m == g.n - 1
    np.testing.assert_array_equal(s.colours, edge_colouring(tree))  # rebuilt from the classes (or cached)
    assert s.eid.dtype == np.int32 and s.chi == int(s.colours.max()) + 1
    assert np.all(s.eu < s.ev)
    for c in range(s.chi):
        lo, hi = int(s.offsets[c]), int(s.offsets[c + 1])
        e = s.eid[lo:hi]
        assert np.all(np.diff(e) > 0)  # each class sweeps the edge arrays forwards
        ends = np.concatenate([s.eu[lo:hi], s.ev[lo:hi]])
        assert np.unique(ends).size == ends.size  # a matching
        # The same edges as the colour class of the tree's own edge arrays.
        mine = np.flatnonzero(s.colours == c)
        assert sorted(zip(tree.u[mine].tolist(), tree.v[mine].tolist())) == sorted(
            zip(s.eu[lo:hi].tolist(), s.ev[lo:hi].tolist()))
    p = s.partner
    for c in range(s.chi):
        mine = np.flatnonzero(s.colours == c)
        np.testing.assert_array_equal(p[tree.u[mine], c], tree.v[mine])
        np.testing.assert_array_equal(p[tree.v[mine], c], tree.u[mine])
    assert np.sum(p != np.arange(tree.n)[:, None]) == 2 * tree.m


def test_protocol_state_is_a_few_bytes_per_edge():
    # The step's own state: int32 edge ids (4 B/edge), int8 flows (1 B/edge), one load buffer.
    g = make_graph("torus:60x60")
    p = td.engine.make_protocol("threshold2")
    loads = np.zeros(g.n, dtype=np.int64)
    p.reset(g, loads, None)
    arrays = [v for v in vars(p).values() if isinstance(v, np.ndarray)]
    arrays += [v for v in vars(p.sched).values() if isinstance(v, np.ndarray)]
    own = sum(a.nbytes for a in arrays if a is not g.u and a is not g.v)
    assert own <= 5 * g.m + 8 * g.n + 8 * (p.sched.chi + 1)


# ---------------------------------------------------------------------------- whole runs
@settings(max_examples=25, deadline=None)
@given(st.sampled_from(SPECS), st.integers(0, 10**6), st.sampled_from(["threshold2", "threshold1", "discrepancy1"]),
       st.integers(0, 5), st.sampled_from(["record", "halt"]))
def test_fast_and_numpy_kernels_give_identical_runs(spec, seed, algo, start, termination):
    g = _graph(spec, seed)
    params = {"colour_start": start}
    if algo == "threshold1":
        params["spanning_tree"] = "bfs"
    if algo == "discrepancy1":
        params["termination"] = termination
    loads = np.random.default_rng(seed).integers(0, 30, g.n)
    runs = [td.simulate(g, algo, loads, max_steps=700, keep_loads_every=1, check=True,
                        params={**params, "kernel": k}) for k in ("numba", "numpy")]
    a, b = runs
    np.testing.assert_array_equal(a.load_history, b.load_history)
    assert a.stop_reason == b.stop_reason and a.steps == b.steps
    assert a.report == b.report
    for k in ("tokens_moved", "messages"):
        np.testing.assert_array_equal(a.trace[k], b.trace[k])


# ---------------------------------------------------------------------------- the engine still checks
def _one_colour_schedule(run_graph, **kwargs):
    """A broken schedule: every edge in one class, which is not a matching."""
    m = run_graph.m
    return Schedule(run_graph, 1, 0, np.arange(m, dtype=np.int32), np.array([0, m]), run_graph.u, run_graph.v)


def test_engine_detects_infeasible_and_multi_port_steps_from_the_int8_flows(monkeypatch):
    monkeypatch.setattr(dx, "make_schedule", _one_colour_schedule)
    # Node 1 holds one token and, with both edges active, THRESHOLD-1 sends one across each.
    with pytest.raises(InfeasibleStepError):
        td.simulate("path:3", "threshold1", np.array([0, 1, 0]), max_steps=3)
    with pytest.raises(ConservationError, match="single-port"):
        td.simulate("path:3", "threshold2", np.array([0, 9, 0]), max_steps=3, check=True)
