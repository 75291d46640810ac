"""``random-walk`` (Elsässer, Monien, Schamberger 2006, Sec. 3): the hypercube phase-1 kernel.

* Kernel (Hypothesis): ``fos_pair_cube`` (dimension by dimension, blocks of ``2^CUBE_BLOCK_BITS``
  nodes) writes the same loads, outflows and estimate as the row loop ``fos_pair_regular`` and
  returns the same moved, max error, squared error and max weighted estimate, bit for bit, with
  unit speeds and with speeds (the in-place estimate path), on cubes smaller than a block (every
  dimension inside it) and larger (dimensions across blocks).
* Kernel (Hypothesis): ``fos_pair_cube_par`` (``threads=k``: the blocks on numba threads) gives the
  serial kernel's results, bit for bit.
* Protocol: ``random-walk`` picks the cube kernel on ``hypercube:d`` (serial numba path, and the
  parallel one with ``threads=2``) and runs through the switch into phase 2 with the loads,
  outflows, estimate and report of the same protocol without it, bit for bit.
"""

import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

from tokendist.engine import make_protocol
from tokendist.graphs import make_graph
from tokendist.graphs._model import unsigned_view
from tokendist.protocols.heterogeneous import _random_walk as rw
from tokendist.protocols.heterogeneous.kernels._walk_cube import CUBE_BLOCK_BITS, fos_pair_cube
from tokendist.kernels import run_parallel
from tokendist.protocols.heterogeneous.kernels._walk_serial import fos_pair_regular
from tokendist.protocols.heterogeneous.kernels._walk_threaded import fos_pair_cube_par

from .test_random_walk_stencil import _assert_same, _assert_same_steps, _inputs, _phase1, _steps

# 3 .. CUBE_BLOCK_BITS: one block or several, every dimension inside; above: dimensions across blocks.
DIMENSIONS = [3, 4, 5, 7, CUBE_BLOCK_BITS, CUBE_BLOCK_BITS + 1, CUBE_BLOCK_BITS + 2]


@settings(max_examples=40, deadline=None)
@given(st.sampled_from(DIMENSIONS), st.booleans(), st.integers(0, 2**31), st.sampled_from([0.0, 3.0, 1e6]))
def test_sec3_phase1_cube_kernel_equals_regular_kernel(d, speeds, seed, noise):
    g = make_graph(f"hypercube:{d}")
    rng = np.random.default_rng(seed)
    n = g.n
    loads, est, s = _inputs(n, rng, noise, speeds)
    a0, total = 1.0 / (2 * d), float(loads.sum())
    ssum = float(s.sum()) if speeds else float(n)
    ix = unsigned_view(g.indices)
    ref = _phase1(fos_pair_regular, lambda s: (ix, d, a0, s, ssum, total), n, loads, est, s)
    new = _phase1(fos_pair_cube, lambda s: (d, a0, s, ssum, total), n, loads, est, s)
    _assert_same(new, ref)
    assert (new[1] >= 0).all() and new[1].sum() == loads.sum()  # integer FOS conserves the tokens


@settings(max_examples=25, deadline=None)
@given(st.sampled_from(DIMENSIONS), st.booleans(), st.integers(0, 2**31))
def test_sec3_phase1_parallel_cube_kernel_equals_serial(d, speeds, seed):
    # threads=k on a hypercube: the blocks of fos_pair_cube on numba threads, each with its own
    # scratch; the squared error summed afterwards in node order. The same bits as the serial kernel.
    g = make_graph(f"hypercube:{d}")
    rng = np.random.default_rng(seed)
    n = g.n
    loads, est, s = _inputs(n, rng, 3.0, speeds)
    a0, total = 1.0 / (2 * d), float(loads.sum())
    ssum = float(s.sum()) if speeds else float(n)

    def parallel(*args):
        return run_parallel(fos_pair_cube_par, 2, *args)

    ref = _phase1(fos_pair_cube, lambda s: (d, a0, s, ssum, total), n, loads, est, s)
    new = _phase1(parallel, lambda s: (d, a0, s, ssum, total), n, loads, est, s)
    _assert_same(new, ref)


def _run(spec, loads, params, steps, use_cube, speeds, monkeypatch):
    g = make_graph(spec)
    if speeds is not None:
        g = g.with_speeds(speeds)
    if not use_cube:
        g.__dict__["cube_dimension"] = None  # the cached property, as for a graph that is no cube
    calls = []
    name = "fos_pair_cube" if params["threads"] == "1" else "fos_pair_cube_par"
    real = getattr(rw, name)

    def spy(*args):
        calls.append(1)
        return real(*args)

    monkeypatch.setattr(rw, name, spy)
    p = make_protocol("random-walk", params)
    p.reset(g, loads.copy(), np.random.default_rng(3))
    return p, _steps(p, g, loads, steps), len(calls)


@pytest.mark.parametrize("spec,speeds,switch,threads", [("hypercube:8", False, "error", 1),
                                                        ("hypercube:7", True, "error", 1),
                                                        ("hypercube:5", True, "step", 1),
                                                        ("hypercube:13", False, "step", 2)])
def test_sec3_protocol_with_cube_kernel_equals_without_through_both_phases(spec, speeds, switch, threads,
                                                                           monkeypatch):
    g = make_graph(spec)
    rng = np.random.default_rng(5)
    loads = rng.integers(0, 20, g.n).astype(np.int64)
    loads[0] += 700
    s = rng.uniform(0.8, 1.2, g.n) if speeds else None
    params = {"switch": switch, "switch_tol": "1e-2", "switch_step": "40", "threads": str(threads)}
    steps = 300 if threads == 1 else 60
    p1, a, calls = _run(spec, loads, params, steps, True, s, monkeypatch)
    p0, b, none = _run(spec, loads, params, steps, False, s, monkeypatch)
    assert calls > 0 and none == 0
    assert p1.switch_at is not None and p1.switch_at == p0.switch_at  # through the switch into phase 2
    assert calls == p1.switch_at  # every phase-1 step on the cube
    _assert_same_steps(a, b)
    assert p1.report() == p0.report()
