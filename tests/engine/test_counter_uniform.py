"""counter_uniform: the vectorised draws are the scalar form's, whatever the index's type."""

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from tokendist._random import CounterDraws, counter_uniform, counter_uniform_scalar

U63 = st.integers(0, 2**63 - 1)


def naive_splitmix64(x: int) -> int:
    """SplitMix64 (Steele, Lea, Flood 2014), written out with explicit wrapping."""
    mask = 2**64 - 1
    z = (x + 0x9E3779B97F4A7C15) % 2**64
    z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & mask
    z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & mask
    return z ^ (z >> 31)


@given(U63, U63, st.lists(U63, max_size=40))
@settings(max_examples=200, deadline=None)
def test_vector_draws_equal_scalar_and_naive_draws(key, step, index):
    naive = [(naive_splitmix64(naive_splitmix64(key ^ naive_splitmix64(step)) ^ naive_splitmix64(i)) >> 11) / 2**53
             for i in index]
    for ix in (index, np.array(index, dtype=np.int64), np.array(index, dtype=np.uint64)):
        got = counter_uniform(key, step, ix)
        assert got.dtype == np.float64 and got.shape == (len(index),)
        assert got.tolist() == naive == [counter_uniform_scalar(key, step, i) for i in index]
    if index:
        assert float(counter_uniform(key, step, index[0])) == naive[0]


def test_the_index_array_is_not_changed():
    index = np.arange(10, dtype=np.uint64)
    counter_uniform(3, 4, index)
    assert index.tolist() == list(range(10))


@given(key=st.integers(0, 2**64 - 1), first=st.integers(0, 2**40), block=st.integers(1, 9),
       index=st.lists(st.integers(0, 2**64 - 1), max_size=7))
@settings(max_examples=60, deadline=None)
def test_counter_draws_by_block_equal_the_single_step_draws(key, first, block, index):
    draws = CounterDraws(key, np.array(index, dtype=np.uint64), block=block)
    # Forward, then back before the block, then far ahead: each row is counter_uniform's.
    for t in [first, first + 1, first + block, first + 2 * block + 1, first, first + 10**6]:
        row = draws.at(t)
        assert np.array_equal(row, counter_uniform(key, t, np.array(index, dtype=np.uint64)))
        assert not row.flags.writeable
