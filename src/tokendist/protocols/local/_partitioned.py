"""Partitioned step of ``ds`` (``--backend mpi``; :mod:`tokendist.engine.mpi`).

DS (Ghosh et al. 1995, Sec. 5) keeps two estimates per edge ``(u, v)``: ``e^u(v)`` at u and
``e^v(u)`` at v. A rank keeps both on every edge of its local graph, the cut edges included: each
step, for every local edge, it decides both directions (``w(u) - e^u(v) > threshold`` sends one
token from u to v, and symmetrically) from the start-of-step loads, which it holds for its ghosts
too, and sets both estimates to those loads. Both ranks of a cut edge so decide the same and keep
the same estimates, and the rule is integer: the owned loads and outflows are the single-process
ones exactly, whichever kernel that process runs (the per-node and per-edge kernels keep the same
estimates, see ``DynamicSynchronous``).
"""

from __future__ import annotations

import numpy as np

from ...engine import Step

__all__ = ["ds_setup", "ds_step", "ds_is_stable", "ds_state_key"]


def ds_setup(self, part):
    # e^u(v) and e^v(u) of the whole graph (the same arbitrary initial estimates on every rank)
    # on the local edges, in int64.
    self._part_est_u = np.asarray(self.est_u, dtype=np.int64)[part.edges]
    self._part_est_v = np.asarray(self.est_v, dtype=np.int64)[part.edges]


def ds_step(self, t, part, loads):
    """One DS step on a rank's local graph (the reference rule per edge, both directions)."""
    g = part.graph
    wu, wv = loads[g.u], loads[g.v]
    send_uv = (wu - self._part_est_u > self.threshold).astype(np.int64)
    send_vu = (wv - self._part_est_v > self.threshold).astype(np.int64)
    out_u = np.bincount(g.u, weights=send_uv, minlength=g.n).astype(np.int64)
    out_v = np.bincount(g.v, weights=send_vu, minlength=g.n).astype(np.int64)
    in_v = np.bincount(g.v, weights=send_uv, minlength=g.n).astype(np.int64)
    in_u = np.bincount(g.u, weights=send_vu, minlength=g.n).astype(np.int64)
    # (2): each message carries its sender's load at the start of the step.
    self._part_est_u = wv.astype(np.int64)
    self._part_est_v = wu.astype(np.int64)
    return Step(loads - out_u - out_v + in_v + in_u, messages=2 * part.global_graph.m, outflow=out_u + out_v)


def ds_is_stable(self, part, loads):
    """``DynamicSynchronous.is_stable`` over the ranks: estimates exact and no edge above the threshold."""
    g = part.graph
    wu, wv = loads[g.u], loads[g.v]
    mine = bool(g.m == 0 or (np.array_equal(self._part_est_u, wv) and np.array_equal(self._part_est_v, wu)
                             and np.abs(wu - wv).max() <= self.threshold))
    return part.allreduce(mine, "and")


def ds_state_key(self, part):
    """``DynamicSynchronous.state_key`` (both estimates per edge, global edge order) on rank 0; collective."""
    est_u, est_v = part.gather_edges(self._part_est_u), part.gather_edges(self._part_est_v)
    return None if est_u is None else est_u.tobytes() + est_v.tobytes()
