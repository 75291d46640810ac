"""The lower-bound network G' of Ghosh et al. 1995, Sec. 4, and the distributions of Secs. 4.1, 4.2."""

import numpy as np
import pytest

from tokendist.engine import make_loads, simulate
from tokendist.engine._metrics import local_discrepancy
from tokendist.errors import TokendistError
from tokendist.graphs import make_graph
from tokendist.graphs._lower_bound import lower_bound_layout


def test_sec4_construction_size_is_checked_before_building():
    # (1 + MU)^K <= 5,000,000 still allowed 12.6 million nodes (K = 22, MU = 1), built one Python
    # edge at a time; the size check refuses it from the level sizes, and the edge count it
    # checks is an upper bound of the built graph's.
    from unittest import mock

    from tokendist.graphs import _specs

    with mock.patch.object(_specs, "MAX_NODES", 1_000_000):
        with pytest.raises(TokendistError, match="12,582,910 nodes is more than"):
            make_graph("ghosh-lower-bound:22,1", seed=0)
    import tokendist.graphs._lower_bound as lower_bound

    seen = []
    with mock.patch.object(lower_bound, "check_size", lambda spec, n, m=None, **kw: seen.append((n, m))):
        for spec in ("ghosh-lower-bound:4,1", "ghosh-lower-bound:6,0.5,6,3", "ghosh-lower-bound:8,1,3,1",
                     "ghosh-lower-bound:10,0.3,5,4", "ghosh-lower-bound:6,1,0,1"):
            g = make_graph(spec, seed=1)
            n, m = seen[-1]
            assert n == g.n and g.m <= m, spec


@pytest.mark.parametrize("k,mu,inner,down", [(4, 1.0, 4, 2), (6, 1.0, 3, 1), (8, 0.5, 4, 2), (6, 1 / 3, 4, 2)])
def test_sec4_construction_sizes_and_degrees(k, mu, inner, down):
    g = make_graph(f"ghosh-lower-bound:{k},{mu},{inner},{down}", seed=1)
    lay = lower_bound_layout(k, mu, inner, down)
    assert g.n == lay.n == 2 * sum(lay.sizes[:k]) + lay.sizes[k]
    assert lay.sizes == tuple(max(1, round((1 + mu) ** i)) for i in range(k + 1)) and lay.sizes[0] == 1
    nbrs = lambda x: set(g.neighbours(x).tolist())  # noqa: E731
    u, v = lay.u, lay.v
    assert g.edge_index(u, v) >= 0  # the edge e
    for side in ("L", "R"):
        # L_0 (R_0) is adjacent to every node of L_1 (R_1).
        first = lay.nodes(side, 0)
        assert first.size == 1 and set(lay.nodes(side, 1).tolist()) <= nbrs(int(first[0]))
        for i in range(k + 1):
            nodes = lay.nodes(side, i)
            assert nodes.size == lay.sizes[i]
            if 0 < i:
                below = set(lay.nodes(side, i - 1).tolist())
                b = min(down, lay.sizes[i - 1])
                for x in nodes.tolist():
                    assert len(nbrs(x) & below) == b  # every node of L_i sees b nodes of L_{i-1}
            if 0 < i < k:
                above = set(lay.nodes(side, i + 1).tolist())
                ups = [len(nbrs(x) & above) for x in nodes.tolist()]
                exact = min(down, lay.sizes[i]) * lay.sizes[i + 1] / lay.sizes[i]
                assert max(ups) - min(ups) <= 1 and min(ups) <= exact <= max(ups)
            if i > 0:
                own = set(nodes.tolist())
                inner_deg = [len(nbrs(x) & own) for x in nodes.tolist()]
                assert max(inner_deg) == min(inner_deg) <= min(inner, lay.sizes[i] - 1)
    # No edge between the two sides except e and through the shared level L_k.
    side = lay.side.copy()
    side[lay.level == k] = 2
    cross = (side[g.u] != side[g.v]) & (side[g.u] != 2) & (side[g.v] != 2)
    assert cross.sum() == 1


def test_sec4_1_distribution_is_locally_balanced_except_across_e():
    g = make_graph("ghosh-lower-bound:8,1", seed=0)
    lay = lower_bound_layout(8, 1.0)
    w = make_loads("ghosh-4.1", g)
    d = g.max_degree
    diff = np.abs(w[g.u] - w[g.v])
    bad = np.flatnonzero(diff > 2 * d)
    assert bad.tolist() == [int(g.edge_index(lay.u, lay.v))]
    assert w[lay.v] - w[lay.u] > lay.k * d
    assert w.min() >= 0 and w.max() - w.min() <= 2 * lay.k * d + 1  # globally O(d k) = O(d log n / mu)


def test_sec4_1_time_to_local_balance_exceeds_script_L():
    """Sec. 4.1 (ii): local balance needs every node of script-L to gain a token through e, so at
    least |script-L| >= sqrt(n)/2 - 1 steps of multi-port."""
    for k in (4, 6, 8):
        g = make_graph(f"ghosh-lower-bound:{k},1", seed=0)
        lay = lower_bound_layout(k, 1.0)
        r = simulate(g, "multi-port", "ghosh-4.1", max_steps=50_000, until_local_discrepancy=2 * g.max_degree)
        assert r.stop_reason == "target-reached"
        assert r.steps >= lay.group_sizes()["L"] >= np.sqrt(g.n) / 2 - 1


def test_sec4_2_distribution_only_R_half_minus_1_is_out_of_balance():
    g = make_graph("ghosh-lower-bound:6,1", seed=0)
    lay = lower_bound_layout(6, 1.0)
    w = make_loads("ghosh-4.2", g)
    diff = np.abs(w[g.u] - w[g.v])
    hot = set(lay.nodes("R", lay.k // 2 - 1).tolist())
    for e in np.flatnonzero(diff > 1):
        assert int(g.u[e]) in hot or int(g.v[e]) in hot
    assert local_discrepancy(g, w) == 2


def test_lower_bound_spec_errors():
    for bad in ("ghosh-lower-bound:5,1", "ghosh-lower-bound:4,2", "ghosh-lower-bound:4", "ghosh-lower-bound:x,1"):
        with pytest.raises(TokendistError):
            make_graph(bad)
    with pytest.raises(TokendistError):
        make_loads("ghosh-4.1", make_graph("ring:5"))
    with pytest.raises(TokendistError):
        make_loads("ghosh-4.1:1", make_graph("ghosh-lower-bound:4,1"))
