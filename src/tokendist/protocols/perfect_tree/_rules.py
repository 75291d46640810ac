"""Perfect token distribution on trees, fully decentralised (Margara, Pistocchi, Vassura).

The protocol ``perfect-tree`` runs the three-phase algorithm of the paper as per-node state
machines (:mod:`._node`) that exchange real messages on the engine's
:class:`~tokendist.engine.MessageExecutor`, through the channel primitives of the paper's Sec. 2
(:mod:`._channels`). One engine step is one time unit of the executor.

Nodes know nothing global (no N, no T, no ids): Phase 1 computes T and N by a convergecast that
elects the root implicitly, Phase 2 balances every subtree to ``Avg = floor(T/N)`` tokens per node
sending the surplus towards the root, Phase 3 lets every node, once it is a root, hand tokens above
``Avg + 1`` down to subtrees that can take them and then send *Finished*.

The exact optimum of token exchanges for comparison is in
:mod:`tokendist.analysis._tree_transport`.
"""

from __future__ import annotations

import os

import numpy as np

from ...engine import MessageExecutor, Param, Protocol, Step, register_protocol
from ...errors import TokendistError
from ...kernels._choice import SMALL_RUN_ENV, why_reference
from ...kernels._report import REFERENCE
from ._channels import RELEASE_MODES, Link
from ._node import PHASE_OVERLAP, PICKS, PerfectTreeNode
from ._schedules import ADVERSARIES, adversarial_schedule
from .kernels import KERNEL_MIN_NODES, PerfectTreeKernelRun, kernel_supports, program_ready
from ...graphs import bfs_tree, min_diameter_spanning_tree, tree_diameter

__all__ = ["PerfectTree", "spanning_tree_of", "SPANNING_TREES"]

SPANNING_TREES = ("bfs", "min-diameter")


def spanning_tree_of(graph, kind: str = "bfs"):
    """``graph`` itself if it is a tree, else its spanning tree of the given kind."""
    if graph.is_tree:
        return graph
    if not graph.is_connected:
        raise TokendistError(f"perfect-tree needs a connected graph; {graph.spec or 'this graph'} is not connected")
    if kind not in SPANNING_TREES:
        raise TokendistError(f"spanning_tree must be one of {', '.join(SPANNING_TREES)}")
    tree = bfs_tree(graph) if kind == "bfs" else min_diameter_spanning_tree(graph)
    return tree


def memory_bits(degrees: np.ndarray, total: int, nodes: int) -> np.ndarray:
    """:meth:`PerfectTreeNode.memory_bits` of every node at once (it depends on the degree only)."""
    def bits(x):
        return max(1, int(x).bit_length())

    degrees = np.asarray(degrees, dtype=np.int64)
    uniq, inverse = np.unique(degrees, return_inverse=True)
    bd = np.array([bits(d) for d in uniq.tolist()], dtype=np.int64)[inverse]
    bt, bn = bits(total), bits(nodes)
    return degrees * (bt + bn) + 2 * bt + bn + 4 * bd + 2 * degrees + 1


@register_protocol
class PerfectTree(Protocol):
    """Three-phase perfect token distribution on a tree with per-node state machines and messages.

    Per node (Sec. 3): Phase 1 (S1.1-S1.5) sends ``(T, N)`` of its subtree to the one neighbour it
    has not heard from, the node that hears from all neighbours is the root and broadcasts the
    totals; Phase 2 (S2.1-S2.4) sends tokens to child subtrees below ``Avg = floor(T/N)`` and
    surplus to the parent; Phase 3 (S3.1, S3.2) spreads the root's extra tokens down, then
    *Finished*. Every node ends with Avg or Avg + 1 tokens and in the final state.

    References
    ----------
    L. Margara, A. Pistocchi, M. Vassura, Perfect Token Distribution on Trees, Sec. 2-5.
    """

    static_reason = ("the three phases run on one spanning tree fixed at the start: a tree edge that fails "
                     "breaks the convergecast and the token flows of Sec. 3")
    name = "perfect-tree"
    title = "Perfect token distribution on trees (three phases, message passing)"
    paper = "Margara, Pistocchi, Vassura, Sec. 3"
    model = "message"
    # step(t) only runs the executor to time t + 1: the engine may drive the executor itself.
    event_driven = True
    requires = frozenset({"connected"})
    params = (
        Param("schedule", str, "sync", "sync (every message 1 time unit), async (delays 1..max_delay from the seed)"
              " or adversarial (see adversary)", ("sync", "async", "adversarial")),
        Param("max_delay", int, 5, "largest message delay of the async and adversarial schedules", minimum=1,
              maximum=10**9),
        Param("adversary", str, "race", "adversarial strategy: race, race-slow, slow-links, slow-tokens", ADVERSARIES),
        Param("spanning_tree", str, "bfs", "spanning tree used on a non-tree graph", SPANNING_TREES),
        Param("release", str, "delivery", "when send frees a reserved link: after delivery (default) or at once"
              " (lets the election deadlock, see the docs)", RELEASE_MODES),
        Param("pick", str, "first", "subtree that gets the next token in S2.3/S3.1: lowest channel or largest deficit",
              PICKS),
        Param("phase_overlap", str, "defer", "a Phase-3 token reaching a node still in Phase 2 waits (defer) or is"
              " counted by Phase 2 (merge, the literal reading; breaks Theorem 3)", PHASE_OVERLAP),
    )

    def check_graph(self, graph) -> None:
        super().check_graph(graph)
        if self.options["max_delay"] < 1:
            raise TokendistError("perfect-tree: max_delay must be at least 1")

    #: Whether the engine's event-driven path runs the compiled program (:mod:`.kernels`) instead of
    #: the handlers: True, False, None (default) for trees of at least ``KERNEL_MIN_NODES`` nodes, or
    #: ``"if-compiled"``: those trees, and smaller ones too when the program is compiled already (in
    #: this process or numba's cache). ``tokendist compare`` asks for the last: it hands out rows,
    #: never the protocol, so nobody reads the handlers (``nodes``) after its run.
    use_kernels: bool | str | None = None

    def reset(self, graph, loads, rng):
        o = self.options
        self.tree = spanning_tree_of(graph, o["spanning_tree"])
        self.initial = np.asarray(loads, dtype=np.int64).copy()
        self._rng = rng
        self._executor = self._nodes = None
        # The compiled program, event for event the handlers' (tests/protocols/test_perfect_tree_kernels.py);
        # the handlers are built when something asks for them (the synchronous loop, a test, a user).
        self.kernel_run = None
        wanted, avoided = self.use_kernels, False
        if wanted is None or wanted == "if-compiled":
            big = self.tree.n >= KERNEL_MIN_NODES
            if wanted and not big and kernel_supports(o) is None:
                # As a small run of another protocol on a cold cache (kernels._choice): the
                # handlers now, the compilation later (tokendist compare's background process,
                # which runs with the kernels kept on).
                wanted = os.environ.get(SMALL_RUN_ENV, "1") == "0" or program_ready()
                avoided = not wanted
            else:
                wanted = big
        if wanted and kernel_supports(o) is None:
            self.kernel_run = PerfectTreeKernelRun(self.tree, self.initial, o, rng)
        else:
            self._build_handlers()
            if avoided:
                self._executor.variant = f"{REFERENCE}: {why_reference('perfect_tree.kernels', 'per-node handlers')}"

    def _build_handlers(self):
        o, tree, rng = self.options, self.tree, self._rng
        links = {}
        for a, b in zip(tree.u.tolist(), tree.v.tolist()):
            links[(a, b)] = links[(b, a)] = Link()
        self._nodes = [
            PerfectTreeNode([None] + [links[(i, int(j))] for j in tree.neighbours(i)], release=o["release"],
                            pick=o["pick"], phase_overlap=o["phase_overlap"])
            for i in range(tree.n)
        ]
        if o["schedule"] == "adversarial":
            schedule = adversarial_schedule(tree, o["adversary"], o["max_delay"], rng)
        else:
            schedule = o["schedule"]
        self._executor = MessageExecutor(tree, self._nodes, self.initial, schedule=schedule, rng=rng,
                                         max_delay=o["max_delay"])

    def _kernel_ran(self) -> bool:
        return self.kernel_run is not None and self.kernel_run.started

    @property
    def executor(self) -> MessageExecutor:
        """The handlers' executor (built on first use; not the one a compiled run used)."""
        if self._executor is None:
            if self._kernel_ran():
                raise TokendistError("perfect-tree: this run is on the compiled program; its handlers never ran")
            self._build_handlers()
        return self._executor

    @executor.setter
    def executor(self, value) -> None:
        # The MPI ranks (engine.mpi._messages) put a view of the whole run in its place for report().
        self._executor = value

    @property
    def nodes(self) -> list:
        """The per-node handlers (:class:`PerfectTreeNode`), built on first use."""
        self.executor  # noqa: B018 - builds them
        return self._nodes

    def step(self, t, graph, loads):
        ex = self.executor
        moved, messages = ex.tokens_moved, ex.messages
        ex.run(until=t + 1)
        return Step(ex.loads.copy(), moved=ex.tokens_moved - moved, messages=ex.messages - messages,
                    in_transit=ex.in_transit)

    def is_stable(self, graph, loads):
        if self._kernel_ran():
            return self.kernel_run.all_final()
        return all(node.state == "final" for node in self.nodes)

    def state_key(self) -> bytes | None:
        kr = self.kernel_run
        ex = kr if kr is not None and self._executor is None else self.executor
        if ex.idle:  # nothing in flight: the states below never change again (a deadlock)
            states = ex.states() if ex is kr else [n.state for n in self.nodes]
            return "|".join(states).encode()
        return None  # messages in flight: the clock is part of the state, so it is always new

    # ------------------------------------------------------------------ reports
    def root(self) -> int | None:
        """The node elected in Phase 1 (parent = 0 after Phase 1), None before."""
        if self._kernel_ran():
            return self.kernel_run.root()
        roots = [i for i, n in enumerate(self.nodes) if n.after_phase1 is not None and n.after_phase1[2] == 0]
        return roots[0] if len(roots) == 1 else None

    def report(self) -> dict:
        """What the run measured: phases, time, messages, token exchanges, memory.

        The paper's figures for the same instance (the optimum number of exchanges, the excess
        and time bounds of Sec. 5) are theory: :func:`tokendist.analysis.perfect_tree_bounds`
        computes them, and ``tokendist bounds`` and the ``margara`` reproduction show both.
        """
        tree = self.tree
        total, n = int(self.initial.sum()), tree.n
        diam = tree_diameter(tree)
        compiled = self._kernel_ran()
        ex = self.kernel_run if compiled else self.executor
        final = ex.all_final() if compiled else all(node.state == "final" for node in self.nodes)
        loads = ex.loads
        avg = total // n
        perfect = bool(final and ex.in_transit == 0 and loads.min() >= avg and loads.max() <= avg + (total % n > 0))
        phase_end = {}
        for k in (1, 2, 3):
            if compiled:
                times = ex.phase_times(k)
                phase_end[f"phase{k}"] = None if (times < 0).any() else int(times.max(initial=0))
            else:
                times = [node.times.get(k) for node in self.nodes]
                phase_end[f"phase{k}"] = None if None in times else int(max(times, default=0))
        rounds = {}
        prev = 0
        for k in (1, 2, 3):
            end = phase_end[f"phase{k}"]
            rounds[f"phase{k}"] = None if end is None else max(0, end - prev)
            prev = end if end is not None else prev
        exchanges = int(ex.tokens_moved)
        root = self.root()
        deg = tree.degrees
        mem = memory_bits(deg, total, n)
        scale = deg * (np.log2(max(total, 2)) + np.log2(max(n, 2)))
        inner = deg > 0
        return {
            "tree": tree.spec or "tree",
            "N": n, "T": total, "D": diam, "max_degree": int(tree.max_degree) if n > 1 else 0,
            "root": root,
            "elected_by": None if root is None else (ex.elected_by(root) if compiled else self.nodes[root].elected_by),
            "all_final": final,
            "perfect": perfect,
            "stuck_nodes": ex.stuck_nodes() if compiled else int(sum(node.stuck for node in self.nodes)),
            "misread_messages": (ex.misread_messages() if compiled
                                 else int(sum(node.consumed_out_of_phase for node in self.nodes))),
            "time": int(ex.now) if final else None,
            "phase_end": phase_end,
            "phase_rounds": rounds,
            "messages": int(ex.messages),
            "messages_by_kind": dict(sorted(ex.messages_by_kind.items())),
            "token_exchanges": exchanges,
            "memory_bits_max": int(mem.max()),
            "memory_bits_over_dv_logT_logN_max": float((mem[inner] / scale[inner]).max()) if inner.any() else None,
        }
