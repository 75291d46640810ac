"""The Sec. 2 primitives of Margara, Pistocchi, Vassura on the executor: reserve is atomic, a send
keeps the link busy until delivery, channels are FIFO, waitany/wait block, safeSend waits."""

import pytest

from tokendist.engine import MessageExecutor
from tokendist.graphs import path_graph, star_graph
from tokendist.protocols.perfect_tree._channels import ChannelNode, Link
from tokendist.protocols.perfect_tree._node import KINDS, PHASE_OVERLAP, PerfectTreeNode, _accept_defer, _accept_merge


class Scripted(ChannelNode):
    """A node whose program is given as a generator function of the node."""

    def __init__(self, links, script, log, release="delivery"):
        super().__init__(links, release)
        self.script, self.log = script, log

    def program(self):
        yield from self.script(self)


def _pair(script0, script1, schedule="sync", release="delivery", loads=(0, 0)):
    link = Link()
    log = []
    nodes = [Scripted([None, link], script0, log, release), Scripted([None, link], script1, log, release)]
    ex = MessageExecutor(path_graph(2), nodes, list(loads), schedule=schedule)
    ex.run()
    return ex, nodes, log


def test_reserve_is_atomic_and_send_holds_the_link_until_delivery():
    def both(node):
        if node.reserve(1):
            node.log.append((node.ctx.node, "won", node.ctx.now))
            yield from node.send(1, ("m",))
            node.log.append((node.ctx.node, "delivered", node.ctx.now))
            node.release(1)
        else:
            node.log.append((node.ctx.node, "busy", node.ctx.now))
            c, (msg, _) = yield from node.waitany(1)
            node.log.append((node.ctx.node, "got", node.ctx.now))

    delays = lambda src, dst, now, message: 4  # noqa: E731
    ex, nodes, log = _pair(both, both, schedule=delays)
    # the message is delivered first, then the sender's send completes (same time unit)
    assert log == [(0, "won", 0), (1, "busy", 0), (1, "got", 4), (0, "delivered", 4)]


def test_release_on_send_lets_both_ends_send():
    def both(node):
        if node.reserve(1):
            if node.receive_from(1, 1) is None:
                yield from node.send(1, ("m",))
                node.release(1)
                node.log.append((node.ctx.node, "sent"))

    ex, nodes, log = _pair(both, both, schedule=lambda *a: 3, release="send")
    assert sorted(log) == [(0, "sent"), (1, "sent")]


def test_safe_send_waits_for_a_busy_link_and_channels_are_fifo():
    def sender(node):
        for k in range(3):
            yield from node.safe_send(1, ("m", k), tokens=1)
        node.log.append(("sender-done", node.ctx.now))

    def other(node):
        yield from node.safe_send(1, ("x",))  # competes for the same link
        got = []
        for _ in range(3):
            msg, tokens = yield from node.wait(1, 1)
            got.append((msg[1], tokens))
        node.log.append(("received", got))

    ex, nodes, log = _pair(sender, other, loads=(3, 0))
    assert ("received", [(0, 1), (1, 1), (2, 1)]) in log
    assert ex.loads.tolist() == [0, 3] and ex.in_transit == 0
    # the link carries one message at a time: 4 messages, one time unit each
    assert ex.now == 4


def test_waitany_takes_the_lowest_readable_channel():
    links = [Link() for _ in range(3)]
    log = []

    def centre(node):
        for _ in range(3):
            c, (msg, _) = yield from node.waitany(1)
            log.append(c)

    def leaf(node):
        yield from node.send(1, ("m",))

    nodes = [Scripted([None] + links, centre, log)] + [Scripted([None, links[i]], leaf, log) for i in range(3)]
    MessageExecutor(star_graph(3), nodes, [0, 0, 0, 0]).run()
    assert log == [1, 2, 3]  # all three arrive at time 1; channels interrogated in order


@pytest.mark.parametrize("overlap", PHASE_OVERLAP)
def test_the_kinds_a_receive_takes_are_the_phase_overlap_rule(overlap):
    # PerfectTreeNode.takes[k] (a set per phase, what receive/readable test) against the rule itself.
    node = PerfectTreeNode([None, Link()], phase_overlap=overlap)
    rule = _accept_defer if overlap == "defer" else _accept_merge
    for phase in (1, 2, 3):
        for kind in KINDS:
            assert (kind in node.takes[phase]) == rule(phase, kind), (phase, kind)
    # and the generic channel node takes every message in every phase
    assert "anything" in Scripted([None, Link()], None, []).takes[2]
