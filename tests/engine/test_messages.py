"""The message-passing executor: FIFO channels, one delivery per channel per time unit, tokens."""

import numpy as np
import pytest
from hypothesis import given, strategies as st

from tokendist.engine import MessageExecutor
from tokendist.errors import TokendistError
from tokendist.graphs import make_graph, path_graph


class _Burst:
    """Node 0 sends k numbered messages to node 1 at time 0; node 1 logs arrival times and order."""

    def __init__(self, k):
        self.k, self.log = k, []

    def start(self, ctx):
        if ctx.node == 0:
            for i in range(self.k):
                ctx.send(1, ("m", i))

    def receive(self, ctx, src, message, tokens):
        self.log.append((ctx.now, message[1]))


@pytest.mark.parametrize("schedule", ["sync", "async"])
def test_fifo_and_one_delivery_per_time_unit(schedule):
    h = [_Burst(6), _Burst(6)]
    ex = MessageExecutor(path_graph(2), h, [0, 0], schedule=schedule, rng=np.random.default_rng(1), max_delay=4)
    ex.run()
    times = [t for t, _ in h[1].log]
    assert [i for _, i in h[1].log] == list(range(6))       # FIFO
    assert len(set(times)) == len(times)                      # one per time unit
    if schedule == "sync":
        assert times == [1, 2, 3, 4, 5, 6]


class _Forward:
    """Each node forwards every token it receives to a random neighbour, a fixed number of hops."""

    def __init__(self, hops):
        self.hops = hops

    def start(self, ctx):
        if ctx.load:
            ctx.send(int(ctx.neighbours[0]), ("t", self.hops), tokens=int(ctx.load))

    def receive(self, ctx, src, message, tokens):
        if message[1] > 0 and tokens:
            nbr = int(ctx.neighbours[(ctx.now + ctx.node) % len(ctx.neighbours)])
            ctx.send(nbr, ("t", message[1] - 1), tokens=tokens)


@given(st.integers(0, 2**31), st.sampled_from(["sync", "async"]))
def test_tokens_conserved_at_every_event(seed, schedule):
    g = make_graph("torus:3x4")
    rng = np.random.default_rng(seed)
    loads = rng.integers(0, 5, size=g.n)
    ex = MessageExecutor(g, [_Forward(5) for _ in range(g.n)], loads, schedule=schedule, rng=rng)
    ex.start()
    while not ex.idle:
        ex.run(until=ex.now + 1)
        ex.check_conservation()
    assert ex.loads.sum() == loads.sum() and ex.in_transit == 0


def test_refuses_overdraw_and_non_neighbours():
    class Bad:
        def __init__(self, dst, tokens):
            self.dst, self.tokens = dst, tokens

        def start(self, ctx):
            if ctx.node == 0:
                ctx.send(self.dst, ("x",), tokens=self.tokens)

        def receive(self, ctx, src, message, tokens):
            pass

    g = path_graph(3)
    with pytest.raises(RuntimeError, match="holds"):
        MessageExecutor(g, [Bad(1, 5)] * 3, [1, 0, 0]).run()
    with pytest.raises(RuntimeError, match="not a neighbour"):
        MessageExecutor(g, [Bad(2, 0)] * 3, [1, 0, 0]).run()


def test_same_seed_same_async_run():
    g = make_graph("torus:3x3")

    def go(seed):
        h = [_Forward(4) for _ in range(g.n)]
        ex = MessageExecutor(g, h, np.arange(g.n), schedule="async", rng=np.random.default_rng(seed))
        ex.run()
        return ex.loads.tolist(), ex.now, ex.messages

    assert go(3) == go(3)


def test_adversarial_schedule_is_a_callable():
    slow = lambda src, dst, now, message: 10 if src == 0 else 1  # noqa: E731
    h = [_Burst(1), _Burst(1)]
    ex = MessageExecutor(path_graph(2), h, [0, 0], schedule=slow)
    ex.run()
    assert h[1].log == [(10, 0)]


def test_node_rules_see_what_each_contact_delivered_last_step():
    # A toy rule: every node with tokens sends one to its lowest-numbered neighbour and records,
    # each step, the tokens its view says arrived in the previous step.
    from tokendist.engine import Protocol, Step
    from tokendist.engine._local import run_node_rules

    seen = {}

    class SendLowest(Protocol):
        name = "send-lowest-test"
        model = "multi-port"
        exchange_rounds = 1

        def step(self, t, graph, loads):  # pragma: no cover - only the node form runs here
            raise NotImplementedError

        def publish(self, rnd, t, node, view):
            return None

        def decide(self, t, node, view):
            seen[(t, node)] = dict(view.delivered)
            low = int(min(view.neighbours))
            return {low: 1} if view.load > 0 else {}

    from tokendist.graphs import make_graph
    g = make_graph("path:4")
    history, _ = run_node_rules(g, SendLowest(), "constant:2", 3, seed=0, schedule="async")
    for t in range(1, 3):
        for node in range(4):
            expected = {int(j): int(history[t - 1][j] > 0 and min(g.neighbours(j)) == node) for j in g.neighbours(node)}
            assert seen[(t, node)] == expected
    assert all(seen[(0, node)] == {} for node in range(4))


# ---------------------------------------------------------------------------------------------------
# The executor against a naive reference: one heap of (time, seq, event), as the model states it
# ---------------------------------------------------------------------------------------------------
class _RefContext:
    def __init__(self, ref, node, neighbours):
        self.ref, self.node, self.neighbours = ref, node, neighbours

    @property
    def now(self):
        return self.ref.now

    @property
    def load(self):
        return self.ref.loads[self.node]

    def send(self, dst, message, tokens=0, on_delivery=None):
        return self.ref.send(self.node, dst, message, tokens, on_delivery)

    def set_timer(self, delay, message):
        self.ref.push(self.ref.now + max(1, int(delay)), (self.node, self.node, message, 0, None))


class _Reference:
    """The model of engine/_messages.py written as plainly as possible (a heap of every event)."""

    def __init__(self, graph, handlers, loads, delay):
        import heapq

        self.heapq, self.graph, self.handlers, self.delay = heapq, graph, handlers, delay
        self.loads = np.array(loads, dtype=np.int64)
        self.now, self.seq, self.heap, self.last = 0, 0, [], {}
        self.contexts = [_RefContext(self, i, graph.neighbours(i)) for i in range(graph.n)]

    def push(self, when, event):
        self.heapq.heappush(self.heap, (when, self.seq, event))
        self.seq += 1

    def send(self, src, dst, message, tokens, on_delivery):
        assert dst in self.graph.neighbours(src).tolist() and 0 <= tokens <= self.loads[src]
        self.loads[src] -= tokens
        when = max(self.now + self.delay(src, dst, self.now, message), self.last.get((src, dst), -1) + 1)
        self.last[(src, dst)] = when
        self.push(when, (src, dst, message, tokens, on_delivery))
        return when

    def run(self):
        for i, h in enumerate(self.handlers):
            h.start(self.contexts[i])
        while self.heap:
            self.now, _, (src, dst, message, tokens, on_delivery) = self.heapq.heappop(self.heap)
            self.loads[dst] += tokens
            self.handlers[dst].receive(self.contexts[dst], src, message, tokens)
            if on_delivery is not None:
                self.handlers[src].receive(self.contexts[src], src, on_delivery, 0)


class _Chatter:
    """Replies to what it receives in ways fixed by a hash of (node, time, message): 0-2 messages,
    with tokens or not, with a delivery notice or not, or a timer; every message carries a hop budget."""

    def __init__(self, log, salt):
        self.log, self.salt = log, salt

    def _act(self, ctx, hops):
        if hops <= 0:
            return
        h = hash((self.salt, ctx.node, ctx.now, hops)) & 0xFFFF
        nbrs = ctx.neighbours.tolist()
        for k in range(h % 3):
            dst = nbrs[(h >> (2 + k)) % len(nbrs)]
            tokens = min(int(ctx.load), (h >> 5) % 3)
            note = ("noted", hops) if (h >> 7) & 1 else None
            ctx.send(dst, ("m", hops - 1), tokens=tokens, on_delivery=note)
        if (h >> 9) & 1:
            ctx.set_timer(1 + (h >> 10) % 3, ("timer", hops - 1))

    def start(self, ctx):
        self._act(ctx, 6)

    def receive(self, ctx, src, message, tokens):
        self.log.append((ctx.now, ctx.node, src, message, tokens))
        self._act(ctx, message[1])


@given(st.integers(0, 2**31), st.sampled_from(["torus:3x4", "path:5", "star:4"]), st.sampled_from(["async", "adversary"]))
def test_calendar_queue_runs_the_events_of_the_naive_heap_in_the_same_order(seed, spec, kind):
    g = make_graph(spec)
    loads = np.random.default_rng(seed).integers(0, 4, size=g.n)
    if kind == "async":  # the executor's own schedule against per-message draws from the same seed
        ref_rng = np.random.default_rng(seed)
        ref_delay = lambda src, dst, now, message: int(ref_rng.integers(1, 5))  # noqa: E731
        kwargs = {"schedule": "async", "rng": np.random.default_rng(seed), "max_delay": 4}
    else:
        ref_delay = lambda src, dst, now, message: 1 + (7 * src + 3 * dst + now + seed) % 4  # noqa: E731
        kwargs = {"schedule": ref_delay}
    got, want = [], []
    ex = MessageExecutor(g, [_Chatter(got, seed) for _ in range(g.n)], loads, **kwargs)
    ex.run()
    ref = _Reference(g, [_Chatter(want, seed) for _ in range(g.n)], loads, ref_delay)
    ref.run()
    assert got == want
    assert ex.loads.tolist() == ref.loads.tolist() and ex.in_transit == 0 and ex.idle


def test_an_event_limit_leaves_the_queue_as_it_was():
    g = make_graph("torus:3x4")
    loads = np.arange(g.n)
    whole, parts = [], []
    MessageExecutor(g, [_Chatter(whole, 1) for _ in range(g.n)], loads, schedule="sync").run()
    ex = MessageExecutor(g, [_Chatter(parts, 1) for _ in range(g.n)], loads, schedule="sync")
    with pytest.raises(TokendistError, match="exceeded 7 events"):
        ex.run(max_events=7)
    assert ex.events == 7 and len(parts) == 7
    ex.run()
    assert parts == whole


def test_a_rebound_loads_array_is_followed():
    class Give:
        def start(self, ctx):
            if ctx.node == 0:
                ctx.send(1, ("x",), tokens=2)

        def receive(self, ctx, src, message, tokens):
            pass

    ex = MessageExecutor(path_graph(2), [Give(), Give()], [3, 0])
    ex.start()
    ex.loads = ex.loads + 10  # a new array (an engine could rebind it): the executor writes to it
    ex.run()
    assert ex.loads.tolist() == [11, 12] and ex.in_transit == 0


@given(st.integers(0, 2**63 - 1), st.integers(1, 10**9), st.integers(0, 3000))
def test_block_drawn_delays_are_the_per_message_draws(seed, max_delay, count):
    from tokendist.engine._messages import _block_draws

    one, block = np.random.default_rng(seed), np.random.default_rng(seed)
    draw = _block_draws(block, 1, max_delay + 1).__next__
    assert [draw() for _ in range(count)] == [int(one.integers(1, max_delay + 1)) for _ in range(count)]
