"""The engine's event-driven path for message protocols gives the synchronous loop's results exactly.

Both paths run the same handlers on the same executor; the event path skips idle time units, records
the trace lazily (a replay of the executor's load log) and checks conservation periodically. Every
field of the run summary, every trace column (values and dtypes) and the final loads must agree.
"""

import pickle

import numpy as np
import pytest

from tokendist.engine import simulate
from tokendist.engine._simulate_events import EventTrace

PERFECT_TREE = [dict(schedule="sync"), dict(schedule="async", max_delay=4),
                dict(schedule="adversarial", adversary="race"), dict(schedule="adversarial", adversary="race-slow"),
                dict(schedule="adversarial", adversary="slow-links", max_delay=6),
                dict(schedule="adversarial", adversary="slow-tokens", max_delay=7),
                dict(schedule="async", pick="largest"), dict(schedule="sync", release="send"),
                dict(schedule="async", phase_overlap="merge", max_delay=3)]


def _both(graph, algo, init, params, **kw):
    ref = simulate(graph, algo, init, seed=3, params=params, event_path=False, **kw)
    new = simulate(graph, algo, init, seed=3, params=params, **kw)
    assert isinstance(new.trace, EventTrace) and not isinstance(ref.trace, EventTrace)
    a, b = ref.to_json(), new.to_json()
    a.pop("seconds"), b.pop("seconds")
    # The event path may run a protocol's compiled form of its handlers (perfect-tree's kernels):
    # the variant differs, the step count does not.
    assert sum(a.pop("variants").values()) == sum(b.pop("variants").values())
    assert a == b
    assert list(ref.trace) == list(new.trace)
    for k in ref.trace:
        assert ref.trace[k].dtype == new.trace[k].dtype, k
        assert np.array_equal(ref.trace[k], new.trace[k]), k
    assert np.array_equal(ref.loads, new.loads) and new.loads.dtype == ref.loads.dtype
    return ref, new


@pytest.mark.parametrize("params", PERFECT_TREE, ids=lambda p: "-".join(map(str, p.values())))
@pytest.mark.parametrize("graph", ["random-tree:120", "kary:2,4", "star:9", "ring:12"])
def test_perfect_tree_event_path_equals_synchronous_loop(graph, params):
    _both(graph, "perfect-tree", "random:0..9", params, max_steps=100_000)


@pytest.mark.parametrize("kw", [dict(max_steps=150), dict(max_steps=100_000, record_every=7),
                                dict(max_steps=100_000, until_discrepancy=12),
                                dict(max_steps=100_000, until_local_discrepancy=3)], ids=str)
def test_stop_rules_and_recording_on_the_event_path(kw):
    ref, _ = _both("random-tree:80", "perfect-tree", "point:400", dict(schedule="async"), **kw)
    assert ref.stop_reason in ("max-steps", "target-reached", "stable")


@pytest.mark.parametrize("schedule", ["sync", "random", "slow-tokens", "slow-edges"])
@pytest.mark.parametrize("graph", ["torus:5x5", "random-tree:30"])
def test_async_multi_port_event_path_equals_synchronous_loop(graph, schedule):
    _both(graph, "async-multi-port", "point:2000", dict(schedule=schedule), max_steps=300)


def test_deadlock_is_a_fixed_point_on_both_paths():
    # release=send under the race adversary deadlocks the election: the executor goes idle with
    # nodes not final, and the repeated idle state is the fixed point.
    params = dict(release="send", schedule="adversarial", adversary="race")
    for graph in ("path:6", "kary:2,3"):
        ref, new = _both(graph, "perfect-tree", "random:0..9", params, max_steps=5000)
        assert new.stop_reason == "fixed-point" and new.cycle_length == 1


def test_lazy_trace_pickles_as_columns():
    r = simulate("random-tree:40", "perfect-tree", "random:0..9", seed=1, max_steps=100_000)
    again = pickle.loads(pickle.dumps(r.trace))
    assert list(again) == list(r.trace)
    assert all(np.array_equal(again[k], r.trace[k]) for k in r.trace)
    assert r.trace["step"][0] == 0 and r.trace["step"][-1] == r.steps


def test_replay_kernel_and_per_step_replay_give_the_same_trace(monkeypatch):
    import tokendist.engine._simulate_events as events

    r = simulate("random-tree:60", "perfect-tree", "random:0..9", seed=2, params=dict(schedule="async"),
                 max_steps=100_000, record_every=3)
    small = {k: r.trace[k] for k in r.trace}
    monkeypatch.setattr(events, "REPLAY_KERNEL_MIN_WORK", 0)
    r = simulate("random-tree:60", "perfect-tree", "random:0..9", seed=2, params=dict(schedule="async"),
                 max_steps=100_000, record_every=3)
    for k in small:
        assert small[k].dtype == r.trace[k].dtype and np.array_equal(small[k], r.trace[k]), k
