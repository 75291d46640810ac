"""The numba kernels of the randomised modern rules against their numpy reference steps.

``stratified-diffusion``, ``random-matching``, ``randomized-diffusion`` and ``pairwise-averaging``
draw their coins counter-based (``counter_uniform(key, t, index)``), so a kernel that computes the
same draws must give the same run bit for bit: loads at every step, tokens moved, messages. Each
is compared on the graph zoo of ``test_modern_kernels`` with several seeds and every parameter that
changes what the kernel computes; ``tests/protocols/test_every_variant.py`` runs them with their
defaults on the whole zoo.
"""

import numpy as np
import pytest

from tokendist.engine import simulate
from tokendist.protocols.modern import _matching, _randomized_diffusion

from .test_modern_kernels import GRAPHS

SEEDS = (1, 9, 2024)
INITS = ("random:0..60", "point:500")  # point: a few rows full, the others empty


def _assert_pair(spec, algo, params, *, seed, init, steps=25, **kw):
    kw = dict(seed=seed, max_steps=steps, keep_loads_every=1, detect_cycles=False, **kw)
    ref = simulate(spec, algo, init, params=dict(params, kernel="numpy"), **kw)
    run = simulate(spec, algo, init, params=dict(params, kernel="numba"), **kw)  # named: never the small-run reference
    assert set(ref.variants) == {"reference"}, ref.variants
    assert all(v.startswith("csr") for v in run.variants), run.variants
    np.testing.assert_array_equal(run.load_history, ref.load_history, err_msg=f"{spec} {params} {run.variants}")
    assert run.tokens_moved == ref.tokens_moved
    assert run.messages == ref.messages
    assert run.infeasible_steps == ref.infeasible_steps
    return ref, run


@pytest.mark.parametrize("spec", GRAPHS)
@pytest.mark.parametrize("params", [{}, {"order": "self-last"}, {"matrix": "max-degree"},
                                    {"matrix": "uniform:1/8", "order": "self-last"}])
def test_stratified_kernel_equals_reference(spec, params):
    for seed in SEEDS:
        for init in INITS:
            _assert_pair(spec, "stratified-diffusion", params, seed=seed, init=init)


@pytest.mark.parametrize("spec", GRAPHS + ["ring:9", "random-tree:12"])
@pytest.mark.parametrize("params", [{}, {"excess": "heavier"}, {"p": "0.3"}, {"drawing": "active-passive"},
                                    {"drawing": "active-passive", "excess": "heavier"}])
def test_random_matching_kernel_equals_reference(spec, params):
    for seed in SEEDS:
        for init in INITS:
            # check=True: the engine verifies the single-port model from the flows the kernel reports.
            _assert_pair(spec, "random-matching", params, seed=seed, init=init, check=True)


@pytest.mark.parametrize("spec", GRAPHS + ["complete:30", "complete:40", "star:40"])  # 40, 41 slots: sorted
@pytest.mark.parametrize("denominator", ["max-degree+1", "2max-degree"])
def test_randomized_diffusion_kernel_equals_reference(spec, denominator):
    for seed in SEEDS:
        for init in INITS:
            _assert_pair(spec, "randomized-diffusion", {"denominator": denominator}, seed=seed, init=init)


@pytest.mark.parametrize("spec", ["torus:5x5", "random-regular:40,3", "star:6"])
def test_randomized_diffusion_kernel_without_its_mix_table_equals_reference(spec, monkeypatch):
    # Past _MIX_TABLE_SLOTS slots the kernel computes each slot's index mix instead of reading it from
    # its table: the same draws. (The graphs above all have tables; this one forces the other path.)
    monkeypatch.setattr(_randomized_diffusion, "_MIX_TABLE_SLOTS", 0)
    for seed in SEEDS:
        for init in INITS:
            _assert_pair(spec, "randomized-diffusion", {}, seed=seed, init=init)


@pytest.mark.parametrize("params", [{}, {"drawing": "active-passive"}])
def test_random_matching_kernel_without_its_mix_table_equals_reference(params, monkeypatch):
    # Past _MIX_TABLE_EDGES edges the kernel computes each edge's index mix instead of reading it from
    # its table: the same matchings and coins.
    monkeypatch.setattr(_matching, "_MIX_TABLE_EDGES", 0)
    for spec in ("torus:5x5", "random-regular:40,3"):
        for seed in SEEDS:
            _assert_pair(spec, "random-matching", params, seed=seed, init="random:0..60", check=True)


def test_randomized_diffusion_kernel_with_loads_past_2_to_53():
    # Loads of 2**53 and more: the kernel splits them by an integer division (below, by a float
    # reciprocal, exact there only): the same shares either way.
    _assert_pair("torus:5x5", "randomized-diffusion", {}, seed=4, init=f"point:{2**60 + 3}")
    _assert_pair("hypercube:4", "randomized-diffusion", {}, seed=4, init=f"random:{2**53 - 40}..{2**53 + 40}")


@pytest.mark.parametrize("spec", GRAPHS)
@pytest.mark.parametrize("excess", ["random", "heavier"])
def test_pairwise_averaging_kernel_equals_reference(spec, excess):
    for seed in SEEDS:
        for init in INITS:
            _assert_pair(spec, "pairwise-averaging", {"excess": excess}, seed=seed, init=init, steps=60)


def test_stratified_kernel_with_large_loads():
    # Loads far above the degree: every boundary's token index k is large, the draw's index u 2^32 + k.
    _assert_pair("torus:6x6", "stratified-diffusion", {}, seed=4, init="random:0..3000000000")


def test_kernels_move_tokens_and_keep_them():
    # The comparison is not vacuous: every rule moves tokens on these runs, and conserves them.
    for algo in ("stratified-diffusion", "random-matching", "randomized-diffusion", "pairwise-averaging"):
        ref, run = _assert_pair("torus:5x5", algo, {}, seed=9, init="random:0..60")
        assert run.tokens_moved > 0
        assert run.load_history.sum(axis=1).tolist() == [int(ref.load_history[0].sum())] * len(run.load_history)
