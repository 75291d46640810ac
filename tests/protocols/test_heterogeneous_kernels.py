"""Fast paths of the Elsässer-Monien-Schamberger schemes against their references.

* The numba kernels of fos, fos-floor, sos and sos-iou against the numpy reference (``kernel=numpy``),
  step by step on random graphs with speeds, static and with edge failures: loads, outflows and
  protocol state bitwise; ``moved`` exactly for the integer schemes, to 1e-12 for the real ones.
* The deflated Lanczos ``gamma`` (used above DENSE_LIMIT nodes) against dense ``eigvalsh`` (Lemma 1).
"""

import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

from tokendist import simulate
from tokendist.engine import EdgeFailures, make_protocol
from tokendist.engine._cycles import state_bytes

from ..strategies import random_connected_graph
from tokendist.protocols.heterogeneous._matrix import (_extremes_lanczos, _symmetric, edge_coefficients,
                                                       scaled_speeds)


@st.composite
def graphs_with_loads(draw, max_n=30):
    n = draw(st.integers(2, max_n))
    rng = np.random.default_rng(draw(st.integers(0, 2**31)))
    g = random_connected_graph(rng, n, draw(st.integers(0, 3 * n)))
    loads = rng.integers(0, 500, n)
    if draw(st.booleans()):
        loads[int(rng.integers(0, n))] += int(rng.integers(0, 20000))
    return g, loads, int(rng.integers(0, 2**31))


def _lockstep(name, g, loads, seed, *, p_fail=0.0, steps=25, params=None):
    """Run the numba and the numpy kernel side by side on the same graphs; compare every step."""
    params = dict(params or {})
    fast = make_protocol(name, {**params, "kernel": "numba"})
    ref = make_protocol(name, {**params, "kernel": "numpy"})
    fast.check_graph(g)
    w0 = loads.astype(np.float64) if fast.divisible else loads.astype(np.int64)
    fast.reset(g, w0.copy(), np.random.default_rng(0))
    ref.reset(g, w0.copy(), np.random.default_rng(0))
    wf, wr = w0.copy(), w0.copy()
    rng = np.random.default_rng(seed)
    for t in range(steps):
        h = g.edge_subgraph(rng.random(g.m) >= p_fail) if p_fail else g
        a = fast.step(t, h, wf)
        b = ref.step(t, h, wr)
        # Loads and the feasibility outflow: the same bits.
        assert a.loads.dtype == b.loads.dtype
        np.testing.assert_array_equal(a.loads, b.loads)
        nz = np.flatnonzero(b.flows)
        f = b.flows[nz]
        ref_out = (np.bincount(h.u[nz], weights=np.maximum(f, 0), minlength=h.n)
                   + np.bincount(h.v[nz], weights=np.maximum(-f, 0), minlength=h.n))
        np.testing.assert_array_equal(a.outflow, ref_out)
        if fast.divisible:
            assert a.moved == pytest.approx(b.moved, rel=1e-12, abs=1e-300)
        else:
            assert a.moved == b.moved
        assert a.messages == b.messages and a.info == b.info
        assert state_bytes(fast.state_key()) == state_bytes(ref.state_key())
        wf, wr = a.loads.copy(), b.loads.copy()
    assert fast.report() == ref.report() if not fast.divisible else True
    return fast, ref


@pytest.mark.parametrize("name", ["fos", "fos-floor", "sos", "sos-iou"])
@settings(max_examples=25, deadline=None)
@given(case=graphs_with_loads(), p_fail=st.sampled_from([0.0, 0.0, 0.3]))
def test_eq3_eq4_numba_kernels_equal_numpy_reference(name, case, p_fail):
    g, loads, seed = case
    fast, ref = _lockstep(name, g, loads, seed, p_fail=p_fail)
    if name in ("sos", "sos-iou"):
        assert fast.dropped == ref.dropped


@settings(max_examples=15, deadline=None)
@given(case=graphs_with_loads(), overdraw=st.sampled_from(["iou", "allow"]))
def test_theorem1_sos_iou_kernel_equals_reference_under_overdraw(case, overdraw):
    # A point load makes sos-iou overdraw (negative-load events): both paths must scale alike.
    g, loads, seed = case
    loads = np.zeros_like(loads)
    loads[0] = 5000
    fast, ref = _lockstep("sos-iou", g, loads, seed, params={"overdraw": overdraw})
    assert fast.events == ref.events and fast.iou_series == ref.iou_series


@pytest.mark.parametrize("name", ["fos", "fos-floor", "sos", "sos-iou"])
def test_simulate_reports_identical_with_both_kernels(name):
    common = dict(seed=1, max_steps=300, speeds="uniform:0.8..1.2")
    if name in ("sos",):
        common["allow_infeasible"] = True
    a = simulate("torus:8x8", name, "point:4096", params={"kernel": "numba"}, **common)
    b = simulate("torus:8x8", name, "point:4096", params={"kernel": "numpy"}, **common)
    np.testing.assert_array_equal(a.loads, b.loads)
    assert a.steps == b.steps and a.stop_reason == b.stop_reason and a.infeasible_steps == b.infeasible_steps
    assert a.final == b.final


def test_sos_infeasible_step_reported_alike():
    # Real SOS overdraws from a point load (Sec. 2): both kernels stop at the same step and node.
    from tokendist.errors import InfeasibleStepError

    msgs = []
    for kernel in ("numba", "numpy"):
        with pytest.raises(InfeasibleStepError) as exc:
            simulate("torus:8x8", "sos", "point:4096", seed=1, max_steps=300, speeds="uniform:0.8..1.2",
                     params={"kernel": kernel})
        msgs.append(str(exc.value))
    assert msgs[0] == msgs[1]


@settings(max_examples=30, deadline=None)
@given(case=graphs_with_loads(max_n=40))
def test_lemma1_lanczos_gamma_equals_dense(case):
    g, _, _ = case
    s = scaled_speeds(g, "raw")
    a = _symmetric(g, edge_coefficients(g, 2.0), s)
    lam = np.linalg.eigvalsh(a.toarray())
    mu2, mun = _extremes_lanczos(a, s)
    # mu_2 is exact when it is non-negative (always for valid M with c = 2 and s >= 1: M_ii >= 1/2).
    assert mu2 == pytest.approx(1 - lam[1], abs=1e-8)
    assert mun == pytest.approx(1 - lam[-1], abs=1e-8)


# Coefficient modes of the kernels (scalar on regular graphs, per node, per edge with capacities),
# x = loads without speeds, base degrees, and sos-iou's exception list across changing graphs.
@st.composite
def graph_variants(draw):
    rng = np.random.default_rng(draw(st.integers(0, 2**31)))
    kind = draw(st.sampled_from(["regular", "plain", "capacities", "speeds"]))
    if kind == "regular":
        from tokendist import make_graph
        g = make_graph(draw(st.sampled_from(["torus:4x5", "hypercube:4", "ring:9", "complete:6"])))
    else:
        n = draw(st.integers(2, 25))
        g = random_connected_graph(rng, n, draw(st.integers(0, 2 * n)))
        if kind != "speeds":
            g = g.with_speeds(None)
        if kind == "capacities":
            g = g.with_capacities(rng.uniform(0.5, 2.0, g.m))
    loads = rng.integers(0, 300, g.n)
    loads[int(rng.integers(0, g.n))] += int(rng.integers(0, 5000))
    return g, loads, int(rng.integers(0, 2**31)), kind


@pytest.mark.parametrize("name", ["fos", "fos-floor", "sos", "sos-iou"])
@settings(max_examples=20, deadline=None)
@given(case=graph_variants(), p_fail=st.sampled_from([0.0, 0.25]), adapt=st.booleans())
def test_eq3_eq4_kernel_coefficient_modes_equal_reference(name, case, p_fail, adapt):
    g, loads, seed, kind = case
    params = {"adapt_degrees": adapt, "allow_invalid": True}
    fast, ref = _lockstep(name, g, loads, seed, p_fail=p_fail, steps=15, params=params)
    if kind == "regular" and not p_fail:
        assert fast._kernel_coefs(g)[0] == 0  # one scalar coefficient, no per-node or per-edge array
    if kind in ("regular", "plain", "capacities"):
        assert fast._unit and fast._xbuf is None  # speeds 1: the kernels read the loads directly
    if name in ("sos", "sos-iou"):
        assert fast.dropped == ref.dropped


@settings(max_examples=15, deadline=None)
@given(case=graphs_with_loads(), p_fail=st.sampled_from([0.1, 0.4]))
def test_theorem1_sos_iou_exceptions_survive_edge_failures(case, p_fail):
    # Point load: nodes owe more than they hold (IOUs >= 1 in the exception list) while edges
    # fail, so the list is mapped onto new graphs; every step equals the reference.
    g, loads, seed = case
    loads = np.zeros_like(loads)
    loads[0] = 8000
    fast, ref = _lockstep("sos-iou", g, loads, seed, p_fail=p_fail, steps=30)
    assert fast.events == ref.events and fast.dropped == ref.dropped
    np.testing.assert_array_equal(fast._iou, ref._iou)


@pytest.mark.parametrize("where", ["first", "middle", "last"])
@pytest.mark.parametrize("graph", ["torus:6x7", "hypercube:5", "path:12"])
def test_theorem1_sos_iou_in_row_payments_equal_reference(where, graph):
    # The numba kernel settles a short node's payments at the end of its own row: what its lower
    # neighbours (rows done) and its upper neighbours (rows to come) receive is corrected in two
    # different ways. A point load on the first, a middle or the last node makes the short nodes
    # send mostly on upper slots, on both, or mostly on lower slots; beta near 2 makes SOS overshoot.
    from tokendist import make_graph
    g = make_graph(graph)
    loads = np.zeros(g.n, np.int64)
    loads[{"first": 0, "middle": g.n // 2, "last": g.n - 1}[where]] = 9000
    fast, ref = _lockstep("sos-iou", g, loads, 0, steps=30, params={"beta": 1.95})
    assert fast.events > 0 and fast.events == ref.events
    np.testing.assert_array_equal(fast._iou, ref._iou)
