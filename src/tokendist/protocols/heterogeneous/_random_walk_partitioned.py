"""Partitioned step of ``random-walk`` (``--backend mpi``; :mod:`tokendist.engine.mpi`).

The algorithm of Elsässer, Monien and Schamberger (2006), Sec. 3, on one rank's part of the graph
(:class:`~tokendist.engine.mpi.LocalPart`: its own nodes and their ghosts), with the single
process's numba path as the reference, bit for bit:

* Phase 1 (integer FOS and the real FOS estimate): the serial kernel
  :func:`~.kernels._walk_serial.fos_pair_step` on the local graph with the whole graph's
  coefficients. An owned row lists the whole graph's neighbours in the whole graph's order, so
  the owned loads and estimates are the single-process kernel's (which the regular, stencil and
  cube kernels equal bit for bit). The estimate of the ghosts comes from their owners after every
  step (a second halo exchange). The step's figures are over the owned nodes: the estimate's
  largest error and largest weighted value are maxima over the ranks; its squared error is summed
  in node order, as the kernels sum it (passed from rank to rank on a contiguous partition,
  gathered on rank 0 otherwise), so ``estimate_l2_error`` has the single-process bits.
* The switch (Sec. 3, Sec. 4): ``error`` reads that maximum; ``local`` the largest weighted
  estimate difference over the local edges (ghost estimates included), a maximum over the ranks;
  ``step`` needs nothing. The targets and the marked and negative tokens are per node (the
  whole graph's ``n`` and ``sum s``), their totals sums over the ranks.
* Phase 2 (main random walk steps): each token moves one hop per step, so it crosses at most one
  cut. A rank walks the tokens of its own nodes (:func:`~.kernels._walk_partitioned.walk_owned`:
  the coins of the global node ids), counts the moves per local edge and direction, and sends,
  for each cut edge, the moves of each kind out of its end to the rank owning the other end (one
  neighbour exchange of one number per cut edge). Both directions of every local edge are then
  known to the rank: it settles the real tokens of its nodes (a marked token i -> j moves one
  token i -> j, a negative one moves one j -> i), counts its overdrawn nodes and annihilates on
  them. The step's totals (messages, overdraws, annihilations, marked and negative tokens left)
  are one sum over the ranks; phase 2 ends on every rank when no marked token is left anywhere.

The counters of ``report()`` are kept global on every rank as they arise; the per-node state
(targets, slow set, marked and negative tokens) is gathered on rank 0 at the end
(:func:`walk_finish`).
"""

from __future__ import annotations

import numpy as np

from ...engine import Step
from .kernels._walk_partitioned import walk_owned
from .kernels._walk_serial import fos_pair_step
from ._walk_targets import targets

__all__ = ["walk_setup", "walk_step", "walk_is_stable", "walk_finish"]

_LOW = np.int64(0xFFFFFFFF)


def walk_setup(self, part):
    """The whole graph's coefficients, speeds and estimate on the rank's local nodes and edges (collective)."""
    g = part.graph
    a0, inv, deg, caps = self._graph_state(part.global_graph)  # validates M as the single process does
    self._part_a0 = a0
    self._part_inv = np.ascontiguousarray(inv[part.nodes]) if inv.shape[0] else inv
    self._part_deg = np.ascontiguousarray(deg[part.nodes]) if caps.shape[0] else deg
    self._part_caps = np.ascontiguousarray(caps[part.edges]) if caps.shape[0] else caps
    self._part_s = np.ascontiguousarray(self._s[part.nodes])
    self._part_est = np.ascontiguousarray(self.estimate[part.nodes])
    self._part_rows = np.ascontiguousarray(part.owned, dtype=np.int64)
    self._part_gid = np.ascontiguousarray(part.nodes, dtype=np.int64)
    self._part_g = np.empty(max(int(np.diff(g.indptr).max(initial=0)), 1))
    ou, ov = part.is_owned[g.u], part.is_owned[g.v]
    self._part_cut_u = ou & ~ov  # cut edges whose owned end is u
    self._part_cut_v = ov & ~ou
    self._part_counts = (0, 0)  # marked and negative tokens left over all ranks
    self._part_what = self._part_slow = None
    self._part_marked = self._part_negative = None
    # The squared error is summed in node order: along the ranks when each owns one range of ids,
    # in rank order (the contiguous partition), else on rank 0.
    own = part.owned_global
    one_range = bool(own.size == 0 or own[-1] - own[0] + 1 == own.size)
    counts = part.comm.allgather(int(own.size))
    starts = part.comm.allgather(int(own[0]) if own.size else -1)
    offsets = np.concatenate([[0], np.cumsum(counts)[:-1]])
    self._part_chained = bool(part.allreduce(one_range, "and")
                              and all(s == -1 or s == o for s, o in zip(starts, offsets)))
    if not self._part_chained:  # the global id of every gathered error, and where each rank's maximum sits
        counts = np.array(counts, dtype=np.int64)
        ids = np.empty(int(counts.sum()), dtype=np.int64) if part.rank == 0 else None
        displs = np.concatenate([[0], np.cumsum(counts)[:-1]]).astype(np.int64)
        part.comm.Gatherv(np.ascontiguousarray(own), [ids, (counts, displs)] if ids is not None else None, root=0)
        counts = counts + 1
        displs = np.concatenate([[0], np.cumsum(counts)[:-1]]).astype(np.int64)
        self._part_gather = (counts, displs, ids, displs + counts - 1)


def _estimate_figures(self, part, err, we):
    """``(sum err^2, max err, max we)`` over the owned nodes of every rank (collective).

    The sum is added from 0.0 in global node order, as the kernels add it: carried from rank to
    rank with the two maxima when each rank owns one range of ids in rank order (the contiguous
    partition), else the errors gathered on rank 0 (and ``we``, one value per rank). The figures land
    on rank 0, which reports them; with ``switch=error`` every rank needs the largest error, so
    they are then broadcast.
    """
    comm = part.comm
    out = np.array([0.0, 0.0, -np.inf])
    last = part.size - 1
    if self._part_chained:
        if part.rank > 0:
            comm.Recv(out, source=part.rank - 1, tag=11)
        if err.size:
            out[0] = np.cumsum(np.concatenate([out[:1], err * err]))[-1]  # strictly left to right
        out[1] = max(out[1], err.max(initial=0.0))
        out[2] = max(out[2], we)
        if part.rank < last:
            comm.Send(out, dest=part.rank + 1, tag=11)
        holder = last
    else:
        # One Gatherv: each rank's errors, then its largest weighted estimate.
        counts, displs, order, tops = self._part_gather
        buf = np.empty(int(counts.sum())) if part.rank == 0 else None
        send = np.concatenate([err, [we]])
        comm.Gatherv(send, [buf, (counts, displs)] if buf is not None else None, root=0)
        if part.rank == 0:
            full = np.empty(order.size)
            full[order] = np.delete(buf, tops)
            if full.size:
                out[0] = np.cumsum(full * full)[-1]
            out[1] = full.max(initial=0.0)
            out[2] = buf[tops].max()
        holder = 0
    if self.options["switch"] == "error":
        comm.Bcast(out, root=holder)
    elif holder != 0 and last > 0:  # rank 0 reports them
        if part.rank == holder:
            comm.Send(out, dest=0, tag=12)
        elif part.rank == 0:
            comm.Recv(out, source=holder, tag=12)
    return float(out[0]), float(out[1]), float(out[2])


def _record(self):
    marked, negative = self._part_counts
    self.series["marked"].append(int(marked))
    self.series["negative"].append(int(negative))
    self.series["estimate_l2_error"].append(self._est_l2)
    self.series["estimate_max_weighted_load"].append(self._est_max)


def _ready(self, t, part) -> bool:
    """``RandomWalk._ready`` over the ranks (every rank gets the same answer)."""
    rule = self.options["switch"]
    if rule == "step":
        return t >= self.options["switch_step"]
    if rule == "error":
        return self._max_err <= self.tol  # the global maximum of the last phase-1 step (or of reset)
    if part.global_graph.m == 0:
        return True
    g = part.graph
    x = self._part_est / self._part_s
    gap = float(np.abs(x[g.u] - x[g.v]).max(initial=0.0))
    return part.allreduce(gap, "max") <= self.tol


def _prepare(self, t, part, loads):
    """The preparation step of phase 2 on the owned nodes; the totals over the ranks."""
    own = part.owned
    what, slow = targets(self._part_est, self._part_s, n=part.global_graph.n, speed_sum=self._ssum)
    marked = np.maximum(loads - what, 0).astype(np.int64)
    negative = np.maximum(what - loads, 0).astype(np.int64)
    ghost = ~part.is_owned
    marked[ghost] = 0  # a ghost's tokens are walked by its owner
    negative[ghost] = 0
    self._part_what, self._part_slow = what, slow
    self._part_marked, self._part_negative = marked, negative
    m, ng = (int(x) for x in part.allreduce_array(np.array([marked[own].sum(), negative[own].sum()],
                                                           dtype=np.int64), "sum"))
    self.initial_marked, self.initial_negative = m, ng
    self._part_counts = (m, ng)
    self.switch_at = t
    self.phase = 2


def walk_step(self, t, part, loads):
    """One step of ``random-walk`` on a rank's local graph; the owned entries are the single process's."""
    g = part.graph
    loads = np.ascontiguousarray(loads, dtype=np.int64)
    if self.phase == 1 and _ready(self, t, part):
        _prepare(self, t, part, loads)
        if self._part_counts[0] == 0:
            self.phase, self.done_at = 3, t
    if self.phase == 1:
        return _phase1(self, part, loads)
    if self.phase == 3:
        _record(self)
        return Step(loads.copy(), messages=0, outflow=np.zeros(g.n, dtype=np.int64))
    return _mrws(self, t, part, loads)


def _phase1(self, part, loads):
    """Integer FOS on the tokens and real FOS on the estimate (the serial kernel on the local graph)."""
    g = part.graph
    est = self._part_est
    out, outflow = np.empty(g.n, dtype=np.int64), np.empty(g.n, dtype=np.int64)
    inv = self._part_inv if self._part_inv.shape[0] else None
    caps = self._part_caps if self._part_caps.shape[0] else None
    deg = self._part_deg if caps is not None else None
    if self._unit_speeds:  # as the single process: s None, x = w itself, a fresh estimate array
        s, xw, xe, dst = None, loads, est, np.empty(g.n)
    else:  # the estimate updated in place from the snapshot est / s
        s = self._part_s
        xw, xe, dst = loads / s, est / s, est
    if g.n:  # (a rank may own no node when there are more ranks than nodes)
        fos_pair_step(g.indptr, g.indices, g.csr_edges, self._part_a0, inv, deg, caps, self.options["c"], s,
                      self._ssum, self._total, loads, xw, est, xe, dst, out, outflow)
    part.exchange(dst)  # the ghosts' rows were partial: their owners' estimates
    self._part_est = dst
    # The kernel's figures of the updated estimate, over the owned nodes (its _estimate_error).
    e = dst[part.owned_sel]
    n, ssum, total = part.global_graph.n, self._ssum, self._total
    if s is None:
        err = np.abs(e - total * 1.0 / ssum)
        we = e.max(initial=-np.inf)
    else:
        s_own = self._part_s[part.owned_sel]
        err = np.abs(e - total * s_own / ssum)
        we = (e / (s_own * (n / ssum))).max(initial=-np.inf)
    sq, max_err, wmax = _estimate_figures(self, part, err, we)
    if s is None:
        wmax = wmax / (n / ssum)
    # Exact on rank 0, which reports them (and on every rank with switch=error, which reads max_err).
    self._max_err, self._est_max = max_err, wmax
    self._est_l2 = float(np.sqrt(sq))
    _record(self)
    return Step(out, messages=2 * part.global_graph.m, outflow=outflow)


def _mrws(self, t, part, loads):
    """One main random walk step of the rank's tokens; a cut edge settled from both of its ends."""
    g = part.graph
    n, m = g.n, g.m
    moves = {}
    stays = {}
    walked = 0
    for kind, counts in ((0, self._part_marked), (1, self._part_negative)):
        st, fwd, back = np.zeros(n, np.int64), np.zeros(m, np.int64), np.zeros(m, np.int64)
        k = walk_owned(g.indptr, g.indices, g.csr_edges, self._part_a0, self._part_inv, self._part_deg,
                       self._part_caps, self.options["c"], self._part_s, self._part_gid, self._part_rows, self._key,
                       t, kind, counts, st, fwd, back, self._part_g)
        walked += k if kind == 0 else 2 * k  # a negative token's move costs two messages (mrws_step)
        stays[kind], moves[kind] = st, (fwd, back)
    # What left this rank's end of each cut edge, both kinds in one number (a count per edge and
    # kind is below 2^31, token_index's own limit), to the rank that owns the other end.
    cu, cv = self._part_cut_u, self._part_cut_v
    sent = [np.where(cu, f, np.where(cv, b, 0)) for f, b in (moves[0], moves[1])]
    theirs = part.exchange_cut_edges((sent[0] << 32) | sent[1])
    for kind, arrived in ((0, theirs >> 32), (1, theirs & _LOW)):
        fwd, back = moves[kind]
        back += np.where(cu, arrived, 0)  # the other end is v: its tokens came v -> u
        fwd += np.where(cv, arrived, 0)
    (fm, bm), (fn, bn) = moves[0], moves[1]
    u, v = g.u, g.v

    def at_nodes(to_v, to_u):  # per local node: what arrives through fwd (at v) and back (at u)
        return (np.bincount(v, weights=to_v, minlength=n) + np.bincount(u, weights=to_u, minlength=n)).astype(np.int64)

    net = fm - bm - fn + bn  # real tokens u -> v: marked forth, negative back
    out = loads + at_nodes(net, -net)
    outflow = at_nodes(np.maximum(-net, 0), np.maximum(net, 0))
    new_m = stays[0] + at_nodes(fm, bm)
    new_n = stays[1] + at_nodes(fn, bn)
    need = at_nodes(bm, fm) + at_nodes(fn, bn)  # marked leaving, negative arriving
    own = part.owned_sel
    gone = np.minimum(new_m, new_n)
    marked, negative = new_m - gone, new_n - gone
    ghost = ~part.is_owned
    marked[ghost] = 0
    negative[ghost] = 0
    self._part_marked, self._part_negative = marked, negative
    figures = np.array([walked, np.count_nonzero(need[own] > loads[own]), gone[own].sum(), marked[own].sum(),
                        negative[own].sum()], dtype=np.int64)
    messages, overdraws, annihilated, left_m, left_n = (int(x) for x in part.allreduce_array(figures, "sum"))
    self.overdraw_events += overdraws
    self.annihilated += annihilated
    self._part_counts = (left_m, left_n)
    if left_m == 0:
        self.phase, self.done_at = 3, t + 1
    _record(self)
    return Step(out, messages=messages, outflow=outflow)


def walk_is_stable(self, part, loads):
    """``RandomWalk.is_stable``: phase 2 is over (the same phase on every rank)."""
    return self.phase == 3


def walk_finish(self, part):
    """The targets, slow set and walking tokens on rank 0 in global order, for ``report()`` (collective)."""
    if self._part_what is None:
        return
    what = part.gather_nodes(self._part_what)
    slow = part.gather_nodes(self._part_slow)
    marked = part.gather_nodes(self._part_marked)
    negative = part.gather_nodes(self._part_negative)
    estimate = part.gather_nodes(self._part_est)
    if part.rank == 0:
        self.what, self.slow, self.marked, self.negative, self.estimate = what, slow, marked, negative, estimate
