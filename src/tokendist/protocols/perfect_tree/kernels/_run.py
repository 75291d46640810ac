"""The compiled ``perfect-tree`` run: the arrays of :mod:`._events`, grown as the run needs them.

:class:`PerfectTreeKernelRun` is what the engine's event-driven path drives instead of the per-node
handlers when the options allow (:func:`kernel_supports`): it owns the loads, the event heap and
every node's program state, runs time units in one compiled call, and answers the questions the
engine and :meth:`PerfectTree.report` ask of the handlers (loads, tokens in transit, messages by
kind, which node is final, when each phase ended, the root and how it was elected).
"""

from __future__ import annotations

import importlib

import numpy as np

from ....kernels._report import dispatchers_ready

# The numba module is imported when the first compiled run is built, not with tokendist (about 15 ms
# of decorating on a quiet machine, for runs that may never use it).
k = None


def _load_events():
    global k
    if k is None:
        k = importlib.import_module(f"{__package__}._events")
    return k

__all__ = ["PerfectTreeKernelRun", "kernel_supports", "program_ready", "VARIANT", "KERNEL_MIN_NODES"]

#: Trees from this many nodes run the compiled program by default (``PerfectTree.use_kernels = None``).
#: Below it the handlers run: a first run after an install would otherwise compile the event loop
#: (about 11 s of CPU here) for a run the handlers finish in well under a second. ``tokendist
#: compare``'s perfect-tree row (a 256-node tree, 1,954 time units, 25,025 messages) costs about
#: 0.24 s of CPU on the handlers, 0.05 s on the compiled program plus about 0.025 s to load it from
#: numba's cache the first time in a process (docs/design/fast-paths.md); so ``tokendist compare``
#: runs the compiled program on small trees too once it is compiled (``use_kernels="if-compiled"``).
KERNEL_MIN_NODES = 1000

#: How ``RunResult.variants`` names a run of the compiled program.
VARIANT = "compiled events (perfect_tree.kernels)"


def program_ready() -> bool:
    """Whether the compiled program runs without compiling: compiled in this process or in numba's
    on-disk cache (its argument types never vary)."""
    ev = _load_events()
    return dispatchers_ready(ev.start, ev.advance)


def kernel_supports(options: dict) -> str | None:
    """None if the compiled program covers these options, else why not (the handlers run instead)."""
    if options["schedule"] not in ("sync", "async"):
        return "adversarial schedules call Python delay functions"
    if options["release"] != "delivery":
        return "release=send is not compiled"
    return None


class PerfectTreeKernelRun:
    """State of one compiled ``perfect-tree`` run on ``tree`` (see :mod:`._events`).

    Parameters
    ----------
    tree : Graph
        The spanning tree the protocol runs on.
    loads : array_like of int
        Tokens at time 0.
    options : dict
        The protocol's options (``schedule``, ``max_delay``, ``pick``, ``phase_overlap``).
    rng : numpy.random.Generator
        The ``async`` schedule's delays, drawn in blocks in the order the executor draws them.
    """

    variant = VARIANT

    def __init__(self, tree, loads, options: dict, rng):
        _load_events()
        n, m = tree.n, tree.m
        self.n = n
        self.indptr = np.ascontiguousarray(tree.indptr, dtype=np.int64)
        self.nbr = np.ascontiguousarray(tree.indices, dtype=np.int64)
        self.edge = np.ascontiguousarray(tree.csr_edges, dtype=np.int64)
        pairs = np.argsort(self.edge, kind="stable").reshape(-1, 2)  # the two slots of each edge
        self.rev = np.empty(2 * m, dtype=np.int64)
        self.rev[pairs[:, 0]], self.rev[pairs[:, 1]] = pairs[:, 1], pairs[:, 0]
        self.loads = np.array(loads, dtype=np.int64)
        self.total = self.loads.sum()
        self.ns = np.zeros((n, k.N_FIELDS), dtype=np.int64)
        self.ns[:, [k.N_T1, k.N_T2, k.N_T3, k.N_P1PARENT]] = -1
        self.ss = np.zeros((2 * m, k.S_FIELDS), dtype=np.int64)
        self.ss[:, [k.S_HEAD, k.S_TAIL, k.S_LAST]] = -1
        cap = 3 * n + 16  # start() and the first time unit need at most this much of everything
        self.ev = np.zeros((cap, k.EV_FIELDS), dtype=np.int64)
        self.free = np.arange(cap, dtype=np.int64)
        self.hw, self.hq, self.hi = (np.zeros(cap, dtype=np.int64) for _ in range(3))
        self.holder = np.full(m, -1, dtype=np.int64)
        self.log = np.zeros((cap, 2), dtype=np.int64)
        self.rows = np.zeros((1024, 4), dtype=np.int64)
        self.cnt = np.zeros(k.C_FIELDS, dtype=np.int64)
        self.cnt[k.C_FREE] = cap
        self._async = options["schedule"] == "async"
        self._rng, self._max_delay = rng, int(options["max_delay"])
        # Drawn at start(): a protocol whose handlers run instead must find its rng untouched.
        self.delays = np.zeros(1, dtype=np.int64)
        self.opt = np.array([options["pick"] == "largest", options["phase_overlap"] == "merge", self._async],
                            dtype=np.int64)

    # ------------------------------------------------------------------ running
    @property
    def started(self) -> bool:
        return bool(self.cnt[k.C_STARTED])

    def _args(self):
        return (self.indptr, self.nbr, self.rev, self.edge, self.ns, self.ss, self.ev, self.free, self.hw, self.hq,
                self.hi, self.holder, self.loads, self.log)

    def start(self) -> None:
        """Every node's program from its first line (the executor's ``start``)."""
        if not self.started:
            if self._async:
                self.delays = self._draw(self.ev.shape[0])
            k.start(*self._args(), self.delays, self.cnt, self.opt)
            self._check_error()

    def advance(self, until: int, one_unit: bool = False) -> int:
        """Run time units up to ``until``; returns a ``RUN_*`` code of :mod:`._events` (never RUN_FULL)."""
        while True:
            status = k.advance(int(until), bool(one_unit), *self._args(), self.rows, self.delays, self.cnt, self.opt)
            if status == k.RUN_ERROR:
                self._check_error()
                raise RuntimeError("perfect-tree kernel: advance called before start")
            if status != k.RUN_FULL:
                return status
            self._grow()

    def settle(self, step: int) -> None:
        """The clock after the engine's last step (idle time units move it, as the executor's)."""
        self.cnt[k.C_NOW] = max(self.now, step)

    def _draw(self, size: int) -> np.ndarray:
        # The executor draws int(rng.integers(1, max_delay + 1)) per send; a block of draws gives the
        # same numbers in the same order.
        return self._rng.integers(1, self._max_delay + 1, size=size).astype(np.int64)

    def _grow(self) -> None:
        cnt, size = self.cnt, int(self.cnt[k.C_HSIZE])
        if cnt[k.C_ROWN] + 1 > self.rows.shape[0]:
            self.rows = _bigger(self.rows, 2 * self.rows.shape[0])
        need = 3 * size + 3
        if cnt[k.C_LOGN] + need > self.log.shape[0]:
            self.log = _bigger(self.log, max(2 * self.log.shape[0], int(cnt[k.C_LOGN]) + need))
        if cnt[k.C_FREE] < 2 * size + 2 or self.hw.shape[0] < need:
            old = self.ev.shape[0]
            new = max(2 * old, need + old)
            self.ev = _bigger(self.ev, new)
            free = np.empty(new, dtype=np.int64)
            nfree = int(cnt[k.C_FREE])
            free[:nfree] = self.free[:nfree]
            free[nfree:nfree + new - old] = np.arange(old, new)
            self.free = free
            cnt[k.C_FREE] = nfree + new - old
            self.hw, self.hq, self.hi = (_bigger(a, new) for a in (self.hw, self.hq, self.hi))
        if self._async and cnt[k.C_DPOS] + 2 * size + 2 > self.delays.shape[0]:
            rest = self.delays[cnt[k.C_DPOS]:]
            self.delays = np.concatenate([rest, self._draw(max(self.delays.shape[0], 2 * size + 2))])
            cnt[k.C_DPOS] = 0

    def _check_error(self) -> None:
        err = int(self.cnt[k.C_ERROR])
        if err > 0:
            v = err - 1
            raise RuntimeError(f"node {v} sent tokens it does not hold ({self.loads[v]})")
        if err < 0:
            raise RuntimeError(f"perfect-tree kernel: unreachable program state ({err})")

    # ------------------------------------------------------------------ what the engine reads
    @property
    def now(self) -> int:
        return int(self.cnt[k.C_NOW])

    @property
    def in_transit(self) -> int:
        return int(self.cnt[k.C_TRANSIT])

    @property
    def tokens_moved(self) -> int:
        return int(self.cnt[k.C_MOVED])

    @property
    def messages(self) -> int:
        return int(self.cnt[k.C_MESSAGES])

    @property
    def idle(self) -> bool:
        return self.cnt[k.C_HSIZE] == 0

    @property
    def messages_by_kind(self) -> dict:
        counts = self.cnt[k.C_KIND0:k.C_KIND0 + len(k.KIND_NAMES)]
        return {name: int(c) for name, c in zip(k.KIND_NAMES, counts) if c}

    def unit_rows(self) -> np.ndarray:
        """``(time unit, tokens moved, messages, 2 * load-log length)`` after each unit with events."""
        return self.rows[:self.cnt[k.C_ROWN]]

    def load_log(self) -> np.ndarray:
        """``(node, change)`` per token message sent (change < 0) or delivered (change > 0), in order."""
        return self.log[:self.cnt[k.C_LOGN]]

    def all_final(self) -> bool:
        return int(self.cnt[k.C_NFINAL]) == self.n

    def states(self) -> list:
        """Each node's state name, as the handlers' ``state``."""
        return [k.STATE_NAMES[s] for s in self.ns[:, k.N_STATE].tolist()]

    def phase_times(self, phase: int) -> np.ndarray:
        """When each node finished ``phase`` (1, 2, 3); -1 where it has not."""
        return self.ns[:, (k.N_T1, k.N_T2, k.N_T3)[phase - 1]]

    def root(self) -> int | None:
        roots = np.flatnonzero((self.ns[:, k.N_T1] >= 0) & (self.ns[:, k.N_P1PARENT] == 0))
        return int(roots[0]) if roots.size == 1 else None

    def elected_by(self, node: int) -> str | None:
        return {k.ELECTED_BUSY: "busy", k.ELECTED_RECEIVED: "received"}.get(int(self.ns[node, k.N_ELECTED]))

    def stuck_nodes(self) -> int:
        return int(self.ns[:, k.N_STUCK].sum())

    def misread_messages(self) -> int:
        return int(self.ns[:, k.N_CONSUMED].sum())


def _bigger(a: np.ndarray, rows: int) -> np.ndarray:
    out = np.zeros((rows,) + a.shape[1:], dtype=a.dtype)
    out[:a.shape[0]] = a
    return out
