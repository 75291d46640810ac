"""Parallel (lazy) rotor walk as a load-balancing scheme (Akbari, Berenbrink, SPAA 2013).

Every node deals its tokens out one at a time along a fixed cyclic order of its ports, starting
where its rotor points; the rotor keeps its position across steps. The lazy version has 2d ports,
a self-loop after every edge, so that about half of the tokens stay.
"""

from __future__ import annotations

import numpy as np

from ...engine import Param, Protocol, Step, register_protocol
from ...graphs._model import unsigned_view
from ...engine._cycles import NO_TABLE
from .kernels._rotor import rotor_stencil_step, rotor_step
from .kernels._rotor import rotor_stencil_steps as _rotor_stencil_steps
from .kernels._rotor import rotor_steps as _rotor_steps
from ...kernels._report import block_kernel_ready, instrument_kernels, kernel_label
from ...kernels._rows import RowOrder


instrument_kernels(globals())  # runs report which kernel ran each step

__all__ = ["RotorRouter", "rotor_counts"]

_INITS = ("zero", "random")




def rotor_counts(x: int, rotor: int, degree: int, lazy: bool, max_degree: int) -> list[int]:
    """Tokens to each of the ``degree`` neighbours (CSR order) when ``x`` tokens leave a rotor at ``rotor``.

    Hands the ``x mod L`` last tokens out one at a time, advancing the rotor after each.
    """
    L = 2 * max_degree if lazy else max_degree
    counts = [0] * degree
    r = rotor
    for _ in range(x % L):
        k = r // 2 if lazy else r
        if (not lazy or r % 2 == 0) and k < degree:
            counts[k] += 1
        r = (r + 1) % L
    whole = x // L
    return [c + whole for c in counts]


@register_protocol
class RotorRouter(Protocol):
    """Parallel rotor walk: each node sends its tokens one at a time to successive ports of its rotor.

    Notes
    -----
    The rule as specified here (Akbari, Berenbrink, SPAA 2013, "parallel rotor walks"; the
    rotor-router model in Friedrich, Gairing, Sauerwald): node i has a cyclic list of ports, its
    d_i neighbours in increasing order (CSR order) and, in the lazy version (default), a self-loop
    after each neighbour (2 d_i ports: neighbour 0, self, neighbour 1, self, ...). Each step it deals
    its x_i tokens one at a time to the ports, starting at its rotor, and leaves the rotor after
    the last port used; rotors persist across steps. Closed form used by the kernel: port q receives
    ``floor(x / L) + [(q - r) mod L < x mod L]`` tokens, and the rotor moves by ``x mod L``. In
    expectation over the rotors this is the (lazy) random walk ``P_ij = 1/(2d)``. Claims (as the
    issue states them; the SPAA paper's own statement could not be read here): the deviation from
    the lazy random walk's expected loads is O(1) on constant-dimension tori and O(log^{3/2} n) on
    hypercubes. Never negative (a node deals only what it holds), deterministic given the initial
    rotors.

    Parameters: ``lazy`` (true: 2d ports with self-loops; false: d ports), ``rotor_init`` (``zero``:
    every rotor at port 0; ``random``: uniform ports drawn from the run's seed).

    References
    ----------
    H. Akbari, P. Berenbrink, Parallel rotor walks on finite graphs and applications in discrete
    load balancing, SPAA 2013. T. Friedrich, M. Gairing, T. Sauerwald, Quasirandom load balancing,
    SIAM J. Comput. 41(4), 2012.

    Examples
    --------
    >>> import tokendist as td
    >>> r = td.simulate("torus:8x8", "rotor-router", "point:640", seed=1, max_steps=300)
    >>> r.tokens, int(r.loads.min()) >= 0
    (640, True)
    """

    name = "rotor-router"
    exact_load_limit = 2**53  # the kernel divides loads in float64 before it rounds
    static_reason = "each node's rotor cycles over its neighbours of the start (Akbari, Berenbrink 2013 analyse a fixed graph)"
    title = "Parallel (lazy) rotor walk"
    paper = "Akbari, Berenbrink, SPAA 2013; Friedrich, Gairing, Sauerwald 2012"
    model = "flow"
    exchange_rounds = 1
    #: A balanced distribution is not a fixed point: x mod L tokens still go round the rotors.
    keeps_balance = False
    params = (Param("lazy", bool, True, "true: 2d ports (a self-loop after every edge); false: d ports"),
              Param("rotor_init", str, "zero", "initial rotors: zero (port 0) or random (seeded)", _INITS),
              Param("kernel", str, "numba", "numba (per-node loop over CSR rows, or the offset stencil on tori "
                    "and rings) or numpy (reference)", ("numba", "numpy")))

    def reset(self, graph, loads, rng):
        self._graph = graph
        lazy = bool(self.options["lazy"])
        # Every node with a neighbour has the ports of a node of maximum degree (self-loops pad).
        self._maxdeg = int(graph.max_degree)
        ports = np.where(graph.degrees > 0, self._maxdeg * (2 if lazy else 1), 0).astype(np.int64)
        if self.options["rotor_init"] == "random":
            self.rotor = (rng.random(graph.n) * np.maximum(ports, 1)).astype(np.int64)
        else:
            self.rotor = np.zeros(graph.n, dtype=np.int64)
        self.rotor0 = self.rotor.copy()
        self._ports = ports
        self._out = np.empty(graph.n, dtype=np.int64)
        self._ref = None  # the numpy step's per-slot constants (_slots)
        self._regular = None  # and on a regular graph those of _regular_step
        # Offset stencil (tori, rings; regular, so every node has maxdeg ports): no index reads in its runs.
        st = graph.stencil
        self._stencil = stencil = (st.starts, st.ends, st.offsets) if st is not None and self._maxdeg > 0 else None
        # The kernel and its arguments that stay the same for the run, made once (a step on a small
        # torus is a few microseconds of kernel; looking them up every step cost about as much).
        fixed = (graph.indptr, unsigned_view(graph.indices), lazy, self._maxdeg)
        self._fast = (rotor_stencil_step, fixed + stencil) if stencil is not None else (rotor_step, fixed)
        self._blocks = _rotor_stencil_steps if stencil is not None else _rotor_steps
        self._messages = 2 * graph.m

    def step(self, t, graph, loads):
        loads = np.ascontiguousarray(loads, dtype=np.int64)
        lazy = bool(self.options["lazy"])
        if self.options["kernel"] == "numpy":
            order, L, L_slot, q, idle = self._slots(graph, lazy)
            if self._regular is not None and graph is self._graph:
                return self._regular_step(loads, order, *self._regular)
            rows = order.row
            rem = loads % L
            # Slot k of node i gets one of the rem extra tokens when its port q(k) is among the
            # rem ports from the rotor on.
            c = loads[rows] // L_slot + ((q - self.rotor[rows]) % L_slot < rem[rows])
            c[idle] = 0
            # int64 row sums (exact); what arrives over a slot is what its reverse slot sent.
            new = loads - order.sums(c) + order.sums(c[order.reverse])
            self.rotor = np.where(self._ports > 0, (self.rotor + rem) % L, 0)
            return Step(new, moved=int(c.sum()), messages=2 * graph.m)
        new = self._out if self._out is not loads else np.empty_like(loads)
        if graph is self._graph:
            kernel, fixed = self._fast
            moved = kernel(*fixed, self.rotor, loads, new)
        else:
            moved = rotor_step(graph.indptr, unsigned_view(graph.indices), lazy, self._maxdeg, self.rotor, loads, new)
        self._out = loads
        return Step(new, moved=int(moved), messages=self._messages)

    steps_find_cycles = True

    def steps(self, t, k, graph, loads, block, moved, messages, stop_idle, seen=None):
        """Up to ``k`` steps of the step kernel in one call (:meth:`Protocol.steps`), with the cycle
        check on the rotors (:meth:`state_key`); None where :meth:`step` takes another path (the
        numpy reference, another graph) or a small run would compile the block kernel."""
        if self.options["kernel"] == "numpy" or graph is not self._graph:
            return None
        kernel, fixed = self._fast
        table = NO_TABLE if seen is None else seen.arrays()
        args = (*fixed, self.rotor, t, k, stop_idle, *table, loads, block, moved, messages, self._messages)
        if not block_kernel_ready(self._blocks, args):
            return None
        return self._blocks(*args), kernel_label(kernel)

    def _slots(self, graph, lazy: bool):
        # The numpy step's per-slot constants, made once per graph.
        if self._ref is None or self._ref[0].graph is not graph:
            order = RowOrder(graph)
            rows = order.row
            L = np.maximum(self._ports, 1)
            k = np.arange(graph.indptr[-1]) - graph.indptr[rows]  # each slot's position in its row
            self._ref = (order, L, L[rows], 2 * k if lazy else k, self._ports[rows] == 0)
            if graph is self._graph and order.regular and order.degree > 0:
                # A regular graph (torus, hypercube): every node has the same L ports and no idle slot.
                D = order.degree
                port = (2 if lazy else 1) * np.arange(D, dtype=np.int64)
                self._regular = (int(L[0]), port[:, None], np.empty((D, graph.n), dtype=np.int64),
                                 np.empty(graph.n, dtype=np.int64), np.empty(graph.n, dtype=np.int64),
                                 2 * graph.m)
        return self._ref

    def _regular_step(self, loads, order, L, port, c, whole, rem, messages):
        """The numpy step on a regular graph, its slots laid out as ``(D, n)`` (RowOrder.reverse_by_column).

        Row ``k`` holds every node's ``k``-th neighbour slot, whose port is ``port[k]`` (``2k`` lazy,
        ``k`` otherwise) for all nodes, so the rule ``floor(x / L) + [(port - rotor) mod L < x mod L]``
        is four broadcast calls and a node's sums are one reduction over contiguous rows: about half
        the numpy calls of the general step, the same integers.
        """
        if L & (L - 1) == 0:  # L a power of two (tori, hypercubes of 2^k dimensions): shifts and masks,
            # the same floor quotient and remainder (two's complement), without an integer division
            shift = L.bit_length() - 1
            np.right_shift(loads, shift, out=whole)
            np.bitwise_and(loads, L - 1, out=rem)
            np.subtract(port, self.rotor, out=c)
            np.bitwise_and(c, L - 1, out=c)
        else:
            np.divmod(loads, L, out=(whole, rem))
            np.subtract(port, self.rotor, out=c)
            np.remainder(c, L, out=c)
        np.less(c, rem, out=c)  # (0 or 1 in the int64 buffer)
        c += whole
        new = loads - order.column_sums(c)
        new += order.column_sums(c.reshape(-1)[order.reverse_by_column].reshape(c.shape))
        moved = int(c.sum())
        rotor = self.rotor + rem
        self.rotor = rotor & (L - 1) if L & (L - 1) == 0 else rotor % L
        return Step(new, moved=moved, messages=messages)

    def state_key(self):
        return self.rotor  # (its bytes, hashed at once by the engine: engine/_cycles.py)

    def report(self):
        return {"lazy": bool(self.options["lazy"]), "rotor_init": self.options["rotor_init"]}

    # Per-node form: the rotor is the node's own memory.
    def publish(self, rnd, t, node, view):
        return int(view.load)

    def decide(self, t, node, view):
        g = self._graph
        a, b = int(g.indptr[node]), int(g.indptr[node + 1])
        d = b - a
        if d == 0:
            return {}
        lazy = bool(self.options["lazy"])
        r = view.memory.get("rotor", int(self.rotor0[node]))
        x = int(view.load)
        counts = rotor_counts(x, r, d, lazy, self._maxdeg)
        view.memory["rotor"] = (r + x) % int(self._ports[node])
        return {int(g.indices[a + k]): c for k, c in enumerate(counts) if c}
