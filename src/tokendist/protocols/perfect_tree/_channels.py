"""The communication primitives of Margara, Pistocchi, Vassura (Sec. 2) on the message executor.

Each node runs its program as a Python generator that *yields* whenever a primitive must block
(``waitany``, ``wait``, ``safeSend`` on a busy channel, a send that is in flight). The driver
(:class:`ChannelNode`) is an ordinary executor handler: every delivery goes to a per-channel FIFO
inbox, and after every event the driver resumes the program while the condition it waits for
holds. Local computation takes no time; only messages do.

The primitives, as the paper defines them:

* ``reserve(c)`` -- atomic test-and-set on the link (the undirected edge): False ("busy") if either
  end holds it. Two ends that try in the same time unit are ordered by the executor's
  deterministic ``(time, seq)`` heap: exactly one wins.
* ``release(c)`` -- frees the link.
* ``send(c, m)`` -- sends through a reserved link. With ``release="delivery"`` (default) the send
  completes when the message is delivered (a self-timer at the delivery time the executor
  returns), so a link stays busy while a message is on it; with ``release="send"`` it returns at
  once (see docs/protocols/perfect-tree.md: this reading lets the election deadlock).
* ``receive(c)`` -- the first message of channel ``c`` or None (no blocking). Messages are typed
  by phase: a receive made in phase ``k`` takes only messages of the kinds in ``takes[k]``, so a
  message of a later phase waits in the FIFO channel (``phase_overlap`` in the protocol).
* ``waitany()``, ``wait(c)`` -- block until a message is readable, then receive it (``waitany``
  interrogates channels 1..deg in order, so the lowest readable channel wins).
* ``safeSend(c, m)`` -- wait until the link is free (re-trying once per time unit: polling),
  reserve, send, release.
* ``receiveToken(c)``, ``receiveTokensFromAll()``, ``sendToken(c)`` -- in
  :mod:`._node`, since they update the node's token variables.

Channels are numbered 1..deg (the node's neighbours in increasing id order), ``0`` is "none",
as in the paper's pseudocode.
"""

from __future__ import annotations

from collections import deque
from typing import Callable, Iterable

__all__ = ["Link", "Wait", "ChannelNode", "RELEASE_MODES"]

#: When a reserved link is released by ``send``: after delivery (default) or at once.
RELEASE_MODES = ("delivery", "send")


class Link:
    """The shared reservation state of one undirected link (the paper's channel lock)."""

    __slots__ = ("holder",)

    def __init__(self):
        self.holder = None


class _AllKinds:
    """``takes`` of a node whose receives take every message, whatever the phase."""

    __slots__ = ()

    def __getitem__(self, phase):
        return self

    def __contains__(self, kind) -> bool:
        return True


class Wait:
    """What a blocked program waits for: ``ready()`` true; ``poll`` re-checks every time unit."""

    __slots__ = ("ready", "poll")

    def __init__(self, ready: Callable[[], bool], poll: bool = False):
        self.ready = ready
        self.poll = poll


class ChannelNode:
    """Executor handler that runs a generator program with the paper's channel primitives.

    Parameters
    ----------
    links : list of Link
        The link of each channel, index 1..deg (index 0 unused).
    release : {"delivery", "send"}
        When ``send`` frees the link (see the module docstring).
    """

    def __init__(self, links: list, release: str = "delivery"):
        self.links = links
        self.release_mode = release
        self.deg = len(links) - 1
        self.inbox = [deque() for _ in range(self.deg + 1)]
        self.channels = tuple(range(1, self.deg + 1))
        self.delivered = [0] * (self.deg + 1)  # sends on channel c confirmed delivered
        self.ctx = None
        self._gen = None
        self._wait: Wait | None = None
        self._polling = False
        self.done = False
        # takes[k]: the message kinds a receive of phase k takes (a set look-up per receive; a
        # subclass fills it from its rule, e.g. PerfectTreeNode's ``phase_overlap``).
        self.takes = _AllKinds()

    # ------------------------------------------------------------------ the program
    def program(self):  # pragma: no cover - overridden
        """The node's program (a generator yielding :class:`Wait`)."""
        raise NotImplementedError
        yield

    # ------------------------------------------------------------------ executor handler
    def start(self, ctx) -> None:
        self.ctx = ctx
        self.me = ctx.node  # (read by every reserve and release)
        self.chan_of = {int(nb): i + 1 for i, nb in enumerate(ctx.neighbours)}
        self.neighbour = [-1] + [int(nb) for nb in ctx.neighbours]
        self._gen = self.program()
        self._advance()

    def receive(self, ctx, src, message, tokens) -> None:
        if src == ctx.node:  # a self-timer
            if message[0] == "delivered":
                self.delivered[message[1]] += 1
            elif message[0] == "poll":
                self._polling = False
        else:
            self.inbox[self.chan_of[src]].append((message, tokens))
        self._advance()

    def _advance(self) -> None:
        # Resume the program while what it waits for holds.
        if self.done:
            return
        wait = self._wait
        if wait is None or wait.ready():
            gen = self._gen
            while True:
                try:
                    wait = next(gen)
                except StopIteration:
                    self.done = True
                    self._wait = None
                    return
                if not wait.ready():
                    break
            self._wait = wait
        if wait.poll and not self._polling:
            self._polling = True
            self.ctx.set_timer(1, ("poll",))

    # ------------------------------------------------------------------ Sec. 2 primitives
    def reserve(self, c: int) -> bool:
        """Reserve channel ``c``; False means *busy* (the other end holds it)."""
        link = self.links[c]
        holder = link.holder
        if holder is not None and holder != self.me:
            return False
        link.holder = self.me
        return True

    def release(self, c: int) -> None:
        """Release channel ``c``."""
        link = self.links[c]
        if link.holder == self.me:
            link.holder = None

    def send(self, c: int, message: tuple, tokens: int = 0):
        """Send ``message`` (with ``tokens``) through the reserved channel ``c`` (a generator)."""
        if self.release_mode == "delivery":
            target = self.delivered[c] + 1
            # The executor hands the sender ("delivered", c) right after the receiver got the
            # message (a self-timer at the delivery time, one heap event fewer): that ends the send.
            self.ctx.send(self.neighbour[c], message, tokens, ("delivered", c))
            yield Wait(lambda: self.delivered[c] >= target)
        else:
            self.ctx.send(self.neighbour[c], message, tokens)

    def readable(self, c: int, phase: int) -> bool:
        """Whether channel ``c``'s first message is one a receive of ``phase`` takes."""
        q = self.inbox[c]
        return bool(q) and q[0][0][0] in self.takes[phase]

    def any_readable(self, phase: int, channels) -> bool:
        """Whether some channel of ``channels`` has a message a receive of ``phase`` takes."""
        inbox, takes = self.inbox, self.takes[phase]
        for c in channels:
            q = inbox[c]
            if q and q[0][0][0] in takes:
                return True
        return False

    def receive_from(self, c: int, phase: int):
        """``receive(c)``: the first message of channel ``c`` as ``(message, tokens)``, or None."""
        q = self.inbox[c]  # (readable's test, written out: this runs for every channel polled)
        if q and q[0][0][0] in self.takes[phase]:
            return q.popleft()
        return None

    def waitany(self, phase: int, channels: Iterable[int] | None = None):
        """``waitany``: block until some channel has a message; returns ``(c, (message, tokens))``."""
        chans = self.channels if channels is None else tuple(channels)
        while True:
            for c in chans:
                got = self.receive_from(c, phase)
                if got is not None:
                    return c, got
            yield Wait(lambda: self.any_readable(phase, chans))

    def wait(self, c: int, phase: int):
        """``wait(c)``: block until channel ``c`` has a message, then return it."""
        while not self.readable(c, phase):
            yield Wait(lambda: self.readable(c, phase))
        return self.inbox[c].popleft()

    def safe_send(self, c: int, message: tuple, tokens: int = 0):
        """``safeSend(c, m)``: wait until ``c`` is not busy, reserve it, send, release."""
        while not self.reserve(c):
            yield Wait(lambda: self.links[c].holder is None, poll=True)
        yield from self.send(c, message, tokens)
        self.release(c)
