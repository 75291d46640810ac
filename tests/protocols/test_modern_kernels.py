"""The numba kernels of ``flow-imitation`` and ``balancing-circuit`` against their numpy reference steps.

``tests/protocols/test_every_variant.py`` runs each with its defaults on the zoo; here every
parameter that changes what the kernel computes: the continuous process flow-imitation imitates
(fos, sos, circuit, random-matching), its guard, the diffusion matrix, node speeds, point loads
(where the guard holds tokens back), and balancing-circuit's excess rule. Loads at every step,
tokens moved and the reports (tokens held back, the largest ``|F - D|``) must be equal, bit for bit.
"""

import numpy as np
import pytest

from tokendist.engine import simulate

GRAPHS = ["path:7", "star:6", "grid:3x4", "torus:5x5", "hypercube:3", "complete:5", "random-regular:40,3"]


def _pair(spec, algo, init, params, **kw):
    kw = dict(seed=9, max_steps=30, keep_loads_every=1, detect_cycles=False, **kw)
    ref = simulate(spec, algo, init, params=dict(params, kernel="numpy"), **kw)
    run = simulate(spec, algo, init, params=dict(params, kernel="numba"), **kw)  # named: never the small-run reference
    return ref, run


def _assert_same(ref, run):
    assert all(v.startswith("csr") for v in run.variants), run.variants
    np.testing.assert_array_equal(run.load_history, ref.load_history, err_msg=str(run.variants))
    assert run.tokens_moved == ref.tokens_moved
    assert run.report == ref.report
    assert run.infeasible_steps == ref.infeasible_steps


@pytest.mark.parametrize("spec", GRAPHS)
@pytest.mark.parametrize("process", ["fos", "sos", "circuit", "random-matching"])
@pytest.mark.parametrize("guard", ["on", "off"])
def test_flow_imitation_kernel_equals_reference(spec, process, guard):
    for init in ("random:0..60", "point:50"):  # point loads: nodes owe more than they hold
        for speeds in (None, "uniform:1..4"):
            params = dict(process=process, guard=guard, matrix="max-degree" if speeds else "degree")
            ref, run = _pair(spec, "flow-imitation", init, params, speeds=speeds, allow_infeasible=guard == "off")
            _assert_same(ref, run)


def test_flow_imitation_guard_holds_tokens_back_in_the_kernel():
    # The case the guard exists for (a node owing more than it holds) is exercised, not only reachable.
    ref, run = _pair("torus:5x5", "flow-imitation", "point:50", {"process": "sos", "beta": "1.9"})
    _assert_same(ref, run)
    assert run.report["held_back"] > 0


def test_flow_imitation_uniform_matrix():
    ref, run = _pair("torus:6x6", "flow-imitation", "random:0..100", {"matrix": "uniform:1/5"})
    _assert_same(ref, run)


@pytest.mark.parametrize("spec", GRAPHS + ["ring:9", "random-tree:12"])
@pytest.mark.parametrize("excess", ["random", "heavier"])
def test_balancing_circuit_kernel_equals_reference(spec, excess):
    # check=True: the engine verifies the single-port model from the flows the kernel reports.
    ref, run = _pair(spec, "balancing-circuit", "random:0..60", {"excess": excess}, check=True)
    _assert_same(ref, run)
    assert run.messages == ref.messages


@pytest.mark.parametrize("ties", ["up", "down"])
def test_quasirandom_reference_counts_the_tokens_its_guard_holds_back(ties):
    # Few tokens a node (loads below the degree): the guard takes tokens back, in both forms alike.
    ref, run = _pair("torus:6x5", "quasirandom", "random:0..4", {"ties": ties})
    np.testing.assert_array_equal(run.load_history, ref.load_history)
    assert run.report == ref.report
    assert ties == "down" or run.report["held_back"] > 0
