"""The numpy reference steps of the randomised modern rules, which draw a block of steps at once.

``randomized-diffusion``, ``stratified-diffusion``, ``random-matching``, ``balancing-circuit`` and
``pairwise-averaging`` (``kernel=numpy``) compute their counter-based draws (and, where they do not
depend on the loads, the matchings and slot ranks) for a block of consecutive steps at a time. A
step must still be the rule of its own step ``t`` whatever steps came before: each reference is
compared here with the naive per-node rules of ``test_modern`` (or with the per-round form it
replaced) on steps taken out of order, across and inside blocks.
"""

import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

from tokendist._random import (CounterDraws, counter_uniform, counter_uniform_mixed, counter_uniform_scalar, mix_index,
                               stream)
from tokendist.engine import make_protocol
from tokendist.graphs import make_graph
from tokendist.protocols.modern._matching import _TAG_MATCH, _coins, edge_coin_matchings, random_matching
from tokendist.protocols.modern._randomized_diffusion import slot_ranks
from tokendist.protocols.modern._stratified import _below as below

from .test_modern import SMALL, naive_randomized_diffusion, naive_stratified

#: Steps in an order that jumps forward, back inside and before a block, and far ahead.
STEPS = [0, 1, 2, 63, 64, 65, 5, 300, 299, 130, 4, 2**40, 2**40 - 1, 7, 8, 9]


def _reference(name, graph, loads, params=None, seed=3):
    p = make_protocol(name, dict(params or {}, kernel="numpy"))
    p.reset(graph, loads.copy(), stream(seed, "protocol"))
    return p


def _loads(graph, seed, high=40):
    return np.random.default_rng(seed).integers(0, high, graph.n).astype(np.int64)


# complete:12: 12 slots, ranked by sorting; torus:120x120: more draws than one block holds
@pytest.mark.parametrize("spec", SMALL + ["complete:12", "torus:120x120"])
@pytest.mark.parametrize("denominator", ["max-degree+1", "2max-degree"])
def test_randomized_diffusion_reference_is_the_per_node_rule(spec, denominator):
    g = make_graph(spec, seed=5)
    x = _loads(g, 4)
    p = _reference("randomized-diffusion", g, x, {"denominator": denominator})
    for i, t in enumerate(STEPS if g.n < 1000 else STEPS[:3]):
        step = p.step(t, g, x)
        np.testing.assert_array_equal(step.loads, naive_randomized_diffusion(g, x, t, p._key, p.slots))
        x = np.array(step.loads, copy=True) if i % 2 else x  # from its own result, or the same loads again


@settings(max_examples=60, deadline=None)
@given(slots=st.integers(1, 12), rows=st.integers(1, 6), levels=st.integers(1, 4), seed=st.integers(0, 2**32 - 1))
def test_slot_ranks_are_a_stable_sort(slots, rows, levels, seed):
    """The ranks by pairwise comparison (few slots) or by sorting: a stable sort's, ties by slot."""
    u = np.random.default_rng(seed).integers(0, levels, (rows, 3, slots)) / levels  # many ties
    expected = np.argsort(np.argsort(u, axis=-1, kind="stable"), axis=-1, kind="stable")
    np.testing.assert_array_equal(slot_ranks(u), expected)


@pytest.mark.parametrize("spec", ["ring:7", "torus:4x4", "hypercube:3", "star:6", "grid:3x4", "random-tree:12"])
@pytest.mark.parametrize("order", ["self-first", "self-last"])
def test_stratified_reference_is_the_per_node_rule(spec, order):
    g = make_graph(spec, seed=5)
    x = _loads(g, 9)
    p = _reference("stratified-diffusion", g, x, {"order": order})
    for i, t in enumerate(STEPS[:10]):
        if i == 6:  # a node with more tokens than the table of token mixes holds: the table grows
            x = x.copy()
            x[0] = 3 * x.max() + 1
        step = p.step(t, g, x)
        np.testing.assert_array_equal(step.loads, naive_stratified(g, x, t, p._key, order == "self-first"))
        x = np.array(step.loads, copy=True) if i % 2 else x
    assert p._mixes is not None and p._mix_width > x.max()


def test_stratified_reference_with_loads_past_the_mix_table():
    """Loads whose table of token mixes would be too large: the indices are mixed step by step."""
    g = make_graph("ring:5")
    x = np.array([2**40, 3, 2**21 + 5, 0, 7], dtype=np.int64)
    p = _reference("stratified-diffusion", g, x)
    c, row, lo, hi = p._boundaries()
    for t in (0, 9, 3):
        step = p.step(t, g, x)
        assert p._mixes is None
        # The rule slot by slot: _below of each slot's two boundaries, tokens over the edge (i -> j).
        key = p._key
        sent = (below(c[hi], x[row[hi]], row[hi], key, t) - below(c[lo], x[row[lo]], row[lo], key, t))
        expected = x - np.bincount(p._rows, weights=sent, minlength=g.n).astype(np.int64) \
            + np.bincount(g.indices, weights=sent, minlength=g.n).astype(np.int64)
        np.testing.assert_array_equal(step.loads, expected)
        assert step.moved == sent.sum() and step.loads.sum() == x.sum()
        x = np.array(step.loads, copy=True)


@settings(max_examples=60, deadline=None)
@given(key=st.integers(0, 2**64 - 1), step=st.integers(0, 2**63 - 1),
       index=st.lists(st.integers(0, 2**64 - 1), max_size=7))
def test_counter_uniform_from_premixed_indices(key, step, index):
    index = np.array(index, dtype=np.uint64)
    mixed = mix_index(index)
    np.testing.assert_array_equal(counter_uniform_mixed(key, step, mixed), counter_uniform(key, step, index))
    np.testing.assert_array_equal(mixed, mix_index(index))  # not changed


def _tagged(key, tag):
    """The key of one use's stream in _matching (its documented derivation)."""
    return key ^ (tag * 0x9E3779B97F4A7C15 & ((1 << 63) - 1))


def _naive_edge_coin(graph, key, t, p):
    """Per edge: a candidate with probability p, matched when no other candidate touches its ends."""
    coin = [counter_uniform_scalar(_tagged(key, _TAG_MATCH), t, e) for e in range(graph.m)]
    cand = [e for e in range(graph.m) if coin[e] < p]
    ends = [(int(graph.u[e]), int(graph.v[e])) for e in cand]
    return sorted(e for e, (a, b) in zip(cand, ends)
                  if sum(a in pair for pair in ends) == 1 and sum(b in pair for pair in ends) == 1)


@pytest.mark.parametrize("spec", SMALL)
def test_edge_coin_matchings_are_the_per_edge_rule(spec):
    g = make_graph(spec, seed=5)
    key, p = 987654321, 0.3
    draws = CounterDraws(_tagged(key, _TAG_MATCH), np.arange(g.m), block=8)
    rounds, edges = edge_coin_matchings(g, draws.rows(40) < p)
    for b in range(8):
        assert edges[rounds == b].tolist() == _naive_edge_coin(g, key, 40 + b, p)
        assert np.flatnonzero(random_matching(g, key, 40 + b, "edge-coin", p)).tolist() == edges[rounds == b].tolist()


@pytest.mark.parametrize("spec", SMALL + ["torus:130x130"])  # torus:130x130: more edges than one block holds
@pytest.mark.parametrize("name,params", [("random-matching", {}), ("random-matching", {"p": "0.3"}),
                                         ("random-matching", {"excess": "heavier"}),
                                         ("random-matching", {"drawing": "active-passive"}),
                                         ("random-matching", {"drawing": "active-passive", "excess": "heavier"}),
                                         ("balancing-circuit", {}), ("balancing-circuit", {"excess": "heavier"})])
def test_matching_references_are_the_per_round_rule(spec, name, params):
    """Each step equals the rule on round t's matching mask (random_matching, or the colour class)."""
    g = make_graph(spec, seed=5)
    x = _loads(g, 6, 25)
    p = _reference(name, g, x, params)
    steps = STEPS if g.n < 100 else STEPS[:6]
    for i, t in enumerate(steps):
        step = p.step(t, g, x)
        matched = (random_matching(g, p._key, t, p.options["drawing"], p.options["p"] or None)
                   if name == "random-matching" else p.colours == t % p.period)
        naive = p._step(t, g, x, matched)  # the per-round form: the mask, its coins, one bincount per end
        np.testing.assert_array_equal(step.loads, naive.loads)
        np.testing.assert_array_equal(step.flows, naive.flows)
        assert (step.moved, step.messages) == (naive.moved, naive.messages)
        x = np.array(step.loads, copy=True) if i % 2 else x


@pytest.mark.parametrize("excess", ["random", "heavier"])
def test_pairwise_averaging_reference_is_the_rule(excess):
    g = make_graph("complete:9")
    x = _loads(g, 10, 50)
    p = _reference("pairwise-averaging", g, x, {"excess": excess})
    for i, t in enumerate(STEPS + list(range(250, 600))):
        a, b = int(g.u[p.pair(t, g)]), int(g.v[p.pair(t, g)])
        s = int(x[a] + x[b])
        a_hi = counter_uniform_scalar(p._key, t, 1) < 0.5 if excess == "random" else x[a] >= x[b]
        expected = x.copy()
        expected[a], expected[b] = (s - s // 2, s // 2) if a_hi else (s // 2, s - s // 2)
        step = p.step(t, g, x)
        np.testing.assert_array_equal(step.loads, expected)
        assert step.outflow.sum() == step.moved == abs(int(x[a]) - int(expected[a]))
        x = np.array(step.loads, copy=True) if i % 2 else x


def test_counter_draws_rows_are_counter_uniform():
    index = np.array([0, 5, 2**40, 2**64 - 1], dtype=np.uint64)
    draws = CounterDraws(11, index, block=6)
    for first in (0, 3, 100, 3):
        rows = draws.rows(first)
        assert rows.shape == (6, 4) and not rows.flags.writeable
        for b in range(6):
            np.testing.assert_array_equal(rows[b], counter_uniform(11, first + b, index))
    np.testing.assert_array_equal(_coins(11, 2, 7, 3), counter_uniform(_tagged(11, 2), 7, np.arange(3)))
