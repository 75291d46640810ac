"""Per-node rule of ``random-walk`` (Elsässer, Monien, Schamberger 2006, Sec. 3; Sec. 4 phase 1).

What node i does in step t, given its own state (``view.memory``) and two exchange rounds with its
neighbours:

Round 0, every step: i publishes ``(w_i / s_i, d_i, e_i / s_i)`` (its load, degree and real-valued
estimate ``e_i``, each divided by its speed).

Phase 1 (integer FOS with the real FOS estimate): i sends ``trunc(c_ij (w_i/s_i - w_j/s_j))``
tokens to every neighbour where that is at least 1 (``fos-floor``), and updates
``e_i += sum_j c_ij (e_j/s_j - e_i/s_i)``, the neighbours below i summed first, then those above,
in increasing order: the kernel's two accumulators, so the estimate has the kernel's bits.

Phase 2 (main random walk steps). At the first phase-2 step i computes its target
``what_i`` from its estimate (``targets``: ``sbar_i = n s_i / sum s``, with ``n`` and ``sum s``
known to every node, as the paper assumes ``n`` is) and marks ``w_i - what_i`` tokens or creates
``what_i - w_i`` negative ones. Then every step: token k of kind ``kind`` (0 marked, 1 negative)
draws ``u = counter_uniform(key, t, token_index(i, kind, k))`` and moves by column i of M
(stay when ``u < M_ii``, else the first slot whose boundary ``M_ii + cum_k`` exceeds u, with
``c_ij / s_i`` summed from 0 over the neighbours in increasing order); the coefficients need the
neighbours' degrees, hence round 1: i publishes ``{j: (marked to j, negative to j)}``. Knowing
what it sends and what arrives, i sends j the net real tokens
``marked_ij + negative_ji - marked_ji - negative_ij`` when positive, and keeps
``stays + arrivals`` of each kind minus ``min`` of the two (annihilation).

Global knowledge. Two decisions need the whole network: when phase 1 ends (``switch=error``:
the max over nodes of the estimate's error; ``switch=local``: every edge's gap) and when phase 2
ends (no marked token anywhere). The paper delegates both to "the usual termination detection
algorithms" (Sec. 3) and does not count their time; the kernel, likewise, decides them at once.
The node form takes them from a *termination oracle*: the protocol object runs a vectorised copy
of the same run (same graph, parameters and coin key; every node reports its initial load to it
when it starts) and tells every node the phase of step t. It stands for the detection algorithm
only: the loads, estimates, targets, coins, walks and annihilations are computed by each node from its own messages, and a node that is
told phase 2 is over while it still holds a marked token raises. ``switch=step`` needs no oracle
for the switch (``t >= switch_step``), only for the end of phase 2. The node form runs on the
static graph of ``run_node_rules``.
"""

from __future__ import annotations

import math

import numpy as np

from ..._random import counter_uniform_scalar
from ._node import _degree
from .kernels._walk_serial import token_index

__all__ = ["node_publish", "node_decide"]


def _coef(protocol, node, j, d_i, d_j) -> float:
    """``c_ij = cap_ij / (c max(d_i, d_j))`` (the kernels' bits, see ``_heterogeneous_node``)."""
    base = protocol._base
    cap = 1.0 if base.capacities is None else float(base.capacities[base.edge_index(node, j)])
    return cap / (protocol.options["c"] * max(d_i, d_j))


def _prepare(protocol, node, view):
    """The preparation step of phase 2 on ``node``: its target, marked and negative tokens."""
    mem = view.memory
    s = protocol._s
    est = mem["est"]
    sbar = s[node] * (protocol._base.n / protocol._ssum)
    base = math.ceil(est - 1e-9 * max(1.0, abs(est)))
    what = base if sbar < 1.0 / 3.0 else base + math.ceil(2.0 * sbar)
    mem["marked"] = max(view.load - what, 0)
    mem["negative"] = max(what - view.load, 0)
    mem["what"] = what


def _walk(protocol, node, view, t):
    """This step's moves of the node's marked and negative tokens: ``{j: [marked, negative]}``."""
    mem = view.memory
    s_i = float(protocol._s[node])
    d_i = view.memory["d"]
    nbrs = sorted(view.received[0])
    probs = [_coef(protocol, node, j, d_i, view.received[0][j][1]) / s_i for j in nbrs]
    cum, acc = [], 0.0
    for p in probs:
        acc = acc + p
        cum.append(acc)
    stay = 1.0 - acc
    bounds = [stay + x for x in cum[:-1]]  # the last boundary is 1
    moves = {j: [0, 0] for j in nbrs}
    stays = [0, 0]
    for kind, count in ((0, mem["marked"]), (1, mem["negative"])):
        for k in range(count):
            u = counter_uniform_scalar(protocol._key, t, token_index(node, kind, k))
            if u < stay:
                stays[kind] += 1
                continue
            q = sum(1 for b in bounds if b <= u)
            moves[nbrs[q]][kind] += 1
    mem["stays"] = stays
    mem["moves"] = moves
    return {j: tuple(v) for j, v in moves.items() if v[0] or v[1]}


def node_publish(protocol, rnd, t, node, view):
    """Round 0: ``(w_i / s_i, d_i, e_i / s_i)``; round 1: this step's token moves (phase 2) or None."""
    mem = view.memory
    s_i = protocol._s[node]
    if rnd == 0:
        if "est" not in mem:  # step 0: the estimate starts as the node's own initial load
            mem["est"] = float(view.load)
            _register(protocol, node, view.load)
        d_i = _degree(protocol, node, view)
        mem["d"] = d_i
        return (view.load / s_i, d_i, mem["est"] / s_i)
    if protocol._node_phase(t) != 2:
        return None
    if "marked" not in mem:
        _prepare(protocol, node, view)
    return _walk(protocol, node, view, t)


def node_decide(protocol, t, node, view) -> dict:
    """The tokens ``node`` sends this step, ``{j: count}``; updates its estimate or its walkers."""
    mem = view.memory
    phase = protocol._node_phase(t)
    if phase == 3:
        if mem.get("marked", 0):
            raise RuntimeError(f"random-walk node {node}: told phase 2 is over while holding marked tokens")
        return {}
    s_i = protocol._s[node]
    d_i = mem["d"]
    if phase == 1:
        x_i = view.load / s_i
        est = mem["est"]
        xe_i = est / s_i
        sends = {}
        inn = q = 0.0
        for j in sorted(view.received[0]):
            x_j, d_j, xe_j = view.received[0][j]
            a = _coef(protocol, node, j, d_i, d_j)
            y = math.trunc(a * (x_i - x_j))
            if y >= 1:
                sends[j] = y
            if j < node:
                inn += a * (xe_j - xe_i)
            else:
                q += a * (xe_j - xe_i)
        mem["est"] = est + (inn + q)
        return sends
    # Phase 2: settle the real tokens of the walks, then annihilate.
    moves = mem["moves"]
    new = list(mem["stays"])
    sends = {}
    for j in sorted(view.received[0]):
        mine = moves.get(j, [0, 0])
        theirs = (view.received[1].get(j) or {}).get(node, (0, 0))
        new[0] += theirs[0]
        new[1] += theirs[1]
        f = mine[0] + theirs[1] - theirs[0] - mine[1]
        if f > 0:
            sends[j] = f
    gone = min(new)
    mem["marked"], mem["negative"] = new[0] - gone, new[1] - gone
    return sends


def _register(protocol, node, load):
    """Step 0: a node tells the termination oracle its initial load (all nodes start at once)."""
    oracle = protocol._oracle
    if oracle is None:
        oracle = protocol._oracle = {"w0": np.zeros(protocol._base.n, np.int64), "known": 0, "copy": None}
    oracle["w0"][node] = load
    oracle["known"] += 1


def node_phase_oracle(protocol, t: int) -> int:
    """The phase of step t (1, 2 or 3) from the termination oracle (see the module docstring)."""
    rule = protocol.options["switch"]
    phases = protocol._oracle
    if phases is None or phases["known"] < protocol._base.n:
        raise RuntimeError("random-walk: the termination oracle needs every node's initial load first")
    if phases["copy"] is None:
        from ._random_walk import RandomWalk

        copy = RandomWalk(**{**protocol.options, "kernel": "numba"})
        copy.reset(protocol._base, phases["w0"].copy(), np.random.default_rng(0))
        copy._key = protocol._key
        phases.update(copy=copy, loads=phases["w0"].copy(), phase=[])
    seen = phases["phase"]
    while len(seen) <= t:
        st = phases["copy"].step(len(seen), protocol._base, phases["loads"])
        phases["loads"] = np.array(st.loads, copy=True)
        seen.append(st.info["phase"])
    phase = seen[t]
    if rule == "step" and phase != 3:
        # The switch of the step rule is local: every node knows t and switch_step.
        local = 1 if t < protocol.options["switch_step"] else 2
        if local != phase:
            raise RuntimeError(f"random-walk: the termination oracle disagrees with switch=step at step {t}")
    return phase
