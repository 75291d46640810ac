"""Ghosh et al. 1995: the row-form DS kernel and the opt-in ``threads=k`` kernels of ``ds`` and ``single-port``.

* Kernel level (Hypothesis, random connected graphs and regular ones so that both row paths run,
  cut into many small blocks): the DS node kernel, serial and parallel, equals a plain numpy
  reference of Sec. 5 and the per-edge kernel :func:`ds_step` (loads, tokens moved, outflows,
  the next step's previous loads, the out-of-range flag).
* Protocol level: ``simulate`` with ``threads=2`` gives the serial trace, bit for bit.
"""

import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

from tokendist import simulate
from tokendist.engine import EdgeFailures, make_protocol
from tokendist.errors import TokendistError
from tokendist.graphs import make_graph
from tokendist.protocols._local_balancing_kernels import INT32_MAX, ds_step, ds_step_nodes
from tokendist.protocols._local_balancing_parallel import ds_step_nodes_par, run_parallel

from ..strategies import random_connected_graph


@st.composite
def ds_cases(draw):
    """(graph, regular degree or 0, loads, previous loads, threshold)."""
    rng = np.random.default_rng(draw(st.integers(0, 2**31)))
    kind = draw(st.sampled_from(["general", "regular", "torus"]))
    if kind == "general":
        n = draw(st.integers(2, 40))
        g = random_connected_graph(rng, n, draw(st.integers(0, 3 * n)))
    elif kind == "regular":
        d = draw(st.integers(1, 6))
        n = draw(st.integers(d + 1, 40))
        n += (n * d) % 2  # n d even
        g = make_graph(f"random-regular:{n},{d}", seed=int(rng.integers(2**31)))
    else:
        g = make_graph(f"torus:{draw(st.integers(3, 7))}x{draw(st.integers(3, 7))}")
    deg = g.degrees
    D = int(deg[0]) if deg.min() == deg.max() else 0
    loads = rng.integers(-5 if draw(st.booleans()) else 0, 80, g.n)
    if draw(st.booleans()):  # a load past int32 somewhere
        loads[int(rng.integers(g.n))] += 3 * 2**31
    prev = loads + rng.integers(-15, 15, g.n)
    if np.abs(prev).max() <= INT32_MAX and draw(st.booleans()):
        prev = prev.astype(np.int32)
    return g, D, loads.astype(np.int64), prev, draw(st.integers(1, 12))


def _reference(g, loads, prev, threshold):
    """Sec. 5 in plain numpy, per edge (u, v): u sends iff w(u) - e^u(v) > T, with e^u(v) = prev[v]."""
    su = (loads[g.u] - prev[g.v].astype(np.int64) > threshold).astype(np.int64)
    sv = (loads[g.v] - prev[g.u].astype(np.int64) > threshold).astype(np.int64)
    new = loads - np.bincount(g.u, su, g.n) + np.bincount(g.v, su, g.n) - np.bincount(g.v, sv, g.n) \
        + np.bincount(g.u, sv, g.n)
    net = su - sv  # what each end sends over the net flow of each edge
    outflow = np.bincount(g.u, net > 0, g.n) + np.bincount(g.v, net < 0, g.n)
    return new.astype(np.int64), int(su.sum() + sv.sum()), outflow.astype(np.int64)


@settings(max_examples=60, deadline=None)
@given(case=ds_cases(), block=st.integers(1, 9), with_outflow=st.booleans())
def test_sec5_ds_node_kernels_serial_and_parallel_equal_the_reference(case, block, with_outflow):
    g, D, loads, prev, threshold = case
    new, moved, outflow = _reference(g, loads, prev, threshold)
    flag = bool(loads.min() < 0 or loads.max() > INT32_MAX)
    idx = g.indices.view(np.uint32)
    results = []
    for kernel, extra in ((ds_step_nodes, ()), (ds_step_nodes_par, (block,))):
        for degree in {D, 0}:  # the regular path (when the graph is regular) and the general one
            out, nxt = np.full(g.n, -7, np.int64), np.full(g.n, -7, prev.dtype)
            of = np.full(g.n, -7, np.int32) if with_outflow else None
            args = (g.indptr, idx, degree, loads, threshold, prev, nxt, out, of, *extra)
            got = run_parallel(kernel, 2, *args) if extra else kernel(*args)
            assert got == (moved, flag)
            np.testing.assert_array_equal(out, new)
            np.testing.assert_array_equal(nxt, loads.astype(prev.dtype))  # int32: truncated past int32 (flagged)
            if with_outflow:
                np.testing.assert_array_equal(of, outflow)
            results.append(out)
    # The per-edge kernel with e^u(v) = prev[v], e^v(u) = prev[u] agrees too.
    est_u, est_v = prev[g.v].astype(np.int64), prev[g.u].astype(np.int64)
    out, of = np.empty(g.n, np.int64), np.empty(g.n, np.int32)
    assert ds_step(g.u, g.v, loads, threshold, est_u, est_v, out, of) == moved
    np.testing.assert_array_equal(out, new)
    np.testing.assert_array_equal(of, outflow)


def test_ds_parallel_kernel_on_a_graph_split_between_threads():
    g = make_graph("torus:40x50", seed=1)
    rng = np.random.default_rng(3)
    w = rng.integers(0, 1000, g.n)
    prev = (w + rng.integers(-100, 100, g.n)).astype(np.int32)
    new, moved, _ = _reference(g, w, prev, 48)
    out, nxt = np.empty(g.n, np.int64), np.empty(g.n, np.int32)
    assert run_parallel(ds_step_nodes_par, 2, g.indptr, g.indices.view(np.uint32), 4, w, 48, prev, nxt, out,
                        None) == (moved, False)
    assert moved > 0
    np.testing.assert_array_equal(out, new)


@pytest.mark.parametrize("graph,init,params,failures", [
    ("hypercube:7", "point:90000", {}, 0.0),
    ("torus:9x11", "random:0..400", {"estimates": "zero", "threshold": 3}, 0.0),
    ("random-regular:120,5", "point:50000", {"estimates": "random"}, 0.0),
    ("gnp:80,0.1", "random:0..300", {"threshold": 2}, 0.0),
    ("torus:8x8", "point:20000", {"threshold": 5}, 0.3),
])
def test_sec5_ds_threads2_gives_the_serial_trace(graph, init, params, failures):
    runs = [simulate(graph, "ds", init, seed=5, max_steps=60, keep_loads_every=1, detect_cycles=False,
                     allow_infeasible=True, dynamics=EdgeFailures(failures) if failures else None,
                     params={**params, "threads": k}) for k in (1, 2)]
    a, b = runs
    np.testing.assert_array_equal(a.load_history, b.load_history)
    for key in a.trace:
        np.testing.assert_array_equal(b.trace[key], a.trace[key], err_msg=key)
    assert a.tokens_moved == b.tokens_moved > 0 and a.infeasible_steps == b.infeasible_steps


@pytest.mark.parametrize("algo", ["ds"])
def test_threads_below_one_is_a_user_error(algo):
    with pytest.raises(TokendistError, match="threads must be at least 1"):
        make_protocol(algo, {"threads": 0})
