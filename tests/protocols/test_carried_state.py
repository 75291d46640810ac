"""Which process the state carried between steps belongs to (Elsässer, Monien, Schamberger 2006).

sos-iou's readings answer this for its IOUs (``test_sos_iou_readings.py``). The other integer
schemes of the paper that carry anything from step to step:

* ``random-walk``, phase 1 (Sec. 3): the carried state is the *estimate*, and it belongs to the
  idealised real-valued FOS process on its own divisible copy of the initial loads (eq. (3)), never
  to the integer process: it is ``fos`` from the same start, bit for bit (numpy reference; the
  numba kernels to rounding). The integer flows carry nothing: each step is ``fos-floor``'s step
  from the current integer loads, so phase 1's loads are ``fos-floor``'s, bit for bit.
* ``fos-floor`` under speeds (Sec. 1, Sec. 4): no per-edge or per-node state at all; each step's
  flow ``trunc(c_ij (w_i/s_i - w_j/s_j))`` belongs to the integer process of that step alone, so a
  fresh protocol started from the loads of step k takes exactly the step the running one takes.
"""

import numpy as np
import pytest

from tokendist.engine import make_protocol
from tokendist.graphs import make_graph

def _graph(spec, seed=0):
    g = make_graph(spec, seed=seed)
    return g.with_speeds(np.random.default_rng(seed + 1).uniform(1.0, 3.0, g.n))


@pytest.mark.parametrize("kernel", ["numpy", "numba"])
@pytest.mark.parametrize("spec", ["torus:8x6", "gnp:30,0.2"])
def test_random_walk_phase1_estimate_is_the_real_fos_process(kernel, spec):
    g = _graph(spec)
    w0 = np.random.default_rng(2).integers(0, 300, g.n)
    rw = make_protocol("random-walk", {"kernel": kernel, "switch": "step", "switch_step": 10_000})
    fos = make_protocol("fos", {"kernel": "numpy"})
    floor = make_protocol("fos-floor", {"kernel": "numpy"})
    rw.reset(g, w0.copy(), np.random.default_rng(0))
    fos.reset(g, w0.astype(np.float64), np.random.default_rng(0))
    floor.reset(g, w0.copy(), np.random.default_rng(0))
    w, x, v = w0.copy(), w0.astype(np.float64), w0.copy()
    for t in range(60):
        w = rw.step(t, g, w).loads
        x = fos.step(t, g, x).loads
        v = floor.step(t, g, v).loads
        # The carried estimate: the idealised FOS process, never the integer loads.
        if kernel == "numpy":
            np.testing.assert_array_equal(rw.estimate, x)
        else:
            np.testing.assert_allclose(rw.estimate, x, rtol=1e-12, atol=1e-9)
        # The integer flows carry nothing: fos-floor's step from the same integer loads.
        np.testing.assert_array_equal(w, v)
    assert rw.phase == 1
    assert not np.array_equal(np.rint(x), w)  # the two processes did part (the rounding error of phase 1)


@pytest.mark.parametrize("kernel", ["numpy", "numba"])
def test_fos_floor_under_speeds_carries_no_state(kernel):
    g = _graph("torus:7x5", seed=3)
    w = np.random.default_rng(4).integers(0, 500, g.n)
    running = make_protocol("fos-floor", {"kernel": kernel})
    running.reset(g, w.copy(), np.random.default_rng(0))
    for t in range(40):
        fresh = make_protocol("fos-floor", {"kernel": kernel})
        fresh.reset(g, w.copy(), np.random.default_rng(0))
        a, b = running.step(t, g, w), fresh.step(0, g, w)
        np.testing.assert_array_equal(a.loads, b.loads)  # only this step's integer loads decide the flows
        assert running.state_key() == b""
        w = a.loads.copy()

