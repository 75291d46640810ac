"""Dynamic token injection and consumption: tokens arriving at and leaving nodes over time.

Ghosh et al. (1995, Sec. 1) analyse the static problem but motivate it by work stations that
receive and finish jobs; :class:`Injection` adds that to any synchronous run: after each step of
the protocol, ``rate`` tokens (in expectation) arrive and ``consume`` tokens (in expectation) are
taken away. ``simulate(..., injection=Injection(...))`` calls :meth:`Injection.reset` once and
:meth:`Injection.apply` after every step, and conserves tokens up to the recorded arrivals and
departures.

Where tokens arrive (``inject_at``):

* ``random`` -- each token at a node chosen uniformly at random (a random stream);
* ``nodes`` -- only at the nodes listed in ``nodes``, in turn (an adversarial hot spot);
* ``heaviest`` -- at a currently heaviest node (an adversary working against balance).

Where tokens leave (``consume_from``): ``random`` (a uniformly random token, so nodes in proportion
to their load), ``nodes`` (only the listed nodes, in turn, when they hold a token), ``lightest``
(an adversary: the lightest node that holds a token) or ``heaviest``. A token is only ever taken
from a node that holds one: loads never go negative.

A non-integer rate r injects ``floor(r)`` tokens plus one more with probability ``r - floor(r)``;
all randomness comes from the generator given to :meth:`reset` (the run's ``dynamics`` stream).
"""

from __future__ import annotations

import numpy as np

from ..errors import TokendistError

__all__ = ["Injection", "INJECT_AT", "CONSUME_FROM"]

INJECT_AT = ("random", "nodes", "heaviest")
CONSUME_FROM = ("random", "nodes", "lightest", "heaviest")


class Injection:
    """A stream of arriving and departing tokens, applied after every synchronous step.

    Parameters
    ----------
    rate : float
        Tokens injected per step (expected value when fractional).
    consume : float
        Tokens consumed per step (expected value when fractional; fewer when the network is empty).
    inject_at : {"random", "nodes", "heaviest"}
    consume_from : {"random", "nodes", "lightest", "heaviest"}
    nodes : sequence of int, optional
        The nodes for ``inject_at="nodes"`` / ``consume_from="nodes"`` (default: node 0).
    start, stop : int, optional
        Steps ``start <= t < stop`` at which the stream runs (default: all).

    Examples
    --------
    >>> from tokendist.engine import simulate
    >>> inj = Injection(rate=2, consume=2, inject_at="nodes", nodes=[0])
    >>> r = simulate("ring:16", "multi-port", "constant:8", injection=inj, max_steps=200, seed=1)
    >>> bool(r.tokens == r.loads.sum()), inj.injected - inj.consumed == r.tokens - 128
    (True, True)
    """

    def __init__(self, rate: float = 1.0, consume: float = 0.0, *, inject_at: str = "random",
                 consume_from: str = "random", nodes=None, start: int = 0, stop: int | None = None):
        if rate < 0 or consume < 0:
            raise TokendistError("injection: rate and consume must be non-negative")
        if inject_at not in INJECT_AT:
            raise TokendistError(f"injection: inject_at must be one of {', '.join(INJECT_AT)}")
        if consume_from not in CONSUME_FROM:
            raise TokendistError(f"injection: consume_from must be one of {', '.join(CONSUME_FROM)}")
        self.rate, self.consume = float(rate), float(consume)
        self.inject_at, self.consume_from = inject_at, consume_from
        self.nodes = np.asarray([0] if nodes is None else list(nodes), dtype=np.int64)
        if self.nodes.size == 0:
            raise TokendistError("injection: nodes must not be empty")
        self.start, self.stop = int(start), stop

    def reset(self, graph, rng: np.random.Generator) -> None:
        if self.nodes.min() < 0 or self.nodes.max() >= graph.n:
            raise TokendistError(f"injection: nodes must be in 0..{graph.n - 1}")
        self.n = graph.n
        self.rng = rng
        self.injected = 0
        self.consumed = 0
        self._turn_in = 0
        self._turn_out = 0

    def _count(self, rate: float) -> int:
        whole = int(np.floor(rate))
        return whole + int(self.rng.random() < rate - whole)

    def apply(self, t: int, loads: np.ndarray):
        """Return ``(new_loads, injected, consumed)`` after step ``t`` (``loads`` is not modified)."""
        if t < self.start or (self.stop is not None and t >= self.stop):
            return loads, 0, 0
        w = np.array(loads, copy=True)
        k = self._count(self.rate)
        if k:
            if self.inject_at == "random":
                w += np.bincount(self.rng.integers(0, self.n, size=k), minlength=self.n).astype(w.dtype)
            elif self.inject_at == "nodes":
                idx = self.nodes[(self._turn_in + np.arange(k)) % self.nodes.size]
                self._turn_in += k
                w += np.bincount(idx, minlength=self.n).astype(w.dtype)
            else:
                for _ in range(k):
                    w[int(np.argmax(w))] += 1
        c = self._count(self.consume)
        taken = 0
        for _ in range(c):
            node = self._consumer(w)
            if node < 0:
                break
            w[node] -= 1
            taken += 1
        self.injected += k
        self.consumed += taken
        return w, k, taken

    def _consumer(self, w: np.ndarray) -> int:
        holders = w > 0
        if not holders.any():
            return -1
        if self.consume_from == "random":
            # A uniformly random token: node i with probability w_i / sum(w).
            cum = np.cumsum(np.where(holders, w, 0))
            return int(np.searchsorted(cum, self.rng.integers(0, cum[-1]), side="right"))
        if self.consume_from == "nodes":
            for _ in range(self.nodes.size):
                node = int(self.nodes[self._turn_out % self.nodes.size])
                self._turn_out += 1
                if w[node] > 0:
                    return node
            return -1
        if self.consume_from == "lightest":
            return int(np.argmin(np.where(holders, w, np.iinfo(np.int64).max)))
        return int(np.argmax(w))

    def describe(self) -> dict:
        return {"rate": self.rate, "consume": self.consume, "inject_at": self.inject_at,
                "consume_from": self.consume_from, "nodes": self.nodes.tolist(),
                "injected": getattr(self, "injected", 0), "consumed": getattr(self, "consumed", 0)}
