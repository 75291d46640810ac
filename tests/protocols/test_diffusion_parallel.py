"""The opt-in parallel kernels of the diffusion protocols (``threads=k``) against the serial ones.

Subramanian-Scherson (1994): continuous diffusion l(t+1) = P l(t) (Sec. 2, Equation 1) and the four
roundings of line (7) (Sec. 4). The parallel kernels run the serial row loops over blocks of rows,
so the loads and outflows must be the serial ones bit for bit (integer and real), the rounded
kernels' token moves and minima too; only the continuous kernel's ``moved`` total may differ in
the last bits (summed per block). The kernels take the block sizes as arguments, so that small
Hypothesis graphs are cut into many blocks (the protocols use blocks of about 1000 rows).
"""

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tokendist._random import stream
from tokendist.engine import make_protocol, simulate
from tokendist.errors import InfeasibleStepError, TokendistError
from tokendist.graphs import make_graph
from tokendist.graphs._model import unsigned_view
from tokendist.protocols.diffusion._rules import _regular_degree
from tokendist.protocols.diffusion.kernels._serial import RANDOM_FRACTION, diffuse_step, rounded_step
from tokendist.protocols.diffusion.kernels._threaded import diffuse_step_parallel, rounded_step_parallel

from .test_diffusion import connected_graphs

ROUNDED = ["diffusion-floor", "diffusion-ceil", "diffusion-random", "diffusion-oriented"]
# Regular graphs take the kernels' regular path (D slots per row, P_ij = 1/(2D)).
REGULAR = ["torus:4x5", "torus:3x3", "hypercube:4", "random-regular:30,3", "ring:11", "complete:7"]

graphs = st.one_of(connected_graphs(max_n=16), st.sampled_from(REGULAR).map(lambda s: make_graph(s, seed=0)))
blocks = st.integers(1, 7)


def _loads(rng, n, huge):
    loads = rng.integers(-5, 80, n)
    if huge:  # a difference of 2**29 or more: the regular path's step is redone on the general one
        loads[rng.integers(0, n)] += 1 << 40
    return loads


@given(graphs, st.integers(0, 2**31), st.sampled_from(["degree", "uniform:1/32", "uniform:1/30"]), blocks)
@settings(max_examples=40, deadline=None)
def test_sec2_parallel_step_is_bitwise_the_serial_one(graph, seed, matrix, block):
    rng = np.random.default_rng(seed)
    loads = rng.uniform(-5, 100, graph.n) * rng.integers(0, 2, graph.n)  # ties (zeros) and negatives
    proto = make_protocol("diffusion", {"matrix": matrix})
    proto.reset(graph, loads.copy(), None)
    args = (graph.indptr, unsigned_view(graph.indices), proto._coef, proto._diag)
    degree = _regular_degree(graph)
    for _ in range(3):
        out1, of1, out2, of2 = (np.full(graph.n, np.nan) for _ in range(4))
        m1 = diffuse_step(*args, loads, degree, out1, of1)
        m2 = diffuse_step_parallel(*args, loads, degree, out2, of2, block)
        np.testing.assert_array_equal(out2, out1)
        np.testing.assert_array_equal(of2, of1)
        assert m2 == pytest.approx(m1, rel=1e-12, abs=1e-12)
        loads = out1


@given(graphs, st.integers(0, 2**31), st.sampled_from(ROUNDED),
       st.sampled_from([{}, {"coin": "fraction"}, {"matrix": "uniform:1/30"}]), blocks, st.integers(1, 9),
       st.booleans())
@settings(max_examples=80, deadline=None)
def test_sec4_parallel_step_equals_the_serial_one(graph, seed, algo, params, block, edge_block, huge):
    if "coin" in params and algo != "diffusion-random":
        params = {}
    rng = np.random.default_rng(seed)
    loads = _loads(rng, graph.n, huge)
    proto = make_protocol(algo, params)
    proto.reset(graph, loads.copy(), stream(seed, "protocol"))
    h = proto.h
    mode = proto._mode
    if proto.options.get("coin") == "fraction":
        mode = RANDOM_FRACTION
    heads2 = np.empty_like(proto._heads)
    for t in range(3):
        out1, of1, out2, of2 = (np.full(graph.n, -7, dtype=np.int64) for _ in range(4))
        common = (h.indptr, unsigned_view(h.indices), unsigned_view(h.csr_edges), proto._coef, proto._ratio,
                  proto._along_slot)
        tail = (mode, np.uint64(proto._key), np.uint64(t), proto._hop_extra)
        r1 = rounded_step(*common, proto._heads, loads, *tail, proto._coin_buf, proto._degree, proto._q, out1, of1)
        r2 = rounded_step_parallel(*common, heads2, loads, *tail, proto._degree, proto._q, out2, of2, block,
                                   edge_block)
        assert tuple(r2) == tuple(r1)
        np.testing.assert_array_equal(out2, out1)
        np.testing.assert_array_equal(of2, of1)
        np.testing.assert_array_equal(heads2, proto._heads)  # the same coins (HEAD bytes)
        assert out1.sum() == loads.sum()
        loads = out1


def _run(spec, algo, init, params):
    try:
        r = simulate(spec, algo, init, seed=5, params=params, max_steps=60)
    except InfeasibleStepError as exc:
        return ("infeasible", str(exc)), None
    return (r.stop_reason, r.steps, r.infeasible_steps, r.cycle_length, r.loads.tolist(), r.report), r


# Sizes with several default blocks: torus:40x40 (1600 rows; 1024 per block), hypercube:10
# (409 rows per block on the rounded regular path), random-tree:2100 (general path).
@pytest.mark.parametrize("algo,params", [("diffusion", {}), ("diffusion-floor", {}), ("diffusion-ceil", {}),
                                         ("diffusion-random", {}), ("diffusion-random", {"coin": "fraction"}),
                                         ("diffusion-oriented", {})])
@pytest.mark.parametrize("spec,init", [("torus:40x40", "random:0..500"), ("hypercube:10", "point:100000"),
                                       ("random-tree:2100", "random:0..50")])
def test_threads2_gives_the_same_run_and_trace(algo, params, spec, init):
    (serial, rs), (par, rp) = (_run(spec, algo, init, {**params, "threads": k}) for k in (1, 2))
    if rs is None or rp is None:
        assert serial == par
        return
    assert serial[:4] == par[:4]
    if algo == "diffusion":
        np.testing.assert_array_equal(rp.loads, rs.loads)  # bit for bit
        for key, col in rs.trace.items():
            # The summed moves may differ in the last bits (per-block sums); everything else agrees.
            np.testing.assert_allclose(rp.trace[key], col, rtol=1e-12, atol=1e-9, err_msg=key)
        assert rp.tokens_moved == pytest.approx(rs.tokens_moved, rel=1e-12)
    else:
        assert serial == par
        assert rp.tokens_moved == rs.tokens_moved
        for key, col in rs.trace.items():
            np.testing.assert_array_equal(rp.trace[key], col, err_msg=key)


@pytest.mark.parametrize("algo", ["diffusion", *ROUNDED])
def test_threads_below_one_is_a_user_error(algo):
    with pytest.raises(TokendistError, match="threads=0"):
        simulate("ring:5", algo, "point:10", params={"threads": 0}, max_steps=2)
