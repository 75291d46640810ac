"""Exact integer arithmetic over the whole int64 range.

The rounded diffusion schemes (Subramanian and Scherson 1994, Sec. 4) send ``floor`` or ``ceil`` of
``P_ij (load[i] - load[j])``. The kernels have a fast path that is exact only while the loads span
less than 2**29 (int32 conversions, ``_diffusion_kernels._regular_rows``) and fall back to exact
integer arithmetic beyond; these tests put load differences at both sides of every boundary
(2**29, 2**31, 2**53, 2**62) and compare every kernel (numba serial, numba threaded, numpy) with a
naive reference in Python fractions. Also: the integer protocols conserve tokens with ``kernel=numpy``
on large loads, the engine refuses token totals beyond int64 and loads beyond a protocol's declared
exact range in one line, and a message-passing run reports the tokens still in transit.
"""

from __future__ import annotations

from fractions import Fraction

import numpy as np
import pytest
from hypothesis import assume, given, settings, strategies as st

from tokendist._random import stream
from tokendist.engine import PROTOCOLS, make_protocol, simulate
from tokendist.errors import TokendistError
from tokendist.graphs import make_graph

SEED = 5  # the run's seed: the reference draws the protocol's coins from the same stream
ROUNDED = ("diffusion-floor", "diffusion-ceil", "diffusion-random", "diffusion-oriented")
GRAPHS = ("path:2", "ring:5", "torus:4x4", "torus:5x5", "path:3", "star:4")
KERNELS = ({"kernel": "numba"}, {"kernel": "numba", "threads": 2}, {"kernel": "numpy"})
# Load differences at both sides of each boundary of the fast paths and of float64.
EDGES = [2**29 - 1, 2**29, 2**29 + 1, 2**31 - 3, 2**31 - 1, 2**31, 2**31 + 1, 2**31 + 3, 2**32 + 5,
         2**40 + 7, 2**53 - 1, 2**53, 2**53 + 1, 2**53 + 3, 2**62 - 1, 2**62, 2**62 + 5]


def reference_step(proto, graph, loads, mode, t=0):
    """One step of the rounded rule in Python integers and fractions (P_ij = 1/(2 max(d_i, d_j)))."""
    deg = graph.degrees
    new = [int(x) for x in loads]
    for e, (u, v) in enumerate(zip(graph.u.tolist(), graph.v.tolist())):
        lu, lv = int(loads[u]), int(loads[v])
        if lu == lv:
            continue
        hi, lo = (u, v) if lu > lv else (v, u)
        p = Fraction(1, 2 * int(max(deg[u], deg[v])))
        x = p * abs(lu - lv)
        amount = x.numerator // x.denominator
        if x != amount:
            if mode == "ceil":
                amount += 1
            elif mode == "random":
                amount += proto._coin_scalar(t, e) < float(p)  # HEAD with probability P_ij
            elif mode == "oriented":
                amount += bool((proto.orient[e] > 0) == (hi < lo))  # the sender rounds up along the edge
        new[hi] -= amount
        new[lo] += amount
    return new


def _loads_with(graph, base, diffs, rng):
    loads = np.full(graph.n, base, dtype=np.int64)
    picks = rng.integers(0, len(diffs), graph.n)
    for i in range(graph.n):
        if rng.random() < 0.7:
            loads[i] = base + diffs[picks[i]] - (diffs[picks[i]] // 3) * int(rng.integers(0, 2))
    return loads


def _run(spec, algo, loads, params):
    return simulate(spec, algo, loads, params=params, max_steps=1, allow_infeasible=True, detect_cycles=False,
                    seed=SEED)


@pytest.mark.parametrize("diff", EDGES)
@pytest.mark.parametrize("algo", ROUNDED)
def test_sec4_path2_rounds_exactly_at_every_boundary(algo, diff):
    # The case: [2**31 + 3, 0] on path:2 with diffusion-floor sent the ceiling.
    graph = make_graph("path:2")
    loads = np.array([diff, 0], dtype=np.int64)
    mode = algo.split("-")[1]
    for params in KERNELS:
        proto = make_protocol(algo, params)
        proto.reset(graph, loads.copy(), stream(SEED, "protocol"))
        want = reference_step(proto, graph, loads, mode)
        got = _run("path:2", algo, loads, params).loads.tolist()
        assert got == want, (params, diff)
        assert sum(got) == diff


@settings(max_examples=30, deadline=None)
@given(spec=st.sampled_from(GRAPHS), algo=st.sampled_from(ROUNDED), seed=st.integers(0, 2**32 - 1),
       top=st.sampled_from([2**29, 2**31, 2**40, 2**53, 2**62]))
def test_sec4_every_kernel_equals_the_fraction_reference(spec, algo, seed, top):
    graph = make_graph(spec)
    rng = np.random.default_rng(seed)
    diffs = [d for d in EDGES if d <= top] + [int(rng.integers(0, top))]
    loads = _loads_with(graph, int(rng.integers(0, 2**20)), diffs, rng)
    # A total beyond int64 is refused before the first step (test_bad_input): not a case here.
    assume(sum(int(x) for x in loads) <= 2**63 - 1)
    mode = algo.split("-")[1]
    for params in KERNELS:
        proto = make_protocol(algo, params)
        proto.reset(graph, loads.copy(), stream(SEED, "protocol"))
        if mode == "oriented" and proto.h is not graph:
            continue  # Case 2 (relays over a cut vertex): the reference above is Case 1's rule
        want = reference_step(proto, graph, loads, mode)
        got = _run(graph, algo, loads, params).loads
        assert got.tolist() == want, params


@pytest.mark.parametrize("spec", ["ring:5", "torus:5x5", "torus:4x4"])
@pytest.mark.parametrize("span", [2**29 - 1, 2**29, 2**29 + 1])
def test_sec4_regular_fast_path_boundary_2_29(spec, span):
    # The int32 fast path serves a step whose loads span less than 2**29; at 2**29 the step is redone
    # on the exact path. Both sides give the reference.
    graph = make_graph(spec)
    loads = np.zeros(graph.n, dtype=np.int64)
    loads[0] = span
    loads[graph.n // 2] = span // 2 + 1
    for algo in ROUNDED:
        proto = make_protocol(algo)
        proto.reset(graph, loads.copy(), stream(SEED, "protocol"))
        assert _run(graph, algo, loads, {}).loads.tolist() == reference_step(proto, graph, loads, algo.split("-")[1])


INTEGER_PROTOCOLS = [name for name in PROTOCOLS.names() if not PROTOCOLS.get(name).divisible]


@pytest.mark.parametrize("algo", ["fos-floor", "sos-iou", "random-walk", *ROUNDED])
def test_numpy_reference_conserves_large_loads(algo):
    # kernel=numpy summed flows in float64 and lost tokens once the sums passed 2**53.
    loads = np.random.default_rng(1).integers(0, 2**52, 16)
    r = simulate("torus:4x4", algo, loads, params={"kernel": "numpy"}, max_steps=3, allow_infeasible=True, seed=3)
    assert int(r.loads.astype(object).sum()) == int(loads.astype(object).sum())


def test_total_beyond_int64_is_refused():
    loads = np.full(4, 2**62, dtype=np.int64)
    with pytest.raises(TokendistError, match="int64"):
        simulate("ring:4", "diffusion-floor", loads, max_steps=1)


@pytest.mark.parametrize("algo", INTEGER_PROTOCOLS)
def test_declared_exact_range_is_enforced(algo):
    cls = PROTOCOLS.get(algo)
    limit = getattr(cls, "exact_load_limit", None)
    if limit is None:
        pytest.skip(f"{algo} is exact over int64")
    graph = "kary:2,2" if "tree" in cls.requires else "ring:4"
    loads = np.array([limit, 0, 0, 0] + [0] * (3 if graph.startswith("kary") else 0), dtype=np.int64)
    with pytest.raises(TokendistError, match="exact"):
        simulate(graph, algo, loads, max_steps=1)
