"""The THRESHOLD-1 theory of Houle, Symvonis and Wood (2004), Sec. 4: stable gaps, MSD, orderings, bounds."""

import math

import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

import tokendist as td
from tokendist.analysis import (c_gap, c_ordering, construct_subgraph, edge_subtree_sizes, gap_positions,
                                gap_stability, gap_stability_naive, kary_subtree_sizes, lemma13_bound,
                                lemma15_terms, lemma17_bound, msd, msd_from_sizes, msd_of_spec, observer_tour,
                                partner_table, stability, stable_gaps, stable_gaps_1, theorem12_distribution,
                                theorem16_bound)
from tokendist.errors import TokendistError
from tokendist.graphs import edge_colouring, kary_tree, make_graph, path_graph, random_tree, star_graph

trees = st.builds(lambda n, seed: random_tree(n, np.random.default_rng(seed)), st.integers(2, 40),
                  st.integers(0, 10**6))
small_trees = st.builds(lambda n, seed: random_tree(n, np.random.default_rng(seed)), st.integers(2, 11),
                        st.integers(0, 10**6))


def _phase_is_stable(tree, loads, colours, c):
    """Definition 1 by simulation: one c-phase of THRESHOLD-1 without a difference-2 edge becoming active
    (then every observer keeps its load and the loads come back)."""
    chi = int(colours.max()) + 1
    r = td.simulate(tree, "threshold1", np.asarray(loads), max_steps=chi * tree.n, keep_loads_every=1,
                    detect_cycles=False, params={"colour_start": c})
    pot = (r.load_history.astype(np.int64) ** 2).sum(axis=1)
    back = np.array_equal(r.load_history[-1], loads)
    return bool(back and np.all(pot == pot[0]))


# ---------------------------------------------------------------------------- SG_1, stability, MSD
def test_sg1_of_complete_binary_trees_sec43():
    assert stable_gaps_1(kary_tree(2, 2)).tolist() == [1, 3, 4, 6]
    assert stable_gaps_1(kary_tree(2, 3)).tolist() == [1, 3, 7, 8, 12, 14]


def test_edge_subtree_sizes_sum_to_n():
    g = make_graph("random-tree:30", seed=3)
    s = edge_subtree_sizes(g)
    nx_g = g.to_networkx()
    import networkx as nx

    for e in range(g.m):
        h = nx_g.copy()
        h.remove_edge(int(g.u[e]), int(g.v[e]))
        assert len(nx.node_connected_component(h, int(g.u[e]))) == s[e]


@settings(max_examples=40, deadline=None)
@given(trees)
def test_bfs_over_zn_matches_the_papers_naive_method(tree):
    gens = stable_gaps_1(tree)
    ref = gap_stability_naive(tree.n, gens)
    for c in (4.0, 0.0, 1e9):  # FFT always, FFT never (push/pull/bitset), default
        assert gap_stability(tree.n, gens, fft_ns_per_point=c).tolist() == ref


@settings(max_examples=40, deadline=None)
@given(trees, st.integers(1, 5))
def test_sg_i_recursion_eq4(tree, i):
    n = tree.n
    sg1 = set(stable_gaps_1(tree).tolist())
    prev = set(stable_gaps(tree, i).tolist())
    nxt = (prev | {(p + q) % n for p in prev for q in sg1}) - {0}
    assert set(stable_gaps(tree, i + 1).tolist()) == nxt
    assert prev == {n - p for p in prev}  # symmetric


def test_examples_sec45_stars_and_paths():
    for k in range(1, 30):
        assert msd(star_graph(k)) == (k + 1) // 2
        assert msd(path_graph(k + 1)) == 1
    assert msd(path_graph(1)) == 0


def test_msd_of_spec_closed_forms_agree_with_graphs():
    for spec in ["kary:2,5", "kary:3,3", "kary:1,6", "star:9", "path:12", "kary:4,1"]:
        g = make_graph(spec)
        info = msd_of_spec(spec)
        assert info["n"] == g.n and info["max_degree"] == g.max_degree and info["msd"] == msd(g)
        assert info["generators"].tolist() == stable_gaps_1(g).tolist()


def test_msd_binary_height_18_fast_and_conjecture_value():
    n, sizes = kary_subtree_sizes(2, 18)
    assert n == 524_287 and msd_from_sizes(n, sizes) == 9


# ---------------------------------------------------------------------------- observer tour (Sec. 4.1)
@settings(max_examples=30, deadline=None)
@given(trees, st.integers(0, 6))
def test_lemma6_orderings_are_permutations_and_eq3(tree, c):
    colours = edge_colouring(tree)
    chi = int(colours.max()) + 1
    c %= chi
    order = c_ordering(tree, colours, c)
    assert sorted(order.tolist()) == list(range(tree.n))
    tour = observer_tour(tree, colours, 0, c)
    assert len({(a, b, col) for a, b, col in tour.tolist()}) == chi * tree.n  # every arc of T' once
    rng = np.random.default_rng(tree.n)
    v, w, x = rng.integers(tree.n, size=3)
    n = tree.n
    if v != w:
        assert c_gap(tree, v, w, colours, c) + c_gap(tree, w, v, colours, c) == n
    assert c_gap(tree, v, w, colours, c) % n == (c_gap(tree, v, x, colours, c) + c_gap(tree, x, w, colours, c)) % n


def test_observation4_arcs_between_wv_and_vw():
    tree = make_graph("random-tree:20", seed=4)
    colours = edge_colouring(tree)
    chi = int(colours.max()) + 1
    tour = observer_tour(tree, colours, 0, 0).tolist()
    start = {(a, b): i for i, (a, b, _) in enumerate(tour) if a != b}
    sizes = edge_subtree_sizes(tree)
    for e in range(tree.m):
        v, w = int(tree.u[e]), int(tree.v[e])
        # From w_v (start of arc w->v) to v_w (start of arc v->w): chi |T(v, w)| arcs.
        assert (start[(v, w)] - start[(w, v)]) % (chi * tree.n) == chi * sizes[e]


# ---------------------------------------------------------------------------- Theorems 11 and 12
@settings(max_examples=30, deadline=None)
@given(small_trees, st.integers(0, 10**6))
def test_theorem11_stable_iff_discrepancy_within_stability(tree, seed):
    rng = np.random.default_rng(seed)
    colours = edge_colouring(tree)
    chi = int(colours.max()) + 1
    c = int(rng.integers(chi))
    st_ = stability(tree)
    base = theorem12_distribution(tree, colours, c, int(rng.integers(tree.n)))
    for loads in (base, base + rng.integers(0, 2, tree.n), rng.integers(0, 3, tree.n), np.maximum(base - 1, 0)):
        pos = gap_positions(tree, colours, c, 0)
        gaps = (pos[None, :] - pos[:, None]) % tree.n
        criterion = bool(np.all(np.abs(loads[:, None] - loads[None, :]) <= np.where(gaps == 0, 0, st_[gaps])))
        assert _phase_is_stable(tree, loads, colours, c) == criterion


@settings(max_examples=30, deadline=None)
@given(small_trees, st.integers(0, 10**6))
def test_theorem12_worst_case_is_stable_with_discrepancy_msd_and_one_more_token_breaks_it(tree, seed):
    rng = np.random.default_rng(seed)
    colours = edge_colouring(tree)
    chi = int(colours.max()) + 1
    c, s = int(rng.integers(chi)), int(rng.integers(tree.n))
    loads = theorem12_distribution(tree, colours, c, s)
    assert loads[s] == 0 and loads.max() - loads.min() == msd(tree)
    assert _phase_is_stable(tree, loads, colours, c)
    more = loads.copy()
    more[int(np.argmax(loads))] += 1  # discrepancy MSD + 1 cannot be stable
    assert not _phase_is_stable(tree, more, colours, c)


def test_theorem12_init_spec_and_colour_start():
    for spec in ["kary:2,3", "star:7", "kary:3,2"]:
        for c in range(2):
            r = td.simulate(spec, "threshold1", f"msd-stable:c={c},s=2", params={"colour_start": c}, max_steps=3000)
            assert r.final["discrepancy"] == r.initial["discrepancy"] == msd(make_graph(spec))
            assert r.stop_reason == "cycle"
    with pytest.raises(TokendistError):
        td.make_loads("msd-stable:q=1", make_graph("path:4"))


# ---------------------------------------------------------------------------- Lemmas 13-15, Theorem 16, Lemma 17
@settings(max_examples=30, deadline=None)
@given(trees)
def test_lemma14_and_lemma15_construct_subgraph(tree):
    n, d = tree.n, tree.max_degree
    lg = math.ceil(math.log2(n))
    st_ = stability(tree)
    for p in range(1, n):
        res = construct_subgraph(tree, p)
        alpha = res["alpha"]
        assert len(alpha) == p and res["iterations"] <= lg  # Lemma 14
        sub = tree.to_networkx().subgraph(alpha)
        import networkx as nx

        assert nx.is_connected(sub)
        t = lemma15_terms(tree, alpha)
        assert t["r"] <= lg
        assert st_[p] <= min(t["M1"], t["M2"])
        assert t["M1"] <= 1 + (d - 2) * t["r"] or d < 2
        assert min(t["M1"], t["M2"]) <= (t["r"] * (d + 1)) // 2 + 1


@settings(max_examples=60, deadline=None)
@given(trees)
def test_lemma13_and_theorem16_bounds(tree):
    value = msd(tree)
    assert value <= lemma13_bound(tree.n)
    if tree.n >= 3:
        assert value <= theorem16_bound(tree.n, tree.max_degree)
    else:  # degenerate: n = 2, D = 1, the middle term 1 + (D-2) ceil(log2 n) is 0 but MSD is 1
        assert value == 1 and theorem16_bound(2, 1) == 0


def test_lemma17_bound_and_conjecture_small():
    from tokendist.analysis import msd_conjecture

    for k in range(1, 5):
        for h in range(1, 5):
            n, sizes = kary_subtree_sizes(k, h)
            value = msd_from_sizes(n, sizes)
            assert value <= lemma17_bound(k, h)
            assert value in msd_conjecture(k, h)


def test_user_errors():
    with pytest.raises(TokendistError):
        msd(make_graph("ring:5"))
    with pytest.raises(TokendistError):
        construct_subgraph(make_graph("path:4"), 4)
    # The tour functions on a graph with a cycle: a user error, not Lemma 6's RuntimeError.
    for f in (partner_table, observer_tour, c_ordering, gap_positions):
        with pytest.raises(TokendistError, match="not a tree"):
            f(make_graph("ring:5"))


def test_registered_bounds_threshold1_threshold2_discrepancy1():
    from tokendist.analysis import predict

    g = make_graph("kary:2,4")
    loads = td.make_loads("msd-stable", g)
    p1 = predict("threshold1", g, loads)
    assert p1["msd"] == 3 and p1["bound_theorem16"] == 6 and p1["bound_lemma17"] == 5
    assert predict("threshold2", make_graph("grid:3x5"), np.zeros(15))["final_discrepancy_bound"] == 6
    p = predict("discrepancy1", make_graph("ring:6"), np.array([7, 0, 0, 0, 0, 0]))
    assert p["time_bound"] == 2 * 6 * p["chi"] * 6 and p["final_discrepancy_bound"] == 1
    with pytest.raises(TokendistError):
        predict("threshold1", make_graph("ring:6"), np.zeros(6), {"spanning_tree": "none"})
    assert predict("threshold1", make_graph("ring:6"), np.zeros(6), {"spanning_tree": "bfs"})["msd"] == 1
    # bfs is the protocol's default, and the prediction follows it
    assert predict("threshold1", make_graph("ring:6"), np.zeros(6))["msd"] == 1


def test_sec45_conjecture_fails_just_beyond_the_checked_range():
    """MSD(T_{6,7}) = 17 < floor((7-1) 6 / 2) = 18, checked here by a plain numpy BFS as well."""
    g = kary_tree(7, 6)
    gens = stable_gaps_1(g)
    n = g.n
    dist = np.full(n, -1)
    dist[0] = 0
    frontier, level = np.array([0]), 0
    while frontier.size:
        nxt = np.unique((frontier[:, None] + gens[None, :]) % n)
        nxt = nxt[dist[nxt] < 0]
        level += 1
        dist[nxt] = level
        frontier = nxt
    assert dist.max() == msd(g) == 17 and 17 not in (18, 19)


@settings(max_examples=30, deadline=None)
@given(trees, st.integers(0, 6))
def test_lemma9_observers_meet_at_an_active_edge_iff_gap_in_sg1(tree, c):
    from tokendist.analysis import partner_table

    out = partner_table(tree, edge_colouring(tree))
    chi, n = out.shape[1], tree.n
    c %= chi
    pos = gap_positions(tree, None, c, 0)
    where = np.arange(n)  # where[v]: the node the observer of v is at
    met = set()
    for j in range(chi * n):
        col = (c + j) % chi
        at = np.empty(n, dtype=np.int64)
        at[where] = np.arange(n)  # at[x]: the observer at node x
        for x in range(n):
            y = int(out[x, col])
            if y != x:
                met.add((int(at[x]), int(at[y])))
        where = out[where, col]
    sg1 = set(stable_gaps_1(tree).tolist())
    expect = {(v, w) for v in range(n) for w in range(n) if v != w and (pos[w] - pos[v]) % n in sg1}
    assert met == expect
