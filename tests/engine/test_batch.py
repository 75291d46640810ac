"""Blocks of steps in one compiled call (engine/_batch.py) give the run of one step at a time.

Every protocol with :meth:`Protocol.steps` is run both ways (``BLOCK_STEPS`` 0: step by step) and
every trace column but the clock, the loads, the totals, the stop and the variants must agree;
a toy protocol with a Python ``steps`` puts an infeasible step, a broken conservation and a fixed
point inside a block.
"""

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import tokendist as td
import tokendist.engine._batch as batch
import tokendist.engine._pass as pass_module
import tokendist.engine._simulate as simulate_module
import tokendist.kernels._report as report
from tokendist.engine import Protocol, Step
from tokendist.engine._pass import SIGN, StepPass
from tokendist.errors import ConservationError, InfeasibleStepError, TokendistError
from tokendist.graphs import make_graph

BATCHED = ["randomized-diffusion", "random-matching", "balancing-circuit", "stratified-diffusion",
           "pairwise-averaging", "single-port", "diffusion-random"]
GRAPHS = ["torus:4x4", "ring:9", "star:6", "grid:3x4", "hypercube:3", "path:7", "complete:5", "torus:16x16"]


def _run(k, *args, **kwargs):
    """simulate with blocks of k steps (0: step by step); also says whether blocks ran steps."""
    calls = []
    real = simulate_module.run_blocks

    def spy(*a, **kw):
        out = real(*a, **kw)
        calls.extend([1] * (out[0] > 0))
        return out

    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(batch, "BLOCK_STEPS", k)
        mp.setattr(simulate_module, "run_blocks", spy)
        return td.simulate(*args, **kwargs), bool(calls)


def assert_same_run(a, b):
    assert (a.steps, a.stop_reason, a.tokens_moved, a.messages, a.infeasible_steps) == \
        (b.steps, b.stop_reason, b.tokens_moved, b.messages, b.infeasible_steps)
    assert np.array_equal(a.loads, b.loads)
    assert a.trace.keys() == b.trace.keys()
    for name in a.trace:
        assert np.array_equal(a.trace[name], b.trace[name]), name
    assert (a.initial, a.final, a.report, a.variants) == (b.initial, b.final, b.report, b.variants)
    assert len(a.clock) == len(b.clock) and np.all(np.diff(b.clock) >= 0)


@settings(max_examples=60, deadline=None)
@given(algo=st.sampled_from(BATCHED), spec=st.sampled_from(GRAPHS), top=st.sampled_from([0, 1, 3, 50, 1000]),
       seed=st.integers(0, 2**32), k=st.integers(1, 70), max_steps=st.integers(0, 300),
       record_every=st.integers(1, 7), allow=st.booleans())
def test_blocks_give_the_run_of_single_steps(algo, spec, top, seed, k, max_steps, record_every, allow):
    kw = dict(seed=seed, max_steps=max_steps, record_every=record_every, allow_infeasible=allow)
    try:
        one, _ = _run(0, spec, algo, f"random:0..{top}", **kw)
    except InfeasibleStepError as exc:  # (the random rounding can send more than a node holds)
        with pytest.raises(InfeasibleStepError) as again:
            _run(k, spec, algo, f"random:0..{top}", **kw)
        assert str(again.value) == str(exc)
        return
    blocks, used = _run(k, spec, algo, f"random:0..{top}", **kw)
    # (single-port and diffusion-random have blocks where they run their stencil kernels, as on
    # torus:8x8 below; the random rounding leaves a step that sends more than a node holds to step())
    if algo not in ("single-port", "diffusion-random"):
        assert used == (max_steps > 0)
    assert_same_run(one, blocks)


@pytest.mark.parametrize("algo", BATCHED)
def test_max_steps_not_a_multiple_of_the_block(algo):
    one, _ = _run(0, "torus:8x8", algo, "random:0..100", seed=3, max_steps=150)
    blocks, used = _run(64, "torus:8x8", algo, "random:0..100", seed=3, max_steps=150)
    assert used and blocks.steps == 150 and sum(blocks.variants.values()) == 150
    assert_same_run(one, blocks)


def test_modern_randomized_variants_name_the_step_kernel():
    blocks, used = _run(64, "torus:8x8", "balancing-circuit", "random:0..100", seed=3, max_steps=100)
    assert used and blocks.variants == {"csr, serial (circuit_step)": 100}


def test_targets_stop_at_the_same_step():
    # (a run with a target goes step by step: the target is checked after every step)
    kw = dict(seed=1, max_steps=5000, until_discrepancy=4)
    one, _ = _run(0, "torus:8x8", "random-matching", "point:640", **kw)
    blocks, used = _run(64, "torus:8x8", "random-matching", "point:640", **kw)
    assert not used and blocks.stop_reason == "target-reached"
    assert_same_run(one, blocks)


@pytest.mark.parametrize("algo", ["random-matching", "balancing-circuit", "pairwise-averaging"])
def test_negative_loads_decline_blocks_of_averaging_protocols(algo):
    # Their exchanges are feasible only from loads >= 0 (each end keeps the floor or the ceiling of
    # the mean), which the engine's block check (the sign of the loads) takes for granted: a block
    # from a negative load (an earlier infeasible step) is declined, and nothing is changed.
    g = make_graph("torus:4x4", seed=0)
    p = td.engine.make_protocol(algo, {})
    loads = np.full(16, 5, dtype=np.int64)
    p.reset(g, loads.copy(), np.random.default_rng(0))
    block, moved, messages = np.zeros((8, 16), np.int64), np.zeros(8, np.int64), np.zeros(8, np.int64)
    assert p.steps(0, 8, g, loads, block, moved, messages, False)[0] == 8
    loads[3] = -1
    block[:] = 7
    assert p.steps(8, 8, g, loads, block, moved, messages, False) is None and np.all(block == 7)


class Toy(Protocol):
    """A randomized toy: at step t node t mod n sends 1 + t mod 4 tokens to node t + 1 mod n,
    whatever it holds; ``fixed`` tokens moved from step ``still`` on: none; ``leak``: one token
    lost at step ``leak``. ``steps`` is :meth:`step` in Python (the engine's side under test)."""

    name = "toy-batch"
    randomized = True
    may_go_negative = True

    def __init__(self, still=None, leak=None, stable=False):
        super().__init__()
        self.still, self.leak, self.stable = still, leak, stable
        self.calls = 0

    def reset(self, graph, loads, rng):
        self.n = graph.n

    def step(self, t, graph, loads):
        new = np.array(loads, dtype=np.int64)
        amount = 0 if self.still is not None and t >= self.still else 1 + t % 4
        a = t % self.n
        new[a] -= amount
        new[(a + 1) % self.n] += amount
        if t == self.leak:
            new[0] -= 1
        return Step(new, moved=amount, messages=1)

    def steps(self, t, k, graph, loads, block, moved, messages, stop_idle):
        self.calls += 1
        for b in range(k):
            out = self.step(t + b, graph, loads if b == 0 else block[b - 1])
            block[b] = out.loads
            moved[b], messages[b] = out.moved, out.messages
            if stop_idle and out.moved == 0:
                return b + 1, "toy"
        return k, "toy"


class LimitedToy(Toy):
    """The toy, exact only below 2**53 (as a rule computed in float64), with 2**54 tokens sent at step 30."""

    exact_load_limit = 2**53

    def step(self, t, graph, loads):
        out = super().step(t, graph, loads)
        if t == 30:
            out.loads[2] -= 2**54
            out.loads[3] += 2**54
        return out


class StableToy(Toy):
    def is_stable(self, graph, loads):
        return self.stable


def _toy_runs(monkeypatch, make, k=16, **kw):
    out = []
    for size in (0, k):
        monkeypatch.setattr(batch, "BLOCK_STEPS", size)
        toy = make()
        try:
            out.append((td.simulate("ring:5", toy, np.full(5, 3), seed=0, **kw), None, toy.calls))
        except (InfeasibleStepError, ConservationError, TokendistError) as exc:
            out.append((None, (type(exc), str(exc)), toy.calls))
    return out


def test_infeasible_step_inside_a_block_stops_at_that_step(monkeypatch):
    (_, one, _), (_, blocks, calls) = _toy_runs(monkeypatch, Toy, max_steps=100)
    assert calls and one is not None and one == blocks and one[0] is InfeasibleStepError


def test_infeasible_steps_inside_blocks_are_counted(monkeypatch):
    (one, _, _), (blocks, _, calls) = _toy_runs(monkeypatch, Toy, max_steps=100, allow_infeasible=True,
                                                record_every=3)
    assert calls and blocks.infeasible_steps > 0
    one.variants = blocks.variants = None  # (step by step: the reference variant; in blocks: the toy's)
    assert_same_run(one, blocks)


def test_conservation_broken_inside_a_block(monkeypatch):
    (_, one, _), (_, blocks, calls) = _toy_runs(monkeypatch, lambda: Toy(leak=21), max_steps=100,
                                                allow_infeasible=True)
    assert calls and one is not None and one == blocks and one[0] is ConservationError
    assert "at step 21" in one[1]


def test_a_load_past_the_exact_limit_inside_a_block(monkeypatch):
    # After an infeasible step the loads may pass a protocol's exact range: refused at that step.
    (_, one, _), (_, blocks, calls) = _toy_runs(monkeypatch, LimitedToy, max_steps=100, allow_infeasible=True)
    assert calls and one is not None and one == blocks and "after step 31" in one[1]


@pytest.mark.parametrize("stable", [True, False])
def test_a_step_that_moved_nothing_ends_the_block(monkeypatch, stable):
    # From step 23 nothing moves: stable stops there (a step between records, recorded too); an
    # unstable one goes on, a block a step (the engine asks is_stable after each).
    runs = _toy_runs(monkeypatch, lambda: StableToy(still=23, stable=stable), max_steps=40, allow_infeasible=True,
                     record_every=5)
    (one, _, _), (blocks, _, calls) = runs
    assert blocks.stop_reason == ("stable" if stable else "max-steps")
    assert blocks.steps == (24 if stable else 40)
    assert calls == (2 if stable else 2 + (40 - 24))
    assert blocks.trace["step"][-1] == blocks.steps
    one.variants = blocks.variants = None
    assert_same_run(one, blocks)


def test_progress_is_called_at_the_same_steps(monkeypatch):
    seen = {}
    for k in (0, 64):
        monkeypatch.setattr(batch, "BLOCK_STEPS", k)
        calls = []
        td.simulate("torus:4x4", "random-matching", "random:0..9", seed=0, max_steps=300,
                    progress=lambda s, m: calls.append((s, m)))
        seen[k] = calls
    assert seen[0] == seen[64] and (64, 300) in seen[0]


@settings(max_examples=20, deadline=None)
@given(seed=st.integers(0, 2**32), done=st.integers(1, 9), first=st.integers(0, 30), every=st.integers(1, 4),
       spec=st.sampled_from(["torus:4x4", "star:6", "path:7"]))
def test_block_pass_is_the_step_pass_on_each_row(seed, done, first, every, spec):
    g = make_graph(spec, seed=0)
    rng = np.random.default_rng(seed)
    old = rng.integers(-3, 50, g.n)
    block = rng.integers(-3, 50, (done, g.n))
    last = first + done if seed % 2 else 10**6
    a, b = StepPass(g, np.int64, 64, small=False), StepPass(g, np.int64, 64, small=False)
    sums, bads = np.zeros(done, np.int64), np.zeros(done, np.int64)
    recorded = a.check_block(block, done, old, 0, first, every, last, sums, bads)
    expect = []
    for i in range(done):
        step = first + i + 1
        rec = step % every == 0 or step == last
        total, _, bad = b.check(block[i], old if i == 0 else block[i - 1], SIGN, None, 0, rec)
        expect.append((total, bad))
    assert [tuple(x) for x in zip(sums.tolist(), bads.tolist())] == expect
    assert recorded == b.count == a.count
    for name, col in a.columns().items():
        assert np.array_equal(col, b.columns()[name]), name


@pytest.mark.parametrize("algo", ["random-matching", "pairwise-averaging"])
def test_totals_past_int64_stay_exact(algo):
    # 2**62 tokens on one node: the tokens moved over a few hundred steps pass 2**63; the block's
    # running totals then go in Python ints, as step by step.
    kw = dict(seed=4, max_steps=300)
    one, _ = _run(0, "torus:4x4", algo, f"point:{2**62}", **kw)
    blocks, used = _run(64, "torus:4x4", algo, f"point:{2**62}", **kw)
    assert used and blocks.tokens_moved > 2**63
    assert_same_run(one, blocks)


def test_a_small_run_does_not_compile_a_block_kernel(monkeypatch):
    # A small run avoids compiling (tokendist.kernels._choice): a block kernel numba would have to
    # compile is not called, the run goes step by step on the (cached) step kernel, the same run.
    monkeypatch.setenv("TOKENDIST_SMALL_RUN_REFERENCE", "1")
    kw = dict(seed=5, max_steps=200)
    one, _ = _run(0, "torus:8x8", "random-matching", "random:0..50", **kw)
    warm, used = _run(64, "torus:8x8", "random-matching", "random:0..50", **kw)
    assert used  # (the block kernel is compiled in this process)
    real = report.kernel_ready
    monkeypatch.setattr(report, "kernel_ready", lambda kernel, args: "steps" not in kernel.__name__
                        and real(kernel, args))
    cold, used = _run(64, "torus:8x8", "random-matching", "random:0..50", **kw)
    assert not used and cold.variants == one.variants == {"csr, serial (matching_step)": 200}
    assert_same_run(one, cold)
    assert_same_run(one, warm)


def test_a_small_run_without_the_compiled_block_pass_steps_one_at_a_time(monkeypatch):
    monkeypatch.setenv("TOKENDIST_SMALL_RUN_REFERENCE", "1")
    kw = dict(seed=5, max_steps=200)
    one, _ = _run(0, "torus:8x8", "stratified-diffusion", "random:0..50", **kw)
    real = pass_module.kernel_ready
    monkeypatch.setattr(pass_module, "kernel_ready", lambda kernel, args: kernel is not pass_module.block_pass
                        and real(kernel, args))
    cold, used = _run(64, "torus:8x8", "stratified-diffusion", "random:0..50", **kw)
    assert not used
    assert_same_run(one, cold)
