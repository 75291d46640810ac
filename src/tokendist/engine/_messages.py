"""The message-passing executor: per-node handlers exchanging real messages over FIFO channels.

A small deterministic discrete-event simulator in the style of SimPy's core: one heap of
``(time, seq, event)``; ``seq`` (the order in which events were scheduled) breaks ties, so a run is
a pure function of the handlers, the schedule and the seed.

Model (Margara, Pistocchi, Vassura, Sec. 2; Ghosh et al., Sec. 5.2):

* every edge is two FIFO channels, one per direction;
* a channel delivers at most one message per time unit, in the order sent;
* a message takes ``delay >= 1`` time units: exactly 1 under the ``sync`` schedule, drawn from the
  run's seed under ``async`` (uniform integer in ``1..max_delay``), or chosen by an adversary
  (any callable ``delay(src, dst, now, message) -> int``);
* a message may carry tokens: they leave the sender when sent and reach the receiver on delivery,
  so the executor conserves ``held + in transit`` exactly and refuses to let a node send tokens it
  does not hold.

A handler is any object with ``start(ctx)`` and ``receive(ctx, src, message, tokens)``; ``ctx`` is the
node's :class:`NodeContext`. The same handler classes are what a distributed run executes, with the
executor replaced by real channels.
"""

from __future__ import annotations

import heapq
from collections import Counter
from typing import Any, Callable, Sequence

import numpy as np

from ..errors import TokendistError

__all__ = ["MessageExecutor", "NodeContext", "SCHEDULES"]

SCHEDULES = ("sync", "async")


class NodeContext:
    """What a handler may see and do: its id, neighbours, tokens, the clock, and sending."""

    __slots__ = ("_ex", "node", "neighbours")

    def __init__(self, executor: "MessageExecutor", node: int, neighbours: np.ndarray):
        self._ex = executor
        self.node = node
        self.neighbours = neighbours

    @property
    def now(self) -> int:
        return self._ex.now

    @property
    def load(self):
        """Tokens this node holds now."""
        return self._ex.loads[self.node]

    def send(self, dst: int, message: Any, tokens: int = 0) -> int:
        """Send ``message`` (and ``tokens`` tokens) to neighbour ``dst``; returns the delivery time."""
        return self._ex.send(self.node, dst, message, tokens)

    def set_timer(self, delay: int, message: Any) -> None:
        """Deliver ``message`` to this node itself after ``delay`` time units (sender = own id)."""
        self._ex.set_timer(self.node, delay, message)


class MessageExecutor:
    """Run per-node handlers with real messages.

    Parameters
    ----------
    graph : Graph
        The network; messages travel only along its edges.
    handlers : sequence
        One handler per node (``start(ctx)``, ``receive(ctx, src, message, tokens)``).
    loads : array_like of int
        Tokens each node holds at time 0.
    schedule : {"sync", "async"} or callable
        Message delays (see the module docstring).
    rng : numpy.random.Generator, optional
        For the ``async`` schedule (the run's ``executor`` sub-stream).
    max_delay : int
        Largest delay of the ``async`` schedule.
    allow_negative : bool
        Let nodes send tokens they do not hold (for studies of infeasible rules).

    Examples
    --------
    >>> from tokendist.graphs import path_graph
    >>> class Ping:
    ...     def start(self, ctx):
    ...         if ctx.node == 0:
    ...             ctx.send(1, "ping", tokens=1)
    ...     def receive(self, ctx, src, message, tokens):
    ...         pass
    >>> ex = MessageExecutor(path_graph(2), [Ping(), Ping()], loads=[1, 0])
    >>> ex.run().loads.tolist(), ex.now
    ([0, 1], 1)
    """

    def __init__(self, graph, handlers: Sequence, loads, *, schedule: str | Callable = "sync",
                 rng: np.random.Generator | None = None, max_delay: int = 5, allow_negative: bool = False):
        if len(handlers) != graph.n:
            raise ValueError(f"need {graph.n} handlers, got {len(handlers)}")
        self.graph = graph
        self.handlers = list(handlers)
        self.loads = np.array(loads, dtype=np.int64 if np.asarray(loads).dtype.kind in "iu" else np.float64)
        self.total = self.loads.sum()
        if callable(schedule):
            self._delay = schedule
        elif schedule == "sync":
            self._delay = lambda src, dst, now, message: 1
        elif schedule == "async":
            if rng is None:
                raise ValueError("the async schedule needs an rng")
            self._delay = lambda src, dst, now, message: int(rng.integers(1, max_delay + 1))
        else:
            raise TokendistError(f"unknown schedule {schedule!r}; choose from {', '.join(SCHEDULES)} or pass a callable")
        self.allow_negative = allow_negative
        self.now = 0
        self._heap: list = []
        self._seq = 0
        self._last_delivery: dict[tuple[int, int], int] = {}
        self.in_transit = 0
        self.messages = 0
        self.messages_by_kind: Counter = Counter()
        self.token_messages = 0
        self.tokens_moved = 0
        self.events = 0
        self.contexts = [NodeContext(self, i, graph.neighbours(i)) for i in range(graph.n)]
        self._neighbour_sets = None
        self._started = False

    # ------------------------------------------------------------------ sending
    def _is_edge(self, a: int, b: int) -> bool:
        if self._neighbour_sets is None:
            self._neighbour_sets = [set(self.graph.neighbours(i).tolist()) for i in range(self.graph.n)]
        return b in self._neighbour_sets[a]

    def send(self, src: int, dst: int, message: Any, tokens=0) -> int:
        if not self._is_edge(src, dst):
            raise RuntimeError(f"node {src} sent to {dst}, which is not a neighbour")
        if tokens < 0:
            raise RuntimeError(f"node {src} sent a negative number of tokens")
        if tokens:
            if self.loads[src] < tokens and not self.allow_negative:
                raise RuntimeError(f"node {src} sent {tokens} tokens but holds {self.loads[src]}")
            self.loads[src] -= tokens
            self.in_transit += tokens
            self.token_messages += 1
            self.tokens_moved += tokens
        delay = int(self._delay(src, dst, self.now, message))
        if delay < 1:
            raise RuntimeError(f"a schedule gave delay {delay}; delays are at least 1")
        # FIFO, and at most one delivery per channel per time unit.
        when = max(self.now + delay, self._last_delivery.get((src, dst), -1) + 1)
        self._last_delivery[(src, dst)] = when
        self.messages += 1
        kind = message[0] if isinstance(message, tuple) and message and isinstance(message[0], str) else type(message).__name__
        self.messages_by_kind[kind] += 1
        self._push(when, ("msg", src, dst, message, tokens))
        return when

    def set_timer(self, node: int, delay: int, message: Any) -> None:
        self._push(self.now + max(1, int(delay)), ("msg", node, node, message, 0))

    def _push(self, when: int, event) -> None:
        heapq.heappush(self._heap, (when, self._seq, event))
        self._seq += 1

    # ------------------------------------------------------------------ running
    def start(self) -> None:
        if not self._started:
            self._started = True
            for i, h in enumerate(self.handlers):
                h.start(self.contexts[i])

    @property
    def idle(self) -> bool:
        """No message in transit and no timer pending."""
        return not self._heap

    def run(self, until: int | None = None, max_events: int | None = None) -> "MessageExecutor":
        """Process events up to time ``until`` (inclusive) or until none is left."""
        self.start()
        while self._heap:
            when = self._heap[0][0]
            if until is not None and when > until:
                break
            if max_events is not None and self.events >= max_events:
                raise TokendistError(f"message-passing run exceeded {max_events} events")
            when, _, (_, src, dst, message, tokens) = heapq.heappop(self._heap)
            self.now = when
            if tokens:
                self.loads[dst] += tokens
                self.in_transit -= tokens
            self.events += 1
            self.handlers[dst].receive(self.contexts[dst], src, message, tokens)
        if until is not None and (not self._heap or self._heap[0][0] > until):
            self.now = max(self.now, until)
        return self

    def check_conservation(self) -> None:
        held = self.loads.sum() + self.in_transit
        exact = self.loads.dtype.kind in "iu"
        if (held != self.total) if exact else abs(held - self.total) > 1e-9 * (abs(self.total) + len(self.loads)):
            raise AssertionError(f"message executor: {self.total} tokens became {held}")

    def stats(self) -> dict:
        return {"time": int(self.now), "messages": int(self.messages), "events": int(self.events),
                "token_messages": int(self.token_messages), "tokens_moved": int(self.tokens_moved),
                "messages_by_kind": dict(sorted(self.messages_by_kind.items()))}
