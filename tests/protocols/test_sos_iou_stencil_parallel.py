"""sos-iou's threaded stencil kernel (``threads=k`` on tori and rings) against the serial stencil kernel, bit for bit.

* :func:`sos_iou_stencil_par` against :func:`sos_iou_stencil` on small tori and rings with a
  forced stencil, cut into 1 to 9 node ranges, over random loads, flows, IOUs and exception bits,
  every flag: loads, outflows, ``yhat``, IOUs, bits and the returned tally ``np.array_equal``.
  Small loads and large flows make many nodes short, so all three ways of paying run (in the
  row's own range while its run is in cache, in phase 3 in its range, serially after).
* :func:`stencil_chunks` against a naive reading of what it promises.
* The protocol with ``threads=2`` against ``threads=1`` on the tori and ring the protocols take
  the stencil path on, step by step, with the threaded path checked to be the one taken.
"""

import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

from tokendist.engine import make_protocol
from tokendist.graphs import make_graph
from tokendist.graphs._model import Graph
from tokendist.graphs._stencil import find_stencil, lower_edge_runs
from tokendist.protocols.heterogeneous.kernels._stencil import sos_iou_stencil
from tokendist.protocols.heterogeneous.kernels._stencil_threaded import sos_iou_stencil_par, stencil_chunks

from .lockstep import assert_same_steps

# The offset shapes of the serial stencil tests (2, 2) and (1, 1), and a torus tall enough for
# rows that pay in their own range while their run is in cache (two torus rows from the bound).
SPECS = ["torus:6x6", "torus:5x7", "torus:8x8", "torus:12x12", "torus:10x40", "ring:7", "ring:16", "ring:60"]


def _forced(spec):
    g = make_graph(spec)
    s = find_stencil(g, min_coverage=0.0)
    assert s is not None
    return g, s


def _swapped_torus():
    """torus:12x12 with the edges (50, 62) and (0, 12) swapped for (0, 62) and (12, 50): still 4-regular.

    Row 62 then has its neighbour 0 far below: cut in 3 (bounds 0, 48, 96, 144) it is a CSR row
    of chunk 1 that reads its transfers in phase 2, and the run row 74 above it (``62 + W``) is
    far enough from the bounds to pay in phase 1 but for ``far`` (a receiver that has not read).
    """
    t = make_graph("torus:12x12")
    edges = set(zip(t.u.tolist(), t.v.tolist())) - {(50, 62), (0, 12)} | {(0, 62), (12, 50)}
    return Graph.from_edges(t.n, np.array(sorted(edges)), spec="torus:12x12 with two edges swapped")


def _compare(g, s, seed, chunks, speeds, first, owed_stored, has_exc, pay_iou):
    """The threaded kernel against the serial one from one random state: every output equal."""
    n, m, rng = g.n, g.m, np.random.default_rng(seed)
    a0 = 1.0 / (2.0 * s.degree)
    starts, ends, delta = lower_edge_runs(s, g.csr_edges)
    w = rng.integers(0, 8, n)
    x = w / rng.uniform(0.5, 3.0, n) if speeds else w
    beta = float(rng.uniform(1.0, 1.99))
    yhat, iou = rng.normal(0.0, 3.0, m), rng.normal(0.0, 2.0, m)
    # Random bits everywhere, the padding bits after edge m - 1 included (both kernels keep them);
    # sparse or dense, so that runs take both paths of _run_upper.
    density = (0.04, 0.5)[(seed >> 1) % 2] if has_exc else 0.0
    bits = np.packbits(rng.random(8 * ((m + 7) // 8)) < density, bitorder="little")
    cut = stencil_chunks(starts, ends, s.lower, s.upper, delta, g.indptr, g.indices, g.u, chunks)
    results = []
    for threaded in (False, True):
        y, io, b = yhat.copy(), iou.copy(), bits.copy()
        out, owe = np.zeros(n, np.int64), np.empty(n)
        tail = (beta, first, owed_stored, has_exc, b, pay_iou, x, w, y, io, out, owe)
        if threaded:
            r = sos_iou_stencil_par(g.indptr, g.indices, g.csr_edges, *cut, a0, *tail)
        else:
            r = sos_iou_stencil(g.indptr, g.indices, g.csr_edges, starts, ends, s.lower, s.upper, delta, a0, *tail)
        results.append((r, y, io, b, out, owe))
    (r1, *a1), (r2, *a2) = results
    assert r1 == r2
    assert all(np.array_equal(p, q) for p, q in zip(a1, a2))
    return r1


# Integer loads as the weighted loads x (unit speeds), as in the protocol tests below: each further
# type signature compiles the parallel kernel again (about 30-40 s with a cold numba cache). With
# speeds x is a float array; the code is the same generic code (the serial stencil kernel, which
# shares its loops, is tested with both in test_heterogeneous_stencil.py).
@settings(max_examples=60, deadline=None)
@given(spec=st.sampled_from(SPECS), seed=st.integers(0, 2**31), chunks=st.integers(1, 9), first=st.booleans(),
       owed_stored=st.booleans(), has_exc=st.booleans(), pay_iou=st.booleans())
def test_theorem1_sos_iou_threaded_stencil_kernel_equals_serial(spec, seed, chunks, first, owed_stored, has_exc,
                                                                 pay_iou):
    g, s = _forced(spec)
    _compare(g, s, seed, chunks, False, first, owed_stored, has_exc, pay_iou)


def test_theorem1_sos_iou_threaded_stencil_row_whose_receiver_reads_late_pays_after():
    g = _swapped_torus()
    s = find_stencil(g, min_coverage=0.0)
    starts, ends, delta = lower_edge_runs(s, g.csr_edges)
    assert s.lower == (-12, -1) and any(p <= 74 < q for p, q in zip(starts, ends))
    assert stencil_chunks(starts, ends, s.lower, s.upper, delta, g.indptr, g.indices, g.u, 3)[12].tolist() == [
        48, 62, 132]  # 132: the last torus row, wrapping around to row 0
    shorts = 0
    for seed in range(40):
        shorts += _compare(g, s, seed, 3, False, False, True, seed % 2 == 0, True)[1]
    assert shorts > 0


@pytest.mark.parametrize("spec,chunks", [("torus:12x12", 1), ("torus:12x12", 5), ("torus:10x40", 8), ("ring:60", 3),
                                         ("ring:7", 9)])
def test_stencil_chunks_cut_the_runs_at_the_bounds(spec, chunks):
    g, s = _forced(spec)
    starts, ends, delta = lower_edge_runs(s, g.csr_edges)
    (st_, en, run_edges, lower, upper, d, reach, up_reach, edge_low, bounds, chunk_runs, chunk_edges,
     far) = stencil_chunks(starts, ends, s.lower, s.upper, delta, g.indptr, g.indices, g.u, chunks)
    n = g.n
    assert bounds[0] == 0 and bounds[-1] == n and np.all(np.diff(bounds) >= 0) and len(bounds) == chunks + 1
    # The same rows, in runs that no bound cuts.
    rows = lambda a, b: sorted(i for p, q in zip(a, b) for i in range(p, q))  # noqa: E731
    assert rows(st_, en) == rows(starts, ends)
    for p, q in zip(st_, en):
        c = np.searchsorted(bounds, p, side="right") - 1
        assert bounds[c] <= p < q <= bounds[c + 1]
        assert chunk_runs[c] <= np.searchsorted(st_, p) < chunk_runs[c + 1]
    # Each run's first upper edge and each chunk's first edge: the edges whose lower end is below.
    assert [int(np.sum(g.u < p)) for p in st_] == run_edges.tolist()
    assert [int(np.sum(g.u < b)) for b in bounds] == chunk_edges.tolist()
    assert (reach, up_reach, edge_low) == (-min(s.lower), max(s.upper), min(delta))
    # far[c]: the first row from bounds[c] + reach on, outside the runs, with a neighbour before c.
    in_run = {i for p, q in zip(st_, en) for i in range(p, q)}
    for c in range(chunks):
        lo, hi = bounds[c], bounds[c + 1]
        wrap = [i for i in range(lo + reach, hi) if i not in in_run and g.indices[g.indptr[i]:g.indptr[i + 1]].min() < lo]
        assert far[c] == (wrap[0] if wrap else hi)


@pytest.mark.parametrize("spec", ["torus:12x12", "torus:40x30", "ring:50"])
def test_theorem1_sos_iou_protocol_threads_equals_serial_on_stencil(spec):
    g = make_graph(spec)
    rng = np.random.default_rng(1)
    loads = rng.integers(0, 5, g.n)
    loads[3] += 5000
    serial = make_protocol("sos-iou", {"kernel": "numba"})
    threaded = make_protocol("sos-iou", {"kernel": "numba", "threads": 2})
    assert_same_steps(serial, threaded, loads, 40, g)
    assert serial._stencil_val is not None and threaded._chunks_val is not None  # both stencil paths ran
    assert serial.events > 0 and serial.report() == threaded.report()
