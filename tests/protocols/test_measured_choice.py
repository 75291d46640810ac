"""The measured choice between a serial and a threaded kernel (``threads=auto``), with a fake clock.

* :class:`MeasuredChoice` alone: the trial's order, the warm-up call left out, the faster kernel
  chosen after the trial, the other one explored every ``explore_every`` calls, the choice moving
  when the timings change; under Hypothesis, any durations: each call returns what the kernel it
  ran returned, the trial is the same whatever the durations, and after the trial the kernel not
  chosen runs exactly on the exploring calls.
* ``sos-iou`` with ``threads=auto`` on a torus and a ring, and ``sos-iou``, ``fos-floor`` and the
  rounded diffusion schemes on graphs without a stencil (the size threshold lowered): the trace,
  the reports and the state are those of ``threads=1`` step by step, with both kernels run; on a
  torus the rounded schemes keep their serial stencil kernel.
* Who may race: a library run with ``threads=auto`` stays serial (no OpenMP in the process, which
  can then fork workers that run protocols); the ``tokendist`` command allows threads for its
  own length only; ``tokendist bench`` notes how often ``auto`` ran the threaded kernel.
* The ``threads`` parameter's values and errors.
"""

import json
import os
import re
import subprocess
import sys
import textwrap

import numba
import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

import tokendist.protocols.diffusion._rules as diffusion
import tokendist.protocols.heterogeneous._rules as heterogeneous
import tokendist.kernels._choice as measured_choice
from tokendist import simulate
from tokendist.engine import make_protocol
from tokendist.errors import TokendistError
from tokendist.graphs import make_graph
from tokendist.kernels._choice import SERIAL, THREADED, MeasuredChoice

from .lockstep import assert_same_steps


class FakeClock:
    """A clock that each kernel advances by the duration the test gives it."""

    def __init__(self):
        self.now = 0.0

    def __call__(self):
        return self.now

    def kernel(self, name, durations):
        """A kernel returning ``name`` that takes ``durations[k]`` seconds on its k-th call."""
        calls = iter(durations)

        def run():
            self.now += next(calls)
            return name
        return run


def _run(choice, clock, serial_times, threaded_times, calls):
    serial, threaded = clock.kernel("S", serial_times), clock.kernel("T", threaded_times)
    return "".join(choice.run(serial, threaded) for _ in range(calls))


def test_trial_alternates_from_serial_and_ignores_each_first_call():
    clock = FakeClock()
    choice = MeasuredChoice(window=3, explore_every=5, clock=clock)
    # The threaded kernel's first call (its compilation) takes 100 s; it is faster afterwards.
    ran = _run(choice, clock, [2.0] * 40, [100.0] + [1.0] * 40, 8)
    assert ran == "STSTSTST"
    assert not choice.in_trial()
    assert list(choice.timings[SERIAL]) == [2.0, 2.0, 2.0] and list(choice.timings[THREADED]) == [1.0, 1.0, 1.0]
    assert choice.faster() == THREADED


@pytest.mark.parametrize("serial_time,threaded_time,chosen", [(2.0, 1.0, "T"), (1.0, 2.0, "S"), (1.0, 1.0, "S")])
def test_after_the_trial_the_faster_runs_and_the_other_every_explore_every_calls(serial_time, threaded_time, chosen):
    clock = FakeClock()
    choice = MeasuredChoice(window=2, explore_every=4, clock=clock)
    ran = _run(choice, clock, [serial_time] * 40, [threaded_time] * 40, 6 + 12)
    other = "S" if chosen == "T" else "T"
    assert ran[:6] == "STSTST"
    assert ran[6:] == (chosen * 3 + other) * 3


def test_the_choice_moves_back_when_the_threaded_kernel_slows_down():
    # The second core gets busy after the trial: the threaded kernel's calls take 3 s instead of 1.
    clock = FakeClock()
    choice = MeasuredChoice(window=1, explore_every=3, clock=clock)
    ran = _run(choice, clock, [2.0] * 40, [1.0, 1.0] + [3.0] * 40, 4 + 6)
    assert ran[:4] == "STST"
    # T runs (3 s, now its only timing), so S is chosen; every third call after the trial
    # explores T again (3 s): S stays chosen.
    assert ran[4:] == "TS" + "TSS" + "T"
    assert choice.faster() == SERIAL


@settings(max_examples=200, deadline=None)
@given(window=st.integers(1, 4), explore_every=st.integers(2, 6),
       serial_times=st.lists(st.floats(0.0, 10.0), min_size=60, max_size=60),
       threaded_times=st.lists(st.floats(0.0, 10.0), min_size=60, max_size=60), calls=st.integers(0, 40))
def test_any_durations_the_trial_is_fixed_and_the_other_kernel_runs_only_when_exploring(
        window, explore_every, serial_times, threaded_times, calls):
    clock = FakeClock()
    choice = MeasuredChoice(window=window, explore_every=explore_every, clock=clock)
    serial, threaded = clock.kernel("S", serial_times), clock.kernel("T", threaded_times)
    trial = 2 * (window + 1)
    for k in range(calls):
        faster = None if choice.in_trial() else ("T" if choice.faster() == THREADED else "S")
        ran = choice.run(serial, threaded)
        if k < trial:
            assert faster is None and ran == "ST"[k % 2]
        else:
            exploring = (k - trial + 1) % explore_every == 0
            assert (ran != faster) == exploring
    assert sum(choice.calls) == calls
    for which in (SERIAL, THREADED):
        assert len(choice.timings[which]) == min(window, max(choice.calls[which] - 1, 0))


def test_window_and_explore_every_are_checked():
    with pytest.raises(ValueError):
        MeasuredChoice(window=0)
    with pytest.raises(ValueError):
        MeasuredChoice(explore_every=1)


@pytest.mark.skipif(numba.config.NUMBA_NUM_THREADS < 2, reason="the race needs two numba threads")
@pytest.mark.parametrize("spec", ["torus:40x30", "ring:50"])
def test_theorem1_sos_iou_threads_auto_gives_the_serial_trace(spec, monkeypatch):
    monkeypatch.setattr(heterogeneous, "AUTO_MIN_NODES", 0)
    monkeypatch.setattr(measured_choice, "_auto_allowed", True)
    g = make_graph(spec)
    rng = np.random.default_rng(3)
    loads = rng.integers(0, 5, g.n)
    loads[7] += 4000
    serial = make_protocol("sos-iou", {"kernel": "numba", "threads": 1})
    auto = make_protocol("sos-iou", {"kernel": "numba"})
    assert auto.options["threads"] == "auto"
    assert_same_steps(serial, auto, loads, 40, g)
    # The trial alone runs each kernel 1 + window times, whatever the timings.
    assert min(auto.kernel_choice.calls) >= 1 + auto.kernel_choice.window
    assert sum(auto.kernel_choice.calls) == 40 and serial.kernel_choice.calls == [0, 0]
    assert serial.events > 0 and serial.report() == auto.report()


def test_sos_iou_threads_auto_stays_serial_below_the_size_threshold():
    g = make_graph("torus:40x30")
    assert g.n < heterogeneous.AUTO_MIN_NODES
    proto = make_protocol("sos-iou", {"kernel": "numba"})
    w = np.random.default_rng(0).integers(0, 50, g.n)
    proto.reset(g, w.copy(), np.random.default_rng(0))
    for t in range(5):
        w = proto.step(t, g, w).loads
    assert proto.kernel_choice.calls == [0, 0] and proto._stencil_val is not None


@pytest.mark.parametrize("text,value", [("auto", "auto"), ("AUTO", "auto"), (" auto ", "auto"), ("1", 1), ("3", 3)])
def test_threads_parameter_values(text, value):
    assert make_protocol("sos-iou", {"threads": text}).options["threads"] == value


@pytest.mark.parametrize("text,message", [("abc", "expects a positive integer or auto, got 'abc'"),
                                          ("2.5", "expects a positive integer or auto"),
                                          ("0", "threads must be at least 1")])
def test_threads_parameter_errors(text, message):
    with pytest.raises(TokendistError, match=message):
        make_protocol("sos-iou", {"threads": text})


@pytest.mark.skipif(numba.config.NUMBA_NUM_THREADS < 2, reason="the race needs two numba threads")
@pytest.mark.parametrize("algo,spec,init,speeds", [
    ("diffusion-floor", "hypercube:7", "random:0..400", None),
    ("diffusion-ceil", "random-regular:150,4", "random:0..400", None),
    ("diffusion-random", "hypercube:7", "random:0..400", None),
    ("diffusion-random", "gnp:120,0.05", "point:9000", None),      # the general path (degrees differ)
    ("diffusion-oriented", "kary:3,4", "point:5000", None),        # a tree: Case 2's relayed edges
    ("fos-floor", "random-regular:150,4", "random:0..400", None),
    ("fos-floor", "gnp:120,0.05", "point:9000", "uniform:0.8..1.2"),  # per-node coefficients, speeds
    ("sos-iou", "hypercube:7", "random:0..20", None),              # the CSR path (no cube kernel below 12)
    ("sos-iou", "gnp:120,0.05", "point:9000", "uniform:0.8..1.2"),
])
def test_threads_auto_gives_the_serial_trace_on_the_csr_paths(algo, spec, init, speeds, monkeypatch):
    monkeypatch.setattr(diffusion, "AUTO_MIN_NODES", 0)
    monkeypatch.setattr(heterogeneous, "AUTO_MIN_NODES", 0)
    monkeypatch.setattr(heterogeneous, "SOS_BLOCK", 16)  # sos-iou's row blocks: these small graphs cut in many
    monkeypatch.setattr(measured_choice, "_auto_allowed", True)
    serial = simulate(spec, algo, init, seed=5, max_steps=30, keep_loads_every=1, detect_cycles=False,
                      allow_infeasible=True, params={"threads": 1}, speeds=speeds)
    proto = make_protocol(algo)
    assert proto.options["threads"] == "auto"
    auto = simulate(spec, proto, init, seed=5, max_steps=30, keep_loads_every=1, detect_cycles=False,
                    allow_infeasible=True, speeds=speeds)
    assert np.array_equal(serial.load_history, auto.load_history)
    assert serial.final == auto.final and serial.report == auto.report
    assert (serial.tokens_moved, serial.messages, serial.infeasible_steps) == (auto.tokens_moved, auto.messages,
                                                                               auto.infeasible_steps)
    assert serial.trace.keys() == auto.trace.keys()
    assert all(np.array_equal(serial.trace[k], auto.trace[k]) for k in serial.trace)
    assert min(proto.kernel_choice.calls) >= 1 + proto.kernel_choice.window


def test_diffusion_rounded_threads_auto_keeps_the_stencil_kernel_on_a_torus(monkeypatch):
    monkeypatch.setattr(diffusion, "AUTO_MIN_NODES", 0)
    monkeypatch.setattr(measured_choice, "_auto_allowed", True)
    proto = make_protocol("diffusion-random")
    simulate("torus:16x16", proto, "random:0..100", seed=1, max_steps=5)
    assert proto._stencil_runs is not None and proto.kernel_choice.calls == [0, 0]


@pytest.mark.parametrize("algo,spec", [("sos-iou", "torus:40x30"), ("diffusion-random", "hypercube:7")])
def test_threads_auto_runs_serial_where_threads_are_not_allowed(algo, spec, monkeypatch):
    monkeypatch.setattr(heterogeneous, "AUTO_MIN_NODES", 0)
    monkeypatch.setattr(diffusion, "AUTO_MIN_NODES", 0)
    assert not measured_choice.auto_threads_allowed()  # a library's default
    proto = make_protocol(algo)
    simulate(spec, proto, "random:0..100", seed=1, max_steps=12, detect_cycles=False)
    assert proto.kernel_choice.calls == [0, 0]


def test_the_command_allows_threads_for_its_length_only(monkeypatch, capsys):
    from tokendist.cli import main
    monkeypatch.setattr(heterogeneous, "AUTO_MIN_NODES", 0)
    seen = []
    original = MeasuredChoice.run

    def spy(self, serial, threaded):
        seen.append(measured_choice.auto_threads_allowed())
        return original(self, serial, threaded)
    monkeypatch.setattr(MeasuredChoice, "run", spy)
    argv = ["run", "--graph", "torus:40x30", "--algo", "sos-iou", "--init", "random:0..100", "--max-steps", "12"]
    assert main(argv) == 0
    assert len(seen) == 12 and all(seen)
    assert not measured_choice.auto_threads_allowed()
    # The summary says which kernel ran (the trial alone runs the threaded one four times).
    out = capsys.readouterr().out
    counts = {kind: int(n) for kind, n in re.findall(r"stencil, (serial|threaded) \(sos_iou_stencil\w*\): (\d+) steps", out)}
    assert 4 <= counts["threaded"] <= 12 and sum(counts.values()) == 12, out


def test_a_library_run_with_threads_auto_leaves_the_process_able_to_fork():
    # In a fresh process (GNU OpenMP kills the children of a process that used it, and this test
    # process may have): a default run above the (lowered) threshold, then a fork.
    script = textwrap.dedent("""
        import os, numba
        import tokendist as td, tokendist.protocols.heterogeneous._rules as h
        h.AUTO_MIN_NODES = 0
        td.simulate("torus:40x30", "sos-iou", "random:0..100", seed=1, max_steps=12)
        try:
            numba.threading_layer()
            print("threads ran")
        except ValueError:  # "no threading layer has been initialised": no parallel kernel ran
            pass
        pid = os.fork()
        if pid == 0:  # a forked worker runs a protocol too (a child that ran a parallel kernel after
            # its parent had would be terminated)
            td.simulate("torus:40x30", "sos-iou", "random:0..100", seed=2, max_steps=12)
            os._exit(7)
        print(os.waitstatus_to_exitcode(os.waitpid(pid, 0)[1]))
    """)
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=300,
                         env={**os.environ, "PYTHONHASHSEED": "0"})
    assert out.returncode == 0, out.stderr
    assert out.stdout.split() == ["7"]


def test_the_bench_notes_how_often_auto_ran_the_threaded_kernel():
    # A fresh process: the bench forks its cases, and a child that runs a parallel kernel must
    # come from a parent that has not (GNU OpenMP).
    script = textwrap.dedent("""
        import tokendist.protocols.heterogeneous._rules as h
        h.AUTO_MIN_NODES = 0
        from tokendist.cli import main
        raise SystemExit(main(["bench", "--graphs", "torus:40x30", "--algos", "sos-iou,multi-port", "--steps", "12",
                               "--naive-graph", "ring:8", "--json"]))
    """)
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=600)
    assert out.returncode == 0, out.stderr
    rows = {r["algorithm"]: r for r in json.loads(out.stdout)["rows"]}
    # The note names the variants of the 12 timed steps; the trial alone runs the threaded kernel
    # four times, the warm-up step (not timed) being one of them at most.
    note = rows["sos-iou"]["variant"]
    counts = {kind: int(n) for kind, n in re.findall(r"stencil, (serial|threaded) \(sos_iou_stencil\w*\) x(\d+)", note)}
    if len(counts) == 1:  # one variant ran every timed step: no count is printed
        counts = {kind: 12 for kind in re.findall(r"stencil, (serial|threaded)", note)}
    assert 3 <= counts.get("threaded", 0) and sum(counts.values()) == 12, note
    assert "threaded" not in rows["multi-port"]["variant"]
