"""sos-iou's three readings of the "idealized scheme" (Elsässer, Monien, Schamberger 2006, Sec. 3, Theorem 1).

* ``ideal=shadow`` (default): the shadow loads are the real-valued ``sos`` process from the same
  start, bit for bit; the integer loads stay within the IOUs of it (``w - w' = div IOU``, also
  across edge failures, where a dropped edge gives its IOU back); on a torus it ends near balance
  and then moves no token at all.
* ``ideal=sent``: the integer loads satisfy eq. (5) of Theorem 1's proof,
  ``w^k = beta M w^{k-1} - (beta - 1) w^{k-2} + delta_{k-1}``, with ``delta`` the IOU change.
* ``ideal=driven``: the momentum on the previous ideal flow driven by the integer loads (kept for
  comparison); it keeps moving tokens on a torus.
* Every reading: the IOU is the total ideal flow minus the total real flow of the edge; the kernel
  ``kernel=numba`` chooses (stencil, threaded stencil, cube, CSR rows, threaded CSR blocks) gives
  the reference's loads, state and report, step by step.
"""

import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

from tokendist import simulate
from tokendist.engine import make_protocol
from tokendist.graphs import make_graph
from tokendist.protocols.heterogeneous._matrix import apply_flows, edge_coefficients, fos_flows
from tokendist.protocols.heterogeneous.kernels._sos_cube import flows_from_cube
from tokendist.protocols.heterogeneous._sos_readings import IDEAL_READINGS

from ..strategies import random_connected_graph


def _div_out(g, values):
    """Per node, the sum of the per-edge ``values`` oriented out of it."""
    return np.bincount(g.u, weights=values, minlength=g.n) - np.bincount(g.v, weights=values, minlength=g.n)


def _pair(g, loads, params, *, steps, p_fail=0.0, seed=0):
    """The numba-chosen path and the numpy reference side by side; yields both after every step."""
    fast = make_protocol("sos-iou", {**params, "kernel": "numba"})
    ref = make_protocol("sos-iou", {**params, "kernel": "numpy"})
    fast.check_graph(g)
    w0 = np.asarray(loads, dtype=np.int64)
    fast.reset(g, w0.copy(), np.random.default_rng(0))
    ref.reset(g, w0.copy(), np.random.default_rng(0))
    wf, wr = w0.copy(), w0.copy()
    rng = np.random.default_rng(seed)
    for t in range(steps):
        h = g.edge_subgraph(rng.random(g.m) >= p_fail) if p_fail else g
        a, b = fast.step(t, h, wf), ref.step(t, h, wr)
        np.testing.assert_array_equal(a.loads, b.loads)
        assert a.moved == b.moved and a.info == b.info
        wf, wr = a.loads.copy(), b.loads.copy()
        yield t, h, fast, ref, wf


def _edge_order(p, values):
    """Per-edge state in edge order (the cube kernel keeps it by dimension)."""
    return values if values.ndim == 1 else flows_from_cube(p._state_graph, values)


def _same_state(fast, ref):
    np.testing.assert_array_equal(_edge_order(fast, fast._prev), ref._prev)
    np.testing.assert_array_equal(fast._iou, ref._iou)
    if ref._shadow is not None:
        np.testing.assert_array_equal(fast._shadow, ref._shadow)
    assert fast.report() == ref.report()


@pytest.mark.parametrize("ideal", IDEAL_READINGS)
@pytest.mark.parametrize("spec,params", [
    ("torus:12x10", {}),                         # the serial stencil kernel
    ("torus:12x10", {"threads": "2"}),           # the threaded stencil kernel
    ("hypercube:12", {"beta": "1.95"}),          # the cube kernel (state by dimension)
    ("random-regular:60,5", {"threads": "2"}),   # the threaded CSR row blocks
])
def test_theorem1_chosen_kernel_path_equals_reference_for_each_reading(ideal, spec, params):
    g = make_graph(spec, seed=3)
    loads = np.random.default_rng(1).integers(0, 60, g.n)
    loads[0] += 5000  # a point load: short nodes pay in proportion (negative-load events)
    for _, _, fast, ref, _ in _pair(g, loads, {**params, "ideal": ideal}, steps=12):
        _same_state(fast, ref)
    assert fast.path == "numba" and ref.path == "numpy"
    assert fast.report()["negative_load_events"] > 0  # short nodes paid in proportion, on the kernels too


@settings(max_examples=15, deadline=None)
@given(seed=st.integers(0, 2**31), ideal=st.sampled_from(IDEAL_READINGS), p_fail=st.sampled_from([0.0, 0.3]),
       speeds=st.booleans())
def test_theorem1_chosen_path_equals_reference_on_random_graphs(seed, ideal, p_fail, speeds):
    rng = np.random.default_rng(seed)
    g = random_connected_graph(rng, int(rng.integers(2, 25)), int(rng.integers(0, 40)))
    if not speeds:
        g = g.with_speeds(None)
    loads = rng.integers(0, 300, g.n)
    for _, _, fast, ref, _ in _pair(g, loads, {"ideal": ideal}, steps=15, p_fail=p_fail, seed=seed):
        _same_state(fast, ref)


def test_default_reading_is_shadow():
    assert make_protocol("sos-iou", {}).options["ideal"] == "shadow"


@pytest.mark.parametrize("kernel", ["numba", "numpy"])
def test_shadow_is_the_real_sos_process_bit_for_bit(kernel):
    g = make_graph("torus:9x7", seed=0).with_speeds(np.random.default_rng(2).uniform(1.0, 2.0, 63))
    w0 = np.random.default_rng(3).integers(0, 200, g.n)
    iou = make_protocol("sos-iou", {"kernel": kernel})
    sos = make_protocol("sos", {"kernel": "numpy"})
    iou.reset(g, w0.copy(), np.random.default_rng(0))
    sos.reset(g, w0.astype(np.float64), np.random.default_rng(0))
    w, x = w0.copy(), w0.astype(np.float64)
    for t in range(40):
        w = iou.step(t, g, w).loads
        x = sos.step(t, g, x).loads
        np.testing.assert_array_equal(iou._shadow, x)


@pytest.mark.parametrize("kernel", ["numba", "numpy"])
@pytest.mark.parametrize("p_fail", [0.0, 0.3])
def test_shadow_keeps_the_integer_loads_within_the_ious(kernel, p_fail):
    # w'_i = w_i - sum_j IOU_ij: the idealised process is ahead of the real one by exactly the IOUs;
    # with edge failures too, because a dropped edge gives its IOU back to the shadow.
    g = make_graph("gnp:40,0.15", seed=4)
    w0 = np.random.default_rng(5).integers(0, 100, g.n)
    w0[3] += 3000
    for t, h, fast, ref, w in _pair(g, w0, {"ideal": "shadow"}, steps=40, p_fail=p_fail, seed=6):
        p = fast if kernel == "numba" else ref
        np.testing.assert_allclose(w - p._shadow, _div_out(h, p._iou), rtol=0, atol=1e-8)
        assert np.isclose(p._shadow.sum(), w0.sum())
    if p_fail:
        assert ref.iou_returned > 0


@pytest.mark.parametrize("ideal", IDEAL_READINGS)
def test_theorem1_iou_is_total_ideal_minus_total_sent(ideal):
    g = make_graph("torus:6x6", seed=0)
    # The ideal flows rebuilt independently from the reading's equation (no speeds: s = 1).
    # A point load and a large beta: the SOS momentum overdraws nodes (negative-load events).
    p2 = make_protocol("sos-iou", {"kernel": "numpy", "ideal": ideal, "beta": 1.9})
    w2 = np.zeros(g.n, np.int64)
    w2[0] = 5000
    p2.reset(g, w2.copy(), np.random.default_rng(0))
    alpha = edge_coefficients(g, 2.0)
    shadow, prev_y, prev_sent = w2.astype(np.float64), None, None
    total_y, total_sent = np.zeros(g.m), np.zeros(g.m)
    for t in range(60):
        drive = shadow if ideal == "shadow" else w2
        f = fos_flows(g, alpha, np.ones(g.n), drive)
        mom = prev_sent if ideal == "sent" else prev_y
        y = f if t == 0 else p2.beta * f + (p2.beta - 1.0) * mom
        step = p2.step(t, g, w2)
        total_y += y
        total_sent += step.flows
        prev_y, prev_sent = y, step.flows
        if ideal == "shadow":
            shadow = apply_flows(g, shadow, y)
        w2 = step.loads
        np.testing.assert_allclose(p2._iou, total_y - total_sent, rtol=0, atol=1e-7)
    assert p2.events > 0  # the point load made nodes short: paid in proportion, owed the rest


def test_theorem1_sent_reading_is_eq5_on_the_real_loads():
    # w^k = beta M w^{k-1} - (beta - 1) w^{k-2} + delta_{k-1}, delta_{k-1} = div(IOU^k - IOU^{k-1})
    # (M w = w - div F(w)): the momentum on the flow actually sent makes the integer process eq. (5).
    g = make_graph("torus:8x8", seed=0)
    w = np.random.default_rng(8).integers(0, 200, g.n)
    p = make_protocol("sos-iou", {"kernel": "numpy", "ideal": "sent"})
    p.reset(g, w.copy(), np.random.default_rng(0))
    alpha = edge_coefficients(g, 2.0)
    hist, ious = [w.astype(np.float64)], [np.zeros(g.m)]
    for t in range(50):
        w = p.step(t, g, w).loads
        hist.append(w.astype(np.float64))
        ious.append(p._iou.copy())
    for k in range(2, 51):
        mw = hist[k - 1] + _div_in(g, fos_flows(g, alpha, np.ones(g.n), hist[k - 1]))
        delta = _div_out(g, ious[k] - ious[k - 1])
        np.testing.assert_allclose(hist[k], p.beta * mw - (p.beta - 1.0) * hist[k - 2] + delta, rtol=0, atol=1e-7)


def _div_in(g, flows):
    return -_div_out(g, flows)


def test_shadow_balances_a_torus_and_then_moves_nothing_driven_keeps_moving():
    # On a small torus: the default ends within a small constant of balance
    # and, once the shadow has balanced, the IOUs are fractions and no token moves; ideal=driven
    # (reachable by its parameter) keeps an oscillation of many tokens a step.
    runs = {ideal: simulate("torus:24x24", "sos-iou", "random:0..200", seed=1, max_steps=800, detect_cycles=False,
                            params={"ideal": ideal}) for ideal in ("shadow", "driven")}
    sh, dr = runs["shadow"], runs["driven"]
    per_step = {k: np.diff(r.trace["tokens_moved"]) for k, r in runs.items()}
    assert sh.final["discrepancy"] <= 2 * 4 + 1
    assert per_step["shadow"][-100:].max() == 0 and sh.report["iou_units"] == 0
    assert dr.final["discrepancy"] > sh.final["discrepancy"]
    assert per_step["driven"][-100:].min() > 1000
