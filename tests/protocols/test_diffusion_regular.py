"""The regular-graph path of the diffusion kernels (Subramanian-Scherson 1994, Sec. 2 and Sec. 4).

On a D-regular graph with one coefficient ``P_ij = 1/q`` the kernels read rows of D slots without
``indptr`` and round ``P_ij (load[i] - load[j])`` by one shifted truncation instead of the snapping
arithmetic (module doc of ``tokendist.protocols.diffusion.kernels._serial``). Each is checked against the
numpy/scipy reference (``kernel=numpy``), the rounding formula against exact integer division, and
the fallback for load differences of 2**29 or more.
"""

import numba
import numpy as np
import scipy.sparse as sp
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tokendist._random import counter_uniform, stream
from tokendist.engine import make_protocol
from tokendist.graphs import make_graph
from tokendist.protocols.diffusion.kernels._serial import _trunc32, head_threshold, reciprocal

ROUNDED = ["diffusion-floor", "diffusion-ceil", "diffusion-random", "diffusion-oriented"]
REGULAR = ["torus:3x4", "torus:5x5", "torus:3x3x3", "hypercube:3", "hypercube:5", "ring:7", "complete:5",
           "random-regular:12,3", "random-regular:16,4"]


def _step_pair(graph, algo, params, loads, seed, steps):
    fast, ref = (make_protocol(algo, {**params, "kernel": k}) for k in ("numba", "numpy"))
    fast.reset(graph, loads.copy(), stream(seed, "protocol"))
    ref.reset(graph, loads.copy(), stream(seed, "protocol"))
    a = b = loads
    for t in range(steps):
        sa, sb = fast.step(t, graph, a), ref.step(t, graph, b)
        yield fast, ref, sa, sb, b
        a, b = sa.loads, sb.loads.copy()


def test_reciprocal_accepts_exactly_the_integer_reciprocals():
    assert [reciprocal(p) for p in (1 / 8, 1 / 40, 1 / 3, 0.5, 1 / (2**21 - 1))] == [8, 40, 3, 2, 2**21 - 1]
    assert [reciprocal(p) for p in (0.3, 0.11, 0.75, 1.0, 0.0, 1 / 2**21)] == [0, 0, 0, 0, 0, 0]


def _split_product(P, b):
    """``P_off @ b + diag(P) * b``: the off-diagonal row sums first, then the diagonal term."""
    off = (sp.triu(P, 1) + sp.tril(P, -1)).tocsr()
    off.sort_indices()
    return off @ b + P.diagonal() * b


@pytest.mark.parametrize("q", [2, 3, 5, 7, 8, 10, 40, 97, 1000, 65537, 2**21 - 1])
def test_sec4_shifted_truncation_is_the_exact_floor_and_ceiling(q):
    # The kernel's arithmetic in numpy (the same IEEE float64 operations): trunc(x + copysign(off, x))
    # with x = d * fl(1/q) must equal sign(d) floor(|d|/q) (off = 1/(2q)) and sign(d) ceil(|d|/q)
    # (off = 1 - 1/(2q)) for every |d| < 2**29.
    p = 1.0 / q
    rng = np.random.default_rng(q)
    mult = np.arange(1, 3000, dtype=np.int64) * q  # exact quotients and their neighbours
    d = np.concatenate([np.arange(-20000, 20001), rng.integers(-(2**29) + 1, 2**29, 200000),
                        np.arange(2**29 - 3000, 2**29), -np.arange(2**29 - 3000, 2**29),
                        mult - 1, mult, mult + 1, -mult, (2**29 - 1) // q * q + np.arange(-2, 2)])
    d = d[np.abs(d) < 2**29].astype(np.int64)
    x = d * p
    off_f = 0.5 / q
    off_c = off_f + (1.0 - 1.0 / q)
    fl = np.trunc(x + np.copysign(off_f, x)).astype(np.int64)
    ce = np.trunc(x + np.copysign(off_c, x)).astype(np.int64)
    ad = np.abs(d)
    np.testing.assert_array_equal(fl, np.sign(d) * (ad // q))
    np.testing.assert_array_equal(ce, np.sign(d) * (-(-ad // q)))
    # The oriented rounding's signed form: floor(x + off) is the floor (off_f) and the ceiling
    # (off_c) of the signed quotient d / q.
    np.testing.assert_array_equal(np.floor(x + off_f).astype(np.int64), d // q)
    np.testing.assert_array_equal(np.floor(x + off_c).astype(np.int64), -(-d // q))


def test_trunc32_truncates_exactly_below_2_30_and_clamps_beyond():
    # The rounded kernels convert float64 -> int64 through int32 (AVX2 has a packed conversion to
    # int32 only); within |v| < 2**30 that is trunc(v), beyond it clamps instead of wrapping or
    # hitting LLVM's undefined out-of-range conversion (such steps are redone on the general path).
    rng = np.random.default_rng(0)
    v = np.concatenate([rng.uniform(-(2.0**30), 2.0**30, 100000), np.arange(-5, 5, 0.25),
                        [2.0**30 - 0.5, -(2.0**30) + 0.5, -0.0, 0.5, -0.5, 2.0**30 - 1e-7]])
    np.testing.assert_array_equal(_trunc32_all(v), np.trunc(v).astype(np.int64))
    big = np.array([2.0**30, 2.0**31, 2.0**40, 1e300, np.inf, -(2.0**30), -(2.0**33), -np.inf])
    np.testing.assert_array_equal(_trunc32_all(big), np.sign(big).astype(np.int64) * 2**30)


@numba.njit
def _trunc32_all(v):
    out = np.empty(v.shape[0], np.int64)
    for k in range(v.shape[0]):
        out[k] = _trunc32(v[k])
    return out


def test_head_threshold_is_the_float_comparison():
    for p in (1 / 8, 1 / 40, 1 / 3, 0.5, 1 / 7):
        u = counter_uniform(5, 9, np.arange(50000))
        bits = (u * 2.0**53).astype(np.int64)  # exact: u = bits / 2**53
        np.testing.assert_array_equal(bits < head_threshold(p), u < p)


@given(st.sampled_from(REGULAR), st.integers(0, 2**31), st.sampled_from(ROUNDED),
       st.sampled_from([{}, {"coin": "fraction"}, {"matrix": "uniform:1/10"}, {"matrix": "uniform:0.11"}]),
       st.sampled_from([100, 10**6, 2**31]))
@settings(max_examples=60, deadline=None)
def test_sec4_regular_path_equals_the_numpy_reference(spec, seed, algo, params, spread):
    # spread 2**31: load differences beyond 2**29, where the kernel falls back to the snapping path.
    if "coin" in params and algo != "diffusion-random":
        params = {}
    graph = make_graph(spec, seed=seed)
    rng = np.random.default_rng(seed)
    loads = rng.integers(0, spread, graph.n)
    try:
        make_protocol(algo, {**params, "kernel": "numpy"}).reset(graph, loads.copy(), stream(seed, "protocol"))
    except Exception as exc:  # uniform:1/10 on a graph of degree > 5 is not a valid P: both refuse
        with pytest.raises(type(exc)):
            make_protocol(algo, params).reset(graph, loads.copy(), stream(seed, "protocol"))
        return
    # (compared step by step: the kernel's output buffers are reused two steps later)
    for fast, ref, sa, sb, _ in _step_pair(graph, algo, params, loads, seed, 4):
        np.testing.assert_array_equal(sa.loads, sb.loads)
        np.testing.assert_array_equal(sa.outflow, sb.outflow)
        assert sa.moved == sb.moved
        assert (fast.min_load, fast.negative_steps) == (ref.min_load, ref.negative_steps)


def test_sec4_regular_path_is_taken_where_it_applies():
    g = make_graph("torus:6x6")
    for algo in ROUNDED:
        p = make_protocol(algo)
        p.reset(g, np.zeros(g.n, dtype=np.int64), stream(0, "protocol"))
        assert (p._degree, p._q) == (4, 8)
    p = make_protocol("diffusion-floor", {"matrix": "uniform:0.11"})
    p.reset(g, np.zeros(g.n, dtype=np.int64), None)
    assert p._q == 0  # 0.11 is not 1/q in float64: the snapping path
    p = make_protocol("diffusion-floor")
    star = make_graph("star:5")
    p.reset(star, np.zeros(star.n, dtype=np.int64), None)
    assert p._degree == 0


def test_sec4_fallback_for_huge_differences_matches_the_reference():
    # A difference of 2**40 + 3 on a ring (P = 1/4): the snapping path decides, as before.
    g = make_graph("ring:6")
    loads = np.array([2**40 + 3, 0, 5, 2**40, 7, 1], dtype=np.int64)
    for algo in ROUNDED:
        for _, _, sa, sb, _ in _step_pair(g, algo, {}, loads, 1, 3):
            np.testing.assert_array_equal(sa.loads, sb.loads)
            np.testing.assert_array_equal(sa.outflow, sb.outflow)


@pytest.mark.parametrize("span", [2**29 - 1, 2**29])
def test_sec4_load_span_at_the_fallback_bound_matches_the_reference(span):
    # The regular path runs while the loads span less than 2**29 (every |d| is then below it) and
    # hands the step to the snapping path from 2**29 on: both sides of the bound, on a torus and
    # a hypercube (CSR rows) and on a torus and a ring with an offset stencil, equal the numpy
    # reference for every rounding. Just under the bound the kernels' 32-bit conversions (see
    # _trunc32) take differences of up to 2**29 - 1.
    for spec in ("torus:4x5", "hypercube:4", "torus:8x8", "ring:10"):
        g = make_graph(spec)
        assert (g.stencil is not None) == (spec in ("torus:8x8", "ring:10"))
        loads = np.random.default_rng(span).integers(0, span + 1, g.n)
        loads[0], loads[1] = 0, span  # (nodes 0 and 1 are adjacent in both)
        for algo in ROUNDED:
            for _, _, sa, sb, _ in _step_pair(g, algo, {}, loads, 2, 2):
                np.testing.assert_array_equal(sa.loads, sb.loads)
                np.testing.assert_array_equal(sa.outflow, sb.outflow)
                assert sa.moved == sb.moved


@given(st.sampled_from(REGULAR), st.integers(0, 2**31), st.sampled_from(["degree", "uniform:1/32", "uniform:1/30"]))
@settings(max_examples=30, deadline=None)
def test_sec2_regular_fused_step_is_bitwise_the_sparse_product(spec, seed, matrix):
    graph = make_graph(spec, seed=seed)
    rng = np.random.default_rng(seed)
    loads = rng.uniform(-5, 100, graph.n) * rng.integers(0, 2, graph.n)
    for fast, ref, sa, sb, b in _step_pair(graph, "diffusion", {"matrix": matrix}, loads, seed, 4):
        assert fast.options["kernel"] == "numba"
        np.testing.assert_array_equal(sa.loads, sb.loads)
        np.testing.assert_array_equal(sb.loads, _split_product(ref.P, b))
        np.testing.assert_allclose(sb.loads, ref.P @ b, rtol=1e-13, atol=1e-13)
        np.testing.assert_allclose(sa.outflow, np.bincount(graph.u, np.maximum(sb.flows, 0), graph.n)
                                   + np.bincount(graph.v, np.maximum(-sb.flows, 0), graph.n), rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("algo", ["diffusion", *ROUNDED])
def test_state_is_small_on_a_torus(algo):
    # The memory budget: at most 64 bytes per edge for graph plus state. The protocol's own arrays on a torus
    # (m = 2n): two load-sized buffers (8 bytes per edge), one byte per edge of HEAD flags
    # (random), one int8 per CSR slot (oriented), and nothing else of size m.
    g = make_graph("torus:40x40")
    p = make_protocol(algo)
    p.reset(g, np.ones(g.n, dtype=np.float64 if p.divisible else np.int64), stream(0, "protocol"))
    state = sum(v.nbytes for v in vars(p).values() if isinstance(v, np.ndarray))
    bound = {"diffusion-random": 9.0, "diffusion-oriented": 11.0}.get(algo, 8.0)
    assert state / g.m <= bound + 32768 / g.m + 0.01  # (+ the fixed 4096-float coin block of random)
