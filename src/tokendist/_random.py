"""The one way tokendist is random.

Every stochastic routine takes a ``seed`` (None, an int, or a ``numpy.random.Generator``) and turns
it into a generator with :func:`make_rng`. A run derives independent sub-streams (topology, initial
loads, speeds, protocol, network dynamics) from one ``SeedSequence`` with :func:`stream`, so that
changing, say, the protocol does not change the graph that the same seed builds.

For randomised rules that must give the same draws whether they run as a vectorised kernel, as
per-node code, or on separate processes, :func:`counter_uniform` is a counter-based generator: the
draw for (key, step, index) is a pure function of those three integers (SplitMix64 finaliser).
"""

from __future__ import annotations

import numbers

import numpy as np

from .errors import TokendistError

__all__ = ["make_rng", "stream", "STREAMS", "counter_uniform", "counter_uniform_scalar", "stream_key",
           "CounterDraws", "mix_index", "counter_uniform_mixed"]

#: Named sub-streams of one run; the position is part of the seed derivation, never reorder.
STREAMS = ("topology", "init", "speeds", "protocol", "dynamics", "executor", "injection")

_MASK64 = (1 << 64) - 1
#: The largest seed: what the CLI, scenario files and sweep tables (int64 columns) can hold, so that
#: every run the Python API makes can be replayed from the command line.
SEED_MAX = 2**63 - 1


def _checked(seed):
    """``seed`` itself if it is None, a Generator or an integer in 0..2**63 - 1; else a one-line error."""
    if seed is None or isinstance(seed, np.random.Generator):
        return seed
    if isinstance(seed, numbers.Integral) and not isinstance(seed, bool) and seed >= 0:
        if seed > SEED_MAX:
            raise TokendistError(f"seed must be at most 2**63 - 1 ({SEED_MAX}), as on the command line, got {seed}")
        return int(seed)
    raise TokendistError(f"seed must be a non-negative integer, a numpy Generator or None, got {seed!r}")


def make_rng(seed=None) -> np.random.Generator:
    """Return a ``numpy.random.Generator`` for ``seed`` (None, int or Generator)."""
    seed = _checked(seed)
    if isinstance(seed, np.random.Generator):
        return seed
    return np.random.default_rng(seed)


def stream(seed, name: str) -> np.random.Generator:
    """The independent sub-stream ``name`` (one of :data:`STREAMS`) of the run seeded by ``seed``.

    ``seed=None`` gives fresh OS entropy; an int gives the same stream in every process.
    """
    if name not in STREAMS:
        raise ValueError(f"unknown random stream {name!r}; known: {', '.join(STREAMS)}")
    seed = _checked(seed)
    if isinstance(seed, np.random.Generator):
        # A caller-made generator: derive children deterministically from it.
        entropy = int(seed.integers(0, 2**63))
        return np.random.default_rng(np.random.SeedSequence(entropy, spawn_key=(STREAMS.index(name),)))
    return np.random.default_rng(np.random.SeedSequence(seed, spawn_key=(STREAMS.index(name),)))


def stream_key(rng: np.random.Generator) -> int:
    """A 63-bit key drawn from ``rng`` for :func:`counter_uniform`."""
    return int(rng.integers(0, 2**63))


_GOLDEN, _MIX1, _MIX2 = np.uint64(0x9E3779B97F4A7C15), np.uint64(0xBF58476D1CE4E5B9), np.uint64(0x94D049BB133111EB)
_S30, _S27, _S31, _S11 = np.uint64(30), np.uint64(27), np.uint64(31), np.uint64(11)


def _splitmix64(x: np.ndarray) -> np.ndarray:
    """SplitMix64's mix of ``x`` (a uint64 array, wrapping mod 2**64), in place: ``x`` is returned.

    In place, because :func:`counter_uniform` runs on every step of the randomised references and
    each temporary array cost as much as the arithmetic on a small graph.
    """
    x += _GOLDEN
    x ^= x >> _S30
    x *= _MIX1
    x ^= x >> _S27
    x *= _MIX2
    x ^= x >> _S31
    return x


def _mix(x: int) -> int:
    """:func:`_splitmix64` of one Python int (exact integer arithmetic mod 2**64)."""
    x = (x + 0x9E3779B97F4A7C15) & _MASK64
    x = ((x ^ (x >> 30)) * 0xBF58476D1CE4E5B9) & _MASK64
    x = ((x ^ (x >> 27)) * 0x94D049BB133111EB) & _MASK64
    return x ^ (x >> 31)


def counter_uniform(key: int, step: int, index) -> np.ndarray:
    """Uniform draws in [0, 1) that depend only on ``(key, step, index)``.

    Vectorised over ``index``. Used where the same random choice must be reproduced by a
    vectorised kernel and by per-node code (for example the candidate edges of a random matching).
    """
    return counter_uniform_mixed(key, step, mix_index(index))


def mix_index(index) -> np.ndarray:
    """The index's own part of :func:`counter_uniform`, for :func:`counter_uniform_mixed` (uint64)."""
    return _splitmix64(np.array(index, dtype=np.uint64))


def counter_uniform_mixed(key: int, step: int, mixed: np.ndarray) -> np.ndarray:
    """``counter_uniform(key, step, index)`` from ``mixed = mix_index(index)`` (not changed): the
    same bits, for a caller that keeps the indices' mixes (a table of them, say)."""
    # A copy mixed in place: a 0-d index stays an array (numpy scalars warn when they wrap).
    x = np.array(mixed, dtype=np.uint64)
    x ^= np.uint64(_mix((key & _MASK64) ^ _mix(step & _MASK64)))  # the step's base, in Python ints
    x = _splitmix64(x)
    x >>= _S11
    return x.astype(np.float64) * (1.0 / (1 << 53))


class CounterDraws:
    """The draws ``counter_uniform(key, t, index)`` of consecutive steps ``t``, computed a block
    of steps at a time.

    A randomised reference step on a small graph spends most of its time in numpy's per-call
    overhead, not in arithmetic. Drawing ``block`` steps at once (one array of shape
    ``(block, len(index))``) costs about as much as drawing one, and gives the same bits as
    :func:`counter_uniform`: the index's own mix is computed once, each step's base once.

    Parameters
    ----------
    key : int
        The run's key (:func:`stream_key`).
    index : array_like of int
        The indices drawn every step (fixed for the life of the object).
    block : int
        How many steps one computation covers.

    Examples
    --------
    >>> draws = CounterDraws(7, np.arange(4), block=8)
    >>> bool((draws.at(3) == counter_uniform(7, 3, np.arange(4))).all())
    True
    """

    def __init__(self, key: int, index, block: int = 64):
        self.key = int(key) & _MASK64
        self._mixed = mix_index(index)  # the index's part, once
        self.block = max(int(block), 1)
        self._first = None  # the first step of the block held in self._rows
        self._rows = None

    def at(self, step: int) -> np.ndarray:
        """The draws of ``step`` (a read-only row; equal to ``counter_uniform(key, step, index)``)."""
        first = self._first
        if first is None or not first <= step < first + self.block:
            self._fill(step)
            first = step
        return self._rows[step - first]

    def rows(self, first: int) -> np.ndarray:
        """The draws of steps ``first .. first + block - 1``: a read-only ``(block, len(index))``
        array whose row ``b`` is ``counter_uniform(key, first + b, index)``."""
        if self._first != first:
            self._fill(first)
        return self._rows

    def pairs(self, first: int, rows, cols) -> np.ndarray:
        """``rows(first)[rows, cols]`` without drawing the rest of the block: the draw of step
        ``first + rows[i]`` at position ``cols[i]`` of the index, for each ``i`` (the same bits)."""
        x = self._bases(first)[rows] ^ self._mixed[cols]
        x = _splitmix64(x)
        x >>= _S11
        return x.astype(np.float64) * (1.0 / (1 << 53))

    def _bases(self, step: int) -> np.ndarray:
        # Each step's base _mix(key ^ _mix(step)), vectorised over the block's steps.
        base = _splitmix64(np.arange(step, step + self.block, dtype=np.int64).astype(np.uint64))
        base ^= np.uint64(self.key)
        return _splitmix64(base)

    def _fill(self, step: int) -> None:
        base = self._bases(step)
        x = base[:, None] ^ self._mixed[None, :]
        x = _splitmix64(x)
        x >>= _S11
        rows = x.astype(np.float64)
        rows *= 1.0 / (1 << 53)
        rows.flags.writeable = False
        self._first, self._rows = step, rows


def counter_uniform_scalar(key: int, step: int, index: int) -> float:
    """The scalar form of :func:`counter_uniform` in plain Python (for per-node rules)."""
    base = _mix((key & _MASK64) ^ _mix(step & _MASK64))
    return (_mix(base ^ _mix(index & _MASK64)) >> 11) * (1.0 / (1 << 53))
