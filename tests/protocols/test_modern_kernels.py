"""The numba kernels of ``flow-imitation``, ``balancing-circuit``, ``quasirandom`` against their numpy references.

``tests/protocols/test_every_variant.py`` runs each with its defaults on the zoo; here every
parameter that changes what the kernel computes: the continuous process flow-imitation imitates
(fos, sos, circuit, random-matching), its guard, the diffusion matrix, node speeds, point loads
(where the guard holds tokens back), and balancing-circuit's excess rule. Loads at every step,
tokens moved and the reports (tokens held back, the largest ``|F - D|``) must be equal, bit for bit.
"""

import numpy as np
import pytest

from tokendist.engine import make_protocol, simulate
from tokendist.engine._cycles import state_bytes
from tokendist.errors import TokendistError
from tokendist.graphs import make_graph
from tokendist.protocols.modern._quasirandom import error_dtype

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


@pytest.mark.parametrize("spec", ["torus:8x8", "torus:9x16"])
@pytest.mark.parametrize("process", ["fos", "sos"])
@pytest.mark.parametrize("guard", ["on", "off"])
def test_flow_imitation_stencil_kernel_equals_reference(spec, process, guard):
    # Tori with an offset stencil: the pull kernel (D kept implicit while D = trunc(F)) runs, and on
    # the steps where some node owes more than it holds the general kernel takes over; both count.
    for init in ("random:0..60", "random:0..3", "point:500"):
        params = dict(process=process, guard=guard)
        ref, run = _pair(spec, "flow-imitation", init, params, allow_infeasible=guard == "off")
        assert "stencil, serial (flow_imitation_stencil_step)" in run.variants, run.variants
        np.testing.assert_array_equal(run.load_history, ref.load_history, err_msg=str(run.variants))
        assert run.tokens_moved == ref.tokens_moved
        assert run.report == ref.report
        assert run.infeasible_steps == ref.infeasible_steps


def test_flow_imitation_stencil_hands_binding_steps_to_the_general_kernel():
    # SOS from a point load: nodes at the front owe more than they hold, the guard holds tokens back.
    # Those steps run the general kernel (the pull kernel's outputs are discarded, its inputs untouched);
    # once a step pays every edge in full, D = trunc(F) again and the pull kernel resumes.
    ref, run = _pair("torus:8x8", "flow-imitation", "point:500", {"process": "sos", "beta": "1.9"})
    assert run.report["held_back"] == ref.report["held_back"] > 0
    assert set(run.variants) == {"stencil, serial (flow_imitation_stencil_step)",
                                 "csr, serial (flow_imitation_step_uniform)"}, run.variants
    np.testing.assert_array_equal(run.load_history, ref.load_history)


def test_flow_imitation_stencil_state_is_the_references():
    # The state the pull kernel leaves (D implicit, buffers swapped) is the reference's, bit for bit,
    # whenever it is read between steps: D, F, xi, and the cycle-detection key built from them.
    g = make_graph("torus:9x8")
    rng = np.random.default_rng(3)
    loads = rng.integers(0, 40, g.n).astype(np.int64)
    protos = [make_protocol("flow-imitation", {"process": "sos", "kernel": k}) for k in ("numpy", "numba")]
    for p in protos:
        p.reset(g, loads, np.random.default_rng(0))
    cur = [loads.copy(), loads.copy()]
    for t in range(30):
        for k, p in enumerate(protos):
            cur[k] = np.asarray(p.step(t, g, cur[k]).loads).copy()
        np.testing.assert_array_equal(cur[0], cur[1])
        states = [(p.D.copy(), p.F.copy(), p.xi.copy(), state_bytes(p.state_key())) for p in protos]
        np.testing.assert_array_equal(states[0][0], states[1][0])
        assert states[0][1].tobytes() == states[1][1].tobytes() and states[0][2].tobytes() == states[1][2].tobytes()
        assert states[0][3] == states[1][3]


@pytest.mark.parametrize("spec", ["torus:8x8", "hypercube:4"])  # the stencil kernel, the general one
def test_flow_imitation_state_key_leaves_d_out_exactly_when_d_is_trunc_f(spec):
    # The cycle key is F and xi while D = trunc(F) on every edge (D then follows from F), else D, F
    # and xi: the same form in every variant, at every step, including the steps where the guard
    # holds tokens back (D behind trunc(F)) and those after, when every edge is paid up again.
    g = make_graph(spec)
    loads = np.zeros(g.n, dtype=np.int64)
    loads[0] = 500  # SOS from a point load: the front owes more than it holds
    params = {"process": "sos", "beta": "1.9"}
    protos = [make_protocol("flow-imitation", dict(params, kernel=k)) for k in ("numpy", "numba")]
    for p in protos:
        p.reset(g, loads, np.random.default_rng(0))
    cur = [loads.copy() for _ in protos]
    forms = set()
    for t in range(40):
        for k, p in enumerate(protos):
            cur[k] = np.asarray(p.step(t, g, cur[k]).loads).copy()
        keys = []
        for p in protos:
            keys.append(state_bytes(p.state_key()))  # (before D is read: the stencil kernel leaves it to be brought up to date)
            lagging = not np.array_equal(p.D, np.trunc(p.F))
            assert keys[-1] == (p.D.tobytes() if lagging else b"") + p.F.tobytes() + p.xi.tobytes()
        forms.add(lagging)
        assert keys[0] == keys[1]
    assert forms == {True, False}  # both forms met: the guard held tokens back on some steps, not on others
    assert protos[1].report()["held_back"] > 0


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


@pytest.mark.parametrize("spec", ["torus:8x8", "torus:9x16", "torus:10x10x10", "ring:40"])
@pytest.mark.parametrize("matrix", ["degree", "max-degree"])
@pytest.mark.parametrize("ties", ["up", "down"])
def test_quasirandom_stencil_kernel_equals_reference(spec, matrix, ties):
    # Tori: the stencil kernel runs (q = 2d a power of two: shift and mask; max-degree q = d + 1: the
    # float split); small loads make nodes overdraw, so the guard's undo in the runs is exercised.
    for init in ("random:0..60", "random:0..4"):
        ref, run = _pair(spec, "quasirandom", init, {"matrix": matrix, "ties": ties})
        assert set(run.variants) == {"stencil, serial (quasirandom_stencil_step)"}, run.variants
        np.testing.assert_array_equal(run.load_history, ref.load_history)
        assert run.tokens_moved == ref.tokens_moved
        assert run.report == ref.report
    assert run.report["held_back"] > 0 or ties == "down"


def test_quasirandom_errors_in_the_narrowest_type():
    # One byte per directed edge on a torus (q = 8), and the error in tokens is the same as ever.
    assert error_dtype(8) == np.int8 and error_dtype(63) == np.int8
    assert error_dtype(64) == np.int16 and error_dtype(16383) == np.int16 and error_dtype(16384) == np.int32
    g = make_graph("torus:6x6")
    p = make_protocol("quasirandom")
    p.reset(g, np.full(g.n, 7, dtype=np.int64), np.random.default_rng(0))
    assert p.err_units.dtype == np.int8
    p.step(0, g, np.full(g.n, 7, dtype=np.int64))
    np.testing.assert_array_equal(p.err, p.err_units.astype(np.int64) / 8)


@pytest.mark.parametrize("spec", ["torus:8x8", "torus:4x4", "random-regular:20,3", "star:5"])
@pytest.mark.parametrize("kernel", ["numba", "numpy"])
def test_quasirandom_refuses_an_error_its_type_cannot_hold(spec, kernel):
    # The guard is the only step that raises an error above q/2: if the value it stores would wrap
    # in the narrow type, the step refuses (one-line TokendistError), it never continues wrongly.
    g = make_graph(spec, seed=1)
    p = make_protocol("quasirandom", {"kernel": kernel})
    loads = np.ones(g.n, dtype=np.int64)
    p.reset(g, loads.copy(), np.random.default_rng(0))
    p.err_units[:] = np.iinfo(p.err_units.dtype).max  # every slot rounds up; x = 1 cannot pay them
    with pytest.raises(TokendistError, match="range"):
        p.step(0, g, loads)
