"""perfect-tree (Margara, Pistocchi, Vassura): the three phases, the theorems as properties, the
election race under adversarial schedules, token exchanges against the exact optimum."""

import itertools

import networkx as nx
import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

from tokendist.analysis._tree_transport import EXCESS_CONSTANT, min_exchanges, perfect_tree_bounds, transport_cost
from tokendist.graphs import tree_diameter


def bounds_figures(tree, loads):
    return perfect_tree_bounds(tree, loads, {})
from tokendist.engine import simulate
from tokendist.graphs import Graph, kary_tree, make_graph, path_graph, random_tree, star_graph
from tokendist.protocols.perfect_tree._rules import PerfectTree
from tokendist.protocols.perfect_tree._schedules import race_edge


# ---------------------------------------------------------------------- instances
def caterpillar(spine: int, legs: int) -> Graph:
    edges = [(i, i + 1) for i in range(spine - 1)]
    nxt = spine
    for i in range(spine):
        for _ in range(legs):
            edges.append((i, nxt))
            nxt += 1
    return Graph.from_edges(nxt, edges, spec=f"caterpillar:{spine},{legs}")


def make_tree(shape: str, size: int, seed: int) -> Graph:
    if shape == "path":
        return path_graph(size)
    if shape == "star":
        return star_graph(size - 1)
    if shape == "caterpillar":
        return caterpillar(max(1, size // 3), 2)
    if shape == "kary":
        k = 2 + seed % 2
        h = 1
        while (k ** (h + 1) - 1) // (k - 1) <= size and h < 3:
            h += 1
        return kary_tree(k, h - 1 if h > 1 else 1)
    return random_tree(size, np.random.default_rng(seed))


def make_loads(kind: str, tree: Graph, seed: int) -> np.ndarray:
    rng = np.random.default_rng(seed)
    n = tree.n
    loads = np.zeros(n, dtype=np.int64)
    if kind == "random":
        loads = rng.integers(0, 10, n)
    elif kind == "fewer-than-n":  # 0 < T < N
        if n > 1:
            loads[rng.choice(n, size=int(rng.integers(1, n)), replace=True)] += 1
    elif kind == "multiple-of-n":
        loads = rng.integers(0, 6, n)
        loads[0] += (-loads.sum()) % n
    elif kind == "one-leaf":
        leaves = np.flatnonzero(tree.degrees <= 1)
        loads[leaves[int(rng.integers(leaves.size))]] = int(rng.integers(1, 4 * n + 2))
    elif kind == "centre":
        loads[int(np.argmax(tree.degrees))] = int(rng.integers(1, 4 * n + 2))
    # kind == "zero": T = 0
    return loads.astype(np.int64)


SCHEDULES = [dict(schedule="sync"), dict(schedule="async", max_delay=4), dict(schedule="async", max_delay=9),
             dict(schedule="adversarial", adversary="race"), dict(schedule="adversarial", adversary="race-slow"),
             dict(schedule="adversarial", adversary="slow-links", max_delay=6),
             dict(schedule="adversarial", adversary="slow-tokens", max_delay=7),
             dict(schedule="async", pick="largest")]

instances = st.tuples(st.sampled_from(["path", "star", "caterpillar", "kary", "random"]), st.integers(1, 16),
                      st.sampled_from(["random", "zero", "fewer-than-n", "multiple-of-n", "one-leaf", "centre"]),
                      st.integers(0, 2**16), st.integers(0, len(SCHEDULES) - 1))


def run(tree, loads, seed=0, **params):
    p = PerfectTree(**params)
    p.use_kernels = False  # the properties read the handlers' variables
    r = simulate(tree, p, loads, seed=seed, max_steps=20_000)
    return r, p


def run_instance(inst):
    shape, size, kind, seed, sched = inst
    tree = make_tree(shape, size, seed)
    loads = make_loads(kind, tree, seed)
    r, p = run(tree, loads, seed=seed, **SCHEDULES[sched])
    return tree, loads, r, p


# ---------------------------------------------------------------------- theorems as properties
@given(instances)
def test_theorem1_after_phase1_every_node_knows_T_N_and_one_root(inst):
    tree, loads, r, p = run_instance(inst)
    T, N = int(loads.sum()), tree.n
    assert all(node.after_phase1[:2] == (T, N) for node in p.nodes)
    roots = [i for i, node in enumerate(p.nodes) if node.after_phase1[2] == 0]
    assert len(roots) == 1
    # parent pointers form a tree rooted there: following them from any node reaches the root
    for i in range(N):
        x, hops = i, 0
        while p.nodes[x].after_phase1[2] != 0:
            x = p.nodes[x].neighbour[p.nodes[x].after_phase1[2]]
            hops += 1
            assert hops < N
        assert x == roots[0]
    # every node learnt the (tokens, nodes) of the subtree behind each of its channels
    for i, node in enumerate(p.nodes):
        assert sum(node.subTreeN[1:]) == N - 1


@given(instances)
def test_lemma1_theorem2_after_phase2_only_the_root_holds_more_than_avg(inst):
    tree, loads, r, p = run_instance(inst)
    T, N = int(loads.sum()), tree.n
    avg = T // N
    root = p.root()
    for i, node in enumerate(p.nodes):
        tv, a, parent = node.after_phase2
        assert a == avg
        if i == root:
            assert tv >= avg and parent == 0
        else:
            assert tv == avg  # Lemma 1 (every subtree below the root) and Theorem 2
    assert p.nodes[root].after_phase2[0] == T - avg * (N - 1)


@given(instances)
def test_theorem3_perfect_distribution_and_every_node_final(inst):
    tree, loads, r, p = run_instance(inst)
    T, N = int(loads.sum()), tree.n
    assert r.stop_reason == "stable"
    assert r.loads.sum() == T
    assert set(np.unique(r.loads)) <= {T // N, -(-T // N)}
    assert all(node.state == "final" for node in p.nodes)
    assert all(node.Tv == r.loads[i] for i, node in enumerate(p.nodes))  # every node knows its count
    rep = r.report
    assert rep["perfect"] and rep["all_final"] and rep["stuck_nodes"] == 0 and rep["misread_messages"] == 0


@given(instances)
def test_section5_exchanges_never_below_optimum_and_excess_within_bound(inst):
    tree, loads, r, p = run_instance(inst)
    rep = r.report
    T, N, D = int(loads.sum()), tree.n, tree_diameter(tree)
    assert rep["token_exchanges"] == r.tokens_moved
    opt = min_exchanges(tree, loads)
    assert bounds_figures(tree, loads)["optimum_token_exchanges"] == opt
    assert rep["token_exchanges"] >= opt
    # The constant the docs derive: excess <= 2 * D * (T mod N) <= 2 * D * min(T, N).
    assert rep["token_exchanges"] - opt <= EXCESS_CONSTANT * D * (T % N) <= EXCESS_CONSTANT * D * min(T, N)
    if T % N == 0:  # Sec. 5: with Avg = T/N phase 2 alone is optimal
        assert rep["token_exchanges"] == opt


@given(instances)
def test_section5_memory_is_theta_dv_log_T_plus_log_N(inst):
    tree, loads, r, p = run_instance(inst)
    T, N = max(int(loads.sum()), 2), max(tree.n, 2)
    for i, node in enumerate(p.nodes):
        d = int(tree.degrees[i])
        bits = node.memory_bits(int(loads.sum()), tree.n)
        if d:
            scale = d * (np.log2(T) + np.log2(N))
            assert 0.5 * scale <= bits <= 12 * scale


@pytest.mark.parametrize("shape,size", [("path", 9), ("star", 8), ("kary", 15), ("caterpillar", 12), ("random", 14)])
def test_section5_sync_time_within_T_D_plus_D_d(shape, size):
    # The paper: phase 1 Theta(D d), phase 2 O(T D), phase 3 O(D (T mod N)). Measured constant
    # (docs): time <= 2 * D * (T + d) under the sync schedule on these shapes.
    for seed in range(6):
        tree = make_tree(shape, size, seed)
        for kind in ("random", "one-leaf", "centre", "zero"):
            loads = make_loads(kind, tree, seed)
            r, p = run(tree, loads, schedule="sync")
            D, d, T = tree_diameter(tree), int(tree.max_degree), int(loads.sum())
            assert r.report["time"] <= 2 * D * (T + d)
            assert r.report["phase_end"]["phase1"] <= 2 * D * d + D
            rounds = r.report["phase_rounds"]
            assert rounds["phase2"] <= D * max(T, 1)
            assert rounds["phase3"] <= D * (T % tree.n + d)  # Finished costs Theta(D d) even at T mod N = 0


# ---------------------------------------------------------------------- edge cases
def test_n1_and_t0():
    r, p = run(path_graph(1), [5])
    assert r.loads.tolist() == [5] and r.report["all_final"] and r.messages == 0
    r, p = run(random_tree(10, 1), np.zeros(10, dtype=np.int64))
    assert r.report["all_final"] and r.tokens_moved == 0 and r.loads.sum() == 0
    assert r.report["messages_by_kind"].keys() == {"phase1-subtree", "phase1-global", "phase3-finished"}


def test_n2_every_schedule():
    for params in SCHEDULES:
        for loads in ([0, 0], [7, 0], [0, 7], [3, 4], [9, 9]):
            r, p = run(path_graph(2), loads, seed=3, **params)
            assert sorted(r.loads.tolist()) == [sum(loads) // 2, -(-sum(loads) // 2)]
            assert r.report["all_final"]


def test_balanced_start_moves_nothing():
    r, p = run(caterpillar(4, 3), np.full(16, 6))
    assert r.tokens_moved == 0 and (r.loads == 6).all() and r.report["all_final"]


def test_same_seed_same_async_run():
    tree = random_tree(20, 4)
    loads = make_loads("random", tree, 4)
    a, _ = run(tree, loads, seed=9, schedule="async", max_delay=7)
    b, _ = run(tree, loads, seed=9, schedule="async", max_delay=7)
    assert a.steps == b.steps and a.report == b.report and (a.loads == b.loads).all()


def test_messages_by_kind_and_one_token_per_message():
    tree = kary_tree(2, 3)
    loads = make_loads("one-leaf", tree, 2)
    r, p = run(tree, loads)
    kinds = r.report["messages_by_kind"]
    N = tree.n
    assert kinds["phase1-subtree"] == N - 1 and kinds["phase1-global"] == N - 1
    assert kinds["phase3-finished"] == N - 1
    assert kinds.get("phase2-token", 0) + kinds.get("phase3-token", 0) == r.tokens_moved


# ---------------------------------------------------------------------- the election race
@pytest.mark.parametrize("tree", [path_graph(6), path_graph(7), kary_tree(2, 3), caterpillar(5, 2),
                                  random_tree(15, 3), star_graph(5)])
def test_race_adversary_both_last_nodes_try_to_send_at_once(tree):
    a, b, ha, hb = race_edge(tree)
    r, p = run(tree, make_loads("random", tree, 1), schedule="adversarial", adversary="race")
    na, nb = p.nodes[a], p.nodes[b]
    assert r.report["perfect"]
    if min(ha, hb) > 0 or ha == hb:
        # both ends reach S1.2 in the same time unit, each with the other as its parent
        assert na.entered["S1.2"] == nb.entered["S1.2"]
    # the one that lost the reservation found the link busy and became the root (S1.2 else-branch)
    root = p.root()
    assert root in (a, b)
    assert p.nodes[root].elected_by == "busy"
    assert "S1.4" in p.nodes[root].entered and "S1.3" in p.nodes[a + b - root].entered


def test_theorem1_election_goes_through_the_busy_branch_and_release_on_send_never_elects():
    # Nodes react to a message in zero time, so the last two nodes of Phase 1 always meet on the
    # link: with the link held until delivery the second one finds it busy and becomes the root
    # (the "received" branch of S1.2 is unreachable, docs item 1); if send released the link at
    # once, both would send and no root would ever be elected (N >= 2).
    for seed in range(12):
        tree = random_tree(2 + seed, seed)
        loads = make_loads("random", tree, seed)
        for sched in ("sync", "async"):
            r, p = run(tree, loads, seed=seed, schedule=sched, max_delay=6)
            assert r.report["perfect"] and p.nodes[p.root()].elected_by == "busy"
            r, p = run(tree, loads, seed=seed, schedule=sched, max_delay=6, release="send")
            assert p.root() is None and not r.report["all_final"]


def test_release_on_send_lets_both_last_nodes_send_breaking_theorem1():
    # Departure example of the docs: if send frees the link at once, the two last nodes can both
    # send; each takes the other's subtree message for the global one, and no root exists.
    tree = path_graph(7)
    loads = [6, 6, 3, 2, 0, 6, 0]
    r, p = run(tree, loads, release="send", schedule="adversarial", adversary="race")
    assert p.root() is None
    assert all(node.after_phase1 is None or node.after_phase1[2] != 0 for node in p.nodes)
    assert not r.report["perfect"] and r.stop_reason == "fixed-point"
    assert r.report["misread_messages"] == 2  # each end took the other's subtree message for the global one
    # with the default (the link is busy until delivery) the same schedule elects one root
    r, p = run(tree, loads, schedule="adversarial", adversary="race")
    assert p.root() is not None and r.report["perfect"]


def test_phase_overlap_merge_breaks_theorem3_and_defer_does_not():
    # Departure example of the docs: a Phase-3 token reaching a node still in Phase 2.
    tree = make_graph("random-tree:25", seed=0)
    loads = [6, 6, 3, 2, 0, 6, 0, 4, 4, 8, 7, 7, 6, 5, 5, 6, 9, 4, 1, 9, 4, 8, 8, 6, 7]
    params = dict(schedule="adversarial", adversary="slow-tokens")
    r, p = run(tree, loads, seed=0, phase_overlap="merge", **params)
    assert r.report["all_final"] and not r.report["perfect"]
    r, p = run(tree, loads, seed=0, phase_overlap="defer", **params)
    assert r.report["perfect"]


# ---------------------------------------------------------------------- the exact optimum
small_trees = st.tuples(st.integers(1, 7), st.integers(0, 2**16), st.integers(0, 12))


@given(small_trees)
def test_optimum_equals_brute_force_over_ceiling_sets(args):
    n, seed, hi = args
    tree = random_tree(n, np.random.default_rng(seed))
    loads = np.random.default_rng(seed + 1).integers(0, hi + 1, n)
    T = int(loads.sum())
    a, rem = divmod(T, n)
    best = min(transport_cost(tree, loads, a + np.isin(np.arange(n), c))
               for c in itertools.combinations(range(n), rem))
    assert min_exchanges(tree, loads) == best


@pytest.mark.parametrize("seed", range(4))
def test_transport_cost_closed_form_equals_networkx_min_cost_flow(seed):
    rng = np.random.default_rng(seed)
    tree = random_tree(9, rng)
    loads = rng.integers(0, 8, 9)
    targets = np.full(9, loads.sum() // 9)
    targets[: loads.sum() % 9] += 1
    g = nx.DiGraph()
    for i in range(9):
        g.add_node(i, demand=int(targets[i] - loads[i]))
    for u, v in zip(tree.u.tolist(), tree.v.tolist()):
        g.add_edge(u, v, weight=1)
        g.add_edge(v, u, weight=1)
    assert transport_cost(tree, loads, targets) == nx.min_cost_flow_cost(g)


# ---------------------------------------------------------------------- non-tree graphs, user errors
@pytest.mark.parametrize("spec", ["ring:9", "grid:3x4", "hypercube:3", "complete:5"])
@pytest.mark.parametrize("kind", ["bfs", "min-diameter"])
def test_spanning_tree_runs_are_perfect_and_only_use_tree_edges(spec, kind):
    g = make_graph(spec, seed=1)
    loads = np.arange(g.n, dtype=np.int64) * 3 % 7
    r, p = run(g, loads, seed=2, schedule="async", spanning_tree=kind)
    assert r.report["perfect"] and r.report["all_final"]
    assert p.tree.is_tree and p.tree.n == g.n and p.tree.m == g.n - 1
    assert r.report["token_exchanges"] >= min_exchanges(p.tree, loads)
    assert perfect_tree_bounds(g, loads, {"spanning_tree": kind})["optimum_token_exchanges"] == min_exchanges(p.tree, loads)


def test_user_errors_are_one_line_tokendist_errors():
    from tokendist.errors import TokendistError
    with pytest.raises(TokendistError):
        simulate("path:4", "perfect-tree", "point:5", params={"max_delay": 0})
    with pytest.raises(TokendistError):
        simulate("path:4", "perfect-tree", "point:5", params={"adversary": "nope"})
    two_parts = Graph.from_edges(4, [(0, 1), (2, 3)])
    with pytest.raises(TokendistError):
        simulate(two_parts, "perfect-tree", "point:5")
