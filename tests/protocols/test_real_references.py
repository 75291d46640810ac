"""The real-valued schemes' numpy steps are their serial kernels' steps, bit for bit.

``diffusion``, ``fos`` and ``sos`` add the same floats in the serial kernels' order
(tokendist.kernels._rows), and so does ``random-walk``'s estimate error in its report, so they
declare ``reference_exact`` and a small run may take the numpy step instead of compiling
(tokendist.kernels._choice). Checked here at every step: the
loads, every trace column, every field of the result but ``seconds``, ``variants`` and the
``kernel`` parameter, on the zoo, on graphs with stencils (tori, rings), on the hypercube whose
``sos`` kernel keeps its state by dimension, on irregular graphs and with node speeds.
"""

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import tokendist as td
from tokendist.engine import PROTOCOLS, make_protocol
from tokendist.graphs import Graph, make_graph
from tokendist.kernels._rows import RowOrder, sequential_sum

from ..conftest import ZOO

REAL = ("diffusion", "fos", "sos")
GRAPHS = ZOO + ["torus:16x16", "torus:5x6", "ring:12", "random-regular:30,3", "gnp:30,0.2", "star:9"]


def _run(graph, name, kernel, steps=120, speeds=None, **params):
    cls = PROTOCOLS.get(name)
    return td.simulate(graph, name, "random:0..60", seed=3, max_steps=steps, keep_loads_every=1, record_every=1,
                       detect_cycles=False, allow_infeasible=cls.may_go_negative, speeds=speeds,
                       params={"kernel": kernel, **params})


def _same_run(graph, name, steps=120, **kw):
    ref, kernel = _run(graph, name, "numpy", steps, **kw), _run(graph, name, "numba", steps, **kw)
    assert any(not v.startswith("numpy") and v != "reference" for v in kernel.variants), kernel.variants
    assert ref.steps == kernel.steps
    np.testing.assert_array_equal(ref.load_history, kernel.load_history)  # every step, bit for bit
    for key, column in kernel.trace.items():
        if key != "seconds":
            np.testing.assert_array_equal(ref.trace[key], column, err_msg=key)

    def fields(r):
        out = {k: v for k, v in r.to_json().items() if k not in ("seconds", "variants", "params")}
        out["params"] = {k: v for k, v in r.to_json()["params"].items() if k != "kernel"}
        return out
    assert fields(ref) == fields(kernel)
    return kernel


@pytest.mark.parametrize("spec", GRAPHS)
@pytest.mark.parametrize("name", REAL)
def test_real_reference_equals_serial_kernel_at_every_step(name, spec):
    _same_run(spec, name)


@pytest.mark.parametrize("name", ["fos", "sos"])
def test_real_reference_equals_serial_kernel_with_speeds(name):
    _same_run("torus:6x6", name, speeds="uniform:1..4")
    _same_run("random-regular:24,3", name, speeds="uniform:1..4")


def test_sos_reference_equals_the_cube_kernel():
    kernel = _same_run("hypercube:12", "sos", steps=30)
    assert any("cube" in v for v in kernel.variants), kernel.variants


@pytest.mark.parametrize("spec", ["torus:16x16", "torus:5x6", "hypercube:5", "random-tree:25", "gnp:30,0.2", "ring:9"])
@pytest.mark.parametrize("switch", ["error", "local"])
@pytest.mark.parametrize("speeds", [None, "uniform:1..3"])
def test_random_walk_reference_equals_serial_kernels_report_included(spec, switch, speeds):
    """Both phases (integer FOS with the real estimate, then the walks); the report's estimate series too."""
    kernel = _same_run(spec, "random-walk", steps=3000, speeds=speeds, switch=switch)
    # Phase 2 reached (the tree with speeds converges too slowly for 3,000 steps: phase 1 only).
    assert any("mrws" in v for v in kernel.variants) or (spec.startswith("random-tree") and speeds), kernel.variants


@pytest.mark.parametrize("name", REAL + ("random-walk",))
def test_threads_other_than_serial_are_not_declared_exact(name):
    torus = make_graph("torus:4x4")
    assert make_protocol(name, {}).reference_exact(torus)
    assert make_protocol(name, {"threads": "1"}).reference_exact(torus)
    assert not make_protocol(name, {"threads": "2"}).reference_exact(torus)


@st.composite
def graphs_and_terms(draw, max_n=12):
    n = draw(st.integers(1, max_n))
    pairs = [(a, b) for a in range(n) for b in range(a + 1, n)]
    edges = draw(st.lists(st.sampled_from(pairs), unique=True, max_size=len(pairs))) if pairs else []
    g = Graph.from_edges(n, edges, spec="hypothesis")
    terms = draw(st.lists(st.floats(-1e6, 1e6), min_size=2 * g.m, max_size=2 * g.m))
    return g, np.array(terms, dtype=np.float64)


@given(graphs_and_terms())
@settings(max_examples=150, deadline=None)
def test_row_sums_add_each_row_in_slot_order(case):
    """Deliberately naive: a Python loop over each row's slots, from 0.0, as the kernels add."""
    g, terms = case
    got = RowOrder(g).sums(terms)
    for i in range(g.n):
        acc = 0.0
        for k in range(g.indptr[i], g.indptr[i + 1]):
            acc += float(terms[k])
        assert got[i] == acc
    total = 0.0
    for v in got:
        total += float(v)
    assert sequential_sum(got) == total


@given(graphs_and_terms(), st.data())
@settings(max_examples=100, deadline=None)
def test_integer_row_sums_and_edge_flows_are_exact_over_int64(case, data):
    """Integer terms near 2**62: exact int64 sums (a float bincount would round), the reverse slot,
    and per-edge flows seen from the slots, against Python integers."""
    g, _ = case
    order = RowOrder(g)
    big = st.integers(-(2**62), 2**62)
    terms = np.array(data.draw(st.lists(big, min_size=2 * g.m, max_size=2 * g.m)), dtype=np.int64)
    flows = np.array(data.draw(st.lists(big, min_size=g.m, max_size=g.m)), dtype=np.int64)
    sums, net = order.sums(terms), order.net(flows)
    assert sums.dtype == np.int64 and net.dtype == np.int64
    for i in range(g.n):
        slots = range(g.indptr[i], g.indptr[i + 1])
        total = sum(int(terms[k]) for k in slots)
        if -(2**63) <= total < 2**63:
            assert int(sums[i]) == total
        gain = sum(int(f) * (int(g.v[e]) == i) - int(f) * (int(g.u[e]) == i) for e, f in enumerate(flows))
        if -(2**63) <= gain < 2**63:
            assert int(net[i]) == gain
        for k in slots:
            j = int(g.indices[k])
            assert order.row[order.reverse[k]] == j and g.indices[order.reverse[k]] == i
