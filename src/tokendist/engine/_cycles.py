"""The key of a state for cycle detection: the loads and the protocol's :meth:`state_key`, hashed.

The synchronous loop (:func:`tokendist.engine.simulate`) stops a deterministic protocol on a static
graph when the state at a period boundary repeats one it has seen (``fixed-point``, ``cycle``,
``rounding-cycle``). It keeps one key per visited state, so the key is computed every period, and
on a small graph (256 nodes) hashing a state of a few kB costs as much as the step itself. Two forms:

* ``state_key()`` returns a numpy array (or a tuple of arrays, standing for their bytes one after
  another), or ``b""`` (no state): the key is :func:`hash128` of the raw bytes of the loads and of
  the state, a 128-bit hash computed in one compiled call over the memory the protocol already
  holds (no copy, no ``bytes`` object);
* ``state_key()`` returns non-empty ``bytes`` (a user's protocol, :mod:`tokendist.engine._user`):
  the key is the sha256 digest of the loads' bytes followed by those bytes.

A small run (:func:`tokendist.engine._pass.small_run`, the rule that keeps a small run on a cold
numba cache from compiling its step kernels) on which :func:`hash128` is neither compiled nor in
numba's on-disk cache takes, for all its keys, the sha256 digest of the loads' bytes and of the
state's bytes instead (:func:`key_function`): the same stop step, nothing to compile. A process
compiles :func:`hash128` after all once it has taken :data:`SHA256_KEY_LIMIT` such keys.

Either way two states have equal keys when their bytes are equal; the forms never give equal keys
to each other, so a protocol returns its state in one form only (the same bytes as an array and as
``bytes`` would be two different keys). ``None`` (a state that cannot repeat) is not hashed.

The 128-bit hash is two 64-bit lanes of a xor-rotate-multiply round in the manner of MurmurHash3
(Appleby 2011), with different constants and seeds, over the 64-bit words of the loads and then of
the state (even and odd words in two chains joined by xor; each one's last partial word padded
with zero bytes, its byte length absorbed after its words), the lanes finished with MurmurHash3's
``fmix64``. For a fixed word a round is a bijection of the lane and for a fixed lane a bijection of
the word, and the join and the finish are bijections of a changed lane: two states of the same
lengths that differ in a single word (so in one byte, anywhere) never get equal keys.
Other accidental collisions have odds of about ``steps**2 / 2**128`` for a run.
"""

from __future__ import annotations

import hashlib

import numba
import numpy as np

from ..kernels._report import kernel_ready

__all__ = ["cycle_key", "hash128", "key_function", "sha256_key", "state_bytes", "SHA256_KEY_LIMIT", "CycleTable",
           "seen_before", "add_moved", "NO_TABLE"]

# Lane constants: MurmurHash3 x64_128's c2 for lane 1, the xxHash64 prime 2 for lane 2; two more
# odd constants start the odd-word streams.
_C1, _C2 = np.uint64(0x87C37B91114253D5), np.uint64(0x4CF5AD432745937F)
_C3, _C4 = np.uint64(0x9E3779B185EBCA87), np.uint64(0xC2B2AE3D27D4EB4F)
_SEED1, _SEED2 = np.uint64(0x243F6A8885A308D3), np.uint64(0x13198A2E03707344)  # (digits of pi)
_F1, _F2 = np.uint64(0xFF51AFD7ED558CCD), np.uint64(0xC4CEB9FE1A85EC53)  # (MurmurHash3's fmix64)
# Shift counts as uint64 (numba promotes a uint64 mixed with a signed int to float64).
_R23, _R27, _R29, _R31, _R33, _R35, _R37, _R41 = (np.uint64(r) for r in (23, 27, 29, 31, 33, 35, 37, 41))
_U8 = np.dtype(np.uint8)

#: The sha256 keys of small runs a process takes before it compiles :func:`hash128` after all. On
#: ``torus:16x16`` a sha256 key (the state copied into ``bytes``) costs 0.7 to 7 us more than
#: :func:`hash128`'s with the state's size, and compiling :func:`hash128` about 0.5 s of CPU
#: (``benchmarks/probes/cycle_key.py``), so some 100,000 keys pay for a compilation in one process;
#: the limit is lower because the compiled hash lands in numba's cache and serves every later run:
#: the first ``tokendist compare`` after an install compiles it part way.
SHA256_KEY_LIMIT = 20_000
_sha256_keys = [0]
_EMPTY = np.zeros(0, dtype=_U8)  # b"" (no state), as an empty array


@numba.njit(cache=True)
def hash128(loads, state):
    """A 128-bit hash of the bytes of ``loads`` and of ``state``, as two 64-bit ints.

    Parameters
    ----------
    loads, state : ndarray of uint8, 1-D, C-contiguous
        The loads' bytes and the protocol state's bytes (``view(np.uint8)`` of the arrays).

    Returns
    -------
    (int, int)
        The two lanes (module docstring).

    Notes
    -----
    One round puts a word ``w`` into lane ``h``: ``h = rotl(h ^ w, r) * c`` (``r`` = 31, ``c`` = _C2
    in lane 1; 27, _C4 in lane 2). For a fixed word it is a bijection of the lane, for a fixed lane
    a bijection of the word (xor, rotation, multiplication by an odd constant). The rounds are
    written out in one function: as helper functions they made its first compilation take almost
    twice as long, for the same machine code.
    """
    h1, h2 = _SEED1, _SEED2
    for data in (loads, state):
        n = data.size
        whole = n >> 3
        words = data[:whole * 8].view(np.uint64)  # read in place: x86 reads unaligned words at full speed
        # The even words into (h1, h2), the odd ones into (g1, g2): two independent chains of
        # multiplications in flight, 1.7 times the speed of one.
        g1, g2 = h1 ^ _C1, h2 ^ _C3
        for i in range(0, whole - 1, 2):
            x = h1 ^ words[i]
            h1 = ((x << _R31) | (x >> _R33)) * _C2
            x = h2 ^ words[i]
            h2 = ((x << _R27) | (x >> _R37)) * _C4
            x = g1 ^ words[i + 1]
            g1 = ((x << _R31) | (x >> _R33)) * _C2
            x = g2 ^ words[i + 1]
            g2 = ((x << _R27) | (x >> _R37)) * _C4
        # Joined by xor (after a rotation): a single changed word stays a changed lane.
        h1 ^= (g1 << _R29) | (g1 >> _R35)
        h2 ^= (g2 << _R23) | (g2 >> _R41)
        # Then, one round each: the last whole word if their number is odd, the last partial word
        # (little-endian, zero-padded) if any, and the byte length (the same bytes split differently
        # between loads and state hash differently).
        partial = np.uint64(0)
        for j in range(n - 1, whole * 8 - 1, -1):
            partial = (partial << np.uint64(8)) | np.uint64(data[j])
        for k in range(3):
            if k == 0:
                if whole & 1 == 0:
                    continue
                w = words[whole - 1]
            elif k == 1:
                if n & 7 == 0:
                    continue
                w = partial
            else:
                w = np.uint64(n)
            x = h1 ^ w
            h1 = ((x << _R31) | (x >> _R33)) * _C2
            x = h2 ^ w
            h2 = ((x << _R27) | (x >> _R37)) * _C4
    # MurmurHash3's fmix64 on each lane, then (h1, h2) -> (h1 + h2, h1 + 2 h2): bijections.
    h1 ^= h1 >> _R33
    h1 *= _F1
    h1 ^= h1 >> _R33
    h1 *= _F2
    h1 ^= h1 >> _R33
    h2 ^= h2 >> _R33
    h2 *= _F1
    h2 ^= h2 >> _R33
    h2 *= _F2
    h2 ^= h2 >> _R33
    h1 += h2
    h2 += h1
    return h1, h2


def _bytes_view(a):
    """The bytes of array ``a`` as a writeable 1-D C-contiguous uint8 view (else of a copy).

    :func:`hash128` is compiled for that one type only (a read-only array is another type to numba).
    """
    flags = a.flags
    if a.ndim != 1 or not (flags.c_contiguous and flags.writeable):
        a = np.array(a, order="C").reshape(-1)
    return a.view(_U8)  # (a dtype object: a quarter less time than np.uint8 here)


def state_bytes(state) -> bytes:
    """The bytes a :meth:`state_key` result stands for (arrays' bytes one after another), as ``bytes``."""
    if isinstance(state, np.ndarray):
        return state.tobytes()
    if isinstance(state, tuple):
        return b"".join(np.asarray(p).tobytes() for p in state)
    return memoryview(state).tobytes()  # (bytes(x) of a numpy integer would be x zero bytes)


def sha256_key(loads, state) -> bytes:
    """The key of a state given as ``bytes``: sha256 of the loads' bytes followed by ``state``.

    ``state`` may be any object with the buffer protocol that :mod:`hashlib` takes (``bytes``,
    ``bytearray``, ``memoryview``, a numpy scalar), as the engine took it before arrays.
    """
    digest = hashlib.sha256(loads.data if loads.flags.c_contiguous else loads.tobytes())
    digest.update(state)
    return digest.digest()


def cycle_key(loads, state):
    """The key of the state (``loads``, ``state``) for the engine's dict of visited states.

    Parameters
    ----------
    loads : ndarray
        The loads at the start of the step.
    state : ndarray, tuple of ndarray, or bytes
        What :meth:`tokendist.engine.Protocol.state_key` returned (not None). A tuple stands for
        its arrays' bytes one after another (hashed from a copy: one array is cheaper); anything
        else (``bytes``, or any object with the buffer protocol) for its bytes.

    Returns
    -------
    tuple of two int, or bytes
        :func:`hash128` for arrays and ``b""``; :func:`sha256_key` for non-empty bytes.
    """
    if isinstance(state, np.ndarray):
        state = _bytes_view(state)
    elif isinstance(state, tuple):
        state = np.concatenate([_bytes_view(np.asarray(p)) for p in state]) if state else _EMPTY
    elif type(state) is bytes and not state:  # (the stateless protocols' b"")
        state = _EMPTY
    elif memoryview(state).nbytes:
        return sha256_key(loads, state)
    else:
        state = _EMPTY  # (an empty bytearray or memoryview: no state, as b"")
    return hash128(_bytes_view(loads), state)


def _bytes_key(loads, state):
    """:func:`sha256_key` of the state's bytes, counted (:data:`SHA256_KEY_LIMIT`)."""
    _sha256_keys[0] += 1
    return sha256_key(loads, state_bytes(state))


def key_function(small: bool):
    """The key function of a run: :func:`cycle_key`, or on a small run while :func:`hash128` would
    compile, the sha256 of the state's bytes (the module docstring).

    One run takes one function for all its keys: the two never give the same key to a state.
    """
    if not small or _sha256_keys[0] >= SHA256_KEY_LIMIT or _hash_ready():
        return cycle_key
    return _bytes_key


def _hash_ready() -> bool:
    """Whether :func:`hash128` runs without compiling (compiled in this process, or cached: then loaded)."""
    if hash128.overloads:
        return True
    if kernel_ready(hash128, (_EMPTY, _EMPTY)):
        hash128(_EMPTY, _EMPTY)  # (loaded from numba's on-disk cache, not compiled)
        return True
    return False


# The visited states of a run in blocks (engine/_batch.py): an open-addressing table a block kernel
# probes and fills, the same entries as the step-by-step loop's dict.
#: ``info`` of a :class:`CycleTable`: keys held, tokens moved before the step being checked (int64,
#: below 2**62), the slot of the state found again (-1: none), the period (0: no cycle detection).
COUNT, MOVED, HIT, PERIOD = 0, 1, 2, 3
_SAFE = 1 << 62
_EMPTY_STEP = -1


@numba.njit(cache=True, nogil=True)
def _insert(keys, visits, h1, h2, step, moved):  # pragma: no cover - compiled
    # Linear probing from the low bits of the first lane (a hash: its bits are uniform). Returns the
    # slot of an equal key (the state was seen), or -1 after taking a free slot for this one.
    mask = np.uint64(keys.shape[0] - 1)
    s = np.int64(h1 & mask)
    while visits[s, 0] != _EMPTY_STEP:
        if keys[s, 0] == h1 and keys[s, 1] == h2:
            return s
        s = np.int64(np.uint64(s + 1) & mask)
    keys[s, 0] = h1
    keys[s, 1] = h2
    visits[s, 0] = step
    visits[s, 1] = moved
    return -1


@numba.njit(cache=True, nogil=True)
def seen_before(keys, visits, info, loads, state, step):  # pragma: no cover - compiled
    """The engine's cycle check before ``step``, inside a block kernel.

    Parameters
    ----------
    keys, visits, info : ndarray
        A :class:`CycleTable`'s arrays (``keys`` uint64 ``(slots, 2)``, ``visits`` int64 ``(slots,
        2)``: the step and the tokens moved before it of each key's first visit; ``info`` int64).
    loads, state : ndarray of uint8
        The bytes of the loads before ``step`` and of the protocol's :meth:`state_key`.
    step : int

    Returns
    -------
    bool
        True when the state was visited before (``info[HIT]`` is then its slot; the kernel stops
        before ``step``), else False (the state is now in the table, as the loop's ``seen[key]``).
    """
    h1, h2 = hash128(loads, state)  # (the key cycle_key gives the step-by-step loop)
    s = _insert(keys, visits, h1, h2, step, info[MOVED])
    if s >= 0:
        info[HIT] = s
        return True
    info[COUNT] += 1
    return False


@numba.njit(cache=True, nogil=True, inline="always")
def add_moved(info, m):  # pragma: no cover - compiled
    """Add a step's tokens moved to ``info[MOVED]``; False (the kernel ends its block after this
    step; ``info[HIT]`` -2) once the total would leave ``(-2**62, 2**62)``: the engine goes on step
    by step. Nothing to add without cycle detection (``info[PERIOD]`` 0)."""
    if info[PERIOD] == 0:  # (no cycle detection: no totals kept)
        return True
    run = info[MOVED]
    if m >= _SAFE - run or m <= -_SAFE - run:
        info[HIT] = -2  # (not a state found: tells a protocol's steps that the block ended)
        return False
    info[MOVED] = run + m
    return True


@numba.njit(cache=True, nogil=True)
def _rehash(keys, visits, new_keys, new_visits):  # pragma: no cover - compiled
    for s in range(keys.shape[0]):
        if visits[s, 0] != _EMPTY_STEP:
            _insert(new_keys, new_visits, keys[s, 0], keys[s, 1], visits[s, 0], visits[s, 1])


class CycleTable:
    """The states a run in blocks has visited at period boundaries, in numpy arrays.

    The step-by-step loop keeps ``seen[key] = (step, tokens moved before it)`` in a dict; a block
    kernel keeps the same entries here through :func:`seen_before`, under the same keys
    (:func:`hash128` of the loads' and of the state's bytes, as :func:`cycle_key`), and stops
    before a step whose state it finds. :meth:`to_dict` gives the loop's dict when the run goes
    on step by step. At most half the slots are taken (:meth:`reserve`).

    Parameters
    ----------
    period : int
        The protocol's period: states are checked before the steps that are multiples of it.
    keys : int
        Keys to make room for at first.
    """

    def __init__(self, period: int, keys: int = 1024):
        self.period = int(period)
        #: Steps from the first visit of the state a block stopped on to the stop.
        self.cycle_length = None
        self.info = np.array([0, 0, -1, self.period], dtype=np.int64)
        self._make(keys)

    def _make(self, keys):
        slots = 1 << max(4, (2 * keys - 1).bit_length())
        self.keys = np.zeros((slots, 2), dtype=np.uint64)
        self.visits = np.full((slots, 2), _EMPTY_STEP, dtype=np.int64)

    def reserve(self, steps: int) -> None:
        """Make room for the keys of ``steps`` more steps."""
        need = int(self.info[COUNT]) + steps // self.period + 1
        if 2 * need > self.keys.shape[0]:
            keys, visits = self.keys, self.visits
            self._make(need)
            _rehash(keys, visits, self.keys, self.visits)

    def start(self, moved: int) -> None:
        """Before a block: ``moved`` the tokens moved so far (within 2**62), no state found yet."""
        self.info[MOVED] = moved
        self.info[HIT] = -1

    def arrays(self):
        """``(keys, visits, info)``: a block kernel's arguments."""
        return self.keys, self.visits, self.info

    def seen(self, loads, state, step: int) -> bool:
        """:func:`seen_before` from Python, for a step a protocol's ``steps`` takes outside its kernel:
        ``state`` as :meth:`~tokendist.engine.Protocol.state_key` returns it (an array or a tuple of
        arrays, or ``b""``), hashed as :func:`cycle_key` hashes it."""
        if isinstance(state, np.ndarray):
            state = _bytes_view(state)
        elif isinstance(state, tuple):
            state = np.concatenate([_bytes_view(np.asarray(p)) for p in state]) if state else _EMPTY
        else:
            assert type(state) is bytes and not state  # (other forms take no blocks)
            state = _EMPTY
        return seen_before(self.keys, self.visits, self.info, _bytes_view(loads), state, step)

    def hit(self) -> tuple[int, int] | None:
        """``(step, tokens moved before it)`` of the first visit of the state the last block stopped
        on, or None."""
        s = int(self.info[HIT])
        return None if s < 0 else (int(self.visits[s, 0]), int(self.visits[s, 1]))

    def to_dict(self) -> dict:
        """The step-by-step loop's ``seen``: ``{(lane 1, lane 2): (step, tokens moved before it)}``."""
        used = np.flatnonzero(self.visits[:, 0] != _EMPTY_STEP)
        return dict(zip(map(tuple, self.keys[used].tolist()), map(tuple, self.visits[used].tolist())))


#: The arrays a block kernel takes when the run detects no cycles (``info[PERIOD]`` 0).
NO_TABLE = (np.zeros((1, 2), dtype=np.uint64), np.full((1, 2), _EMPTY_STEP, dtype=np.int64),
            np.array([0, 0, -1, 0], dtype=np.int64))
