"""Small runs take the numpy reference step instead of compiling a kernel, with the same results.

The rule (tokendist.kernels._choice.reference_is_cheaper) and the switch in the engine: a run whose
kernel is neither compiled nor cached, and that would cost less on the reference than compiling,
runs the reference from its start; everything but ``seconds`` and ``variants`` is the kernel's run.
"""

import numpy as np
import pytest

import tokendist as td
from tokendist.engine import PROTOCOLS, make_protocol
from tokendist.kernels import _report
from tokendist.kernels._choice import (COMPILE_SECONDS, REFERENCE_NODE_SECONDS, REFERENCE_STEP_SECONDS,
                                       reference_is_cheaper, reference_seconds)
from tokendist.graphs import make_graph

from ..conftest import zoo_for


@pytest.fixture(autouse=True)
def small_run_rule(monkeypatch):
    monkeypatch.setenv("TOKENDIST_SMALL_RUN_REFERENCE", "1")  # the suite turns it off (tests/conftest.py)

#: Protocols whose kernels the rule may skip: a kernel parameter with a numpy reference that gives the
#: kernels' run (integer loads unless declared otherwise; real-valued loads where declared).
SWITCHABLE = [name for name, cls in PROTOCOLS.items()
              if getattr(cls, "reference_exact", not cls.divisible)
              and any(p.name == "kernel" and "numpy" in (p.choices or ()) for p in cls.params)]


def test_the_rule_weighs_the_reference_run_against_one_compilation(monkeypatch):
    per_step = REFERENCE_STEP_SECONDS + 256 * REFERENCE_NODE_SECONDS
    assert reference_seconds(256, 10_000) == pytest.approx(10_000 * per_step)
    torus = make_graph("torus:16x16")
    # The default scenario of tokendist compare: every run costs less on the reference than one compilation.
    assert reference_seconds(torus.n, 10_000) <= COMPILE_SECONDS
    assert reference_is_cheaper(make_protocol("multi-port", {}), torus, 10_000)
    # Longer runs, larger graphs: compiling pays.
    assert not reference_is_cheaper(make_protocol("multi-port", {}), torus, 100_000)
    assert not reference_is_cheaper(make_protocol("multi-port", {}), make_graph("torus:256x256"), 1_000)
    # Real-valued loads: where the numpy step adds in the serial kernel's order (declared), not with
    # threads (another order); random-walk's report likewise.
    assert reference_is_cheaper(make_protocol("diffusion", {}), torus, 10)
    assert not reference_is_cheaper(make_protocol("diffusion", {"threads": "2"}), torus, 10)
    assert reference_is_cheaper(make_protocol("random-walk", {}), torus, 10)
    assert not reference_is_cheaper(make_protocol("random-walk", {"threads": "2"}), torus, 10)
    # The reference asked for, or a protocol without compiled kernels: nothing to decide.
    assert not reference_is_cheaper(make_protocol("multi-port", {"kernel": "numpy"}), torus, 10)
    assert not reference_is_cheaper(make_protocol("perfect-tree", {}), make_graph("kary:2,3"), 10)
    # A reference that moves tokens differently (relayed edges), or the rule switched off.
    assert reference_is_cheaper(make_protocol("diffusion-oriented", {}), torus, 10)
    assert not reference_is_cheaper(make_protocol("diffusion-oriented", {}), make_graph("random-tree:30"), 10)
    monkeypatch.setenv("TOKENDIST_SMALL_RUN_REFERENCE", "0")
    assert not reference_is_cheaper(make_protocol("multi-port", {}), torus, 10)


def _spec(cls):
    return "torus:6x6" if "torus:4x4" in zoo_for(cls) else zoo_for(cls)[0]


def _comparable(r):
    return {k: v for k, v in r.to_json().items() if k not in ("seconds", "variants")}


@pytest.mark.parametrize("name", SWITCHABLE)
def test_the_small_run_path_gives_the_kernels_run(name, monkeypatch):
    cls = PROTOCOLS.get(name)
    spec = _spec(cls)
    kw = dict(seed=4, max_steps=150, allow_infeasible=cls.may_go_negative)
    kernel = td.simulate(spec, name, "random:0..60", params={"kernel": "numba"}, **kw)
    assert any(v != "reference" and not v.startswith("numpy") for v in kernel.variants), kernel.variants
    # Every kernel taken as cold: the run takes the reference and says why.
    monkeypatch.setattr(_report, "kernel_ready", lambda kernel, args: False)
    small = td.simulate(spec, name, "random:0..60", **kw)
    assert all("instead of compiling" in v for v in small.variants), small.variants
    assert sum(small.variants.values()) == small.steps
    assert _comparable(small) == _comparable(kernel)
    np.testing.assert_array_equal(small.loads, kernel.loads)
    for key, column in kernel.trace.items():
        np.testing.assert_array_equal(small.trace[key], column, err_msg=key)
    assert small.params["kernel"] == "numba"  # the parameter as given; variants say what ran


def test_a_compiled_kernel_keeps_running_on_small_runs():
    first = td.simulate("torus:6x6", "multi-port", "random:0..60", seed=2, max_steps=20, params={"kernel": "numba"})
    again = td.simulate("torus:6x6", "multi-port", "random:0..60", seed=2, max_steps=20)
    assert again.variants == first.variants  # compiled in this process: nothing to avoid


def test_a_named_kernel_is_obeyed(monkeypatch):
    monkeypatch.setattr(_report, "kernel_ready", lambda kernel, args: False)  # every kernel taken as cold
    named = td.simulate("torus:6x6", make_protocol("multi-port", {"kernel": "numba"}), "random:0..60", seed=2,
                        max_steps=20)
    assert named.variants and not any("reference" in v or v.startswith("numpy") for v in named.variants)
    left = td.simulate("torus:6x6", make_protocol("multi-port", {}), "random:0..60", seed=2, max_steps=20)
    assert all("instead of compiling" in v for v in left.variants)
