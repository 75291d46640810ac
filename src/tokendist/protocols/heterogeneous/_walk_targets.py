"""The phase-2 targets of the randomized algorithm (Elsässer, Monien, Schamberger 2006, Sec. 3).

Shared by the single-process steps (:mod:`._random_walk`) and the partitioned step
(:mod:`._random_walk_partitioned`), which computes them for one rank's nodes.
"""

from __future__ import annotations

import numpy as np

__all__ = ["targets"]


def targets(estimate: np.ndarray, speeds: np.ndarray, n: int | None = None,
            speed_sum: float | None = None) -> tuple[np.ndarray, np.ndarray]:
    """The phase-2 targets ``what`` and the slow set R (a boolean mask) of Section 3.

    ``sbar_i = n s_i / sum s``; ``R = {sbar_i < 1/3}``; ``what_i = ceil(wbar_i)`` on R and
    ``ceil(wbar_i) + ceil(2 sbar_i)`` elsewhere. ``n`` and ``speed_sum`` (default: ``speeds``'
    size and sum) are the whole graph's when ``estimate`` and ``speeds`` cover some nodes only
    (one rank's, ``--backend mpi``).
    """
    n = speeds.size if n is None else n
    sbar = speeds * (n / (speeds.sum() if speed_sum is None else speed_sum))
    slow = sbar < 1.0 / 3.0
    # A tiny relative slack so that an estimate equal to an integer up to round-off stays that integer.
    base = np.ceil(estimate - 1e-9 * np.maximum(1.0, np.abs(estimate))).astype(np.int64)
    what = np.where(slow, base, base + np.ceil(2.0 * sbar).astype(np.int64))
    return what, slow
