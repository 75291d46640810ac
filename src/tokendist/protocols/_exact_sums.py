"""Per-node sums of integer per-edge flows, exact over the whole int64 range.

``np.bincount(index, weights=flows)`` adds in float64: exact while every partial sum stays below
2**53, and silently off by the last tokens beyond (a dynamic run of ``diffusion-floor`` with a load
near 2**62 "broke token conservation" by 32 tokens that the sums had rounded away). These helpers
keep bincount where it is exact and add in int64 (``np.add.at``) where it is not.
"""

from __future__ import annotations

import numpy as np

__all__ = ["node_sums", "apply_edge_flows"]

# float64 represents every integer of magnitude up to 2**53: a sum of k terms of magnitude at most
# b has partial sums of magnitude at most k b.
_EXACT_FLOAT = 2**53


def node_sums(index: np.ndarray, values: np.ndarray, n: int) -> np.ndarray:
    """``sum of values[e] over the edges e with index[e] == i`` for each node i, as int64 (exact).

    Real ``values``: bincount's float64 sums, as before.
    """
    if values.dtype.kind == "f":
        return np.bincount(index, weights=values, minlength=n)
    if values.size == 0:
        return np.zeros(n, dtype=np.int64)
    top = max(int(values.max()), -int(values.min()))
    if top * values.size < _EXACT_FLOAT:
        return np.bincount(index, weights=values, minlength=n).astype(np.int64)
    out = np.zeros(n, dtype=np.int64)
    np.add.at(out, index, values.astype(np.int64, copy=False))
    return out


def apply_edge_flows(u: np.ndarray, v: np.ndarray, loads: np.ndarray, flows: np.ndarray):
    """``(loads after the signed flows u -> v, what each node sent)``, both int64 and exact."""
    n = loads.shape[0]
    pos, neg = np.maximum(flows, 0), np.maximum(-flows, 0)
    outflow = node_sums(u, pos, n) + node_sums(v, neg, n)
    new = loads - node_sums(u, flows, n) + node_sums(v, flows, n)
    return new, outflow
