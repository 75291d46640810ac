"""Maximum stable discrepancy MSD(T) fast: a breadth-first search over Z_n (Houle et al. 2004, Sec. 4.3).

The stability of a gap ``p`` of an ``n``-node tree is the least number of terms of ``SG_1(T)``
(the subtree sizes ``|T(x, y)|``) that sum to ``p`` modulo ``n``; ``MSD(T)`` is the largest
stability. That is a shortest-path problem in the Cayley graph of ``Z_n`` whose generators are the
stable gaps: breadth-first search from 0 gives every stability at once.

The paper computes ``SG_i`` from ``SG_{i-1}`` by all pairwise sums, ``O(n^2 MSD)`` time. Here each
BFS layer is expanded by the cheapest of three methods (a direction-optimising BFS):

* *push*: every frontier element plus every generator, ``|F| g`` probes;
* *pull*: every unreached element looks for a generator that leads back into the frontier and stops
  at the first one, at most ``|U| g`` probes, usually far fewer;
* *bitset*: the frontier as a bit array, rotated by every generator and OR-ed, ``g n / 64`` word
  operations in sequential memory (the winner for complete k-ary trees: few generators, big layers);
* *FFT*: the layer is the support of the cyclic convolution of the frontier's indicator with the
  generators' indicator, ``O(n log n)`` whatever ``|F|`` and ``g``.

Push, pull and bitset run inside one numba kernel that loops over the layers itself (a star has ``n/2``
layers), and hands back to Python only when an FFT layer is cheaper.

For the complete ``k``-ary tree the generator set is known in closed form (every edge cuts off a
complete subtree ``T_{j,k}``), so :func:`kary_subtree_sizes` gives it without building the graph.
"""

from __future__ import annotations

import math

import numba
import numpy as np

from ..errors import TokendistError

__all__ = ["gap_stability", "gap_stability_naive", "msd_from_sizes", "kary_subtree_sizes", "kary_order",
           "generators_from_sizes"]


def generators_from_sizes(n: int, sizes) -> np.ndarray:
    """``SG_1`` from subtree sizes: the distinct values ``s`` and ``n - s`` in ``1 .. n-1``, sorted."""
    s = np.asarray(sizes, dtype=np.int64)
    s = s[(s >= 1) & (s <= n - 1)]
    # A presence mask, not np.unique: O(n) and, with numpy 2.4, far faster on a million sizes.
    present = np.zeros(max(n, 1), dtype=bool)
    present[s] = True
    present[n - s] = True
    return np.flatnonzero(present).astype(np.int64)


@numba.njit(cache=True, nogil=True)
def _bitset_layer(dist, vis, gens, frontier, nf, level, nxt):  # pragma: no cover - compiled
    """One layer as the union of the frontier bitset rotated by every generator, minus the visited.

    The frontier is written twice into a ``2n``-bit array ``D`` so that rotating by ``s`` modulo
    ``n`` is reading 64 bits at offset ``n - s + 64 w`` for word ``w``: ``O(g n / 64)`` word
    operations, sequential in memory.
    """
    n = dist.shape[0]
    nw = (n + 63) >> 6
    dw = ((2 * n + 63) >> 6) + 2
    d = np.zeros(dw, np.uint64)
    one = np.uint64(1)
    for i in range(nf):
        f = frontier[i]
        d[f >> 6] |= one << np.uint64(f & 63)
        f2 = f + n
        d[f2 >> 6] |= one << np.uint64(f2 & 63)
    acc = np.zeros(nw, np.uint64)
    for j in range(gens.shape[0]):
        base = n - gens[j]
        q0 = base >> 6
        r = base & 63
        if r == 0:
            for w in range(nw):
                acc[w] |= d[q0 + w]
        else:
            ru = np.uint64(r)
            lu = np.uint64(64 - r)
            for w in range(nw):
                acc[w] |= (d[q0 + w] >> ru) | (d[q0 + w + 1] << lu)
    # Padding bits beyond n in the last word are not elements.
    tail = n & 63
    if tail:
        acc[nw - 1] &= (one << np.uint64(tail)) - one
    k = 0
    for w in range(nw):
        x = acc[w] & ~vis[w]
        if x:
            vis[w] |= x
            b = 0
            while x:
                if x & one:
                    e = (w << 6) + b
                    dist[e] = level + 1
                    nxt[k] = e
                    k += 1
                x >>= one
                b += 1
    return k


@numba.njit(cache=True, nogil=True)
def _bfs_kernel(dist, vis, gens, frontier, nf, level, unreached, fft_cost):  # pragma: no cover - compiled
    """Expand BFS layers over Z_n by push, pull or bitset until done or an FFT layer is cheaper.

    ``dist[x]`` is -1 for unreached x and ``vis`` its bitset; ``frontier[:nf]`` holds the elements at
    distance ``level``. Returns ``(nf, level, unreached, want_fft)``; on return ``frontier[:nf]`` is
    the current layer.
    """
    n = dist.shape[0]
    g = gens.shape[0]
    one = np.uint64(1)
    nxt = np.empty_like(frontier)
    unv = np.empty(0, np.int64)
    nu = 0
    unv_valid = False
    bits = 2 * g * ((n + 63) >> 6) + n // 16
    while nf > 0 and unreached > 0:
        push = nf * g
        # Pull stops at the first generator that hits the frontier. That would be about n / nf
        # probes for a frontier spread evenly, but stable gaps cluster (a tree has many small
        # subtrees), so a miss scans about half the generators: charge g / 2.
        pull = unreached * (g // 2 + 1) + (n if not unv_valid else 0)
        best = min(push, pull, bits)
        if fft_cost < best:
            return nf, level, unreached, True
        k = 0
        if best == bits:
            k = _bitset_layer(dist, vis, gens, frontier, nf, level, nxt)
            unv_valid = False
        elif best == push:
            for i in range(nf):
                f = frontier[i]
                for j in range(g):
                    y = f + gens[j]
                    if y >= n:
                        y -= n
                    if dist[y] < 0:
                        dist[y] = level + 1
                        vis[y >> 6] |= one << np.uint64(y & 63)
                        nxt[k] = y
                        k += 1
            unv_valid = False
        else:
            if not unv_valid:
                unv = np.empty(unreached, np.int64)
                nu = 0
                for x in range(n):
                    if dist[x] < 0:
                        unv[nu] = x
                        nu += 1
                unv_valid = True
            keep = 0
            for i in range(nu):
                x = unv[i]
                hit = False
                for j in range(g):
                    y = x - gens[j]
                    if y < 0:
                        y += n
                    if dist[y] == level:
                        hit = True
                        break
                if hit:
                    dist[x] = level + 1
                    vis[x >> 6] |= one << np.uint64(x & 63)
                    nxt[k] = x
                    k += 1
                else:
                    unv[keep] = x
                    keep += 1
            nu = keep
        unreached -= k
        level += 1
        frontier[:k] = nxt[:k]
        nf = k
    return nf, level, unreached, False


def _fft_layer(dist, frontier_nodes, gen_hat, level, n):
    """One BFS layer as the support of a cyclic convolution (scipy.fft, length n)."""
    import scipy.fft as sfft

    f = np.zeros(n, dtype=np.float64)
    f[frontier_nodes] = 1.0
    conv = sfft.irfft(sfft.rfft(f) * gen_hat, n)
    # Entries are counts of representations (integers <= g); FFT error is far below 0.5.
    new = np.flatnonzero((conv > 0.5) & (dist < 0))
    dist[new] = level + 1
    return new


def gap_stability(n: int, gens, *, fft_ns_per_point: float | None = None) -> np.ndarray:
    """The stability of every gap: ``dist[p] = min{i : p in SG_i}`` for ``p = 1 .. n-1`` (``dist[0] = 0``).

    Parameters
    ----------
    n : int
        Number of nodes of the tree.
    gens : array_like of int
        ``SG_1(T)`` (closed under ``p -> n - p``; see :func:`generators_from_sizes`).
    fft_ns_per_point : float, optional
        Cost model: the price of an FFT layer in kernel probes is this times ``n log2 n``
        (default 4). Only the speed depends on it, never the result.

    Returns
    -------
    ndarray of int32, shape (n,)
        ``dist[p]`` is the stability of gap ``p`` (Sec. 4.3); -1 would mark an unreachable gap,
        which cannot happen for a tree since ``1 in SG_1``.

    Examples
    --------
    >>> gap_stability(7, [1, 3, 4, 6]).tolist()   # T_{2,2}: SG_1 = {1, 3, 4, 6}
    [0, 1, 2, 1, 1, 2, 1]
    """
    n = int(n)
    if n < 1:
        raise TokendistError("a tree has at least one node")
    gens = np.asarray(gens, dtype=np.int64)
    dist = np.full(n, -1, dtype=np.int32)
    dist[0] = 0
    if n == 1:
        return dist
    if gens.size == 0 or gens.min() < 1 or gens.max() > n - 1:
        raise TokendistError("stable gaps must lie in 1 .. n-1")
    c = 4.0 if fft_ns_per_point is None else float(fft_ns_per_point)
    fft_cost = int(c * n * max(1.0, math.log2(n)))
    frontier = np.zeros(n, dtype=np.int64)
    vis = np.zeros((n + 63) >> 6, dtype=np.uint64)
    vis[0] = 1
    nf, level, unreached = 1, 0, n - 1
    gen_hat = None
    while True:
        nf, level, unreached, want_fft = _bfs_kernel(dist, vis, gens, frontier, nf, level, unreached, fft_cost)
        if not want_fft:
            break
        if gen_hat is None:
            import scipy.fft as sfft

            ind = np.zeros(n)
            ind[gens] = 1.0
            gen_hat = sfft.rfft(ind)
        new = _fft_layer(dist, frontier[:nf], gen_hat, level, n)
        np.bitwise_or.at(vis, new >> 6, np.left_shift(np.uint64(1), (new & 63).astype(np.uint64)))
        unreached -= new.size
        level += 1
        nf = new.size
        frontier[:nf] = new
    return dist


def gap_stability_naive(n: int, gens) -> list[int]:
    """The paper's method, deliberately naive: ``SG_i = SG_{i-1} + SG_1`` (eq. 4) with Python sets.

    ``O(n^2 MSD)``; a reference for tests on small trees. Returns ``[stability(p) for p in 0..n-1]``
    with 0 for ``p = 0``.
    """
    sg1 = {int(p) % n for p in gens}
    stab = [0] * n
    current = set(sg1)
    i = 1
    for p in current:
        if p:
            stab[p] = 1
    while len({p for p in current if p}) < n - 1:
        nxt = current | {(p + q) % n for p in current for q in sg1}
        i += 1
        for p in nxt - current:
            if p and not stab[p]:
                stab[p] = i
        if nxt == current:
            raise TokendistError("stable gaps do not generate Z_n")
        current = nxt
    return stab


def msd_from_sizes(n: int, sizes) -> int:
    """MSD(T) from ``n`` and the subtree sizes of the tree (0 for a single node)."""
    if n <= 1:
        return 0
    return int(gap_stability(n, generators_from_sizes(n, sizes)).max())


def kary_order(k: int, h: int) -> int:
    """``|T_{h,k}| = (k^(h+1) - 1) / (k - 1)`` (``h + 1`` for ``k = 1``)."""
    if k < 1 or h < 0:
        raise TokendistError("a complete k-ary tree needs k >= 1 and h >= 0")
    return h + 1 if k == 1 else (k ** (h + 1) - 1) // (k - 1)


def kary_subtree_sizes(k: int, h: int) -> tuple[int, np.ndarray]:
    """``n`` and the distinct subtree sizes ``|T_{j,k}|, j = 0 .. h-1`` of the complete k-ary tree.

    Every edge of ``T_{h,k}`` joins a node at depth ``d`` to a child at depth ``d + 1``; removing
    it leaves the child's complete subtree ``T_{h-d-1,k}`` (Lemma 17's proof), so these sizes and
    their complements are ``SG_1(T_{h,k})``, without building the tree.
    """
    return kary_order(k, h), np.array([kary_order(k, j) for j in range(h)], dtype=np.int64)
