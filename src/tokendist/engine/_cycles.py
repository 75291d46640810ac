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
  the key is the sha256 digest of the loads' bytes followed by those bytes, as before.

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

__all__ = ["cycle_key", "hash128", "sha256_key", "state_bytes"]

# Lane constants: MurmurHash3 x64_128's c2 for lane 1, the xxHash64 prime 2 for lane 2; two more
# odd constants start the odd-word streams.
_C1, _C2 = np.uint64(0x87C37B91114253D5), np.uint64(0x4CF5AD432745937F)
_C3, _C4 = np.uint64(0x9E3779B185EBCA87), np.uint64(0xC2B2AE3D27D4EB4F)
_SEED1, _SEED2 = np.uint64(0x243F6A8885A308D3), np.uint64(0x13198A2E03707344)  # (digits of pi)
_U8 = np.dtype(np.uint8)
_EMPTY = np.zeros(0, dtype=_U8)  # b"" (no state), as an empty array


@numba.njit(cache=True, inline="always")
def _rotl(x, r):
    return (x << np.uint64(r)) | (x >> np.uint64(64 - r))


@numba.njit(cache=True, inline="always")
def _fmix64(k):
    k ^= k >> np.uint64(33)
    k *= np.uint64(0xFF51AFD7ED558CCD)
    k ^= k >> np.uint64(33)
    k *= np.uint64(0xC4CEB9FE1A85EC53)
    k ^= k >> np.uint64(33)
    return k


@numba.njit(cache=True, inline="always")
def _round(h1, h2, w):
    # One word into both lanes: for a fixed word each line is a bijection of its lane, and for a
    # fixed lane a bijection of the word (xor, rotation, multiplication by an odd constant).
    h1 = _rotl(h1 ^ w, 31) * _C2
    h2 = _rotl(h2 ^ w, 27) * _C4
    return h1, h2


@numba.njit(cache=True, inline="always")
def _absorb(data, h1, h2):
    # The whole words, read in place (x86 reads unaligned words at full speed), the even ones into
    # (h1, h2) and the odd ones into (g1, g2): two independent chains of multiplications in flight,
    # 1.7 times the speed of one. Joining them by xor keeps a single changed word a changed lane.
    n = data.size
    whole = n >> 3
    words = data[:whole * 8].view(np.uint64)
    g1, g2 = h1 ^ _C1, h2 ^ _C3
    for i in range(0, whole - 1, 2):
        h1, h2 = _round(h1, h2, words[i])
        g1, g2 = _round(g1, g2, words[i + 1])
    h1 ^= _rotl(g1, 29)
    h2 ^= _rotl(g2, 23)
    if whole & 1:
        h1, h2 = _round(h1, h2, words[whole - 1])
    if n & 7:  # the last partial word, little-endian, zero-padded
        w = np.uint64(0)
        for j in range(n - 1, whole * 8 - 1, -1):
            w = (w << np.uint64(8)) | np.uint64(data[j])
        h1, h2 = _round(h1, h2, w)
    # The length ends the part: the same bytes split differently between loads and state hash differently.
    return _round(h1, h2, np.uint64(n))


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
    """
    h1, h2 = _absorb(loads, _SEED1, _SEED2)
    h1, h2 = _absorb(state, h1, h2)
    h1 = _fmix64(h1)
    h2 = _fmix64(h2)
    h1 += h2  # (MurmurHash3's finish: (h1, h2) -> (h1 + h2, h1 + 2 h2), a bijection of the pair)
    h2 += h1
    return h1, h2


def _bytes_view(a):
    """The bytes of array ``a`` as a 1-D C-contiguous uint8 view (a copy only if ``a`` is not contiguous)."""
    if a.ndim != 1 or not a.flags.c_contiguous:
        a = np.ascontiguousarray(a).reshape(-1)
    return a.view(_U8)  # (a dtype object: a quarter less time than np.uint8 here)


def state_bytes(state) -> bytes:
    """The bytes a :meth:`state_key` result stands for (arrays' bytes one after another), as ``bytes``."""
    if isinstance(state, np.ndarray):
        return state.tobytes()
    if isinstance(state, tuple):
        return b"".join(np.asarray(p).tobytes() for p in state)
    return bytes(state)


def sha256_key(loads, state: bytes) -> bytes:
    """The key of a state given as ``bytes``: sha256 of the loads' bytes followed by ``state``."""
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
        its arrays' bytes one after another (hashed from a copy: one array is cheaper).

    Returns
    -------
    tuple of two int, or bytes
        :func:`hash128` for arrays and ``b""``; :func:`sha256_key` for non-empty bytes.
    """
    if isinstance(state, np.ndarray):
        state = _bytes_view(state)
    elif isinstance(state, tuple):
        state = np.concatenate([_bytes_view(np.asarray(p)) for p in state]) if state else _EMPTY
    elif state:
        return sha256_key(loads, bytes(state))
    else:
        state = _EMPTY
    return hash128(_bytes_view(loads), state)
