"""Ghosh et al. 1995: the row-form kernels and the opt-in ``threads=k`` kernels of ds, single-port, multi-port.

* Kernel level (Hypothesis, random connected graphs and regular ones so that both row paths run,
  cut into many small blocks): the DS node kernel, serial and parallel, equals a plain numpy
  reference of Sec. 5 and the per-edge kernel :func:`ds_step` (loads, tokens moved, outflows,
  the next step's previous loads, the out-of-range flag); the multi-port row kernels equal the
  numpy reference; the parallel single-port kernel equals the serial one and the numpy reference
  (same candidates in the same order, loads, flows, selection counts, clean counts), sparse and
  dense coins (both compactions of the serial kernel).
* Protocol level: ``simulate`` with ``threads=2`` gives the serial trace, bit for bit.
"""

import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

from tokendist import simulate
from tokendist.engine import EdgeFailures, make_protocol
from tokendist.errors import TokendistError
from tokendist.graphs import make_graph
from tokendist.protocols.local._rules import (SinglePort, _apply_flows, multi_port_flows, single_port_flows,
                                                  single_port_matching)
from tokendist.protocols.local.kernels._serial import (BLOCK, INT32_MAX, coin_bound, ds_step, ds_step_nodes,
                                                          multi_port_step_regular, single_port_counter_step)
from tokendist.protocols.local.kernels._threaded import (ds_step_nodes_par, multi_port_step_regular_par, run_parallel,
                                                           single_port_counter_step_par)

from ..strategies import random_connected_graph


@st.composite
def ds_cases(draw):
    """(graph, regular degree or 0, loads, previous loads, threshold)."""
    rng = np.random.default_rng(draw(st.integers(0, 2**31)))
    kind = draw(st.sampled_from(["general", "regular", "torus"]))
    if kind == "general":
        n = draw(st.integers(2, 40))
        g = random_connected_graph(rng, n, draw(st.integers(0, 3 * n)))
    elif kind == "regular":
        d = draw(st.integers(1, 6))
        n = draw(st.integers(d + 1, 40))
        n += (n * d) % 2  # n d even
        g = make_graph(f"random-regular:{n},{d}", seed=int(rng.integers(2**31)))
    else:
        g = make_graph(f"torus:{draw(st.integers(3, 7))}x{draw(st.integers(3, 7))}")
    deg = g.degrees
    D = int(deg[0]) if deg.min() == deg.max() else 0
    loads = rng.integers(-5 if draw(st.booleans()) else 0, 80, g.n)
    if draw(st.booleans()):  # a load past int32 somewhere
        loads[int(rng.integers(g.n))] += 3 * 2**31
    prev = loads + rng.integers(-15, 15, g.n)
    if np.abs(prev).max() <= INT32_MAX and draw(st.booleans()):
        prev = prev.astype(np.int32)
    return g, D, loads.astype(np.int64), prev, draw(st.integers(1, 12))


def _reference(g, loads, prev, threshold):
    """Sec. 5 in plain numpy, per edge (u, v): u sends iff w(u) - e^u(v) > T, with e^u(v) = prev[v]."""
    su = (loads[g.u] - prev[g.v].astype(np.int64) > threshold).astype(np.int64)
    sv = (loads[g.v] - prev[g.u].astype(np.int64) > threshold).astype(np.int64)
    new = loads - np.bincount(g.u, su, g.n) + np.bincount(g.v, su, g.n) - np.bincount(g.v, sv, g.n) \
        + np.bincount(g.u, sv, g.n)
    net = su - sv  # what each end sends over the net flow of each edge
    outflow = np.bincount(g.u, net > 0, g.n) + np.bincount(g.v, net < 0, g.n)
    return new.astype(np.int64), int(su.sum() + sv.sum()), outflow.astype(np.int64)


@settings(max_examples=60, deadline=None)
@given(case=ds_cases(), block=st.integers(1, 9), with_outflow=st.booleans())
def test_sec5_ds_node_kernels_serial_and_parallel_equal_the_reference(case, block, with_outflow):
    g, D, loads, prev, threshold = case
    new, moved, outflow = _reference(g, loads, prev, threshold)
    flag = bool(loads.min() < 0 or loads.max() > INT32_MAX)
    idx = g.indices.view(np.uint32)
    results = []
    for kernel, extra in ((ds_step_nodes, ()), (ds_step_nodes_par, (block,))):
        for degree in {D, 0}:  # the regular path (when the graph is regular) and the general one
            out, nxt = np.full(g.n, -7, np.int64), np.full(g.n, -7, prev.dtype)
            of = np.full(g.n, -7, np.int32) if with_outflow else None
            args = (g.indptr, idx, degree, loads, threshold, prev, nxt, out, of, *extra)
            got = run_parallel(kernel, 2, *args) if extra else kernel(*args)
            assert got == (moved, flag)
            np.testing.assert_array_equal(out, new)
            np.testing.assert_array_equal(nxt, loads.astype(prev.dtype))  # int32: truncated past int32 (flagged)
            if with_outflow:
                np.testing.assert_array_equal(of, outflow)
            results.append(out)
    # The per-edge kernel with e^u(v) = prev[v], e^v(u) = prev[u] agrees too.
    est_u, est_v = prev[g.v].astype(np.int64), prev[g.u].astype(np.int64)
    out, of = np.empty(g.n, np.int64), np.empty(g.n, np.int32)
    assert ds_step(g.u, g.v, loads, threshold, est_u, est_v, out, of) == moved
    np.testing.assert_array_equal(out, new)
    np.testing.assert_array_equal(of, outflow)


def test_ds_parallel_kernel_on_a_graph_split_between_threads():
    g = make_graph("torus:40x50", seed=1)
    rng = np.random.default_rng(3)
    w = rng.integers(0, 1000, g.n)
    prev = (w + rng.integers(-100, 100, g.n)).astype(np.int32)
    new, moved, _ = _reference(g, w, prev, 48)
    out, nxt = np.empty(g.n, np.int64), np.empty(g.n, np.int32)
    assert run_parallel(ds_step_nodes_par, 2, g.indptr, g.indices.view(np.uint32), 4, w, 48, prev, nxt, out,
                        None) == (moved, False)
    assert moved > 0
    np.testing.assert_array_equal(out, new)


@pytest.mark.parametrize("graph,init,params,failures", [
    ("hypercube:7", "point:90000", {}, 0.0),
    ("torus:9x11", "random:0..400", {"estimates": "zero", "threshold": 3}, 0.0),
    ("random-regular:120,5", "point:50000", {"estimates": "random"}, 0.0),
    ("gnp:80,0.1", "random:0..300", {"threshold": 2}, 0.0),
    ("torus:8x8", "point:20000", {"threshold": 5}, 0.3),
])
def test_sec5_ds_threads2_gives_the_serial_trace(graph, init, params, failures):
    runs = [simulate(graph, "ds", init, seed=5, max_steps=60, keep_loads_every=1, detect_cycles=False,
                     allow_infeasible=True, dynamics=EdgeFailures(failures) if failures else None,
                     params={**params, "threads": k}) for k in (1, 2)]
    a, b = runs
    np.testing.assert_array_equal(a.load_history, b.load_history)
    for key in a.trace:
        np.testing.assert_array_equal(b.trace[key], a.trace[key], err_msg=key)
    assert a.tokens_moved == b.tokens_moved > 0 and a.infeasible_steps == b.infeasible_steps


@st.composite
def regular_cases(draw):
    rng = np.random.default_rng(draw(st.integers(0, 2**31)))
    if draw(st.booleans()):
        d = draw(st.integers(1, 6))
        n = draw(st.integers(d + 1, 40))
        n += (n * d) % 2
        g = make_graph(f"random-regular:{n},{d}", seed=int(rng.integers(2**31)))
    else:
        g = make_graph(draw(st.sampled_from(["torus:5x7", "hypercube:5", "ring:9", "complete:6"])))
    return g, rng.integers(-40, 80, g.n)


@settings(max_examples=40, deadline=None)
@given(case=regular_cases(), threshold=st.integers(1, 9), block=st.integers(1, 9))
def test_sec3_2_multi_port_regular_row_kernels_equal_the_reference(case, threshold, block):
    g, loads = case
    flows = multi_port_flows(g, loads, threshold)
    expect = _apply_flows(g, loads, flows)
    idx, D = g.indices.view(np.uint32), g.max_degree
    out_s, out_p = np.full(g.n, -7, np.int64), np.full(g.n, -7, np.int64)
    assert multi_port_step_regular(idx, D, loads, threshold, out_s) == np.abs(flows).sum()
    assert run_parallel(multi_port_step_regular_par, 2, idx, D, loads, threshold, out_p, block) == np.abs(flows).sum()
    np.testing.assert_array_equal(out_s, expect)
    np.testing.assert_array_equal(out_p, expect)


class _SinglePortBuffers:
    """One kernel's buffers (serial or parallel), as the protocol keeps them between steps."""

    def __init__(self, g, eblock=None):
        self.out, self.flows = np.empty(g.n, np.int64), np.zeros(g.m, np.int8)
        self.count = np.zeros(g.n, np.uint8)
        self.cands, self.ca, self.cb = (np.zeros(g.m + BLOCK, np.int32) for _ in range(3))
        self.sel = np.zeros(g.m, np.int32)
        self.nprev = 0
        self.extra = () if eblock is None else (np.zeros(16 * -(-g.m // BLOCK), np.uint64),
                                                 np.zeros(max(1, -(-g.m // eblock)), np.int64), eblock, 3)

    def step(self, g, loads, key, t, p, threshold):
        args = (g.u, g.v, loads, key, t, coin_bound(p), threshold, self.out, self.flows, self.count, self.cands,
                self.ca, self.cb, self.nprev, self.sel, *self.extra)
        moved, self.nprev = (run_parallel(single_port_counter_step_par, 2, *args) if self.extra
                             else single_port_counter_step(*args))
        return moved


@st.composite
def single_port_cases(draw):
    rng = np.random.default_rng(draw(st.integers(0, 2**31)))
    if draw(st.booleans()):
        n = draw(st.integers(2, 60))
        g = random_connected_graph(rng, n, draw(st.integers(0, 4 * n)))
    else:
        g = make_graph(draw(st.sampled_from(["torus:6x9", "hypercube:6", "torus:30x40"])))
    return g, rng.integers(0, 30, g.n), int(rng.integers(2**62))


@settings(max_examples=40, deadline=None)
@given(case=single_port_cases(), p=st.sampled_from([0.0, 0.01, 0.02, 0.0625, 0.3, 1.0]),
       threshold=st.integers(1, 3), eblock=st.sampled_from([64, 128, 1024, 16 * 1024]))
def test_sec3_1_parallel_single_port_kernel_equals_serial_and_reference(case, p, threshold, eblock):
    g, loads, key = case
    ser, par = _SinglePortBuffers(g), _SinglePortBuffers(g, eblock)
    for t in range(3):
        moved = ser.step(g, loads, key, t, p, threshold)
        assert par.step(g, loads, key, t, p, threshold) == moved
        assert par.nprev == ser.nprev
        ref = single_port_flows(g, loads, key, t, p, threshold)
        for kernel in (ser, par):
            np.testing.assert_array_equal(kernel.flows, ref)
            np.testing.assert_array_equal(kernel.out, _apply_flows(g, loads, ref))
            assert not kernel.count.any()
        assert moved == np.abs(ref).sum()
        for name in ("cands", "ca", "cb"):
            np.testing.assert_array_equal(getattr(par, name)[:par.nprev], getattr(ser, name)[:ser.nprev])
        np.testing.assert_array_equal(par.sel, ser.sel)
        loads = ser.out.copy()
    assert (par.sel > 0).sum() <= 3 * g.m and np.array_equal(par.sel > 0, ser.sel > 0)


def test_sec3_1_parallel_single_port_kernel_reports_a_full_candidate_buffer():
    g = make_graph("torus:40x40")
    loads = np.random.default_rng(1).integers(0, 9, size=g.n)
    par = _SinglePortBuffers(g, 64)
    par.cands, par.ca, par.cb = (np.zeros(100, np.int32) for _ in range(3))
    assert par.step(g, loads, 31, 4, 0.5, 1) == -1 and par.nprev == 0
    assert not par.count.any() and not par.sel.any()
    # The protocol grows its buffers and redoes the step: the reference matching.
    proto = SinglePort(probability=0.5, threads=2)
    proto.reset(g, loads, np.random.default_rng(0))
    proto._alloc_candidates(100)
    step = proto.step(4, g, loads)
    mask = single_port_matching(g, proto.key, 4, 0.5)
    np.testing.assert_array_equal(step.flows, np.where(mask, np.sign(loads[g.u] - loads[g.v]), 0))


@pytest.mark.parametrize("graph,params", [
    ("hypercube:8", {}),
    ("torus:12x15", {"probability": 0.2}),
    ("random-regular:200,5", {"threshold": 2, "flows": False}),
    ("gnp:150,0.05", {"coins": "geometric"}),
])
def test_sec3_1_single_port_threads2_gives_the_serial_trace(graph, params):
    runs = [simulate(graph, "single-port", "point:30000", seed=4, max_steps=80, keep_loads_every=1,
                     detect_cycles=False, params={**params, "threads": k}) for k in (1, 2)]
    a, b = runs
    np.testing.assert_array_equal(a.load_history, b.load_history)
    assert a.tokens_moved == b.tokens_moved > 0
    assert a.report == b.report


def test_sec3_2_multi_port_threads2_gives_the_serial_trace_on_a_regular_graph():
    a, b = (simulate("torus:16x16", "multi-port", "point:50000", seed=2, max_steps=80, keep_loads_every=1,
                     detect_cycles=False, params={"threads": k}) for k in (1, 2))
    np.testing.assert_array_equal(a.load_history, b.load_history)
    assert a.tokens_moved == b.tokens_moved > 0


@pytest.mark.parametrize("algo", ["ds", "single-port"])
def test_threads_below_one_is_a_user_error(algo):
    with pytest.raises(TokendistError, match="threads must be at least 1"):
        make_protocol(algo, {"threads": 0})
