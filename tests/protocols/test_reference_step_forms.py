"""The cheaper numpy reference steps of ``diffusion-random`` (and the other rounded rules),
``stratified-diffusion``, ``single-port`` and ``randomized-diffusion`` give the plain forms' numbers.

A small run takes these numpy steps instead of compiling kernels (tokendist.kernels._choice), so
each has a fast form: the rounded rules' one floor with a carry per CSR slot (``SlotRounding``, and
its one-shift sign while the loads are narrow), stratified diffusion's boundary table on regular
graphs, single-port's matchings a block of steps at a time, randomized diffusion's shares in one
floor division. Each is compared here with the plain form it replaces, on steps taken out of order
(across and inside the blocks of draws), with loads up to 2**62 and negative loads where the rule
allows them.
"""

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tokendist._random import counter_uniform_scalar, stream
from tokendist.engine import make_protocol
from tokendist.graphs import make_graph
from tokendist.protocols.local._matching_blocks import MatchingBlocks
from tokendist.protocols.local._rules import single_port_matching

from .test_diffusion import connected_graphs
from .test_modern import naive_randomized_diffusion, naive_stratified

#: Steps that jump forward, back inside and before a block of draws, and far ahead.
STEPS = [0, 1, 2, 63, 64, 65, 5, 300, 299, 130, 4, 2**40, 2**40 - 1, 7]
ROUNDED = [("diffusion-random", {}), ("diffusion-floor", {}), ("diffusion-ceil", {}), ("diffusion-oriented", {}),
           ("diffusion-random", {"coin": "fraction"})]


def _protocol(name, graph, loads, params=None, seed=11):
    p = make_protocol(name, {"kernel": "numpy", **(params or {})})
    p.reset(graph, loads.copy(), stream(seed, "protocol"))
    return p


def _same_steps(fast, plain, graph, loads, steps):
    """Both protocols, step by step from the same loads: the same loads, outflow, flows, moved, reports."""
    for i, t in enumerate(steps):
        a, b = fast.step(t, graph, loads), plain.step(t, graph, loads)
        np.testing.assert_array_equal(a.loads, b.loads)
        for x, y in ((a.outflow, b.outflow), (a.flows, b.flows)):
            assert (x is None) == (y is None)
            if x is not None:
                np.testing.assert_array_equal(x, y)
        assert (a.moved, a.messages) == (b.moved, b.messages)
        loads = np.array(a.loads, copy=True) if i % 2 else loads  # from its own result, or the same loads again
    assert fast.report() == plain.report()


def _rounded_pair(name, graph, loads, params):
    fast = _protocol(name, graph, loads, params)
    plain = _protocol(name, graph, loads, params)
    plain._slot_rule = lambda loads: None  # the edge-wise rule (rounded_flows) on every step
    return fast, plain


@pytest.mark.parametrize("spec", ["torus:6x6", "hypercube:4", "ring:7", "star:7", "grid:4x5"])
@pytest.mark.parametrize("name,params", ROUNDED)
@pytest.mark.parametrize("span", ["small", "wide", "negative"])
def test_rounded_slot_steps_equal_the_edgewise_rule(spec, name, params, span):
    """The slot form with the sign's carry in one shift (loads below 2**(63 - k), P = 2**-k), in two
    operations (wider or negative loads) and by integer division (P not a power of two)."""
    g = make_graph(spec, seed=1)
    rng = np.random.default_rng(7)
    loads = {"small": rng.integers(0, 300, g.n),
             "wide": rng.integers(2**61, 2**62 - 1, g.n),  # (beyond 2**60: not narrow for P = 1/8)
             "negative": rng.integers(-(2**60), 2**60, g.n)}[span].astype(np.int64)
    fast, plain = _rounded_pair(name, g, loads, params)
    _same_steps(fast, plain, g, loads, STEPS)


@given(connected_graphs(max_n=12), st.integers(0, 2**32 - 1), st.sampled_from([1, 2**20, 2**61]),
       st.sampled_from(ROUNDED))
@settings(max_examples=40, deadline=None)
def test_rounded_slot_steps_equal_the_edgewise_rule_on_any_graph(graph, seed, scale, rule):
    name, params = rule
    loads = np.random.default_rng(seed).integers(-scale, scale, graph.n).astype(np.int64)
    fast, plain = _rounded_pair(name, graph, loads, params)
    _same_steps(fast, plain, graph, loads, STEPS[:8])


def test_rounded_slot_steps_on_a_regular_graph_with_unequal_coefficients(tmp_path):
    """A regular graph whose P_ij differ (P from a file: fractions per slot, no single shift)."""
    g = make_graph("torus:4x4")
    path = tmp_path / "p.txt"
    path.write_text("".join(f"{a} {b} {'1/8' if e % 3 == 0 else '1/16'}\n"
                            for e, (a, b) in enumerate(zip(g.u.tolist(), g.v.tolist()))))
    loads = np.random.default_rng(2).integers(0, 500, g.n).astype(np.int64)
    for name, params in ROUNDED:
        fast, plain = _rounded_pair(name, g, loads, {**params, "matrix": f"file:{path}"})
        _same_steps(fast, plain, g, loads, STEPS[:8])


@pytest.mark.parametrize("spec", ["torus:6x6", "hypercube:4", "ring:9", "complete:6", "star:6", "grid:3x4"])
@pytest.mark.parametrize("order", ["self-first", "self-last"])
def test_stratified_table_steps_equal_the_boundary_form(spec, order):
    """The (D + 1, n) boundary table (regular graphs) against the per-boundary form it replaces
    (the other graphs take that form itself), and against the per-node rule."""
    g = make_graph(spec, seed=5)
    loads = np.random.default_rng(9).integers(0, 60, g.n).astype(np.int64)
    fast = _protocol("stratified-diffusion", g, loads, {"order": order})
    plain = _protocol("stratified-diffusion", g, loads, {"order": order})
    plain._boundary_table = lambda: None
    _same_steps(fast, plain, g, loads, STEPS)
    regular = int(g.degrees.min()) == g.max_degree
    assert (fast._table is not None) == regular
    x = loads
    for t in (3, 70):
        np.testing.assert_array_equal(fast.step(t, g, x).loads, naive_stratified(g, x, t, fast._key,
                                                                                order == "self-first"))


def test_stratified_table_step_with_the_token_test_kept():
    """A boundary above 1.0 (rounding in another matrix) keeps the test k < x: the same loads."""
    g = make_graph("torus:4x4")
    loads = np.random.default_rng(3).integers(0, 50, g.n).astype(np.int64)
    fast = _protocol("stratified-diffusion", g, loads)
    plain = _protocol("stratified-diffusion", g, loads)
    fast.step(0, g, loads)
    c, inner, rev, exact = fast._table
    assert exact
    fast._table = (c, inner, rev, False)
    _same_steps(fast, plain, g, loads, STEPS[:6])


@pytest.mark.parametrize("spec", ["torus:6x6", "hypercube:4", "star:7", "gnp:40,0.1", "path:5"])
@pytest.mark.parametrize("p", [1 / 16, 0.4])
def test_single_port_matching_blocks_are_the_per_step_matchings(spec, p):
    g = make_graph(spec, seed=2)
    blocks = MatchingBlocks(g, 12345, p)
    for t in STEPS:
        e, a, b = blocks.at(t)
        expected = np.flatnonzero(single_port_matching(g, 12345, t, p))
        np.testing.assert_array_equal(e, expected)
        np.testing.assert_array_equal(a, g.u[expected])
        np.testing.assert_array_equal(b, g.v[expected])


def _sent_to_neighbours(graph, loads, t, key, slots):
    """The tokens moved by one step of the per-node rule (naive_randomized_diffusion's shares over
    the slots that lead to a neighbour)."""
    moved = 0
    for i in range(graph.n):
        q, r = divmod(int(loads[i]), slots)
        coins = sorted((counter_uniform_scalar(key, t, i * slots + s), s) for s in range(slots))
        chosen = {s for _, s in coins[:r]}
        moved += sum(q + (s in chosen) for s in range(int(graph.degrees[i])))
    return moved


@pytest.mark.parametrize("spec", ["torus:4x4", "hypercube:3", "star:6", "complete:12"])
@pytest.mark.parametrize("denominator", ["max-degree+1", "2max-degree"])
@pytest.mark.parametrize("span", ["small", "past-2**62", "negative"])
def test_randomized_diffusion_shares_in_one_division(spec, denominator, span):
    """(x + S - 1 - rank) // S while the loads are below 2**62; q + (rank < r) past it and for
    negative loads: both the per-node rule's shares and tokens moved."""
    g = make_graph(spec, seed=5)
    loads = np.random.default_rng(4).integers(-40 if span == "negative" else 0, 40, g.n).astype(np.int64)
    if span == "past-2**62":
        loads[1] = 2**62 + 5
    p = _protocol("randomized-diffusion", g, loads, {"denominator": denominator})
    x = loads
    for t in STEPS[:8]:
        step = p.step(t, g, x)
        np.testing.assert_array_equal(step.loads, naive_randomized_diffusion(g, x, t, p._key, p.slots))
        assert step.moved == _sent_to_neighbours(g, x, t, p._key, p.slots)
        x = np.array(step.loads, copy=True)
