"""The cheaper forms of the numpy reference steps give the plain forms' numbers, step by step.

A small run takes the numpy reference instead of compiling kernels (tokendist.kernels._choice), so
the references have fast paths: the rounded diffusion rules per CSR slot (``_SlotRounding``), the
integer sends of ``sos-iou`` per CSR slot (``RowOrder.net``), ``single-port`` on its candidates
only, and the row sums of ``fos`` and ``sos`` from one table on regular graphs. Each is checked
here against the plain form it replaces (kept in the code for the cases the fast path leaves out).
"""

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tokendist._random import stream
from tokendist.engine import make_protocol
from tokendist.graphs import make_graph
from tokendist.protocols.diffusion import _rules as diffusion_rules
from tokendist.protocols.heterogeneous import _rules as heterogeneous_rules
from tokendist.kernels._rows import RowOrder
from tokendist.protocols.heterogeneous._matrix import apply_flows
from tokendist.protocols.local._rules import single_port_flows

from .test_diffusion import connected_graphs

GRAPHS = ["torus:6x6", "hypercube:4", "star:7", "grid:4x5", "random-tree:15", "path:6", "ring:7"]


def _steps(algo, graph, loads, params, steps):
    """``steps`` numpy steps from ``loads``: each step's (loads, outflow, flows, moved)."""
    p = make_protocol(algo, {"kernel": "numpy", **params})
    p.reset(graph, loads.copy(), stream(11, "protocol"))
    out = []
    for t in range(steps):
        s = p.step(t, graph, loads)
        out.append((s.loads.tobytes(), None if s.outflow is None else np.asarray(s.outflow).tolist(),
                    None if s.flows is None else np.asarray(s.flows).tolist(), s.moved))
        loads = s.loads
    return out


@pytest.mark.parametrize("spec", GRAPHS)
@pytest.mark.parametrize("algo,params", [
    ("diffusion-floor", {}), ("diffusion-ceil", {}), ("diffusion-oriented", {}), ("diffusion-random", {}),
    ("diffusion-random", {"coin": "fraction"}),
    # P_ij = 3/20: not a unit fraction (the general floor of ad num / den)
    ("diffusion-floor", {"matrix": "uniform:3/20", "min_diag": 0.1}),
    ("diffusion-random", {"matrix": "uniform:3/20", "min_diag": 0.1, "coin": "fraction"}),
])
def test_rounded_diffusion_per_slot_equals_the_edgewise_rule(monkeypatch, spec, algo, params):
    g = make_graph(spec, seed=1)
    if "3/20" in params.get("matrix", "") and g.max_degree > 3:
        pytest.skip("P_ii would be negative")
    rng = np.random.default_rng(5)
    for loads in (rng.integers(0, 300, g.n), rng.integers(0, 2**45, g.n),
                  np.r_[2**62 + 3, np.zeros(g.n - 1, dtype=np.int64)]):  # (span >= 2**62: the edge-wise rule)
        fast = _steps(algo, g, loads, params, 12)
        with monkeypatch.context() as m:
            m.setattr(diffusion_rules._RoundedDiffusion, "_slot_rule", lambda self, loads: None)
            plain = _steps(algo, g, loads, params, 12)
        assert fast == plain


@given(connected_graphs(max_n=14), st.integers(0, 2**31))
@settings(max_examples=40, deadline=None)
def test_slot_net_applies_integer_flows_as_add_at_does(graph, seed):
    rng = np.random.default_rng(seed)
    loads = rng.integers(-(2**61), 2**61, graph.n)
    flows = rng.integers(-(2**50), 2**50, graph.m)
    np.testing.assert_array_equal(loads + RowOrder(graph).net(flows), apply_flows(graph, loads, flows))


@pytest.mark.parametrize("spec", GRAPHS + ["gnp:40,0.1"])
@pytest.mark.parametrize("params", [{}, {"threshold": 2}, {"probability": 0.4}, {"coins": "geometric"}])
def test_single_port_on_its_candidates_equals_the_edgewise_rule(spec, params):
    g = make_graph(spec, seed=2)
    p = make_protocol("single-port", {"kernel": "numpy", **params})
    loads = np.random.default_rng(3).integers(0, 9, g.n)
    p.reset(g, loads.copy(), stream(4, "protocol"))
    for t in range(40):
        out = p.step(t, g, loads)
        if params.get("coins") != "geometric":
            expected = single_port_flows(g, loads, p.key, t, p.p, p.threshold)
            np.testing.assert_array_equal(out.flows, expected)
        np.testing.assert_array_equal(out.loads, apply_flows(g, loads, out.flows))
        assert out.moved == int(np.abs(out.flows).sum())
        loads = out.loads


@pytest.mark.parametrize("spec", ["torus:6x6", "hypercube:4", "ring:9", "star:7", "grid:4x5"])
@pytest.mark.parametrize("algo", ["fos", "sos"])
def test_real_flow_table_on_regular_graphs_adds_as_the_row_order(monkeypatch, spec, algo):
    g = make_graph(spec)
    loads = np.random.default_rng(8).uniform(0, 100, g.n)
    fast = _steps(algo, g, loads, {}, 15)
    with monkeypatch.context() as m:
        m.setattr(heterogeneous_rules, "regular_slot_tables", lambda graph, rows: None)
        plain = _steps(algo, g, loads, {}, 15)
    assert fast == plain  # bit for bit (loads as bytes), outflow and the load moved too
