"""Per-node forms of sos and sos-iou (Elsässer, Monien, Schamberger 2006, eq. (4), Sec. 3) against the kernels.

* Lockstep: every step, each node runs ``publish`` / ``decide`` on the loads the vectorised kernel
  holds, seeing only its live neighbours; the amounts it sends must be the kernel's edge flows
  bit for bit, its memory the kernel's per-edge ``yhat`` and IOU (negated at the upper endpoint),
  on random graphs with speeds or capacities, static and with edge failures, both kernels, both
  overdraw modes.
* End to end: ``run_node_rules`` (real messages, sync and async schedules) gives the same loads
  as ``simulate`` with either kernel, including runs where a node is short and pays in proportion.
"""

import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

from tokendist import simulate
from tokendist.engine import make_protocol, run_node_rules
from tokendist.engine._local import NodeView
from tokendist.protocols.heterogeneous._sos_readings import IDEAL_READINGS

from ..strategies import random_connected_graph


@st.composite
def cases(draw, max_n=14):
    rng = np.random.default_rng(draw(st.integers(0, 2**31)))
    n = draw(st.integers(2, max_n))
    g = random_connected_graph(rng, n, draw(st.integers(0, 2 * n)))
    kind = draw(st.sampled_from(["speeds", "speeds", "plain", "capacities"]))
    if kind != "speeds":
        g = g.with_speeds(None)
    if kind == "capacities":
        g = g.with_capacities(rng.uniform(0.5, 2.0, g.m))
    loads = rng.integers(0, 60, n)
    point = draw(st.sampled_from(["none", "any", "hub", "hub"]))
    if point != "none":
        # A point load; on a node of largest degree, with little elsewhere, the SOS momentum makes
        # sos-iou nodes owe more than they hold (proportional payment) in most such cases.
        at = int(np.argmax(g.degrees)) if point == "hub" else int(rng.integers(0, n))
        if point == "hub":
            loads[:] = rng.integers(0, 3, n)
        loads[at] += int(rng.integers(500, 5000))
    return g, loads, int(rng.integers(0, 2**31))


def _node_step(p, t, h, loads, memory, delivered):
    """Every node's decision in step ``t`` on graph ``h``: ``{(i, j): amount}``; updates ``delivered``."""
    views = [NodeView(i, loads[i], h.neighbours(i), memory=memory[i], delivered=delivered[i])
             for i in range(h.n)]
    for vw in views:
        vw.contacts = vw.neighbours
    pub = [p.publish(0, t, i, views[i]) for i in range(h.n)]
    for i, vw in enumerate(views):
        vw.received.append({int(j): pub[j] for j in vw.neighbours})
    sends = {}
    for i in range(h.n):
        for j, a in p.decide(t, i, views[i]).items():
            assert a > 0 and h.edge_index(i, j) >= 0
            sends[(i, int(j))] = a
    for i in range(h.n):
        delivered[i] = {int(j): sends.get((int(j), i), 0) for j in h.neighbours(i)}
    return sends


def _lockstep(name, g, loads, seed, *, kernel, p_fail=0.0, steps=12, params=None):
    params = {**(params or {}), "kernel": kernel}
    ref = make_protocol(name, params)
    node = make_protocol(name, params)
    ref.check_graph(g)
    w = loads.astype(np.float64) if ref.divisible else loads.astype(np.int64)
    ref.reset(g, w.copy(), np.random.default_rng(0))
    node.reset(g, w.copy(), np.random.default_rng(0))
    memory = [{} for _ in range(g.n)]
    delivered = [{} for _ in range(g.n)]
    rng = np.random.default_rng(seed)
    short_steps = 0
    for t in range(steps):
        h = g.edge_subgraph(rng.random(g.m) >= p_fail) if p_fail else g
        sends = _node_step(node, t, h, w, memory, delivered)
        events = getattr(ref, "events", 0)
        step = ref.step(t, h, w)
        short_steps += getattr(ref, "events", 0) > events
        # The kernel's edge flows, positive from u to v; the numba path gives only loads: derive
        # the flows from the node sends and check they reproduce the kernel's loads exactly.
        flows = np.zeros(h.m)
        for (i, j), a in sends.items():
            e = int(h.edge_index(i, j))
            flows[e] = a if i < j else -a
        if step.flows is not None:
            np.testing.assert_array_equal(flows, step.flows)
        if not ref.divisible:
            delta = (np.bincount(h.v, weights=flows, minlength=h.n)
                     - np.bincount(h.u, weights=flows, minlength=h.n))
            np.testing.assert_array_equal(w + delta.astype(np.int64), step.loads)
        # Memory: each end holds the kernel's yhat (and IOU) of its edges, oriented out of itself.
        # (ideal=sent: the kernel keeps the sent flow, which a node learns only next step.)
        yhat = ref._prev
        iou = ref._iou if name == "sos-iou" else None
        ideal = ref.options.get("ideal")
        for e in range(h.m):
            a, b = int(h.u[e]), int(h.v[e])
            if ideal != "sent":
                assert memory[a]["yhat"][b] == yhat[e] and memory[b]["yhat"][a] == -yhat[e]
            if iou is not None:
                for i, j, sign in ((a, b, 1.0), (b, a, -1.0)):
                    m = memory[i]
                    settled = m["owed"][j] - float(m["sent"].get(j, 0) - delivered[i][j])
                    assert settled == sign * iou[e]
        for i in range(h.n):
            assert set(memory[i]["yhat"]) == {int(j) for j in h.neighbours(i)}
            if ideal == "shadow":  # each node's share of the idealised process
                assert memory[i]["shadow"] == ref._shadow[i]
        w = step.loads.copy()
    return ref, short_steps


@pytest.mark.parametrize("kernel", ["numba", "numpy"])
@settings(max_examples=25, deadline=None)
@given(case=cases(), p_fail=st.sampled_from([0.0, 0.0, 0.3]))
def test_eq4_sos_node_rule_is_the_kernel_bit_for_bit(kernel, case, p_fail):
    g, loads, seed = case
    _lockstep("sos", g, loads, seed, kernel=kernel, p_fail=p_fail)


@pytest.mark.parametrize("kernel", ["numba", "numpy"])
@settings(max_examples=40, deadline=None)
@given(case=cases(), p_fail=st.sampled_from([0.0, 0.0, 0.3]), overdraw=st.sampled_from(["iou", "allow"]),
       ideal=st.sampled_from(IDEAL_READINGS))
def test_theorem1_sos_iou_node_rule_is_the_kernel_bit_for_bit(kernel, case, p_fail, overdraw, ideal):
    g, loads, seed = case
    _lockstep("sos-iou", g, loads, seed, kernel=kernel, p_fail=p_fail, params={"overdraw": overdraw, "ideal": ideal})


@pytest.mark.parametrize("kernel", ["numba", "numpy"])
def test_theorem1_sos_iou_short_node_pays_in_proportion(kernel):
    # Star with a point load on the hub: the SOS momentum makes the hub owe its leaves more than it
    # holds (4 negative-load events in 20 steps); it pays floor(t * w / T) on each edge, keeps an
    # IOU of at least 1 there, and the node rule follows the kernel through all of it.
    from tokendist.graphs import make_graph

    g = make_graph("star:7")
    loads = np.zeros(g.n, np.int64)
    loads[0] = 3000
    ref, short = _lockstep("sos-iou", g, loads, 1, kernel=kernel, steps=20)
    assert short > 0 and ref.events > 0
    assert ref.iou_max >= 1.0  # an edge not paid in full


@settings(max_examples=20, deadline=None)
@given(case=cases(max_n=10), name=st.sampled_from(["sos", "sos-iou"]), kernel=st.sampled_from(["numba", "numpy"]),
       schedule=st.sampled_from(["sync", "async"]), overdraw=st.sampled_from(["iou", "allow"]))
def test_eq4_node_rules_with_messages_give_the_kernel_trace(case, name, kernel, schedule, overdraw):
    g, loads, _ = case
    params = {"kernel": kernel, **({"overdraw": overdraw} if name == "sos-iou" else {})}
    negative = name == "sos" or overdraw == "allow"
    init = loads
    r = simulate(g, name, init, seed=2, max_steps=10, keep_loads_every=1, detect_cycles=False, params=params,
                 allow_infeasible=negative)
    history, _ = run_node_rules(g, name, init, r.steps, seed=2, params=params, schedule=schedule,
                                allow_negative=negative)
    if name == "sos":
        # Loads are sums of real amounts that arrive in message order: equal up to rounding.
        np.testing.assert_allclose(history, r.load_history, rtol=1e-9, atol=1e-9)
    else:
        np.testing.assert_array_equal(history, r.load_history)


@pytest.mark.parametrize("kernel", ["numba", "numpy"])
def test_theorem1_sos_iou_payment_is_the_exact_proportional_floor(kernel):
    # A short node pays floor(t w / T) on each edge: with one edge owed t = 22 and w = 15 tokens it
    # pays all 15 (evaluating t * (w / T) = 22 * (15 / 22) = 14.999... would pay 14).
    from tokendist.graphs import make_graph

    g = make_graph("path:2")
    w = np.array([15, 15], np.int64)
    ref = make_protocol("sos-iou", {"kernel": kernel, "beta": 1.5})
    ref.reset(g, w.copy(), np.random.default_rng(0))
    # State after one step whose SOS flow was 44.4 from node 0 to node 1 and paid in full.
    ref._k, ref._keys, ref._state_graph = 1, g.edge_keys, g
    ref._prev, ref._iou = np.array([44.4]), np.zeros(1)
    node = make_protocol("sos-iou", {"kernel": kernel, "beta": 1.5})
    node.reset(g, w.copy(), np.random.default_rng(0))
    memory = [{"k": 1, "yhat": {1: 44.4}, "owed": {1: 0.0}, "sent": {}},
              {"k": 1, "yhat": {0: -44.4}, "owed": {0: 0.0}, "sent": {}}]
    delivered = [{1: 0}, {0: 0}]
    sends = _node_step(node, 1, g, w, memory, delivered)
    step = ref.step(1, g, w)
    assert sends == {(0, 1): 15} and step.loads.tolist() == [0, 30] and ref.events == 1
    iou = ref._iou[0]
    assert iou == 22.2 - 15 and memory[0]["owed"][1] - 15 == iou
    assert memory[1]["owed"][0] + delivered[1][0] == -iou
