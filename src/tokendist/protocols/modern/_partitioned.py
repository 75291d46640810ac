"""Partitioned steps of the modern family (``--backend mpi``; :mod:`tokendist.engine.mpi`).

Two shapes of rule, two ways to split them over the ranks, each giving the single-process result
bit for bit whatever the number of ranks and the partition:

* **Per-node rules** (``randomized-diffusion``, ``stratified-diffusion``, ``rotor-router``,
  ``quasirandom``): what a node sends depends on its own load, its own state (a rotor, the errors
  of its out-edges) and draws keyed by ``(seed, step, global node id, slot)``. A rank evaluates
  the whole graph's CSR rows of all its local nodes, ghosts included (:class:`RowView`): a ghost's
  load is exchanged every step and its state follows from its load alone, so the rank knows what
  every ghost sends to its own nodes without any message beyond the load exchange. Its own nodes'
  new loads are then exact; the ghosts' are overwritten by the next exchange.
* **Per-edge rules** (``balancing-circuit``, ``random-matching``, ``flow-imitation``): the edge's
  decision (matched or not, the excess coin, the continuous flow) is keyed by its global id, and
  both ranks of a cut edge take it from the loads of both ends. Where a decision needs a sum over
  a ghost's whole row (how many candidate edges touch it, how much it owes), a second exchange
  brings the owner's figure (``random-matching``), or the value the sending end decided crosses
  the cut edge (``flow-imitation``'s guard, :meth:`LocalPart.exchange_cut_edges`).

The figures a report sums over the run (tokens held back, the largest gap) are kept per rank over
the nodes and edges it counts and reduced once at the end, when the per-slot and per-edge state is
gathered on rank 0 in global order for ``report()`` and cycle detection.
"""

from __future__ import annotations

import numpy as np

from ..._random import counter_uniform, counter_uniform_scalar
from ...engine import Step
from ...kernels._rows import RowOrder
from ._flow_imitation import FlowImitation
from ._matching import _TAG_ACTIVE, _TAG_COIN, _TAG_MATCH, _TAG_PICK, BalancingCircuit, RandomMatching
from ._pairwise_averaging import PairwiseAveraging
from ._quasirandom import Quasirandom, quasirandom_rounding
from ._randomized_diffusion import RandomizedDiffusion
from ._rotor_router import RotorRouter
from ._stratified import StratifiedDiffusion, _below

__all__ = ["RowView", "attach"]


class RowView:
    """The whole graph's CSR rows of a rank's local nodes (owned and ghosts), in local numbering.

    ``indices`` maps each slot's target to its local id, or to ``n - 1`` (a sink) when the target
    lives on no node of this rank (a ghost's neighbour elsewhere); ``slots`` are the slots' global
    positions (for per-slot state), ``rows`` the local row of each slot, ``row_global`` its global
    node id and ``k`` the slot's position in its row.
    """

    def __init__(self, part):
        g = part.global_graph
        nodes = part.nodes
        nl = nodes.size
        start = g.indptr[nodes].astype(np.int64)
        deg = g.indptr[nodes + 1].astype(np.int64) - start
        self.n = nl + 1
        self.indptr = np.concatenate([[0], np.cumsum(deg), [deg.sum()]]).astype(np.int64)
        total = int(deg.sum())
        self.rows = np.repeat(np.arange(nl, dtype=np.int64), deg)
        self.k = np.arange(total, dtype=np.int64) - self.indptr[self.rows]
        self.slots = start[self.rows] + self.k
        self.row_global = nodes[self.rows]
        target = g.indices[self.slots].astype(np.int64)
        pos = np.minimum(np.searchsorted(nodes, target), max(nl - 1, 0))
        self.indices = np.where(nodes[pos] == target, pos, nl) if nl else np.zeros(0, np.int64)
        self.owned_slot = part.is_owned[self.rows]

    def extended(self, loads):
        return np.concatenate([np.asarray(loads, dtype=np.int64), np.zeros(1, np.int64)])

    def apply(self, loads, sent):
        """``(new loads, outflow)`` of the local nodes after ``sent`` per slot (right on the owned nodes)."""
        n = self.n
        out = np.bincount(self.rows, weights=sent, minlength=n)[:-1].astype(np.int64)
        got = np.bincount(self.indices, weights=sent, minlength=n)[:-1].astype(np.int64)
        return np.asarray(loads, dtype=np.int64) - out + got, out


def _constant_messages(part):
    return 2 * part.global_graph.m


def _never_stable(self, part, loads):
    # The single-process protocols have no stability test (Protocol.is_stable is None).
    return False


# ---------------------------------------------------------------------------------------------- randomized-diffusion
def rd_setup(self, part):
    self._part_table = self._table[part.nodes]
    self._part_nodes = part.nodes.astype(np.uint64)


def rd_step(self, t, part, loads):
    """``floor(x/S)`` to every slot and the excess to distinct slots drawn by global id (BCFFS 2011)."""
    S = self.slots
    loads = np.asarray(loads, dtype=np.int64)
    q, r = np.divmod(loads, S)
    ids = (self._part_nodes[:, None] * np.uint64(S) + np.arange(S, dtype=np.uint64)[None, :]).reshape(-1)
    u = counter_uniform(self._key, t, ids).reshape(-1, S)
    ranks = np.argsort(np.argsort(u, axis=1, kind="stable"), axis=1, kind="stable")
    give = q[:, None] + (ranks < r[:, None])
    table = self._part_table
    to_other = table >= 0
    sent = np.where(to_other, give, 0)
    out = sent.sum(axis=1)
    nodes = part.nodes
    target = table[to_other]
    pos = np.minimum(np.searchsorted(nodes, target), nodes.size - 1)
    here = nodes[pos] == target
    got = np.bincount(pos[here], weights=sent[to_other][here], minlength=nodes.size).astype(np.int64)
    return Step(loads - out + got, messages=_constant_messages(part), outflow=out)


# ---------------------------------------------------------------------------------------------- stratified-diffusion
def strat_setup(self, part):
    view = self._part_view = RowView(part)
    col = self._col[view.slots]
    self._part_c = (self._c[view.row_global, col], self._c[view.row_global, col + 1])


def strat_step(self, t, part, loads):
    """Token k of node u moves by its draw ``counter_uniform(key, t, u 2^32 + k)`` (Shiraga 2018)."""
    view = self._part_view
    loads = np.asarray(loads, dtype=np.int64)
    x = loads[view.rows]
    lo = _below(self._part_c[0], x, view.row_global, self._key, t)
    hi = _below(self._part_c[1], x, view.row_global, self._key, t)
    new, out = view.apply(loads, hi - lo)
    return Step(new, messages=_constant_messages(part), outflow=out)


# ---------------------------------------------------------------------------------------------- rotor-router
def rotor_setup(self, part):
    self._part_view = RowView(part)
    self._part_rotor = self.rotor[part.nodes].copy()
    self._part_ports = self._ports[part.nodes]


def rotor_step(self, t, part, loads):
    """The rotors of the local nodes (ghosts too: a rotor moves by its node's load alone), the reference rule."""
    view = self._part_view
    loads = np.asarray(loads, dtype=np.int64)
    ports, rotor, rows = self._part_ports, self._part_rotor, view.rows
    L = np.maximum(ports, 1)
    q = 2 * view.k if self.options["lazy"] else view.k
    rem = loads % L
    c = loads[rows] // L[rows] + ((q - rotor[rows]) % L[rows] < rem[rows])
    c[ports[rows] == 0] = 0
    self._part_rotor = np.where(ports > 0, (rotor + rem) % L, 0)
    new, out = view.apply(loads, c)
    return Step(new, messages=_constant_messages(part), outflow=out)


def rotor_state_key(self, part):
    full = part.gather_nodes(self._part_rotor)
    return None if full is None else full.tobytes()


def rotor_finish(self, part):
    full = part.gather_nodes(self._part_rotor)
    if full is not None:
        self.rotor = full


# ---------------------------------------------------------------------------------------------- quasirandom
def qr_refusal(self):
    if self.options["track"]:
        return "track=true runs the continuous process on the whole graph for the report; use track=false"
    return None


def qr_setup(self, part):
    view = self._part_view = RowView(part)
    self._part_order = RowOrder(view)
    self._part_q = self._q_slot[view.slots]
    self._part_err = self.err_units[view.slots].copy()
    self._part_held = 0


def qr_step(self, t, part, loads):
    """Each directed edge rounds ``x_i P_ij`` keeping its accumulated error within 1/2 (FGS 2012, Sec. 2)."""
    view, q, err = self._part_view, self._part_q, self._part_err
    loads = np.asarray(loads, dtype=np.int64)
    whole, rest = np.divmod(loads[view.rows], q)
    asked = whole + (2 * (err + rest) + int(self._ties_up) > q)  # before the guard takes tokens back
    ext = view.extended(loads)
    sent, out, _ = quasirandom_rounding(view, self._part_order, q, ext, err, self._ties_up, self._guard)
    # What arrives at each node over the slots of its neighbours (ghosts' other neighbours: the sink).
    new = ext - out + np.bincount(view.indices, weights=sent, minlength=view.n).astype(np.int64)
    own = view.owned_slot
    self._part_held += int(asked[own].sum() - sent[own].sum())
    return Step(new[:-1], messages=_constant_messages(part), outflow=out[:-1])


def _qr_full_err(self, part):
    view = self._part_view
    own = view.owned_slot
    return part.gather_indexed(view.slots[own], self._part_err[own], self._q_slot.size)


def qr_state_key(self, part):
    full = _qr_full_err(self, part)
    return None if full is None else full.tobytes()


def qr_finish(self, part):
    full = _qr_full_err(self, part)
    self.held_back += int(part.allreduce(self._part_held, "sum"))
    if full is not None:
        self.err_units = full


# ---------------------------------------------------------------------------------------------- matchings
def _edge_coins(key, tag, t, edges):
    """``_coins(key, tag, t, m)[edges]`` of :mod:`._matching`: the draws of the global edge ids."""
    return counter_uniform(key ^ (tag * 0x9E3779B97F4A7C15 & ((1 << 63) - 1)), t, edges.astype(np.uint64))


def _balance(self, t, part, loads, matched, messages):
    """Matched local edges average their ends (the excess by the edge's coin); the single-process ``_step``."""
    g = part.graph
    loads = np.asarray(loads, dtype=np.int64)
    if self.options["excess"] == "random":
        up_to_u = _edge_coins(self._key, _TAG_COIN, t, part.edges) < 0.5
    else:
        up_to_u = loads[g.u] >= loads[g.v]
    e = np.flatnonzero(matched)
    a, b = loads[g.u[e]], loads[g.v[e]]
    half, odd = np.divmod(a + b, 2)
    flows = np.zeros(g.m, dtype=np.int64)
    flows[e] = a - (half + (odd & up_to_u[e]))
    new = loads - np.bincount(g.u, weights=flows, minlength=g.n).astype(np.int64) \
        + np.bincount(g.v, weights=flows, minlength=g.n).astype(np.int64)
    out = np.bincount(g.u, weights=np.maximum(flows, 0), minlength=g.n) \
        + np.bincount(g.v, weights=np.maximum(-flows, 0), minlength=g.n)
    return Step(new, messages=messages, outflow=out.astype(np.int64))


def circuit_setup(self, part):
    self._part_colours = self.colours[part.edges]
    self._part_per_colour = np.bincount(self.colours, minlength=self.period) if self.colours.size else np.zeros(1, int)


def circuit_step(self, t, part, loads):
    """Round t balances colour class ``t mod c`` of the whole graph's colouring (Sauerwald, Sun 2012)."""
    c = t % self.period
    return _balance(self, t, part, loads, self._part_colours == c, 2 * int(self._part_per_colour[c]))


def matching_step(self, t, part, loads):
    """This round's random matching, drawn from the coins of the global edge and node ids."""
    g, G = part.graph, part.global_graph
    if G.m == 0:
        return _balance(self, t, part, loads, np.zeros(0, bool), 0)
    if self.options["drawing"] == "edge-coin":
        p = self.options["p"] or 1.0 / (4 * G.max_degree)
        cand = _edge_coins(self._key, _TAG_MATCH, t, part.edges) < p
        count = np.bincount(g.u[cand], minlength=g.n) + np.bincount(g.v[cand], minlength=g.n)
        part.exchange(count)  # a ghost's candidates lie partly on other ranks: its owner's count
        matched = cand & (count[g.u] == 1) & (count[g.v] == 1)
    else:
        matched = _active_passive(self, t, part)
    mine = int(np.count_nonzero(matched & part.edge_owned))
    return _balance(self, t, part, loads, matched, 2 * part.allreduce(mine, "sum"))


def _active_passive(self, t, part):
    """``random_matching``'s active-passive drawing on the local edges (pick counts of ghosts exchanged)."""
    g, G, nodes = part.graph, part.global_graph, part.nodes
    ids = nodes.astype(np.uint64)
    active = _edge_coins(self._key, _TAG_ACTIVE, t, ids) < 0.5
    deg = (G.indptr[nodes + 1] - G.indptr[nodes]).astype(np.int64)
    pick = G.indptr[nodes] + np.minimum((_edge_coins(self._key, _TAG_PICK, t, ids) * deg).astype(np.int64),
                                        np.maximum(deg - 1, 0))
    choose = active & (deg > 0)
    target = np.where(choose, G.indices[np.where(choose, pick, 0)], -1).astype(np.int64)
    # The target's own activity: a local node's from the coins of its global id.
    pos = np.minimum(np.searchsorted(nodes, target), nodes.size - 1)
    local = choose & (nodes[pos] == target)
    ok = np.zeros(nodes.size, bool)
    ok[local] = ~active[pos[local]]
    picked = np.bincount(pos[ok], minlength=nodes.size).astype(np.int64)
    part.exchange(picked)  # a ghost is picked by neighbours on other ranks too: its owner's count
    # Edge (chooser, target) of a local edge: chooser is its u or its v.
    keep_u = ok[g.u] & (target[g.u] == nodes[g.v]) & (picked[g.v] == 1)
    keep_v = ok[g.v] & (target[g.v] == nodes[g.u]) & (picked[g.u] == 1)
    return keep_u | keep_v


# ---------------------------------------------------------------------------------------------- flow-imitation
def fi_setup(self, part):
    g = part.graph
    e, nodes = part.edges, part.nodes
    # One P_ij is kept as a scalar (tori, hypercubes); the SOS flows only for process=sos.
    self._part_alpha = self._alpha[e] if np.ndim(self._alpha) else self._alpha
    self._part_speeds = self._speeds[nodes]
    self._part_xi = self.xi[nodes].copy()
    self._part_F = self.F[e].copy()
    self._part_D = self.D[e].copy()
    self._part_prev = self._prev[e].copy() if self._prev is not None else np.zeros(e.size)
    self._part_held = 0
    self._part_gap = 0.0
    if self.options["process"] == "circuit":
        self._part_colours = self._colours[e]
    # Which end of each local edge this rank owns (u, v or both): the guard is the sender's.
    self._part_owns_u = part.is_owned[g.u]
    self._part_owns_v = part.is_owned[g.v]


def _fi_flow(self, t, part):
    """The continuous process's flow on every local edge (``FlowImitation._continuous_flow``)."""
    g = part.graph
    proc = self.options["process"]
    xi, s = self._part_xi, self._part_speeds
    pot = xi / s
    if proc in ("fos", "sos"):
        f = self._part_alpha * (pot[g.u] - pot[g.v])
        if proc == "sos" and t > 0:
            beta = self.options["beta"]
            f = (beta - 1.0) * self._part_prev + beta * f
        self._part_prev = f
        return f
    if proc == "circuit":
        matched = self._part_colours == t % self.period
    else:  # random: the random matching model's default drawing (edge-coin, p = 1/(4 Delta))
        p = 1.0 / (4 * part.global_graph.max_degree)
        cand = _edge_coins(self._key, _TAG_MATCH, t, part.edges) < p
        count = np.bincount(g.u[cand], minlength=g.n) + np.bincount(g.v[cand], minlength=g.n)
        part.exchange(count)
        matched = cand & (count[g.u] == 1) & (count[g.v] == 1)
    su, sv = s[g.u], s[g.v]
    total = xi[g.u] + xi[g.v]
    return np.where(matched, xi[g.u] - total * su / (su + sv), 0.0)


def fi_step(self, t, part, loads):
    """The continuous process on the local graph, its whole tokens sent, guarded by the sending end."""
    g = part.graph
    loads = np.asarray(loads, dtype=np.int64)
    f = _fi_flow(self, t, part)
    xi = self._part_xi - np.bincount(g.u, weights=f, minlength=g.n) + np.bincount(g.v, weights=f, minlength=g.n)
    self._part_xi = part.exchange(xi)  # a ghost's continuous load: its owner's (its row is partial here)
    self._part_F += f
    send = np.trunc(self._part_F).astype(np.int64) - self._part_D
    if self.options["guard"] == "on":
        send = _fi_guard(self, part, loads, send)
    self._part_D += send
    if g.m:
        self._part_gap = max(self._part_gap, float(np.abs(self._part_F - self._part_D).max()))
    new = loads - np.bincount(g.u, weights=send, minlength=g.n).astype(np.int64) \
        + np.bincount(g.v, weights=send, minlength=g.n).astype(np.int64)
    out = np.bincount(g.u, weights=np.maximum(send, 0), minlength=g.n) \
        + np.bincount(g.v, weights=np.maximum(-send, 0), minlength=g.n)
    return Step(new, messages=_constant_messages(part), outflow=out.astype(np.int64))


def _fi_guard(self, part, loads, send):
    """``FlowImitation._guarded`` for the owned nodes; a cut edge takes the amount its sending end paid."""
    g = part.graph
    out = np.bincount(g.u, weights=np.maximum(send, 0), minlength=g.n) \
        + np.bincount(g.v, weights=np.maximum(-send, 0), minlength=g.n)
    over = np.flatnonzero((out > loads) & part.is_owned)
    if not part.allreduce(over.size > 0, "or"):
        return send
    before, send = send, send.copy()
    for i in over:  # rare: pay the edges of an owned node in CSR order (the local row is whole)
        budget = int(loads[i])
        for e in g.csr_edges[g.indptr[i]:g.indptr[i + 1]]:
            owed = send[e] if g.u[e] == i else -send[e]
            if owed <= 0:
                continue
            pay = min(owed, budget)
            budget -= pay
            self._part_held += int(owed - pay)
            send[e] = pay if g.u[e] == i else -pay
    theirs = part.exchange_cut_edges(send)
    # On a cut edge the sender's rank decided: take its value where the sender is the other end.
    sender_is_u = before > 0  # the sign before the guard (a paid 0 no longer shows who sends)
    remote = np.where(sender_is_u, ~self._part_owns_u, ~self._part_owns_v)
    return np.where(remote, theirs, send)


def fi_state_key(self, part):
    D, F = part.gather_edges(self._part_D), part.gather_edges(self._part_F)
    xi = part.gather_nodes(self._part_xi)
    return None if D is None else D.tobytes() + F.tobytes() + xi.tobytes()


def fi_finish(self, part):
    D, F = part.gather_edges(self._part_D), part.gather_edges(self._part_F)
    xi = part.gather_nodes(self._part_xi)
    self.held_back += int(part.allreduce(self._part_held, "sum"))
    self.max_gap = max(self.max_gap, float(part.allreduce(self._part_gap, "max")))
    if D is not None:
        self.D, self.F, self.xi = D, F, xi


# ---------------------------------------------------------------------------------------------- pairwise-averaging
def pa_step(self, t, part, loads):
    """Step t's pair (one global edge drawn by its index); the rank holding it averages it."""
    G, g = part.global_graph, part.graph
    new = np.array(loads, dtype=np.int64, copy=True)
    out = np.zeros(g.n, dtype=np.int64)
    if G.m == 0:
        return Step(new, messages=0, outflow=out)
    e = self.pair(t, G)
    i = int(np.searchsorted(part.edges, e))
    if i < part.edges.size and part.edges[i] == e:
        a, b = int(g.u[i]), int(g.v[i])
        xa, xb = int(new[a]), int(new[b])
        s = xa + xb
        lo, hi = s // 2, s - s // 2
        a_hi = counter_uniform_scalar(self._key, t, 1) < 0.5 if self.options["excess"] == "random" else xa >= xb
        new[a], new[b] = (hi, lo) if a_hi else (lo, hi)
        out[a] = max(xa - int(new[a]), 0)
        out[b] = max(xb - int(new[b]), 0)
    return Step(new, messages=2, outflow=out)


def attach() -> None:
    """Give the modern protocols their partitioned form (kept here, apart from their rules and kernels)."""
    hooks = {
        RandomizedDiffusion: dict(setup=rd_setup, step=rd_step),
        StratifiedDiffusion: dict(setup=strat_setup, step=strat_step),
        RotorRouter: dict(setup=rotor_setup, step=rotor_step, state_key=rotor_state_key, finish=rotor_finish),
        Quasirandom: dict(refusal=qr_refusal, setup=qr_setup, step=qr_step, state_key=qr_state_key, finish=qr_finish),
        BalancingCircuit: dict(setup=circuit_setup, step=circuit_step),
        RandomMatching: dict(step=matching_step),
        FlowImitation: dict(setup=fi_setup, step=fi_step, state_key=fi_state_key, finish=fi_finish),
        PairwiseAveraging: dict(step=pa_step),
    }
    for cls, fns in hooks.items():
        for what, fn in fns.items():
            setattr(cls, f"partitioned_{what}", fn)
        cls.partitioned_is_stable = _never_stable


attach()
