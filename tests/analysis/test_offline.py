"""The off-line optimum of Ghosh et al. 1995, Sec. 6 (Lemma 6.3), against brute force and algorithms."""

import itertools
import math

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings, strategies as st

from tokendist.analysis._offline import lemma_6_3_time, offline_feasible, offline_optimum
from tokendist.engine import simulate
from tokendist.errors import TokendistError
from tokendist.graphs import Graph, make_graph


# ------------------------------------------------------------------ naive references
def _moves(graph, model):
    """All per-step move sets: tuples of directed edges (a, b) used at once."""
    arcs = [(int(a), int(b)) for a, b in zip(graph.u, graph.v)] + [(int(b), int(a)) for a, b in zip(graph.u, graph.v)]
    out = []
    for r in range(len(arcs) + 1):
        for combo in itertools.combinations(arcs, r):
            if model == "matching":
                ends = [x for a in combo for x in a]
                if len(ends) != len(set(ends)):
                    continue
            elif model == "single-port":  # one send and one receive per node
                if len({a for a, _ in combo}) != r or len({b for _, b in combo}) != r:
                    continue
            out.append(combo)
    return out


def brute_force_steps(graph, loads, slack, model):
    """Breadth-first search over load vectors: the exact minimum number of steps."""
    cap = -(-sum(loads) // graph.n) + slack
    moves = _moves(graph, model)
    start = tuple(int(x) for x in loads)
    frontier, seen, t = {start}, {start}, 0
    while True:
        if any(max(s) <= cap for s in frontier):
            return t
        nxt = set()
        for s in frontier:
            for combo in moves:
                w = list(s)
                ok = True
                for a, b in combo:
                    w[a] -= 1
                    w[b] += 1
                sent = {}
                for a, _ in combo:
                    sent[a] = sent.get(a, 0) + 1
                if any(s[a] < k for a, k in sent.items()):
                    ok = False
                if ok:
                    tw = tuple(w)
                    if tw not in seen:
                        seen.add(tw)
                        nxt.add(tw)
        frontier, t = nxt, t + 1
        assert frontier and t < 60


def exact_edge_expansion(graph):
    """alpha = min over nonempty S with |S| <= n/2 of |E(S, V-S)| / |S| (brute force)."""
    best = math.inf
    for r in range(1, graph.n // 2 + 1):
        for S in itertools.combinations(range(graph.n), r):
            inside = np.zeros(graph.n, bool)
            inside[list(S)] = True
            cut = int((inside[graph.u] != inside[graph.v]).sum())
            best = min(best, cut / r)
    return best


TINY = ["path:3", "path:4", "star:3", "ring:4", "complete:3"]


@pytest.mark.parametrize("spec", TINY)
@pytest.mark.parametrize("slack", [0, 1])
def test_lemma6_3_max_flow_equals_brute_force_multi_port(spec, slack):
    g = make_graph(spec)
    rng = np.random.default_rng(hash(spec) % 1000 + slack)
    for _ in range(3):
        loads = rng.integers(0, 5, size=g.n)
        assert offline_optimum(g, loads, slack=slack).steps == brute_force_steps(g, loads, slack, "multi-port")


@pytest.mark.parametrize("spec", ["path:3", "star:3", "ring:4"])
def test_single_port_flow_is_exact_for_one_send_one_receive_and_a_lower_bound_for_matchings(spec):
    g = make_graph(spec)
    rng = np.random.default_rng(7)
    for _ in range(3):
        loads = rng.integers(0, 5, size=g.n)
        r = offline_optimum(g, loads, model="single-port")
        assert not r.exact
        assert r.steps == brute_force_steps(g, loads, 0, "single-port")
        assert r.steps <= brute_force_steps(g, loads, 0, "matching")


def test_single_port_relaxation_is_strictly_below_matching_optimum_somewhere():
    # Path 0-1-2 with loads (2, 1, 0): one step if node 1 passes a token on while receiving one,
    # which a matching forbids (it needs 2 steps).
    g = make_graph("path:3")
    assert offline_optimum(g, [2, 1, 0], model="single-port").steps == 1
    assert brute_force_steps(g, [2, 1, 0], 0, "matching") == 2


def test_feasibility_is_monotone_in_T():
    g = make_graph("torus:4x4")
    loads = np.zeros(g.n, int)
    loads[0] = 160
    T = offline_optimum(g, loads).steps
    assert not offline_feasible(g, loads, T - 1) and offline_feasible(g, loads, T) and offline_feasible(g, loads, T + 3)


@pytest.mark.parametrize("spec", ["ring:8", "path:6", "star:5", "complete:6", "hypercube:3", "torus:3x3"])
def test_lemma6_3_within_d_in_ceil_delta_over_alpha(spec):
    """Lemma 6.3, first part: every node <= ceil(rho) + d within ceil(Delta / alpha) steps (exact alpha)."""
    g = make_graph(spec)
    alpha = exact_edge_expansion(g)
    rng = np.random.default_rng(3)
    for loads in [rng.integers(0, 60, size=g.n), np.eye(g.n, dtype=int)[0] * 50 * g.n]:
        rho = loads.sum() / g.n
        delta = np.abs(loads - rho).max()
        r = offline_optimum(g, loads, slack=g.max_degree)
        assert r.steps <= lemma_6_3_time(delta, alpha)


@pytest.mark.parametrize("spec", ["ring:8", "path:6", "star:5", "hypercube:3", "torus:3x3"])
def test_lemma6_3_worst_distribution_needs_ceil_delta_over_alpha(spec):
    """Lemma 6.3, second part: Delta tokens on each node of a minimum-expansion side V1 (|V1| <= n/2).

    With rho an integer, s(Delta' ) tokens must cross alpha s edges (Delta' = imbalance), so at least
    ceil(Delta' / alpha) steps are needed; the max-flow optimum meets it.
    """
    g = make_graph(spec)
    alpha = exact_edge_expansion(g)
    best = None
    for r in range(1, g.n // 2 + 1):
        for S in itertools.combinations(range(g.n), r):
            inside = np.zeros(g.n, bool)
            inside[list(S)] = True
            if int((inside[g.u] != inside[g.v]).sum()) == alpha * r:
                best = inside
                break
        if best is not None:
            break
    s = int(best.sum())
    D = g.n * 6 // math.gcd(g.n, s)  # makes rho = D s / n an integer
    loads = np.where(best, D, 0)
    rho = loads.sum() / g.n
    assert rho == int(rho)
    imbalance = np.abs(loads - rho).max()
    T = offline_optimum(g, loads).steps
    assert T >= lemma_6_3_time(imbalance, alpha)
    assert T == lemma_6_3_time(imbalance, alpha)  # observed: the max-flow optimum meets it exactly here


@pytest.mark.parametrize("algo", ["multi-port", "single-port", "ds"])
@pytest.mark.parametrize("spec", ["torus:4x4", "hypercube:3", "ring:9"])
def test_offline_optimum_is_a_lower_bound_on_every_algorithm(algo, spec):
    g = make_graph(spec)
    loads = np.zeros(g.n, int)
    loads[0] = 40 * g.n
    r = simulate(g, algo, loads, seed=1, max_steps=100_000, keep_loads_every=None)
    ceil_rho = -(-loads.sum() // g.n)
    K = int(r.trace["max"].min()) - ceil_rho  # a level the algorithm reached
    reached = r.steps_to("max", ceil_rho + K)
    model = "single-port" if algo == "single-port" else "multi-port"
    assert offline_optimum(g, loads, slack=K, model=model).steps <= reached


def test_offline_rejects_bad_input():
    g = make_graph("ring:4")
    with pytest.raises(TokendistError):
        offline_optimum(g, [1, 2, 3], slack=0)
    with pytest.raises(TokendistError):
        offline_optimum(g, [1, 2, 3, 4], model="two-port")
    with pytest.raises(TokendistError):
        offline_optimum(Graph.from_edges(4, [(0, 1)]), [5, 0, 0, 0])


@given(st.integers(0, 10**6))
@settings(max_examples=15)
def test_offline_zero_when_already_below_target(seed):
    g = make_graph("grid:3x3")
    loads = np.random.default_rng(seed).integers(0, 3, size=g.n)
    cap = -(-loads.sum() // g.n)
    r = offline_optimum(g, loads, slack=2)
    assert (r.steps == 0) == (loads.max() <= cap + 2)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(spec=st.sampled_from(["path:5", "ring:6", "star:4", "torus:3x3", "hypercube:3", "random-regular:8,3",
                             "complete:4"]),
       seed=st.integers(0, 50), high=st.integers(1, 40), slack=st.integers(0, 2),
       model=st.sampled_from(["multi-port", "single-port"]))
def test_the_search_starts_at_a_true_lower_bound_and_ends_at_the_least_feasible_t(spec, seed, high, slack, model):
    # The search trusts its lower bound (the per-node and the cut bound): a T below it is never
    # checked. So T = bound - 1 must be infeasible, and the T found the least feasible one.
    from tokendist.analysis._offline import _lower_bound

    g = make_graph(spec, seed=seed)
    loads = np.random.default_rng(seed).integers(0, high + 1, size=g.n)
    cap = -(-int(loads.sum()) // g.n) + slack
    bound = _lower_bound(g, loads, cap, model)
    if bound > 0:
        assert not offline_feasible(g, loads, bound - 1, slack=slack, model=model)
    T = offline_optimum(g, loads, slack=slack, model=model).steps
    assert T >= bound and offline_feasible(g, loads, T, slack=slack, model=model)
    assert T == 0 or not offline_feasible(g, loads, T - 1, slack=slack, model=model)


def test_the_cut_bound_is_the_optimum_with_half_the_nodes_loaded():
    # ghosh-scaling's distributions (2 Delta on the first n/2 nodes): (n/2)(2 Delta - cap) tokens
    # leave the loaded half over its cut, one an edge a step; one max-flow confirms that T.
    from tokendist.experiments._repro_ghosh import half_loads

    for spec, delta, cut in [("ring:32", 50, 2), ("torus:6x6", 50, 12), ("hypercube:5", 50, 16)]:
        g = make_graph(spec, seed=0)
        loads = half_loads(g, delta)
        cap = -(-int(loads.sum()) // g.n)
        r = offline_optimum(g, loads)
        assert r.steps == -(-(g.n // 2) * (2 * delta - cap) // cut) and r.flow_checks == 1
