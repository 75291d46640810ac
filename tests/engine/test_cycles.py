"""The cycle-detection key (engine/_cycles.py): equal states, equal keys; a byte apart, different keys;
and the engine's stop steps the same as with the sha256 key of the same bytes."""

import hashlib

import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

import tokendist.engine._simulate as simulate_module
from tokendist import simulate
import tokendist.engine._cycles as cycles_module
from tokendist.engine._cycles import cycle_key, hash128, key_function, sha256_key, state_bytes
from tokendist.graphs import make_graph


def _split(data: bytes, cuts):
    """``data`` as a tuple of uint8 arrays cut at ``cuts`` (sorted offsets)."""
    edges = [0, *sorted(cuts), len(data)]
    return tuple(np.frombuffer(data[a:b], dtype=np.uint8) for a, b in zip(edges, edges[1:]))


@settings(max_examples=200, deadline=None)
@given(loads=st.lists(st.integers(-2**63, 2**63 - 1), max_size=40), state=st.binary(max_size=200),
       cuts=st.lists(st.integers(0, 200), max_size=4), data=st.data())
def test_equal_states_give_equal_keys_whatever_arrays_hold_them(loads, state, cuts, data):
    w = np.array(loads, dtype=np.int64)
    key = cycle_key(w, np.frombuffer(state, dtype=np.uint8))
    assert cycle_key(w.copy(), np.frombuffer(bytes(state), dtype=np.uint8).copy()) == key  # (other memory)
    assert cycle_key(w.view(np.float64), np.frombuffer(state, dtype=np.uint8)) == key  # (bytes, not values)
    assert cycle_key(w, _split(state, [c for c in cuts if c <= len(state)])) == key  # (a tuple: bytes in a row)
    if len(state) % 8 == 0:
        assert cycle_key(w, np.frombuffer(state, dtype=np.float64)) == key
    # A non-contiguous array: hashed by its elements' bytes in order, as its contiguous copy.
    doubled = np.repeat(np.frombuffer(state, dtype=np.uint8), 2)[::2]
    assert cycle_key(w, doubled) == key
    if not state:
        assert cycle_key(w, b"") == key  # (no state: an empty array)
    # 2-D: its C-order bytes.
    assert cycle_key(w, np.frombuffer(state + state, dtype=np.uint8).reshape(2, -1)) == \
        cycle_key(w, np.frombuffer(state + state, dtype=np.uint8))


@settings(max_examples=300, deadline=None)
@given(n_loads=st.integers(0, 40), n_state=st.integers(0, 200), seed=st.integers(0, 2**32 - 1), data=st.data())
def test_a_state_one_byte_apart_gets_another_key(n_loads, n_state, seed, data):
    rng = np.random.default_rng(seed)
    w = rng.integers(-1000, 1000, n_loads).astype(np.int64)
    s = rng.integers(0, 256, n_state).astype(np.uint8)
    total = 8 * n_loads + n_state
    if total == 0:
        return
    at = data.draw(st.integers(0, total - 1), label="byte")
    flip = data.draw(st.integers(1, 255), label="xor")
    w2, s2 = w.copy(), s.copy()
    if at < 8 * n_loads:
        w2.view(np.uint8)[at] ^= flip
    else:
        s2[at - 8 * n_loads] ^= flip  # (including the last partial word of the state)
    assert cycle_key(w, s) != cycle_key(w2, s2)


def test_the_last_partial_word_and_the_lengths_count():
    w = np.arange(5, dtype=np.int64)
    s = np.arange(1, 12, dtype=np.uint8)  # one whole word and 3 bytes
    keys = {cycle_key(w, s[:k]) for k in range(12)}
    assert len(keys) == 12  # every prefix: the zero padding of a partial word is not a byte
    zeros = [cycle_key(w, np.zeros(k, dtype=np.uint8)) for k in range(17)]
    assert len(set(zeros)) == 17  # only the length tells these apart
    # The bytes of the loads and of the state are not interchangeable: where the loads end counts.
    both = np.arange(16, dtype=np.int64)
    assert cycle_key(both[:8], both[8:]) != cycle_key(both[:7], both[7:])


def test_the_key_is_two_64_bit_words_and_bytes_states_keep_sha256():
    w = np.arange(10, dtype=np.int64)
    key = cycle_key(w, np.ones(3))
    assert isinstance(key, tuple) and len(key) == 2 and all(0 <= k < 2**64 for k in key)
    assert key == hash128(w.view(np.uint8), np.ones(3).view(np.uint8))
    # A user's protocol returns bytes: the sha256 digest of the loads' bytes followed by them.
    assert cycle_key(w, b"\x01\x02") == hashlib.sha256(w.tobytes() + b"\x01\x02").digest() == \
        sha256_key(w, b"\x01\x02")
    assert state_bytes((np.ones(2), np.zeros(1, dtype=np.int32))) == np.ones(2).tobytes() + bytes(4)


def _sha256_of_bytes(loads, state):
    # The key before engine/_cycles.py: sha256 of the loads' bytes and of the state's bytes.
    return sha256_key(loads, state_bytes(state))


RUNS = [
    ("torus:6x6", "rotor-router", "random:0..50", {}),
    ("hypercube:4", "quasirandom", "random:0..100", {}),
    ("random-tree:20", "discrepancy1", "random:0..100", {}),
    ("torus:6x6", "threshold1", "random:0..100", {}),
    ("torus:6x6", "diffusion", "random:0..100", {}),
    ("torus:6x6", "sos", "random:0..100", {}),
    ("hypercube:4", "fos", "point:500", {}),
    ("torus:6x6", "sos-iou", "random:0..100", {}),
    ("hypercube:4", "flow-imitation", "point:500", {"process": "sos"}),
    ("torus:5x4", "flow-imitation", "random:0..100", {}),
]


@pytest.mark.parametrize("spec, algo, init, params", RUNS)
def test_stop_steps_unchanged_against_the_sha256_key(monkeypatch, spec, algo, init, params):
    g = make_graph(spec, seed=1)
    fast = simulate(g, algo, init, seed=3, max_steps=4000, params=params)
    monkeypatch.setattr(simulate_module, "key_function", lambda small: _sha256_of_bytes)
    ref = simulate(g, algo, init, seed=3, max_steps=4000, params=params)
    assert (fast.steps, fast.stop_reason, fast.cycle_length) == (ref.steps, ref.stop_reason, ref.cycle_length)
    np.testing.assert_array_equal(fast.loads, ref.loads)


def test_the_runs_above_stop_on_repeated_states():
    # The comparison above means something: most of those runs end on a repeated state.
    reasons = [simulate(make_graph(spec, seed=1), algo, init, seed=3, max_steps=4000, params=params).stop_reason
               for spec, algo, init, params in RUNS]
    assert sum(r in ("fixed-point", "cycle", "rounding-cycle") for r in reasons) >= len(RUNS) // 2


def test_other_buffers_keep_the_sha256_key_and_empty_ones_are_no_state():
    w = np.arange(4, dtype=np.int64)
    raw = np.int64(7).tobytes()
    for same in (bytearray(raw), memoryview(raw), np.int64(7)):
        assert cycle_key(w, same) == cycle_key(w, raw)
        assert state_bytes(same) == raw
    assert cycle_key(w, np.int64(0)) == cycle_key(w, bytes(8)) != cycle_key(w, b"")
    assert cycle_key(w, bytearray()) == cycle_key(w, memoryview(b"")) == cycle_key(w, b"") == cycle_key(w, ())


def test_a_small_run_keeps_sha256_keys_while_the_hash_would_compile(monkeypatch):
    # Pretend hash128 is neither compiled nor cached: a small run takes the sha256 of the state's
    # bytes for all its keys, a large one (or one past the limit) hash128; the stop step is the same.
    monkeypatch.setattr(cycles_module, "_hash_ready", lambda: False)
    monkeypatch.setattr(cycles_module, "_sha256_keys", [0])
    assert key_function(True) is cycles_module._bytes_key and key_function(False) is cycle_key
    w, state = np.arange(6, dtype=np.int64), np.ones(3)
    assert key_function(True)(w, state) == sha256_key(w, state.tobytes())
    assert cycles_module._sha256_keys[0] == 1
    monkeypatch.setattr(simulate_module, "small_run", lambda graph, max_steps: True)
    g = make_graph("torus:6x6")
    run = simulate(g, "rotor-router", "random:0..50", seed=3, max_steps=4000)
    assert run.stop_reason == "cycle" and cycles_module._sha256_keys[0] > 1
    monkeypatch.setattr(cycles_module, "_sha256_keys", [cycles_module.SHA256_KEY_LIMIT])
    assert key_function(True) is cycle_key
    again = simulate(g, "rotor-router", "random:0..50", seed=3, max_steps=4000)
    assert (again.steps, again.cycle_length) == (run.steps, run.cycle_length)
