"""sos-iou's threaded hypercube kernel (``threads=k`` and ``auto`` on ``hypercube:d``, d >= 13) against the serial one.

* :func:`sos_iou_cube_par` against :func:`sos_iou_cube` on hypercube:13 and 14 cut into 2 to 4
  chunks, from random flows, IOUs, exception bits (sparse or dense) and loads, every flag: the
  returned tally, loads, outflows, ``yhat``, IOUs and bits ``np.array_equal``. Small loads and
  large flows make many nodes short, so they pay on both kinds of edges (inside their chunk in
  phase 2, to other chunks in phase 3).
* A chain of steps from loads alone, exceptions carried from step to step.
* :func:`cube_chunk_bits` against what it promises.
* The protocol with ``threads=2`` and ``threads=auto`` against ``threads=1``, step by step, with
  the threaded cube kernel checked to be the one taken.

x is the loads themselves (unit speeds), as in the protocol: each further type signature compiles
the parallel kernel again. The chunk walk it shares with the serial kernel is tested with speeds
in test_sos_cube.py.
"""

import numba
import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

from tokendist.engine import make_protocol
from tokendist.graphs import make_graph
from tokendist.protocols.heterogeneous import _rules as heterogeneous
from tokendist.kernels import _choice as measured_choice
from tokendist.protocols.heterogeneous.kernels._walk_cube import CUBE_BLOCK_BITS
from tokendist.protocols.heterogeneous.kernels._sos_cube import sos_iou_cube
from tokendist.protocols.heterogeneous.kernels._sos_cube_threaded import (CUBE_CHUNKS_PER_THREAD, cube_chunk_bits,
                                                                  sos_iou_cube_par)

from .lockstep import assert_same_steps

D = CUBE_BLOCK_BITS + 1  # the smallest cube the threaded kernel cuts


def _both(d, q, state, loads, a0, beta, first, owed_stored, has_exc, pay_iou):
    """One step of each kernel on its own copy of ``state``: ``[(result, yhat, iou, bits, out, owe)] * 2``."""
    n = 1 << d
    runs = []
    for threaded in (False, True):
        y, io, b = (a.copy() for a in state)
        out, owe = np.zeros(n, np.int64), np.empty(n)
        tail = (a0, beta, first, owed_stored, has_exc, b, pay_iou, loads, loads, y, io, out, owe)
        r = sos_iou_cube_par(d, q, *tail) if threaded else sos_iou_cube(d, *tail)
        runs.append((r, y, io, b, out, owe))
    return runs


def _assert_equal(runs):
    (r1, *a1), (r2, *a2) = runs
    assert r1 == r2
    assert all(np.array_equal(p, q) for p, q in zip(a1, a2))


@settings(max_examples=25, deadline=None)
@given(d=st.sampled_from([D, D + 1]), q=st.integers(1, 2), seed=st.integers(0, 2**31), first=st.booleans(),
       owed_stored=st.booleans(), has_exc=st.booleans(), pay_iou=st.booleans(), dense=st.booleans())
def test_theorem1_sos_iou_threaded_cube_kernel_equals_serial(d, q, seed, first, owed_stored, has_exc, pay_iou, dense):
    q = min(q, d - CUBE_BLOCK_BITS)
    n, rng = 1 << d, np.random.default_rng(seed)
    m = d * n // 2
    loads = rng.integers(0, 8, n)
    yhat, iou = rng.normal(0.0, 3.0, (d, n // 2)), rng.normal(0.0, 2.0, (d, n // 2))
    bits = np.packbits(rng.random(8 * ((m + 7) // 8)) < (0.5 if dense else 0.04), bitorder="little")
    if not has_exc:
        bits[:] = 0
    runs = _both(d, q, (yhat, iou, bits), loads, 1.0 / (2 * d), float(rng.uniform(1.0, 1.99)), first, owed_stored,
                 has_exc, pay_iou)
    _assert_equal(runs)
    result, out = runs[0][0], runs[0][4]
    assert out.sum() == loads.sum()
    if not (first and owed_stored):  # then o is a small first flow plus an IOU below 1
        assert result[1] > 0  # short nodes: these loads are far below the flows
    if pay_iou:
        assert out.min() >= 0


def test_theorem1_sos_iou_threaded_cube_kernel_chain_of_steps():
    # From loads alone, as the protocol starts: exceptions made in one step are read back in the
    # next; every step's short nodes pay across chunks (phase 3) as well as inside them.
    d, q = D + 1, 2
    n = 1 << d
    loads = np.random.default_rng(1).integers(0, 20, n)
    state = (np.zeros((d, n // 2)), np.zeros((d, n // 2)), np.zeros((d * n // 2 + 7) // 8, np.uint8))
    owed_stored, has_exc, shorts, exc_steps = False, False, 0, 0
    for step in range(6):
        runs = _both(d, q, state, loads, 1.0 / (d + 1), 1.95, step == 0, owed_stored, has_exc, True)
        _assert_equal(runs)
        result, *after, out, _ = runs[0]
        assert out.sum() == loads.sum() and out.min() >= 0
        state, loads = tuple(after), out
        owed_stored, has_exc = True, result[4]
        shorts += result[1]
        exc_steps += has_exc
    assert shorts > 1000 and exc_steps >= 3


@pytest.mark.parametrize("d", range(1, 25))
@pytest.mark.parametrize("threads", [1, 2, 3, 8])
def test_cube_chunk_bits_cuts_only_into_whole_blocks(d, threads):
    q = cube_chunk_bits(d, threads)
    assert q >= 0
    if q:
        assert d - q >= CUBE_BLOCK_BITS and d - q >= 4  # whole blocks of the serial walk, whole bytes of bits
        assert (1 << q) <= CUBE_CHUNKS_PER_THREAD * threads * 2  # a power of two at most twice the wish
        assert (1 << q) >= CUBE_CHUNKS_PER_THREAD * threads or d - q == max(CUBE_BLOCK_BITS, 4)
    else:
        assert d <= CUBE_BLOCK_BITS


def _protocol_loads(g):
    rng = np.random.default_rng(2)
    loads = rng.integers(0, 5, g.n)
    loads[5] += 30000
    return loads


def test_theorem1_sos_iou_protocol_threads_takes_the_threaded_cube_kernel():
    g = make_graph(f"hypercube:{D}")
    serial = make_protocol("sos-iou", {"kernel": "numba", "threads": 1})
    threaded = make_protocol("sos-iou", {"kernel": "numba", "threads": 2})
    calls = []
    original = heterogeneous.sos_iou_cube_par

    def spy(*args):
        calls.append(args[1])  # q
        return original(*args)
    try:
        heterogeneous.sos_iou_cube_par = spy
        assert_same_steps(serial, threaded, _protocol_loads(g), 30, g)
    finally:
        heterogeneous.sos_iou_cube_par = original
    assert calls == [1] * 30  # hypercube:13 cuts in two
    assert serial._prev.ndim == threaded._prev.ndim == 2  # both kept the state by dimension
    assert serial.events > 0 and serial.report() == threaded.report()


@pytest.mark.skipif(numba.config.NUMBA_NUM_THREADS < 2, reason="the race needs two numba threads")
def test_theorem1_sos_iou_threads_auto_races_the_cube_kernels(monkeypatch):
    monkeypatch.setattr(heterogeneous, "AUTO_MIN_NODES", 0)
    monkeypatch.setattr(measured_choice, "_auto_allowed", True)
    g = make_graph(f"hypercube:{D}")
    serial = make_protocol("sos-iou", {"kernel": "numba", "threads": 1})
    auto = make_protocol("sos-iou", {"kernel": "numba"})
    assert auto.options["threads"] == "auto"
    assert_same_steps(serial, auto, _protocol_loads(g), 30, g)
    assert min(auto.kernel_choice.calls) >= 1 + auto.kernel_choice.window
    assert sum(auto.kernel_choice.calls) == 30 and auto._prev.ndim == 2
    assert serial.events > 0 and serial.report() == auto.report()
