"""The per-node program of Margara, Pistocchi, Vassura: Phases 1-3 as one state machine per node.

The program follows the paper's pseudocode line by line (Sec. 3.1 PHASE 1, Sec. 3.2 PHASE 2,
Sec. 3.3 PHASE 3); the variable names are the paper's (``Tv``, ``Nv``, ``R``, ``S``, ``parent``,
``subTreeT``, ``subTreeN``, ``Avg``, ``bigger``, ``smaller``, ``subTreeBalanced``, ``p``). The
state (S1.1 ... S3.2, then ``final``) is kept in :attr:`PerfectTreeNode.state` for the reports.

Where the pseudocode does not say what to do, the choices are (docs/protocols/perfect-tree.md):

* a ``while`` loop of Phase 2/3 that polls with non-blocking receives and finds nothing blocks
  until a message it could read arrives (polling that finds nothing changes nothing);
* "tokens at v" in the Phase 2 initialisation is the node's own count (tokens delivered to it but
  not yet received by the program are counted when ``receiveToken`` takes them);
* ``receiveTokensFromAll`` calls ``receiveToken`` once per channel, channels 1..deg in order;
* "an element of smaller" / "a neighbour that can accept a token" is chosen by ``pick``: ``first``
  (lowest channel) or ``largest`` (largest deficit; ties to the lowest channel);
* a message of a later phase is not taken by a receive of an earlier phase (``phase_overlap =
  "defer"``); ``"merge"`` lets Phase 2 count Phase-3 tokens as ordinary tokens (the literal
  reading of ``receiveToken``), which breaks Theorem 3 (see the docs).
"""

from __future__ import annotations

from ._channels import ChannelNode, Wait

__all__ = ["PerfectTreeNode", "KINDS", "PHASE_OVERLAP", "PICKS"]

#: Message kinds (the first field of every message tuple) and the phase that sends them.
KINDS = {"phase1-subtree": 1, "phase1-global": 1, "phase2-token": 2, "phase3-token": 3, "phase3-finished": 3}
PHASE_OVERLAP = ("defer", "merge")
PICKS = ("first", "largest")


def _accept_defer(phase: int, kind: str) -> bool:
    # A receive of phase k takes messages of phases <= k: a node that has moved on reads what
    # older phases left in its channels (it never happens: see the docs), never a later phase.
    return KINDS[kind] <= phase


def _accept_merge(phase: int, kind: str) -> bool:
    if phase == 2 and kind == "phase3-token":
        return True
    return KINDS[kind] <= phase


class PerfectTreeNode(ChannelNode):
    """One node: its program is :meth:`program` (the three phases in sequence).

    Parameters
    ----------
    links : list of Link
        The link of each channel 1..deg.
    release : {"delivery", "send"}
        Link release rule of ``send`` (see :mod:`._channels`).
    pick : {"first", "largest"}
        Which subtree gets the next token in S2.3 and S3.1.
    phase_overlap : {"defer", "merge"}
        Whether Phase 2 may take Phase-3 tokens (see the module docstring).
    """

    def __init__(self, links, *, release="delivery", pick="first", phase_overlap="defer"):
        super().__init__(links, release)
        self.pick = pick
        accept = _accept_defer if phase_overlap == "defer" else _accept_merge
        # The rule above as one set of kinds per phase (index 0 unused): a receive tests membership.
        self.takes = tuple(frozenset(kind for kind in KINDS if accept(phase, kind)) for phase in range(4))
        self._state = "start"
        self.entered = {}      # state -> time the node first entered it
        # How S1.2 made this node the root: "busy" (the link was reserved by the other end: the
        # election race) or "received" (the other end's message had already arrived); else None.
        self.elected_by = None
        self.times = {}        # phase -> time the node finished it
        self.after_phase1 = None  # (Tv, Nv, parent)
        self.after_phase2 = None  # (Tv, Avg, parent)
        self.stuck = False
        self.consumed_out_of_phase = 0

    @property
    def state(self) -> str:
        """The paper's state name (S1.1 ... S3.2), ``final`` at the end."""
        return self._state

    @state.setter
    def state(self, value: str) -> None:
        if value != self._state:  # (the loops of Phase 2 and 3 set the same state again and again)
            self._state = value
            if value not in self.entered:
                self.entered[value] = self.ctx.now

    # ------------------------------------------------------------------ helpers
    def _bits(self, x: int) -> int:
        return max(1, int(x).bit_length())

    def memory_bits(self, total: int, nodes: int) -> int:
        """Bits of the program's variables, each sized to the largest value it can hold here.

        ``subTreeT``/``subTreeN`` (deg entries each), ``Tv``, ``Avg``, ``Nv``, ``R``, ``S``,
        ``parent``, ``p`` (channel numbers), ``bigger``/``smaller`` (deg-bit sets),
        ``subTreeBalanced``: the paper's Theta(d_v (log T + log N)) (Sec. 5).
        """
        bt, bn, bd = self._bits(total), self._bits(nodes), self._bits(self.deg)
        return self.deg * (bt + bn) + 2 * bt + bn + 4 * bd + 2 * self.deg + 1

    def _subtree_room(self, i: int, level: int) -> int:
        # level * subTreeN[i] - subTreeT[i]: > 0 iff subTreeAvg(i) < level (integer arithmetic).
        return level * self.subTreeN[i] - self.subTreeT[i]

    def _choose(self, candidates: list, level: int) -> int:
        if self.pick == "first":
            return candidates[0]
        return max(candidates, key=lambda i: (self._subtree_room(i, level), -i))

    # bigger / smaller (Sec. 3.2): the sons whose subtree holds more / fewer than Avg tokens a node,
    # i.e. _subtree_room(i, Avg) < 0 / > 0, written out (Phase 2 recomputes them at every step).
    def _bigger(self):
        avg, parent, T, N = self.Avg, self.parent, self.subTreeT, self.subTreeN
        return [i for i in self.channels if i != parent and avg * N[i] < T[i]]

    def _smaller(self):
        avg, parent, T, N = self.Avg, self.parent, self.subTreeT, self.subTreeN
        return [i for i in self.channels if i != parent and avg * N[i] > T[i]]

    # ------------------------------------------------------------------ the program
    def program(self):
        yield from self.phase1()
        self.times[1] = self.ctx.now
        self.after_phase1 = (self.Tv, self.Nv, self.parent)
        yield from self.phase2()
        self.times[2] = self.ctx.now
        self.after_phase2 = (self.Tv, self.Avg, self.parent)
        yield from self.phase3()
        self.times[3] = self.ctx.now
        self.state = "final"

    def phase1(self):
        """Sec. 3.1: convergecast of subtree sizes and tokens, implicit election, broadcast of T, N."""
        deg = self.deg
        self.own = int(self.ctx.load)  # nothing has been delivered at time 0
        self.Tv, self.Nv, self.R, self.S, self.parent = self.own, 1, 0, 0, 0
        self.subTreeT = [None] * (deg + 1)
        self.subTreeN = [None] * (deg + 1)
        while self.S < deg or self.R < deg:
            if self.S == 0 and self.R < deg - 1:
                self.state = "S1.1"
                while self.R < deg - 1:  # local info from all neighbours but one
                    i, (msg, _) = yield from self.waitany(1)
                    self._add_subtree(i, msg)
            elif self.S == 0 and self.R == deg - 1:
                self.state = "S1.2"
                self.parent = next(j for j in range(1, deg + 1) if self.subTreeT[j] is None)
                if self.reserve(self.parent):
                    got = self.receive_from(self.parent, 1)
                    if got is None:  # not received: send the subtree's values to the parent
                        yield from self.send(self.parent, ("phase1-subtree", self.Tv, self.Nv))
                        self.release(self.parent)
                        self.S += 1
                    else:  # the last neighbour already sent: v is the root
                        self.elected_by = "received"
                        self.release(self.parent)
                        self._add_subtree(self.parent, got[0])
                        self.parent = 0
                else:  # the parent is using the channel: wait for its message, v is the root
                    self.elected_by = "busy"
                    msg, _ = yield from self.wait(self.parent, 1)
                    self._add_subtree(self.parent, msg)
                    self.parent = 0
            elif self.S == 1 and self.R == deg - 1:
                self.state = "S1.3"
                msg, _ = yield from self.wait(self.parent, 1)  # the global message
                if msg[0] != "phase1-global":  # e.g. a crossing subtree message (release="send")
                    self.consumed_out_of_phase += 1
                self.subTreeT[self.parent] = msg[1] - self.Tv
                self.subTreeN[self.parent] = msg[2] - self.Nv
                self.Tv, self.Nv = msg[1], msg[2]
                self.R += 1
            elif self.S == 0 and self.R == deg:
                self.state = "S1.4"
                for i in range(1, deg + 1):
                    yield from self.safe_send(i, ("phase1-global", self.Tv, self.Nv))
                self.S = deg
            elif self.S == 1 and self.R == deg:
                self.state = "S1.5"
                for i in range(1, deg + 1):
                    if i != self.parent:
                        yield from self.safe_send(i, ("phase1-global", self.Tv, self.Nv))
                self.S = deg
            else:  # pragma: no cover - the five cases cover every reachable (S, R)
                raise RuntimeError(f"phase 1: unreachable state S={self.S}, R={self.R}")

    def _add_subtree(self, i: int, msg) -> None:
        if msg[0] != "phase1-subtree":
            self.consumed_out_of_phase += 1
        self.Tv += msg[1]
        self.Nv += msg[2]
        self.subTreeT[i] = msg[1]
        self.subTreeN[i] = msg[2]
        self.R += 1

    # receiveToken / receiveTokensFromAll / sendToken (Sec. 2), on the node's token variables.
    def receive_token(self, c: int, phase: int) -> bool:
        got = self.receive_from(c, phase)
        if got is None:
            return False
        msg, tokens = got
        if tokens != 1:
            self.consumed_out_of_phase += 1
        self.Tv += tokens
        self.subTreeT[c] -= tokens
        return True

    def receive_tokens_from_all(self, phase: int) -> bool:
        got = False
        inbox = self.inbox
        for c in self.channels:
            if inbox[c]:  # (an empty channel has nothing to receive: no call)
                got |= self.receive_token(c, phase)
        return got

    def send_token(self, c: int, kind: str):
        yield from self.safe_send(c, (kind,), 1)
        self.Tv -= 1
        self.subTreeT[c] += 1

    def _any_readable(self, phase: int, channels=None):
        chans = self.channels if channels is None else channels
        return Wait(lambda: self.any_readable(phase, chans))

    def phase2(self):
        """Sec. 3.2: balance every subtree to Avg tokens per node; extra tokens go to the root."""
        self.Avg = self.Tv // self.Nv
        self.Tv = self.own
        bigger, smaller = self._bigger(), self._smaller()
        balanced = not bigger and not smaller
        while not ((balanced and self.Tv == self.Avg) or (balanced and self.parent == 0)):
            if not balanced and self.Tv <= self.Avg:
                self.state = "S2.1"
                if not self.receive_tokens_from_all(2):
                    yield self._any_readable(2)
                    continue
                bigger = self._bigger()
                balanced = not bigger and not smaller
            elif balanced and self.Tv < self.Avg and self.parent > 0:
                self.state = "S2.2"  # all sons have finished: tokens come from the parent
                if not self.receive_token(self.parent, 2):
                    yield self._any_readable(2, [self.parent])
            elif not balanced and self.Tv > self.Avg:
                self.state = "S2.3"
                got = self.receive_tokens_from_all(2)
                bigger = self._bigger()
                if smaller:
                    j = self._choose(smaller, self.Avg)
                    yield from self.send_token(j, "phase2-token")
                    smaller = self._smaller()
                elif not got:
                    yield self._any_readable(2)
                balanced = not bigger and not smaller
            elif balanced and self.Tv > self.Avg and self.parent > 0:
                self.state = "S2.4"
                yield from self.send_token(self.parent, "phase2-token")
            else:  # pragma: no cover - the loop condition excludes every other case
                raise RuntimeError("phase 2: unreachable state")

    def phase3(self):
        """Sec. 3.3: roots send tokens above Avg + 1 down, then Finished; every node becomes a root."""
        p = self.parent
        self.p = p
        while not (self.Tv <= self.Avg + 1 and self.parent == 0):
            if self.Tv > self.Avg + 1 and self.parent == 0:
                self.state = "S3.1"
                # The sons whose subtree can take a token: _subtree_room(i, Avg + 1) > 0, written out.
                level, T, N = self.Avg + 1, self.subTreeT, self.subTreeN
                cands = [i for i in self.channels if i != p and level * N[i] > T[i]]
                if not cands:  # Theorem 3 says it cannot happen; record it and stop here
                    self.stuck = True
                    yield Wait(lambda: False)
                i = self._choose(cands, self.Avg + 1)
                yield from self.safe_send(i, ("phase3-token",), 1)
                self.Tv -= 1
                self.subTreeT[i] += 1
            else:
                self.state = "S3.2"
                got = self.receive_from(self.parent, 3)
                if got is None:
                    yield self._any_readable(3, [self.parent])
                    continue
                msg, tokens = got
                if msg[0] == "phase3-finished":
                    self.parent = 0  # the parent finished: become a root
                else:
                    self.Tv += tokens
                    self.subTreeT[self.parent] -= tokens
        self.state = "S3-finish"
        for i in range(1, self.deg + 1):
            if i != p:
                yield from self.safe_send(i, ("phase3-finished",))
