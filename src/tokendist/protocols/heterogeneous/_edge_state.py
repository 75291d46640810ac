"""Per-edge state of ``sos`` and ``sos-iou`` across steps: carried onto a changed graph, read back from the kernels.

Both schemes keep a value per edge (the previous SOS flow; the IOU) by node pair. On a dynamic
network (Elsässer, Monien, Schamberger 2006, Sec. 4) an edge that disappears drops its value and a
new edge starts from 0 (:func:`carry`). ``sos-iou``'s kernels may keep the amounts owed instead of
the IOUs (:func:`actual_ious`) and, for ``ideal=sent``, rebuild the flow sent (:func:`sent_flows`).
"""

from __future__ import annotations

import numpy as np

__all__ = ["actual_ious", "sent_flows", "carry", "StatePair"]


def actual_ious(raw, owed_stored, has_exc, bits):
    """The IOUs of ``sos-iou``'s kernel state ``raw`` (the amounts owed where ``owed_stored``, see
    ``SOSIOU._iou``), in the layout of ``raw`` (edge order or by dimension), as a new array."""
    if not owed_stored:
        return raw.copy()
    iou = raw - np.trunc(raw)
    if has_exc:
        exc = np.unpackbits(bits, count=raw.size, bitorder="little").view(bool)
        iou.reshape(-1)[exc] = raw.reshape(-1)[exc]
    return iou


def sent_flows(y, iou_before, iou_after):
    """The tokens sent on each edge, ``(y + IOU^{k-1}) - IOU^k``, from the kernels' state (ideal=sent).

    Exact, so the numpy reference's integer ``sent`` bit for bit (up to the sign of a zero): the
    amount owed ``o = y + IOU^{k-1}`` is the kernel's own sum, the IOU is ``o - sent`` with
    ``sent`` an integer between 0 and ``trunc(o)``, a multiple of ``ulp(o)`` while ``|o| < 2^53``,
    so ``o - sent`` and then ``o - (o - sent)`` are exact.
    """
    return (y + iou_before) - iou_after


def carry(prev_keys, prev_vals, graph):
    """Per-edge state of the previous step's graph mapped onto ``graph`` (0 on new edges).

    Returns the mapped values and the total absolute value dropped with edges that disappeared.
    """
    keys = graph.edge_keys
    if prev_keys is None:
        return np.zeros(graph.m), 0.0
    if prev_keys.shape == keys.shape and np.array_equal(prev_keys, keys):
        return prev_vals, 0.0
    if prev_keys.size == 0:
        return np.zeros(graph.m), 0.0
    pos = np.minimum(np.searchsorted(prev_keys, keys), prev_keys.size - 1)
    found = prev_keys[pos] == keys
    out = np.where(found, prev_vals[pos], 0.0)
    kept = np.zeros(prev_keys.size, bool)
    kept[pos[found]] = True
    return out, float(np.abs(prev_vals[~kept]).sum())


class StatePair:
    """Two float64 buffers used in turn: a step writes its state into one while it reads last
    step's from the other.

    ``sos-iou``'s numpy step keeps ``[y | IOU | w']`` so, side by side, so that its state key (the
    bytes the engine hashes every step to detect cycles) is :attr:`current` itself, no copy; its
    kernel path writes them there (:func:`._sos_readings.shadow_step`) once the engine has asked
    for a key (:attr:`wanted`). :attr:`views` are the arrays of that step, to tell whether the
    protocol's state is still them.
    """

    def __init__(self):
        self.bufs = None
        self.views = None
        #: Whether the engine has asked for a state key (it does on small static graphs, every step).
        self.wanted = False

    def next(self, size: int) -> np.ndarray:
        """The buffer of ``size`` values to write this step's state into (the other holds last step's)."""
        if self.bufs is None or self.bufs[0].shape[0] != size:
            self.bufs = [np.empty(size), np.empty(size)]
        self.bufs.reverse()
        return self.bufs[0]

    @property
    def current(self) -> np.ndarray:
        """The buffer the last step wrote."""
        return self.bufs[0]
