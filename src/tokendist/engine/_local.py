"""Run a synchronous protocol's per-node rule with real messages.

Every synchronous protocol that has a node form (``exchange_rounds > 0``) can run here instead of
through its vectorised kernel. Each node executes, for step t:

1. ``exchange_rounds`` rounds: send ``publish(r, t, node, view)`` to each contact of step t and
   wait for every contact's value of that round;
2. ``decide(t, node, view)`` -> tokens per contact, sent as one message to each contact (possibly
   zero tokens, so that the receiver knows the step is over);
3. wait for the token messages of all contacts, then start step t + 1.

That is a synchroniser: it gives the same trace under the ``sync`` and ``async`` schedules, which is
what lets the same per-node code run on separate processes. The test suite checks that it gives the
same loads, step by step, as the vectorised kernel.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from .._random import stream
from ..graphs import make_graph
from ._initial import make_loads
from ._messages import MessageExecutor
from ._user import make_protocol

__all__ = ["NodeView", "run_node_rules"]


@dataclass
class NodeView:
    """What one node knows in one step: its load, neighbours, contacts, what it received, its memory."""

    node: int
    load: int
    neighbours: np.ndarray
    contacts: np.ndarray = None
    received: list = field(default_factory=list)  # one dict {neighbour: value} per exchange round
    memory: dict = field(default_factory=dict)    # persists across steps (estimates, localMax, ...)
    # Tokens that arrived from each contact in the previous step (what a token message says; rules
    # that keep per-edge accounts, such as IOUs, need to know what the other end actually paid).
    delivered: dict = field(default_factory=dict)


class _SyncNode:
    def __init__(self, protocol, steps: int, history: np.ndarray):
        self.p = protocol
        self.steps = steps
        self.history = history
        self.inbox: dict = {}
        self.memory: dict = {}

    def start(self, ctx):
        self.t = 0
        self._begin(ctx)

    def _begin(self, ctx):
        if self.t >= self.steps:
            return
        self.view = NodeView(ctx.node, ctx.load, ctx.neighbours, memory=self.memory)
        self.view.contacts = np.asarray(self.p.contacts(self.t, ctx.node, ctx.neighbours))
        self.round = 0
        self._publish(ctx)

    def _publish(self, ctx):
        value = self.p.publish(self.round, self.t, ctx.node, self.view)
        for c in self.view.contacts.tolist():
            ctx.send(c, ("pub", self.t, self.round, value))
        self._advance(ctx)

    def _advance(self, ctx):
        contacts = self.view.contacts.tolist()
        while True:
            if self.round < self.p.exchange_rounds:
                key = ("pub", self.t, self.round)
                box = self.inbox.get(key, {})
                if len(box) < len(contacts):
                    return
                self.view.received.append(self.inbox.pop(key, {}))
                self.round += 1
                if self.round < self.p.exchange_rounds:
                    value = self.p.publish(self.round, self.t, ctx.node, self.view)
                    for c in contacts:
                        ctx.send(c, ("pub", self.t, self.round, value))
                    continue
                sends = self.p.decide(self.t, ctx.node, self.view) or {}
                for c in contacts:
                    ctx.send(c, ("tok", self.t), tokens=sends.get(c, 0))
                self.round += 1  # now waiting for tokens
            key = ("tok", self.t)
            if len(self.inbox.get(key, ())) < len(contacts):
                return
            delivered = self.inbox.pop(key, {})
            self.t += 1
            self.history[self.t, ctx.node] = ctx.load
            if self.t >= self.steps:
                return
            self.view = NodeView(ctx.node, ctx.load, ctx.neighbours, memory=self.memory, delivered=delivered)
            self.view.contacts = np.asarray(self.p.contacts(self.t, ctx.node, ctx.neighbours))
            self.round = 0
            contacts = self.view.contacts.tolist()
            value = self.p.publish(0, self.t, ctx.node, self.view)
            for c in contacts:
                ctx.send(c, ("pub", self.t, 0, value))

    def receive(self, ctx, src, message, tokens):
        if message[0] == "pub":
            _, t, r, value = message
            self.inbox.setdefault(("pub", t, r), {})[src] = value
        else:
            self.inbox.setdefault(("tok", message[1]), {})[src] = tokens
        self._advance(ctx)


def run_node_rules(graph, algo, init, steps: int, *, seed=None, params=None, schedule="sync",
                   max_delay: int = 5, allow_negative: bool = False):
    """Run ``steps`` synchronous steps of ``algo``'s per-node rule on the message executor.

    Returns
    -------
    history : ndarray, shape (steps + 1, n)
        The loads after each step (row 0: initial loads).
    stats : dict
        Messages, events and time of the executor.
    """
    graph = make_graph(graph, seed=seed)
    protocol = make_protocol(algo, params)
    if protocol.exchange_rounds <= 0:
        raise ValueError(f"{protocol.name} has no per-node rule")
    protocol.check_graph(graph)
    loads = make_loads(init, graph, seed)
    if protocol.divisible:
        loads = loads.astype(np.float64)
    protocol.reset(graph, loads.copy(), stream(seed, "protocol"))
    history = np.zeros((steps + 1, graph.n), dtype=loads.dtype)
    history[0] = loads
    nodes = [_SyncNode(protocol, steps, history) for _ in range(graph.n)]
    ex = MessageExecutor(graph, nodes, loads, schedule=schedule, rng=stream(seed, "executor"),
                         max_delay=max_delay, allow_negative=allow_negative)
    ex.run()
    ex.check_conservation()
    return history, ex.stats()
