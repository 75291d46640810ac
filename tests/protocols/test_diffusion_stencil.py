"""The offset-stencil paths of the diffusion kernels (Subramanian-Scherson 1994, Sec. 2 and Sec. 4).

On a torus or a ring the nodes of the stencil's runs read their neighbours at fixed offsets
instead of through CSR indices (``diffuse_stencil_step``, ``rounded_stencil_step``); every row
does the CSR kernel's arithmetic in the same order, so loads, outflows, moves, minimum loads and
coin streams must be those of ``diffuse_step`` / ``rounded_step`` bit for bit. Checked on small
tori with a forced stencil (``find_stencil(g, min_coverage=0.0)``), on graphs that get one by
default through the protocols, and on the fallback for load spans of 2**29 or more.
"""

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tokendist._random import stream
from tokendist.engine import make_protocol
from tokendist.graphs import make_graph
from tokendist.graphs._model import unsigned_view
from tokendist.graphs._stencil import affine_edge_runs, find_stencil
from tokendist.protocols.diffusion.kernels._serial import (CEIL, FLOOR, ORIENTED, RANDOM, diffuse_stencil_step, diffuse_step,
                                                    rounded_stencil_step, rounded_step)

# Tuple lengths (2, 2) and (1, 1) only: each pair of lengths is one more numba compilation.
FORCED = ["torus:6x6", "torus:5x7", "torus:8x8", "ring:9"]
ROUNDED = ["diffusion-floor", "diffusion-ceil", "diffusion-random", "diffusion-oriented"]
_GRAPHS = {}


def _graph(spec):
    if spec not in _GRAPHS:
        g = make_graph(spec)
        _GRAPHS[spec] = (g, find_stencil(g, min_coverage=0.0))
    return _GRAPHS[spec]


def _continuous_pair(g, s, coef, diag, x):
    n, D = g.n, int(g.degrees[0])
    ix = unsigned_view(g.indices)
    o1, f1, o2, f2 = np.empty(n), np.empty(n), np.empty(n), np.empty(n)
    m1 = diffuse_step(g.indptr, ix, coef, diag, x, D, o1, f1)
    m2 = diffuse_stencil_step(ix, coef, diag, x, D, s.starts, s.ends, s.lower, s.upper, o2, f2)
    return (o1, f1, m1), (o2, f2, m2)


def _rounded_pair(g, s, mode, loads, along, key, step):
    n, m, D = g.n, g.m, int(g.degrees[0])
    ix, ce = unsigned_view(g.indices), unsigned_view(g.csr_edges)
    q = 2 * D
    coef = np.array([1.0 / q])
    if mode == RANDOM:
        starts, ends, ebase = affine_edge_runs(s, ce)
    else:
        starts, ends, ebase = s.starts, s.ends, np.zeros((1, D), dtype=np.int64)
    a, fa, b, fb = (np.empty(n, dtype=np.int64) for _ in range(4))
    ra = rounded_step(g.indptr, ix, ce, coef, np.array([[1, q]]), along, np.empty(m, np.uint8), loads, mode,
                      np.uint64(key),
                      np.uint64(step), np.zeros(0, np.int64), np.empty(0), D, q, a, fa)
    rb = rounded_stencil_step(ix, ce, coef[0], q, along, np.empty(m, np.uint8), loads, mode, np.uint64(key),
                              np.uint64(step), D, starts, ends, s.lower, s.upper, ebase, b, fb)
    return (ra, a, fa), (rb, b, fb)


@settings(max_examples=25, deadline=None)
@given(spec=st.sampled_from(FORCED), seed=st.integers(0, 2**32 - 1), per_slot=st.booleans())
def test_sec2_equation1_stencil_step_is_bitwise_the_csr_step(spec, seed, per_slot):
    g, s = _graph(spec)
    rng = np.random.default_rng(seed)
    x = rng.random(g.n) * 10.0 ** rng.integers(0, 6)
    D = int(g.degrees[0])
    if per_slot:  # P_ij per CSR slot and P_ii per node (the kernel's general coefficient layout)
        coef, diag = rng.random(D * g.n) / (2 * D), rng.random(g.n)
    else:
        coef, diag = np.array([1.0 / (2 * D)]), np.array([0.5])
    (o1, f1, m1), (o2, f2, m2) = _continuous_pair(g, s, coef, diag, x)
    assert np.array_equal(o1, o2) and np.array_equal(f1, f2) and m1 == m2


@settings(max_examples=40, deadline=None)
@given(spec=st.sampled_from(FORCED), mode=st.sampled_from([FLOOR, CEIL, RANDOM, ORIENTED]),
       seed=st.integers(0, 2**32 - 1), spread=st.sampled_from([3, 40, 10**6]))
def test_sec4_stencil_rounding_is_bitwise_the_csr_rounding(spec, mode, seed, spread):
    g, s = _graph(spec)
    rng = np.random.default_rng(seed)
    loads = rng.integers(-spread, spread + 1, g.n)
    along = rng.integers(0, 2, 2 * g.m).astype(np.int8)
    (ra, a, fa), (rb, b, fb) = _rounded_pair(g, s, mode, loads, along, seed, seed % 1000)
    assert rb[2]  # narrow: the stencil kernel's outputs are valid
    assert ra == rb[:2] and np.array_equal(a, b) and np.array_equal(fa, fb)


def _run(graph, algo, params, loads, seed, steps, stencil):
    p = make_protocol(algo, params)
    p.reset(graph, loads.copy(), stream(seed, "protocol"))
    if not stencil:  # the same protocol with the stencil path switched off: the CSR kernel
        p._stencil = None
        p._stencil_runs = None
    out, w = [], loads.copy()  # (the protocol writes a later step into the array it was given)
    for t in range(steps):
        step = p.step(t, graph, w)
        out.append((step.loads.copy(), step.outflow.copy(), step.moved))
        w = step.loads.copy()  # (a copy apart from the record: the protocol reuses it as a buffer)
    return p, out


@pytest.mark.parametrize("spec", ["torus:8x8", "torus:12x12", "ring:10"])
@pytest.mark.parametrize("algo", ["diffusion"] + ROUNDED)
def test_protocols_take_the_stencil_path_with_the_csr_results(spec, algo):
    g = make_graph(spec)
    assert g.stencil is not None
    loads = np.random.default_rng(5).integers(0, 500, g.n)
    if algo == "diffusion":
        loads = loads.astype(np.float64)
    fast, a = _run(g, algo, {}, loads, 11, 6, True)
    slow, b = _run(g, algo, {}, loads, 11, 6, False)
    assert getattr(fast, "_stencil", None) is not None or getattr(fast, "_stencil_runs", None) is not None
    for (wa, fa, ma), (wb, fb, mb) in zip(a, b):
        assert np.array_equal(wa, wb) and np.array_equal(fa, fb) and ma == mb
    if algo != "diffusion":
        assert fast.min_load == slow.min_load


@pytest.mark.parametrize("algo", ROUNDED)
def test_sec4_stencil_fallback_for_huge_spans_matches_the_reference(algo):
    # Loads spanning 2**29 or more: the stencil kernel reports it and the protocol redoes the step
    # on the general (snapping) path, as the CSR regular path does.
    g = make_graph("torus:8x8")
    loads = np.random.default_rng(2).integers(0, 100, g.n)
    loads[[3, 40]] = [2**40 + 7, -(2**31)]
    fast, a = _run(g, algo, {}, loads, 4, 3, True)
    assert fast._stencil_runs is not None
    ref = make_protocol(algo, {"kernel": "numpy"})
    ref.reset(g, loads.copy(), stream(4, "protocol"))
    w = loads
    for t, (wa, fa, ma) in enumerate(a):
        sb = ref.step(t, g, w)
        w = sb.loads.copy()
        assert np.array_equal(wa, w) and np.array_equal(fa, sb.outflow)


def test_stencil_path_is_off_where_it_does_not_apply():
    g = make_graph("torus:8x8")
    loads = np.zeros(g.n, dtype=np.int64)
    cases = [("diffusion-random", {"coin": "fraction"}), ("diffusion-floor", {"threads": 2}),
             ("diffusion-floor", {"matrix": "uniform:0.11"})]  # 0.11 is not 1/q: the general path
    for algo, params in cases:
        p = make_protocol(algo, params)
        p.reset(g, loads, stream(0, "protocol"))
        assert p._stencil_runs is None, (algo, params)
    p = make_protocol("diffusion", {})
    p.reset(make_graph("hypercube:4"), np.zeros(16), stream(0, "protocol"))
    assert p._stencil is None


def test_one_sided_stencils_are_not_used():
    # A stencil whose offsets are all on one side (no lower or no upper offsets) cannot be a numba
    # tuple loop (Tuple() has no items to index): the protocols keep the CSR kernels for it.
    from tokendist.graphs._stencil import Stencil
    from tokendist.protocols.diffusion._rules import _usable_stencil

    class G:
        stencil = Stencil(starts=np.array([0]), ends=np.array([1]), lower=(), upper=(1,), covered=1)

    assert _usable_stencil(G()) is None
    assert _usable_stencil(make_graph("torus:8x8")) is not None
