"""The message-passing executor: per-node handlers exchanging real messages over FIFO channels.

A small deterministic discrete-event simulator in the style of SimPy's core: events run in
``(time, seq)`` order, ``seq`` being the order in which they were scheduled, so a run is a pure
function of the handlers, the schedule and the seed. Times are whole time units and every event is
scheduled at least one unit ahead, so the queue is a calendar: one list per time unit (appended in
``seq`` order) and a heap of the times that have one; the same order as one heap of
``(time, seq, event)``, with a list append per event instead of a heap push and pop.

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

from heapq import heappop, heappush
from typing import Any, Callable, Sequence

import numpy as np

from ..errors import TokendistError
from ..kernels._report import REFERENCE

__all__ = ["MessageExecutor", "NodeContext", "SCHEDULES"]

SCHEDULES = ("sync", "async")


_INF = float("inf")

#: Delays the ``async`` schedule draws at once (see :func:`_block_draws`).
DELAY_BLOCK = 1024


def _block_draws(rng: np.random.Generator, low: int, high: int):
    """``int(rng.integers(low, high))`` again and again, drawn :data:`DELAY_BLOCK` at a time.

    ``rng.integers(low, high, size=k)`` yields the same numbers as ``k`` scalar calls, in the same
    order (tests/engine/test_messages.py checks it), for a twentieth of the cost per number; the
    generator is left further on at the end of a run, and nothing else draws from the executor's stream.
    """
    while True:
        yield from rng.integers(low, high, size=DELAY_BLOCK).tolist()


def _kind(message) -> str:
    """The kind ``messages_by_kind`` counts: a tuple's first field if it is a string, else the type's name."""
    if isinstance(message, tuple) and message and isinstance(message[0], str):
        return message[0]
    return type(message).__name__


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

    def send(self, dst: int, message: Any, tokens: int = 0, on_delivery: Any = None) -> int:
        """Send ``message`` (and ``tokens`` tokens) to neighbour ``dst``; returns the delivery time.

        ``on_delivery``: a message this node receives from itself when ``dst`` has received this one.
        """
        return self._ex.send(self.node, dst, message, tokens, on_delivery)

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

    #: What ``RunResult.variants`` calls a run of these handlers on the engine's event-driven path.
    variant: str = REFERENCE

    def __init__(self, graph, handlers: Sequence, loads, *, schedule: str | Callable = "sync",
                 rng: np.random.Generator | None = None, max_delay: int = 5, allow_negative: bool = False):
        if len(handlers) != graph.n:
            raise ValueError(f"need {graph.n} handlers, got {len(handlers)}")
        self.graph = graph
        self.handlers = list(handlers)
        self.loads = np.array(loads, dtype=np.int64 if np.asarray(loads).dtype.kind in "iu" else np.float64)
        self.total = self.loads.sum()
        self._held = memoryview(self.loads)  # see _view()
        self._fixed_delay = 0  # a constant delay (the sync schedule) skips the delay call
        if callable(schedule):
            self._delay = schedule
        elif schedule == "sync":
            self._delay = lambda src, dst, now, message: 1
            self._fixed_delay = 1
        elif schedule == "async":
            if rng is None:
                raise ValueError("the async schedule needs an rng")
            draw = _block_draws(rng, 1, max_delay + 1).__next__
            self._delay = lambda src, dst, now, message: draw()
        else:
            raise TokendistError(f"unknown schedule {schedule!r}; choose from {', '.join(SCHEDULES)} or pass a callable")
        self.allow_negative = allow_negative
        self.now = 0
        # The event queue (see the module docstring): time -> the events due then, in seq order,
        # each (src, dst, message, tokens, on_delivery); and a heap of those times.
        self._buckets: dict[int, list] = {}
        self._times: list[int] = []
        # Per node, its channels: neighbour -> time of the last delivery on that channel (-1: none yet).
        # One dict look-up per send both checks that ``dst`` is a neighbour and finds the channel's
        # FIFO constraint (a set of neighbours and a dict keyed by (src, dst) before: two look-ups
        # and a tuple per message).
        ptr, idx = graph.indptr.tolist(), graph.indices.tolist()
        self._last_delivery: list[dict[int, int]] = [dict.fromkeys(idx[ptr[i]:ptr[i + 1]], -1)
                                                     for i in range(graph.n)]
        self.in_transit = 0
        self.messages = 0
        # kind -> messages sent (a plain dict: a Counter's ``+= 1`` costs twice as much per message).
        self.messages_by_kind: dict[str, int] = {}
        self.token_messages = 0
        self.tokens_moved = 0
        self.events = 0
        # With a list here, every token leaving or reaching a node appends (node, change): the engine's
        # event-driven path rebuilds the per-step trace from it (engine/_simulate_events.py).
        self.load_log: list | None = None
        self.contexts = [NodeContext(self, i, graph.neighbours(i)) for i in range(graph.n)]
        self._receivers: list = []  # the handlers' bound ``receive``, taken at start (one look-up less per event)
        self._started = False

    def _view(self) -> memoryview:
        # The loads as a memoryview on the same buffer: reading or writing one entry through it
        # costs half as much as through the numpy array (no numpy scalar), and the array sees every
        # change at once. Followed if someone rebinds ``loads`` (checked at start and per ``run``).
        if self._held.obj is not self.loads:
            self._held = memoryview(self.loads)
        return self._held

    # ------------------------------------------------------------------ sending
    def send(self, src: int, dst: int, message: Any, tokens=0, on_delivery: Any = None) -> int:
        """Send ``message`` with ``tokens`` from ``src`` to its neighbour ``dst``; returns the delivery time.

        With ``on_delivery``, the sender receives ``on_delivery`` as a self-message right after the
        receiver's handler has run (the same event order as a self-timer set now for the delivery
        time, one event fewer on the heap).
        """
        channels = self._last_delivery[src]
        last = channels.get(dst)
        if last is None:
            raise RuntimeError(f"node {src} sent to {dst}, which is not a neighbour")
        if tokens:
            if tokens < 0:
                raise RuntimeError(f"node {src} sent a negative number of tokens")
            held = self._held
            if held[src] < tokens and not self.allow_negative:
                raise RuntimeError(f"node {src} sent {tokens} tokens but holds {held[src]}")
            held[src] -= tokens
            self.in_transit += tokens
            self.token_messages += 1
            self.tokens_moved += tokens
            if self.load_log is not None:
                self.load_log += (src, -tokens)
        now = self.now
        delay = self._fixed_delay or int(self._delay(src, dst, now, message))
        if delay < 1:
            raise RuntimeError(f"a schedule gave delay {delay}; delays are at least 1")
        # FIFO, and at most one delivery per channel per time unit.
        when = now + delay
        if when <= last:
            when = last + 1
        channels[dst] = when
        self.messages += 1
        kind = message[0] if type(message) is tuple and message and type(message[0]) is str else _kind(message)
        kinds = self.messages_by_kind
        if kind in kinds:
            kinds[kind] += 1
        else:
            kinds[kind] = 1
        bucket = self._buckets.get(when)
        if bucket is None:
            self._buckets[when] = bucket = []
            heappush(self._times, when)
        bucket.append((src, dst, message, tokens, on_delivery))
        return when

    def set_timer(self, node: int, delay: int, message: Any) -> None:
        when = self.now + max(1, int(delay))
        bucket = self._buckets.get(when)
        if bucket is None:
            self._buckets[when] = bucket = []
            heappush(self._times, when)
        bucket.append((node, node, message, 0, None))

    @property
    def next_time(self) -> int | None:
        """The time of the next event, None if nothing is pending."""
        return self._times[0] if self._times else None

    # ------------------------------------------------------------------ running
    def start(self) -> None:
        if not self._started:
            self._started = True
            self._view()
            self._receivers = [h.receive for h in self.handlers]
            for i, h in enumerate(self.handlers):
                h.start(self.contexts[i])

    @property
    def idle(self) -> bool:
        """No message in transit and no timer pending."""
        return not self._times

    def run(self, until: int | None = None, max_events: int | None = None) -> "MessageExecutor":
        """Process events up to time ``until`` (inclusive) or until none is left."""
        # (The engine's event-driven path calls this once per time unit with events: a lean preamble.)
        if not self._started:
            self.start()
        times, buckets = self._times, self._buckets
        receivers, contexts, held, log = self._receivers, self.contexts, self._held, self.load_log
        if held.obj is not self.loads:
            held = self._view()
        horizon = _INF if until is None else until
        limit = _INF if max_events is None else max_events
        events = self.events
        try:
            while times and times[0] <= horizon:
                when = heappop(times)
                bucket = buckets.pop(when)
                self.now = when
                # (Nothing a handler schedules now can join this bucket: every event is >= 1 unit ahead.)
                for k, (src, dst, message, tokens, on_delivery) in enumerate(bucket):
                    if events >= limit:
                        buckets[when] = bucket[k:]  # back in the queue, in the same order
                        heappush(times, when)
                        raise TokendistError(f"message-passing run exceeded {max_events} events")
                    if tokens:
                        held[dst] += tokens
                        self.in_transit -= tokens
                        if log is not None:
                            log += (dst, tokens)
                    events += 1
                    receivers[dst](contexts[dst], src, message, tokens)
                    if on_delivery is not None:
                        # The self-timer the sender would have set for the delivery time: it came right
                        # after the message in (time, seq) order, so nothing can run in between.
                        events += 1
                        receivers[src](contexts[src], src, on_delivery, 0)
        finally:
            self.events = events
        if until is not None and (not times or times[0] > until):
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
