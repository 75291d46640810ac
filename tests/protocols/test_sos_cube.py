"""``sos`` and ``sos-iou`` (Elsässer, Monien, Schamberger 2006, eq. (4), Sec. 3): the hypercube kernels.

* Layout: :func:`cube_flow_slot` places every edge of ``hypercube:d`` at a distinct ``(k, c)``, and
  :func:`flows_to_cube` / :func:`flows_from_cube` move the per-edge state there and back.
* Kernel (Hypothesis): ``sos_real_cube`` (dimension by dimension, blocks of ``2^CUBE_BLOCK_BITS``
  nodes) writes the same loads and outflows, returns the same load moved and keeps the same
  flows as the row loop ``sos_real_step``, bit for bit, step after step, with and without speeds,
  on cubes smaller than a block and larger.
* Protocol: ``sos`` takes the cube kernel on ``hypercube:d`` from ``SOS_CUBE_MIN_DIMENSION`` on and
  gives the numpy reference's loads; on a dynamic sequence that moves between cube and non-cube
  graphs (the state changes layout and follows the edges) it still does.
* sos-iou, the same three levels: ``sos_iou_cube`` against ``sos_iou_step`` (Hypothesis: few to
  most nodes short, paying or overdrawing, exceptions read back; and a cube across blocks with
  thousands of short nodes), with the IOUs and exception bits by dimension; the protocol against
  the numpy reference and the threaded row kernel (report included), and through a dynamic sequence.
"""

import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

from tokendist.engine import GraphSequence, make_protocol, simulate
from tokendist.graphs import make_graph
from tokendist.protocols.heterogeneous.kernels._serial import COEF_SCALAR, sos_iou_step, sos_real_step
from tokendist.protocols.heterogeneous.kernels._walk_cube import CUBE_BLOCK_BITS
from tokendist.protocols.heterogeneous.kernels._sos_cube import (SOS_CUBE_MIN_DIMENSION, cube_flow_slot, flows_from_cube,
                                                         flows_to_cube, sos_iou_cube, sos_real_cube)

DIMENSIONS = [1, 2, 3, 5, CUBE_BLOCK_BITS, CUBE_BLOCK_BITS + 1, CUBE_BLOCK_BITS + 2]


@pytest.mark.parametrize("d", [1, 3, 6])
def test_every_edge_has_its_own_slot_by_dimension(d):
    g = make_graph(f"hypercube:{d}")
    slots = set()
    for u, v in zip(g.u.tolist(), g.v.tolist()):
        k = (v - u).bit_length() - 1
        assert v - u == 1 << k and not u & (1 << k)
        c = cube_flow_slot(u, k)
        assert 0 <= c < g.n // 2
        slots.add((k, c))
    assert len(slots) == g.m
    values = np.random.default_rng(d).normal(size=g.m)
    by_dim = flows_to_cube(g, d, values)
    assert by_dim.shape == (d, g.n // 2)
    assert sorted(by_dim.ravel()) == sorted(values)
    for e, (u, v) in enumerate(zip(g.u.tolist(), g.v.tolist())):
        k = (v - u).bit_length() - 1
        assert by_dim[k, cube_flow_slot(u, k)] == values[e]
    assert np.array_equal(flows_from_cube(g, by_dim), values)


@settings(max_examples=30, deadline=None)
@given(st.sampled_from(DIMENSIONS), st.booleans(), st.integers(0, 2**31), st.floats(1.0, 1.99))
def test_eq4_cube_kernel_equals_row_loop_bit_for_bit(d, speeds, seed, beta):
    g = make_graph(f"hypercube:{d}")
    n, rng = g.n, np.random.default_rng(seed)
    loads = (rng.integers(0, 1000, n) + np.arange(n)).astype(np.float64)  # never balanced
    s = rng.uniform(0.8, 1.2, n) if speeds else None
    a0 = 1.0 / (2 * d)
    flow_rows = np.zeros(g.m)
    flow_dims = np.zeros((d, n // 2))
    w_rows, w_dims = loads.copy(), loads.copy()
    largest = 0.0
    for step in range(4):
        first = step == 0
        outs = [np.empty(n) for _ in range(4)]
        x_rows = w_rows if s is None else w_rows / s
        x_dims = w_dims if s is None else w_dims / s
        moved_rows = sos_real_step(g.indptr, g.indices, g.csr_edges, COEF_SCALAR, a0, None, None, beta, first,
                                   x_rows, w_rows, flow_rows, outs[0], outs[1])
        moved_dims = sos_real_cube(d, a0, beta, first, x_dims, w_dims, flow_dims, outs[2], outs[3])
        assert np.array_equal(outs[2], outs[0])  # loads
        assert np.array_equal(outs[3], outs[1])  # outflows
        assert moved_dims == moved_rows
        assert np.array_equal(flows_from_cube(g, flow_dims), flow_rows)
        assert outs[2].sum() == pytest.approx(loads.sum())
        largest = max(largest, np.abs(flow_rows).max())
        w_rows, w_dims = outs[0], outs[2]
    assert largest > 0  # the flows were exercised, not zeros compared to zeros


def _run(graph, params, steps, dynamics=None):
    return simulate(graph, "sos", "random:0..200", seed=11, max_steps=steps, params=params, dynamics=dynamics,
                    detect_cycles=False)


@pytest.mark.parametrize("speeds", [False, True])
def test_protocol_takes_the_cube_kernel_and_matches_the_reference(speeds):
    g = make_graph(f"hypercube:{SOS_CUBE_MIN_DIMENSION}")
    if speeds:
        g = g.with_speeds(np.random.default_rng(3).uniform(0.8, 1.2, g.n))
    p = make_protocol("sos", {})
    p.check_graph(g)
    p.reset(g, np.arange(g.n, dtype=np.float64), np.random.default_rng(0))
    p.step(0, g, np.arange(g.n, dtype=np.float64))
    assert p._prev.shape == (SOS_CUBE_MIN_DIMENSION, g.n // 2)  # the state is kept by dimension
    fast = _run(g, {}, 25)
    ref = _run(g, {"kernel": "numpy"}, 25)
    rows = _run(g, {"threads": "2"}, 25)  # the threaded row kernel: edge order
    assert np.array_equal(fast.loads, ref.loads)
    assert np.array_equal(fast.loads, rows.loads)
    assert fast.final["l2_error"] < 0.5 * fast.initial["l2_error"]


def test_smaller_cubes_keep_the_row_loop():
    g = make_graph(f"hypercube:{SOS_CUBE_MIN_DIMENSION - 1}")
    p = make_protocol("sos", {})
    p.check_graph(g)
    w = np.arange(g.n, dtype=np.float64)
    p.reset(g, w, np.random.default_rng(0))
    p.step(0, g, w)
    assert p._prev.shape == (g.m,)


def test_dynamic_sequence_moves_the_state_between_layouts():
    # The same cube as two graph objects (carried by edge keys), a cube with failed edges (the row
    # loop, edge order, flows of missing edges dropped), and back: the reference's loads throughout.
    d = SOS_CUBE_MIN_DIMENSION
    a, b = make_graph(f"hypercube:{d}"), make_graph(f"hypercube:{d}")
    alive = np.random.default_rng(5).random(a.m) >= 0.2
    seq = [a, a, b, a.edge_subgraph(alive), a]
    fast = _run(a, {}, 12, GraphSequence(seq))
    ref = _run(a, {"kernel": "numpy"}, 12, GraphSequence(seq))
    assert np.array_equal(fast.loads, ref.loads)
    assert fast.report["flow_dropped_with_edges"] == pytest.approx(ref.report["flow_dropped_with_edges"])
    assert fast.report["flow_dropped_with_edges"] > 0  # the failed edges did carry flow


# ---------------------------------------------------------------------------------------------
# sos-iou (Sec. 3)


def _iou_state_in_edge_order(g, d, yhat, iou, bits):
    ex = np.unpackbits(bits, count=g.m, bitorder="little").astype(np.float64).reshape(d, g.n // 2)
    return flows_from_cube(g, yhat), flows_from_cube(g, iou), flows_from_cube(g, ex).astype(bool)


@settings(max_examples=30, deadline=None)
@given(st.sampled_from(DIMENSIONS), st.booleans(), st.integers(0, 2**31), st.floats(1.0, 1.99), st.integers(1, 200),
       st.booleans())
def test_sec3_iou_cube_kernel_equals_row_loop_bit_for_bit(d, speeds, seed, beta, top, pay):
    # Loads 0..top with beta up to 1.99: from few to most nodes short, exceptions left for the next
    # step (IOUs of at least 1), read back and paid again.
    g = make_graph(f"hypercube:{d}")
    n, m, rng = g.n, g.m, np.random.default_rng(seed)
    loads = rng.integers(0, top + 1, n)
    s = rng.uniform(0.8, 1.2, n) if speeds else None
    a0 = 1.0 / (2 * d) if d > 1 else 0.25
    rows = [np.zeros(m), np.zeros(m), np.zeros((m + 7) // 8, np.uint8)]
    dims = [np.zeros((d, n // 2)), np.zeros((d, n // 2)), np.zeros((m + 7) // 8, np.uint8)]
    w_rows, w_dims = loads.copy(), loads.copy()
    owed_stored, has_exc, shorts = False, False, 0
    for step in range(5):
        first = step == 0
        out_rows, out_dims = np.zeros(n, np.int64), np.zeros(n, np.int64)
        owe_rows, owe_dims = np.empty(n), np.empty(n)
        x_rows = w_rows if s is None else w_rows / s
        x_dims = w_dims if s is None else w_dims / s
        res_rows = sos_iou_step(g.indptr, g.indices, g.csr_edges, COEF_SCALAR, a0, None, None, beta, first,
                                owed_stored, has_exc, rows[2], pay, x_rows, w_rows, rows[0], rows[1], out_rows,
                                owe_rows)
        res_dims = sos_iou_cube(d, a0, beta, first, owed_stored, has_exc, dims[2], pay, x_dims, w_dims, dims[0],
                                dims[1], out_dims, owe_dims)
        assert res_dims == res_rows
        assert np.array_equal(out_dims, out_rows) and np.array_equal(owe_dims, owe_rows)
        yhat, iou, exc = _iou_state_in_edge_order(g, d, *dims)
        assert np.array_equal(yhat, rows[0]) and np.array_equal(iou, rows[1])
        assert np.array_equal(exc, np.unpackbits(rows[2], count=m, bitorder="little").astype(bool))
        assert out_dims.sum() == loads.sum()
        if pay:
            assert out_dims.min() >= 0
        owed_stored, has_exc, shorts = True, res_rows[4], shorts + res_rows[1]
        w_rows, w_dims = out_rows, out_dims


def test_sec3_iou_cube_kernel_pays_short_nodes_on_a_large_cube():
    # The Hypothesis test may not draw a case with short nodes on a cube across blocks every time:
    # this one has thousands, and exceptions carried from step to step.
    d = CUBE_BLOCK_BITS + 1
    g = make_graph(f"hypercube:{d}")
    n, m = g.n, g.m
    loads = np.random.default_rng(1).integers(0, 20, n)
    rows = [np.zeros(m), np.zeros(m), np.zeros((m + 7) // 8, np.uint8)]
    dims = [np.zeros((d, n // 2)), np.zeros((d, n // 2)), np.zeros((m + 7) // 8, np.uint8)]
    w_rows, w_dims, owed_stored, has_exc, shorts, exc_steps = loads, loads, False, False, 0, 0
    for step in range(6):
        outs = [np.zeros(n, np.int64), np.empty(n), np.zeros(n, np.int64), np.empty(n)]
        res_rows = sos_iou_step(g.indptr, g.indices, g.csr_edges, COEF_SCALAR, 1.0 / (d + 1), None, None, 1.95,
                                step == 0, owed_stored, has_exc, rows[2], True, w_rows, w_rows, rows[0], rows[1],
                                outs[0], outs[1])
        res_dims = sos_iou_cube(d, 1.0 / (d + 1), 1.95, step == 0, owed_stored, has_exc, dims[2], True, w_dims, w_dims,
                                dims[0], dims[1], outs[2], outs[3])
        assert res_dims == res_rows
        assert np.array_equal(outs[2], outs[0]) and np.array_equal(outs[3], outs[1])
        owed_stored, has_exc = True, res_rows[4]
        shorts += res_rows[1]
        exc_steps += has_exc
        w_rows, w_dims = outs[0], outs[2]
    assert shorts > 1000 and exc_steps >= 3


# ideal=shadow (the default) only meets short nodes where the real SOS process itself overdraws:
# a point load; ideal=driven meets them from random loads.
@pytest.mark.parametrize("ideal,init", [("driven", "random:0..30"), ("shadow", "point:40000")])
@pytest.mark.parametrize("overdraw", ["iou", "allow"])
def test_sos_iou_protocol_takes_the_cube_kernel_and_matches_the_reference(overdraw, ideal, init):
    g = make_graph(f"hypercube:{SOS_CUBE_MIN_DIMENSION}").with_speeds(np.random.default_rng(4).uniform(0.8, 1.2, 4096))
    params = {"overdraw": overdraw, "beta": "1.95", "ideal": ideal}

    def run(extra):
        return simulate(g, "sos-iou", init, seed=2, max_steps=15, params={**params, **extra},
                        detect_cycles=False, allow_infeasible=overdraw == "allow")

    fast, ref, rows = run({}), run({"kernel": "numpy"}), run({"threads": "2"})
    assert np.array_equal(fast.loads, ref.loads) and np.array_equal(fast.loads, rows.loads)
    for key in ("iou_total", "iou_units", "iou_max_ever", "negative_load_events", "iou_units_series"):
        assert fast.report[key] == ref.report[key], key
    assert fast.report["negative_load_events"] > 0  # short nodes were met (and paid, or overdrew)
    p = make_protocol("sos-iou", params)
    p.check_graph(g)
    w = np.arange(g.n)
    p.reset(g, w, np.random.default_rng(0))
    p.step(0, g, w)
    assert p._prev.shape == p._iou_raw.shape == (SOS_CUBE_MIN_DIMENSION, g.n // 2)  # kept by dimension
    assert p._iou.shape == (g.m,)  # read in edge order


def test_sos_iou_dynamic_sequence_moves_the_state_between_layouts():
    d = SOS_CUBE_MIN_DIMENSION
    a, b = make_graph(f"hypercube:{d}"), make_graph(f"hypercube:{d}")
    alive = np.random.default_rng(5).random(a.m) >= 0.2
    seq = GraphSequence([a, a, b, a.edge_subgraph(alive), a, a])

    def run(params):
        return simulate(a, "sos-iou", "random:0..30", seed=8, max_steps=14, params={"beta": "1.95", **params},
                        dynamics=seq, detect_cycles=False)

    fast, ref = run({}), run({"kernel": "numpy"})
    assert np.array_equal(fast.loads, ref.loads)
    for key in ("iou_total", "iou_units", "negative_load_events", "flow_dropped_with_edges"):
        assert fast.report[key] == pytest.approx(ref.report[key], rel=1e-12), key
    assert fast.report["negative_load_events"] > 0
