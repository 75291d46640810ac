"""The message-passing protocols as MPI ranks: per-node handlers placed on ranks, real MPI messages.

``mpiexec -n K python -m tokendist.cli run --algo perfect-tree --backend mpi ...`` (and
``async-multi-port``) runs here. The nodes of the protocol's network (the spanning tree of
``perfect-tree``) are partitioned over the ranks (:mod:`._partition`: contiguous ranges or METIS);
each rank runs the handlers of its own nodes -- the same handler objects the single-process
:class:`~tokendist.engine.MessageExecutor` runs -- and time advances in lock-step, one time unit
at a time:

1. every rank processes the events of the time unit that belong to its nodes, in the order of the
   single-process executor (below);
2. one ``allgather`` per time unit gives every rank the number of messages each event sent (so
   that each message gets the single-process executor's sequence number), the time unit's token
   and message counts and the next time unit at which anything is due (idle time units are
   skipped by all ranks alike);
3. the messages for nodes of other ranks travel as one pickled batch per neighbour rank and time
   unit (``neighbor_alltoall`` on a distributed graph topology whose edges are the ranks that share
   a cut edge): no MPI call per message.

Why the result is the single-process one. The single-process executor processes the events of a
time unit in the order of their sequence numbers (the global order in which messages were sent).
This executor gives every message that same number: the sends of a time unit are numbered in
the order of the events that made them, which the ``allgather`` of per-event send counts makes
known to every rank. So every node sees its events in the same order, the same handlers make the
same decisions, and loads, messages, time units and the JSON are the same. The one state two
nodes share is the link reservation of ``perfect-tree`` (the paper's atomic test-and-set, Sec. 2):
for a link whose ends sit on two ranks, each rank keeps the link's changes within the time unit
keyed by event number, and an event at an end of such a link waits until the other rank has
processed every event of the other end with a smaller number (a few small exchange rounds per time
unit, only when such events exist). Reads then see what the single-process executor saw.

Schedules. ``sync`` and the deterministic adversaries are the single-process schedules, so every
K gives the single-process run. The random schedules (``perfect-tree`` ``async``,
``async-multi-port`` ``random``) draw a delay per message in the single-process executor from one
sequential stream, which a partitioned run cannot share; here the delay of the c-th message on
the channel ``src -> dst`` sent at time ``t`` is a counter-based draw keyed by (seed, channel, t,
c) (:func:`tokendist._random.counter_uniform_scalar`): the same for every K, not the
single-process draws.
"""

from __future__ import annotations

import hashlib
import heapq
import pickle
import time
from bisect import bisect_right
from collections import Counter

import numpy as np

from ..._random import counter_uniform_scalar, stream, stream_key
from ...errors import ConservationError, TokendistError
from .._messages import NodeContext
from .._metrics import discrepancy, measure
from .._simulate import _CYCLE_DETECTION_MAX_N, TRACE_METRICS, RunResult, _plain
from .._simulate_events import CONSERVATION_EVERY, EventTrace
from ._partition import edge_cut, partition

__all__ = ["run_message_ranks", "RankExecutor", "MESSAGE_PROTOCOLS"]

#: The message-passing protocols that run as ranks (each has an adapter below).
MESSAGE_PROTOCOLS = ("perfect-tree", "async-multi-port")

_INF = 1 << 62
# Kinds of the items a rank processes in a time unit.
_START, _MSG, _ACK, _TIMER, _NOTE = range(5)


class _CutLink:
    """A ``perfect-tree`` link whose two ends sit on two ranks (stands in for ``Link``).

    ``holder`` reads the value as of the event being processed (``executor.key``): the last change
    with a key not above it, made by either end; a write is recorded under the current key and
    sent to the other rank at the end of the round.
    """

    __slots__ = ("_rx", "base", "keys", "values", "out", "ends", "rank")

    def __init__(self, rx, ends, rank):
        self._rx = rx
        self.base = None
        self.keys: list = []
        self.values: list = []
        self.out: list = []
        self.ends = ends    # (smaller node id, larger)
        self.rank = rank    # the other end's rank

    @property
    def holder(self):
        pos = bisect_right(self.keys, self._rx.key)
        return self.values[pos - 1] if pos else self.base

    @holder.setter
    def holder(self, value):
        k = self._rx.key
        pos = bisect_right(self.keys, k)
        self.keys.insert(pos, k)
        self.values.insert(pos, value)
        self.out.append((k, value))

    def merge(self, entries) -> None:
        for k, value in entries:
            pos = bisect_right(self.keys, k)
            self.keys.insert(pos, k)
            self.values.insert(pos, value)

    def end_unit(self) -> None:
        if self.keys:
            self.base = self.values[-1]
            self.keys.clear()
            self.values.clear()


# ---------------------------------------------------------------------------------------------------
# What each protocol needs from its placement (no change to the per-node handler classes)
# ---------------------------------------------------------------------------------------------------
class _PerfectTreeAdapter:
    """``perfect-tree``: cut links become :class:`_CutLink`; stable = every own node final."""

    random_schedules = ("async",)

    def place(self, rx, protocol) -> bool:
        owner, rank, graph = rx.owner, rx.rank, rx.graph
        shared = False
        for i in rx.local_nodes.tolist():
            node = protocol.nodes[i]
            for c, j in enumerate(graph.neighbours(i).tolist(), start=1):
                if owner[j] != rank:
                    node.links[c] = _CutLink(rx, (min(i, j), max(i, j)), int(owner[j]))
                    rx.link_of[(i, j)] = node.links[c]
                    shared = True
        return shared

    def local_stable(self, rx, protocol) -> bool:
        nodes = protocol.nodes
        return all(nodes[i].state == "final" for i in rx.local_nodes.tolist())

    def remote_delivered(self, protocol, src, dst) -> None:
        pass


class _AsyncMultiPortAdapter:
    """``async-multi-port``: no shared state; the stability test of ``is_stable`` over the ranks."""

    random_schedules = ("random",)

    def place(self, rx, protocol) -> bool:
        return False

    def local_stable(self, rx, protocol) -> bool:
        # AsyncMultiPort.is_stable over this rank's nodes: the messages its nodes have in flight
        # carry their current loads, and no edge with an own end differs by more than the threshold.
        ghosts = rx.neighbour_loads()  # collective: before any early answer
        w = rx.loads
        for src, message in rx.in_flight_from_own():
            if message[1] != w[src]:
                return False
        g = rx.graph
        for i in rx.local_nodes.tolist():
            for j in g.neighbours(i).tolist():
                wj = w[j] if rx.owner[j] == rx.rank else ghosts[j]
                if abs(int(w[i]) - int(wj)) > protocol.threshold:
                    return False
        return True

    def remote_delivered(self, protocol, src, dst) -> None:
        # The receiver's handler pops the sender's in-flight record; on another rank it cannot.
        protocol._handlers[src].in_flight[dst].popleft()


_ADAPTERS = {"perfect-tree": _PerfectTreeAdapter(), "async-multi-port": _AsyncMultiPortAdapter()}


def _kind(message) -> str:
    """The message's kind as the single-process executor counts it (``messages_by_kind``)."""
    if isinstance(message, tuple) and message and isinstance(message[0], str):
        return message[0]
    return type(message).__name__


# ---------------------------------------------------------------------------------------------------
# One rank's executor
# ---------------------------------------------------------------------------------------------------
class RankExecutor:
    """The handlers of one rank's nodes, advanced one time unit at a time together with the others.

    ``loads`` has one entry per node of the whole network; only the own nodes' entries are kept up
    to date. ``in_transit`` is this rank's share (tokens sent minus tokens received): the sum over
    the ranks is the tokens in flight.
    """

    def __init__(self, comm, graph, handlers, loads, owner, *, delay, fixed_delay, adapter, protocol,
                 allow_negative=False):
        self.comm = comm
        self.rank, self.size = comm.Get_rank(), comm.Get_size()
        self.graph = graph
        self.handlers = handlers
        self.owner = owner
        self.adapter = adapter
        self.protocol = protocol
        self.local_nodes = np.flatnonzero(owner == self.rank)
        self.is_local = owner == self.rank
        self.loads = np.array(loads, dtype=np.int64)
        self._delay, self._fixed_delay = delay, fixed_delay
        self.allow_negative = allow_negative
        self.now = 0
        self.key = 0
        self.contexts = {i: NodeContext(self, i, graph.neighbours(i)) for i in self.local_nodes.tolist()}
        self._nbr_sets = {i: set(graph.neighbours(i).tolist()) for i in self.local_nodes.tolist()}
        self._heap: list = []
        self._last_delivery: dict = {}
        self._pending: list = []       # sends of the time unit being processed, numbered at its end
        self._records: list = []       # [key, sends] per event of the time unit
        self._rec = None
        self.seq = 0                   # the global send counter (the same on every rank)
        self.in_transit = 0
        self.messages = self.token_messages = self.tokens_moved = self.events = 0
        self.messages_by_kind: Counter = Counter()
        self.load_log: list = []       # (step, node, change) per token leaving or reaching an own node
        self.step_no = 1
        self.link_of: dict = {}
        # The ranks that own a neighbour of an own node (sources = destinations: cut edges are symmetric).
        u, v = graph.u, graph.v
        cut = (owner[u] != owner[v]) & ((owner[u] == self.rank) | (owner[v] == self.rank))
        other = np.where(owner[u[cut]] == self.rank, owner[v[cut]], owner[u[cut]])
        self.peers = sorted(set(other.tolist()))
        self._peer_index = {r: k for k, r in enumerate(self.peers)}
        self.topology = comm.Create_dist_graph_adjacent(self.peers, self.peers, reorder=False)
        self.shared = adapter.place(self, protocol)
        self.shared = bool(comm.allreduce(int(self.shared), op=_mpi().MAX))
        # Own nodes at an end of a cut link, and the remote ends of their cut links; the same for
        # every node (each rank decides alone, from the allgathered next events, whether a time
        # unit needs rounds).
        self._cut_nbrs: dict = {}
        for (i, j) in self.link_of:
            self._cut_nbrs.setdefault(i, []).append(j)
        self._links = list(self.link_of.values())
        self._link_by_ends = {link.ends: link for link in self._links}
        self._all_cut: dict = {}
        if self.shared:
            for a, b in zip(u[owner[u] != owner[v]].tolist(), v[owner[u] != owner[v]].tolist()):
                self._all_cut.setdefault(a, []).append(b)
                self._all_cut.setdefault(b, []).append(a)
        # The starts (time 0) may reserve links at once (a leaf's S1.2): rounds, when links are cut.
        self._rounds_needed = self.shared
        self._frontier: dict = {}
        # Measured communication: cross-rank messages and the bytes of their batches, link rounds.
        self.cross_messages = 0
        self.batch_bytes = 0
        self.link_rounds = 0
        self.link_bytes = 0
        self.units = 0
        self._started = False

    # ------------------------------------------------------------------ NodeContext's calls
    def send(self, src, dst, message, tokens=0, on_delivery=None) -> int:
        if dst not in self._nbr_sets[src]:
            raise RuntimeError(f"node {src} sent to {dst}, which is not a neighbour")
        if tokens:
            if tokens < 0:
                raise RuntimeError(f"node {src} sent a negative number of tokens")
            if self.loads[src] < tokens and not self.allow_negative:
                raise RuntimeError(f"node {src} sent {tokens} tokens but holds {self.loads[src]}")
            self.loads[src] -= tokens
            self.in_transit += tokens
            self.token_messages += 1
            self.tokens_moved += tokens
            self.load_log.append((self.step_no, src, -tokens))
        channel = (src, dst)
        count = self._last_delivery.get(channel, (-1, 0))
        delay = self._fixed_delay or int(self._delay(src, dst, self.now, message, count[1]))
        if delay < 1:
            raise RuntimeError(f"a schedule gave delay {delay}; delays are at least 1")
        when = self.now + delay
        if when <= count[0]:
            when = count[0] + 1
        self._last_delivery[channel] = (when, count[1] + 1)
        self.messages += 1
        self.messages_by_kind[_kind(message)] += 1
        self._pending.append((self._count(), when, _MSG, src, dst, message, tokens, on_delivery))
        return when

    def set_timer(self, node, delay, message) -> None:
        self._pending.append((self._count(), self.now + max(1, int(delay)), _TIMER, node, node, message, 0, None))

    def _count(self):
        rec = self._rec
        if rec is None or rec[0] != self.key:
            rec = self._rec = [self.key, 0]
            self._records.append(rec)
        rec[1] += 1
        return rec, rec[1] - 1

    # ------------------------------------------------------------------ one time unit
    def _items(self, unit):
        """The events of ``unit`` at own nodes: ``(key, kind, node, src, dst, message, tokens, ack)``."""
        if unit == 0:
            return [(2 * i, _START, i, i, i, None, 0, None) for i in self.local_nodes.tolist()]
        heap, pop, items = self._heap, heapq.heappop, []
        while heap and heap[0][0] == unit:
            _, key, kind, src, dst, message, tokens, ack = pop(heap)
            if kind == _MSG:
                items.append((key, _MSG, dst, src, dst, message, tokens, None))
                if ack is not None and self.is_local[src]:
                    items.append((key + 1, _ACK, src, src, dst, ack, 0, None))
            elif kind == _ACK:
                items.append((key, _ACK, src, src, dst, ack, 0, None))
            elif kind == _NOTE:
                items.append((key, _NOTE, -1, src, dst, message, 0, None))
            else:
                items.append((key, _TIMER, dst, src, dst, message, 0, None))
        return items

    def _process(self, item) -> None:
        key, kind, node, src, dst, message, tokens, _ = item
        self.key = key
        if kind == _MSG:
            if tokens:
                self.loads[dst] += tokens
                self.in_transit -= tokens
                self.load_log.append((self.step_no, dst, tokens))
            self.events += 1
            self.handlers[dst].receive(self.contexts[dst], src, message, tokens)
        elif kind == _ACK:
            self.events += 1
            self.handlers[src].receive(self.contexts[src], src, message, 0)
        elif kind == _TIMER:
            self.events += 1
            self.handlers[dst].receive(self.contexts[dst], dst, message, 0)
        elif kind == _START:
            self.handlers[node].start(self.contexts[node])
        else:  # _NOTE: a message of an own node reached another rank
            self.adapter.remote_delivered(self.protocol, src, dst)

    def run_unit(self, unit: int) -> None:
        """Process the events of time unit ``unit`` at own nodes (collective when links are shared)."""
        self.now = unit
        items = self._items(unit)
        if not self._rounds_needed:
            for item in items:
                self._process(item)
            return
        # Both ends of some cut link have events in this unit: process in rounds. An event at an
        # end of a cut link waits until the other rank has processed every event of the other end
        # with a smaller key; each round sends the own ends' next keys (when they changed) and the
        # link changes made since the last round, in one allgather that also says who is done.
        cut, i = self._cut_nbrs, 0
        if unit == 0:  # the starts: every node has one, keyed by its id
            frontier = {j: 2 * j for u in cut for j in cut[u]}
        else:  # the first events, from the allgather that numbered them
            frontier = dict(self._frontier)   # node -> key of its next unprocessed event in this unit
        sent = {u: frontier[u] for u in cut if u in frontier} if unit else {u: 2 * u for u in cut}
        while True:
            while i < len(items):
                item = items[i]
                nbrs = cut.get(item[2])
                if nbrs is not None and any(frontier.get(j, _INF) <= item[0] for j in nbrs):
                    break
                self._process(item)
                i += 1
            nxt: dict = {}
            for item in items[i:]:
                if item[2] in cut and item[2] not in nxt:
                    nxt[item[2]] = item[0]
            fronts = []
            for u in cut:
                k = nxt.get(u, _INF)
                if sent.get(u, _INF) != k:
                    fronts.append((u, k))
                    sent[u] = k
            changes = []
            for link in self._links:
                if link.out:
                    changes.append((link.ends, link.out))
                    link.out = []
            blob = pickle.dumps((i < len(items), fronts, changes), protocol=pickle.HIGHEST_PROTOCOL)
            self.link_bytes += len(blob) * (self.size - 1)  # an allgather: to every other rank
            self.link_rounds += 1
            busy = False
            for r, got in enumerate(self.comm.allgather(blob)):
                if r == self.rank:
                    continue
                waiting, fronts, changes = pickle.loads(got)
                busy = busy or waiting
                for u, k in fronts:
                    frontier[u] = k
                for ends, entries in changes:
                    link = self._link_by_ends.get(ends)
                    if link is not None:
                        link.merge(entries)
            if not busy and i == len(items):
                break

    def finish_unit(self):
        """Number this time unit's sends, route them, and return the global figures of the unit.

        One ``neighbor_alltoall`` carries the messages for other ranks (one pickled batch per
        neighbour rank, the sends named by the sending event's key and their index in it) and the
        cut links' changes not yet sent; one ``allgather`` then gives every rank every event's
        number of sends (hence every message's global sequence number), the unit's totals, the
        next time anything is due, and when the ends of cut links have their next events.
        Returns ``(next_time, totals)``, the same on every rank.
        """
        recs = [r for r in self._records if r[1]]
        keys = np.array([r[0] for r in recs], dtype=np.int64)
        counts = np.array([r[1] for r in recs], dtype=np.int64)
        out = [([], []) for _ in self.peers]
        local = []
        for (rec, j), when, kind, src, dst, message, tokens, ack in self._pending:
            if kind == _TIMER or self.is_local[dst]:
                local.append((when, rec[0], j, 0, kind, src, dst, message, tokens, ack))
                continue
            out[self._peer_index[int(self.owner[dst])]][0].append(
                (when, rec[0], j, src, dst, message, tokens, ack is not None))
            self.cross_messages += 1
            # The sender's side of a message to another rank: its delivery acknowledgement (the
            # single-process executor runs it right after the receiver's handler) or a note.
            local.append((when, rec[0], j, 1, _ACK if ack is not None else _NOTE, src, dst,
                          message if ack is None else None, 0, ack))
        for link in self._links:
            if link.out:
                out[self._peer_index[link.rank]][1].append((link.ends, link.out))
                link.out = []
        # Nothing for a neighbour rank this time unit: an empty bytes object, not an empty pickle.
        blobs = [pickle.dumps(b, protocol=pickle.HIGHEST_PROTOCOL) if b[0] or b[1] else b"" for b in out]
        self.batch_bytes += sum(len(b) for b in blobs)
        for blob in self.topology.neighbor_alltoall(blobs):
            if not blob:
                continue
            batch, changes = pickle.loads(blob)
            for when, rkey, j, src, dst, message, tokens, acked in batch:
                local.append((when, rkey, j, 0, _MSG, src, dst, message, tokens, True if acked else None))
            for ends, entries in changes:
                self._link_by_ends[ends].merge(entries)
        for link in self._links:
            link.end_unit()
        self._pending, self._records, self._rec = [], [], None
        nxt = min((e[0] for e in local), default=_INF)
        if self._heap:
            nxt = min(nxt, self._heap[0][0])
        first = {}
        if self.shared:
            # The next event of each own end of a cut link: (time, smallest numbered key, smallest
            # key still named by its sending event), resolved once the allgather numbers the sends.
            def note(node, when, final, prov):
                have = first.get(node)
                if have is None or when < have[0]:
                    first[node] = [when, final, prov]
                elif when == have[0]:
                    if final is not None and (have[1] is None or final < have[1]):
                        have[1] = final
                    if prov is not None and (have[2] is None or prov < have[2]):
                        have[2] = prov
            cut = self._cut_nbrs
            for e in local:
                node = e[6] if e[4] in (_MSG, _TIMER) else (e[5] if e[4] == _ACK else -1)
                if node in cut:
                    note(node, e[0], None, (e[1], e[2], e[3]))
            for e in self._heap:
                node = e[4] if e[2] in (_MSG, _TIMER) else (e[3] if e[2] == _ACK else -1)
                if node in cut:
                    note(node, e[0], e[1], None)
        figures = (self.tokens_moved, self.messages, len(self.load_log), self.in_transit, nxt)
        gathered = self.comm.allgather((keys, counts, figures, first))
        all_keys = np.concatenate([g[0] for g in gathered])
        all_counts = np.concatenate([g[1] for g in gathered])
        order = np.argsort(all_keys, kind="stable")
        offsets = self.seq + np.concatenate([[0], np.cumsum(all_counts[order])[:-1]]).astype(np.int64)
        start_of = dict(zip(all_keys[order].tolist(), offsets.tolist()))
        self.seq += int(all_counts.sum())
        heap, push = self._heap, heapq.heappush
        for when, rkey, j, sub, kind, src, dst, message, tokens, ack in local:
            push(heap, (when, 2 * (start_of[rkey] + j) + sub, kind, src, dst, message, tokens, ack))
        self.units += 1
        totals = np.array([g[2][:4] for g in gathered], dtype=np.int64).sum(axis=0)
        next_time = min(g[2][4] for g in gathered)
        if self.shared:
            keys_now = {}  # the ends of cut links with an event at next_time, and its key
            for g in gathered:
                for node, (when, final, prov) in g[3].items():
                    if when == next_time:
                        k = _INF if final is None else final
                        if prov is not None:
                            k = min(k, 2 * (start_of[prov[0]] + prov[1]) + prov[2])
                        keys_now[node] = k
            self._frontier = keys_now
            self._rounds_needed = any(j in keys_now for u in keys_now for j in self._all_cut.get(u, ()))
        return next_time, totals

    # ------------------------------------------------------------------ helpers of the adapters
    def in_flight_from_own(self):
        """``(src, message)`` of every message an own node sent that is still in flight."""
        for when, key, kind, src, dst, message, tokens, ack in self._heap:
            if (kind == _MSG and self.is_local[src]) or kind == _NOTE:
                yield src, message

    def neighbour_loads(self) -> dict:
        """The loads of the other ranks' nodes adjacent to own nodes (collective)."""
        out = [{} for _ in self.peers]
        g = self.graph
        for i in self.local_nodes.tolist():
            for j in g.neighbours(i).tolist():
                if not self.is_local[j]:
                    out[self._peer_index[int(self.owner[j])]][i] = int(self.loads[i])
        got = {}
        for d in self.topology.neighbor_alltoall(out):
            got.update(d)
        return got

    def portable_nodes(self) -> dict:
        """The picklable attributes of the own handlers (what reports read), by node."""
        out = {}
        for i in self.local_nodes.tolist():
            h = self.handlers[i]
            if not hasattr(h, "__dict__"):
                continue
            attrs = {}
            for k, v in vars(h).items():
                if k in ("ctx", "_gen", "_wait", "links", "accept", "inbox"):
                    continue
                try:
                    pickle.dumps(v)
                except Exception:  # noqa: BLE001 - generators, lambdas: not part of a report
                    continue
                attrs[k] = v
            out[i] = attrs
        return out

    def free(self) -> None:
        self.topology.Free()


class _GlobalView:
    """What ``protocol.report()`` and ``state_key()`` read of the executor, for the whole run (rank 0)."""

    def __init__(self, graph, loads, *, now, in_transit, idle, stats, by_kind):
        self.graph = graph
        self.loads = loads
        self.now = now
        self.in_transit = in_transit
        self.idle = idle
        self.messages, self.events, self.token_messages, self.tokens_moved = stats
        self.messages_by_kind = by_kind
        self.allow_negative = False

    def stats(self) -> dict:
        return {"time": int(self.now), "messages": int(self.messages), "events": int(self.events),
                "token_messages": int(self.token_messages), "tokens_moved": int(self.tokens_moved),
                "messages_by_kind": dict(sorted(self.messages_by_kind.items()))}


def _mpi():
    from mpi4py import MPI  # optional dependency; mpi_world() checked that it imports

    return MPI


def _schedule(protocol, adapter, seed_key):
    """The delay function ``(src, dst, now, message, count)`` and a fixed delay (0: call it)."""
    ex = protocol.executor
    if ex._fixed_delay:
        return None, ex._fixed_delay
    if protocol.options.get("schedule") in adapter.random_schedules:
        top = int(protocol.options["max_delay"])
        n = ex.graph.n

        def delay(src, dst, now, message, count):
            return 1 + int(counter_uniform_scalar(seed_key + src * n + dst, now, count) * top)
        return delay, 0
    fn = ex._delay
    return (lambda src, dst, now, message, count: fn(src, dst, now, message)), 0


# ---------------------------------------------------------------------------------------------------
# The run
# ---------------------------------------------------------------------------------------------------
def run_message_ranks(comm, graph, protocol, loads, *, seed, max_steps, until_discrepancy, until_local_discrepancy,
                      record_every, detect_cycles, partition_method, progress, started,
                      keep_loads_every=None) -> RunResult:
    """The event-driven step loop of :func:`tokendist.simulate` with the handlers spread over ``comm``.

    Called by :func:`tokendist.engine.mpi.run_partitioned` for a message protocol after the
    common checks; collective. The stopping rules are those of the single-process event path
    (:mod:`tokendist.engine._simulate_events`), in the same order, decided on global figures.
    """
    if protocol.name not in _ADAPTERS:
        raise TokendistError(f"{protocol.name} cannot run as MPI ranks yet (those that do: {', '.join(MESSAGE_PROTOCOLS)})")
    if until_local_discrepancy is not None:
        raise TokendistError("--until-local-discrepancy cannot run a message protocol as MPI ranks yet")
    if keep_loads_every is not None:
        raise TokendistError("keep_loads_every cannot run a message protocol as MPI ranks yet")
    if not isinstance(seed, int):
        raise TokendistError("a message protocol as MPI ranks needs an integer seed: every rank builds the run from it")
    adapter = _ADAPTERS[protocol.name]
    rank, size = comm.Get_rank(), comm.Get_size()
    root = rank == 0
    initial_loads = loads.copy()
    if hasattr(protocol, "use_kernels"):
        protocol.use_kernels = False  # the ranks run the per-node handlers, never the compiled program
    protocol.reset(graph, loads.copy(), stream(seed, "protocol"))
    ex = protocol.executor
    net = ex.graph  # the network the messages travel on (perfect-tree: the spanning tree)
    owner, error = None, None
    if root:
        try:
            owner = partition(net, size, partition_method)
        except TokendistError as exc:
            error = str(exc)
    error = comm.bcast(error, root=0)
    if error is not None:
        raise TokendistError(error)
    owner = comm.bcast(owner, root=0)
    seed_key = comm.bcast(stream_key(stream(seed, "executor")) if root else None, root=0)
    delay, fixed = _schedule(protocol, adapter, seed_key)
    rx = RankExecutor(comm, net, ex.handlers, ex.loads, owner, delay=delay, fixed_delay=fixed, adapter=adapter,
                      protocol=protocol, allow_negative=ex.allow_negative)
    total = int(initial_loads.sum())
    stop_targets = until_discrepancy is not None
    cycles = detect_cycles and not protocol.randomized and graph.n <= _CYCLE_DETECTION_MAX_N
    MIN, MAX = _mpi().MIN, _mpi().MAX
    own = rx.local_nodes

    def reached() -> bool:
        w = rx.loads[own]
        hi = comm.allreduce(int(w.max()) if w.size else -_INF, op=MAX)
        lo = comm.allreduce(int(w.min()) if w.size else _INF, op=MIN)
        return hi - lo <= until_discrepancy

    def stable() -> bool:
        return bool(comm.allreduce(int(adapter.local_stable(rx, protocol)), op=MIN))

    def check_conservation(t) -> None:
        held = comm.allreduce(int(rx.loads[own].sum()) + rx.in_transit)
        if held != total:
            raise ConservationError(f"{protocol.name} broke token conservation by step {t}: "
                                    f"{total} tokens became {held}")

    records = [(0, 0, 0)]  # (step, tokens moved, messages) at each recorded step
    seen: dict = {}
    cum = np.zeros(4, dtype=np.int64)  # global tokens moved, messages, load-log length, tokens in flight
    next_time = 0          # the next time unit with an event anywhere (the starts come first)
    stable_cache = None    # is_stable's answer while nothing happens
    stop_reason, cycle_length, t = "max-steps", None, 0
    clock_start = time.perf_counter()
    if stop_targets and discrepancy(graph, initial_loads) <= until_discrepancy:
        stop_reason = "target-reached"
    else:
        for t in range(max_steps):
            # state_key() is None while anything is in flight: test only where it can repeat.
            if cycles and t % protocol.period == 0 and (next_time >= _INF or not rx._started):
                verdict = _cycle_check(comm, rx, protocol, seen, t, int(cum[0]))
                if verdict is not None:
                    stop_reason, cycle_length = verdict
                    break
            step_no = t + 1
            rx.step_no = step_no
            before, units_before = cum.copy(), rx.units
            if not rx._started:  # inside step 0, after its cycle check, as the single-process loop
                rx._started = True
                rx.run_unit(0)
                next_time, cum = rx.finish_unit()
            while next_time <= step_no:
                rx.run_unit(next_time)
                next_time, cum = rx.finish_unit()
            moved, messages = int(cum[0] - before[0]), int(cum[1] - before[1])
            changed = bool(cum[2] != before[2])
            in_transit = int(cum[3])
            if rx.units != units_before:  # something happened: ask again
                stable_cache = None
            if step_no % CONSERVATION_EVERY == 0:
                check_conservation(t)
            done = stop_targets and changed and reached()
            if not done and moved == 0 and in_transit == 0:
                if stable_cache is None:
                    stable_cache = stable()
                if stable_cache:
                    stop_reason = "stable"
                    done = True
            elif done:
                stop_reason = "target-reached"
            if step_no % record_every == 0 or done or step_no == max_steps:
                records.append((step_no, int(cum[0]), int(cum[1])))
            if progress is not None and root and (step_no & 63) == 0:
                progress(step_no, max_steps)
            if done:
                t = step_no
                break
        else:
            t = max_steps
        if stop_reason == "max-steps" and stable():
            stop_reason = "stable"
    moved_total, messages_total, in_transit = int(cum[0]), int(cum[1]), int(cum[3])
    if progress is not None and root:
        progress(t, max_steps)
    check_conservation(t)
    seconds_stepping = time.perf_counter() - clock_start
    result = _assemble(comm, rx, protocol, graph, initial_loads, records, seed=seed, t=t, stop_reason=stop_reason,
                       cycle_length=cycle_length, moved_total=moved_total, messages_total=messages_total,
                       in_transit=in_transit, next_time=next_time, partition_method=partition_method,
                       started=started, seconds_stepping=seconds_stepping)
    rx.free()
    return comm.bcast(result, root=0)


def _sync_nodes(comm, rx, protocol):
    """Copy the own handlers' report attributes of every rank into rank 0's handlers."""
    parts = comm.gather(rx.portable_nodes(), root=0)
    if comm.Get_rank() == 0:
        for part in parts:
            for i, attrs in part.items():
                h = rx.handlers[i]
                for k, v in attrs.items():
                    setattr(h, k, v)


def _gather_loads(comm, rx):
    own = rx.local_nodes
    parts = comm.gather((own, rx.loads[own]), root=0)
    if comm.Get_rank() != 0:
        return None
    full = np.zeros(rx.graph.n, dtype=np.int64)
    for nodes, values in parts:
        full[nodes] = values
    return full


def _global_stats(comm, rx):
    mine = (rx.messages, rx.events, rx.token_messages, rx.tokens_moved, rx.in_transit)
    sums = np.array(comm.allreduce(np.array(mine, dtype=np.int64)), dtype=np.int64)
    kinds = comm.gather(rx.messages_by_kind, root=0)
    by_kind = Counter()
    for k in kinds or ():
        by_kind.update(k)
    return sums, by_kind


def _cycle_check(comm, rx, protocol, seen, t, moved_total):
    """The engine's fixed-point/cycle test, run where ``state_key`` can repeat (nothing in flight)."""
    _sync_nodes(comm, rx, protocol)
    loads = _gather_loads(comm, rx)
    verdict = None
    if comm.Get_rank() == 0:
        view = _GlobalView(rx.graph, loads, now=t, in_transit=0, idle=True, stats=(0, 0, 0, 0), by_kind=Counter())
        real, protocol.executor = protocol.executor, view
        try:
            key = protocol.state_key()
        finally:
            protocol.executor = real
        if key is not None:
            digest = hashlib.blake2b(loads.tobytes() + key, digest_size=16).digest()
            if digest in seen:
                first, moved_then = seen[digest]
                verdict = ("fixed-point" if moved_total == moved_then else "cycle", t - first)
            else:
                seen[digest] = (t, moved_total)
    return comm.bcast(verdict, root=0)


def _assemble(comm, rx, protocol, graph, initial_loads, records, *, seed, t, stop_reason, cycle_length, moved_total,
              messages_total, in_transit, next_time, partition_method, started, seconds_stepping):
    """Rank 0's :class:`RunResult`: gathered loads, trace, report (None on the other ranks)."""
    sums, by_kind = _global_stats(comm, rx)
    _sync_nodes(comm, rx, protocol)
    final = _gather_loads(comm, rx)
    logs = comm.gather(rx.load_log, root=0)
    figures = np.array([rx.cross_messages, rx.batch_bytes, rx.link_bytes], dtype=np.int64)
    figures = np.array(comm.allreduce(figures), dtype=np.int64)
    rounds = comm.allreduce(rx.link_rounds, op=_mpi().MAX)
    if comm.Get_rank() != 0:
        return None
    entries = sorted((e for log in logs for e in log), key=lambda e: e[0])
    steps = np.array([e[0] for e in entries], dtype=np.int64)
    flat = [x for e in entries for x in e[1:]]
    trace = EventTrace(graph, initial_loads.astype(np.int64), flat, tuple(TRACE_METRICS))
    for step, moved, messages in records:
        trace._records.append((step, moved, messages, 2 * int(np.searchsorted(steps, step, side="right"))))
    messages, events, token_messages, tokens_moved, _ = (int(x) for x in sums)
    view = _GlobalView(rx.graph, final, now=t, in_transit=in_transit, idle=next_time >= _INF,
                       stats=(messages, events, token_messages, tokens_moved), by_kind=by_kind)
    protocol.executor = view
    units = max(rx.units, 1)
    ranks = {"count": rx.size, "partition": partition_method, "edge_cut": edge_cut(rx.graph, rx.owner),
             "time_units": rx.units,
             "cross_rank_messages": int(figures[0]), "message_batch_bytes": int(figures[1]),
             "link_rounds": int(rounds), "link_round_bytes": int(figures[2]),
             "cross_rank_messages_per_time_unit": figures[0] / units,
             "bytes_per_time_unit": (figures[1] + figures[2]) / units,
             "seconds_stepping": seconds_stepping}
    return RunResult(
        graph=graph, algorithm=protocol.name, params=dict(protocol.options), seed=seed, steps=t,
        stop_reason=stop_reason, tokens=_plain(initial_loads.sum()), initial=measure(graph, initial_loads),
        final=measure(graph, final), tokens_moved=moved_total, messages=messages_total, infeasible_steps=0,
        loads=final, initial_loads=initial_loads, trace=trace, report=protocol.report(), dynamics=None,
        seconds=time.perf_counter() - started, cycle_length=cycle_length, load_history=None, ranks=ranks,
        variants={f"message handlers, {rx.size} ranks ({partition_method})": t} if t else {},
        in_transit=_plain(in_transit))
