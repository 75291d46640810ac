"""The cheaper forms of the numpy steps of ``sos-iou``, ``fos``/``sos`` and ``flow-imitation`` give the plain forms' numbers.

A small run takes the numpy reference instead of compiling kernels (tokendist.kernels._choice), so
these references have cheaper forms, each checked here against the plain form it replaces (kept in
the code for the cases the cheaper form leaves out):

* ``sos-iou`` and ``flow-imitation``: no node can be short (or overdraw) when the largest degree
  times the largest integer flow is at most the smallest load; integer flows summed per node in
  float64 while every partial sum stays below 2**53 (the plain form: int64 sums per CSR slot);
  ``sos-iou``'s whole IOU units are 0 when every edge paid in full. The module constant
  ``_EXACT_SUMS`` set to 0 turns them all off.
* ``fos``/``sos``: the row sums of a regular graph from a ``(D, 2, n)`` slot table, against
  :class:`tokendist.kernels._rows.RowOrder` sums of the per-slot terms.
* :class:`~tokendist.protocols.heterogeneous._matrix.EdgeIndex` against ``fos_flows`` and ``apply_flows``.
* The dense ``gamma`` on one BLAS thread, remembered per input.
"""

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from threadpoolctl import threadpool_info

from tokendist._random import stream
from tokendist.engine import make_protocol
from tokendist.engine._cycles import state_bytes
from tokendist.graphs import make_graph
from tokendist.kernels._rows import RowOrder
from tokendist.protocols.heterogeneous import _matrix as hm
from tokendist.protocols.heterogeneous import _rules as heterogeneous_rules
from tokendist.protocols.modern import _flow_imitation as flow_imitation

from .test_diffusion import connected_graphs

GRAPHS = ["torus:6x6", "torus:16x16", "hypercube:4", "star:7", "grid:4x5", "random-tree:15", "ring:7", "gnp:30,0.2"]
CASES = [("sos-iou", {}), ("sos-iou", {"ideal": "sent"}), ("sos-iou", {"ideal": "driven", "overdraw": "allow"}),
         ("flow-imitation", {}), ("flow-imitation", {"process": "sos"}), ("flow-imitation", {"guard": "off"}),
         ("flow-imitation", {"process": "random-matching"})]


def _steps(algo, graph, loads, params, steps):
    """``steps`` numpy steps from ``loads``: each step's state key, loads, flows, moved and info; the report."""
    p = make_protocol(algo, {"kernel": "numpy", **params})
    p.reset(graph, loads.copy(), stream(11, "protocol"))
    out = []
    for t in range(steps):
        key = state_bytes(p.state_key())
        s = p.step(t, graph, loads)
        out.append((key, s.loads.tobytes(), np.asarray(s.flows).tobytes(), s.moved, s.info))
        loads = s.loads
    out.append(repr(p.report()))
    return out


@pytest.mark.parametrize("spec", GRAPHS)
@pytest.mark.parametrize("algo,params", CASES)
def test_bounded_forms_equal_the_plain_forms(monkeypatch, spec, algo, params):
    g = make_graph(spec, seed=1)
    module = flow_imitation if algo == "flow-imitation" else heterogeneous_rules
    rng = np.random.default_rng(5)
    for loads in (rng.integers(0, 300, g.n), rng.integers(0, 4, g.n), rng.integers(0, 2**45, g.n),
                  np.r_[2**52 + 3, np.zeros(g.n - 1, dtype=np.int64)],  # (flows near 2**53: the plain sums)
                  np.r_[2**62 + 3, rng.integers(0, 9, g.n - 1)]):
        fast = _steps(algo, g, loads, params, 30)
        with monkeypatch.context() as m:
            m.setattr(module, "_EXACT_SUMS", 0)
            plain = _steps(algo, g, loads, params, 30)
        assert fast == plain


def _plain_row_sums(graph, y):
    """``(in - out, sent)`` per node from RowOrder sums of the per-slot terms (the irregular graphs' form)."""
    rows = RowOrder(graph)
    ys, low = y[graph.csr_edges], rows.lower
    inn, outs = rows.sums(np.where(low, ys, 0.0)), rows.sums(np.where(low, 0.0, ys))
    sent = rows.sums(np.where(low, 0.0, np.maximum(ys, 0.0))) + rows.sums(np.where(low, np.maximum(-ys, 0.0), 0.0))
    return inn - outs, sent


def _awkward_floats(rng, size):
    """Magnitudes from 1e-300 to 1e300, subnormals, zeros of both signs: sums whose order shows in the bits."""
    y = rng.standard_normal(size) * np.exp(rng.uniform(-690, 690, size))
    y[rng.random(size) < 0.1] = 5e-324 * rng.integers(-9, 9)
    y[rng.random(size) < 0.15] = 0.0
    y[rng.random(size) < 0.1] = -0.0
    return y


@given(st.sampled_from(["torus:5x6", "torus:16x16", "hypercube:5", "ring:9", "random-regular:20,3", "complete:6",
                        "path:2"]), st.integers(0, 2**31))
@settings(max_examples=60, deadline=None)
def test_regular_table_sums_add_as_the_row_order(spec, seed):
    g = make_graph(spec, seed=1)
    y = _awkward_floats(np.random.default_rng(seed), g.m)
    change, sent = hm.regular_flow_sums(hm.regular_slot_tables(g, RowOrder(g)), y)
    plain_change, plain_sent = _plain_row_sums(g, y)
    assert change.tobytes() == plain_change.tobytes() and sent.tobytes() == plain_sent.tobytes()


@given(connected_graphs(max_n=14), st.integers(0, 2**31))
@settings(max_examples=40, deadline=None)
def test_edge_index_gives_fos_flows_and_apply_flows(graph, seed):
    rng = np.random.default_rng(seed)
    alpha = hm.edge_coefficients(graph, 2.0)
    index = hm.EdgeIndex(graph, alpha)
    x = _awkward_floats(rng, graph.n)
    assert index.fos_flows(x).tobytes() == hm.fos_flows(graph, alpha, np.ones(graph.n), x).tobytes()
    y = _awkward_floats(rng, graph.m)
    assert index.apply_flows(x, y).tobytes() == hm.apply_flows(graph, x, y).tobytes()
    flows = rng.integers(-(2**48), 2**48, graph.m)  # integers: exact sums below 2**53, as int64 ones
    np.testing.assert_array_equal(index.net(flows.astype(np.float64)).astype(np.int64), RowOrder(graph).net(flows))


def test_dense_gamma_on_one_blas_thread_is_remembered(monkeypatch):
    g = make_graph("torus:6x6")
    alpha, s = hm.edge_coefficients(g, 2.0), np.ones(g.n)
    hm._DENSE_NORMS.clear()
    first = hm.diffusion_norm(g, alpha, s)
    lam = np.linalg.eigvalsh(hm._symmetric(g, alpha, s).toarray())
    assert first["gamma"] == pytest.approx(max(abs(1 - lam[1]), abs(1 - lam[-1])), abs=1e-12)
    with monkeypatch.context() as m:
        m.setattr(hm, "_eigenvalues", lambda a: pytest.fail("computed again"))
        assert hm.diffusion_norm(make_graph("torus:6x6"), alpha.copy(), s.copy()) == first  # same input, same bits
    assert hm.diffusion_norm(g, alpha * 0.5, s)["gamma"] != first["gamma"]  # another input is computed
    # The BLAS thread count comes back as it was.
    before = [i["num_threads"] for i in threadpool_info() if i["user_api"] == "blas"]
    with hm._one_blas_thread():
        assert all(i["num_threads"] == 1 for i in threadpool_info() if i["user_api"] == "blas")
    assert [i["num_threads"] for i in threadpool_info() if i["user_api"] == "blas"] == before
