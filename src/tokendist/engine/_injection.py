"""Dynamic token injection and consumption: tokens arriving at and leaving nodes over time.

Ghosh et al. (1995, Sec. 1) analyse the static problem but motivate it by work stations that
receive and finish jobs; :class:`Injection` adds that to any synchronous run: after each step of
the protocol, ``rate`` tokens (in expectation) arrive and ``consume`` tokens (in expectation) are
taken away. ``simulate(..., injection=Injection(...))`` calls :meth:`Injection.reset` once and
:meth:`Injection.apply` after every step, and conserves tokens up to the recorded arrivals and
departures.

Where tokens arrive (``inject_at``):

* ``random`` -- each token at a node chosen uniformly at random (a random stream);
* ``all`` -- every node in turn (0, 1, ..., n-1, 0, ...): an even, deterministic spread;
* ``nodes`` -- only at the nodes listed in ``nodes``, in turn (an adversarial hot spot);
* ``heaviest`` -- at a currently heaviest node (an adversary working against balance).

``bursts`` adds ``count`` tokens after step ``t`` for each ``(t, count)``, placed the same way
(a branch-and-bound node that suddenly expands). :class:`InjectionSchedule` replays a file of
``step node tokens`` lines instead; :func:`parse_injection` reads the CLI's ``--inject`` spec, and
:func:`stream_summary` gives the metrics that make sense for a stream (backlog, peak load,
time-averaged discrepancy).

Where tokens leave (``consume_from``): ``random`` (a uniformly random token, so nodes in proportion
to their load), ``nodes`` (only the listed nodes, in turn, when they hold a token), ``lightest``
(an adversary: the lightest node that holds a token) or ``heaviest``. A token is only ever taken
from a node that holds one: loads never go negative.

A non-integer rate r injects ``floor(r)`` tokens plus one more with probability ``r - floor(r)``;
all randomness comes from the generator given to :meth:`reset` (the run's ``injection`` stream).
"""

from __future__ import annotations

import re

import numpy as np

from .._files import DATA_FILE_LIMIT, read_text
from ..errors import TokendistError

__all__ = ["Injection", "InjectionSchedule", "INJECT_AT", "CONSUME_FROM", "parse_injection", "stream_summary",
           "INJECT_SPEC_HELP"]

INJECT_AT = ("random", "all", "nodes", "heaviest")
CONSUME_FROM = ("random", "nodes", "lightest", "heaviest")
#: The most tokens an :class:`Injection` moves in one step (``rate``, ``consume``, a step's bursts):
#: it draws each arriving token's node (8 bytes each) and picks each departing token in turn, so
#: ``rate=1e20`` once failed inside numpy with a traceback; 2**26 tokens is half a GB a step.
MAX_TOKENS_PER_STEP = 2**26


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
    bursts : sequence of (int, int), optional
        ``(t, count)``: ``count`` more tokens arrive after step ``t`` (outside the start/stop window too).

    Examples
    --------
    >>> from tokendist.engine import simulate
    >>> inj = Injection(rate=2, consume=2, inject_at="nodes", nodes=[0])
    >>> r = simulate("ring:16", "multi-port", "constant:8", injection=inj, max_steps=200, seed=1)
    >>> bool(r.tokens == r.loads.sum()), inj.injected - inj.consumed == r.tokens - 128
    (True, True)
    """

    def __init__(self, rate: float = 1.0, consume: float = 0.0, *, inject_at: str = "random",
                 consume_from: str = "random", nodes=None, start: int = 0, stop: int | None = None,
                 bursts=()):
        try:
            rate, consume = float(rate), float(consume)
        except (TypeError, ValueError):
            raise TokendistError(f"injection: rate and consume must be numbers, got {rate!r} and {consume!r}") from None
        if not (0 <= rate <= MAX_TOKENS_PER_STEP and 0 <= consume <= MAX_TOKENS_PER_STEP):  # nan fails too
            raise TokendistError(f"injection: rate and consume must be numbers in [0, {MAX_TOKENS_PER_STEP:,}] "
                                 f"(tokens a step), got {rate!r} and {consume!r}")
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
        self.bursts: dict[int, int] = {}
        for t, count in bursts:
            if int(t) < 0 or int(count) < 0:
                raise TokendistError("injection: a burst needs a step >= 0 and a count >= 0")
            self.bursts[int(t)] = self.bursts.get(int(t), 0) + int(count)
            if self.bursts[int(t)] > MAX_TOKENS_PER_STEP:
                raise TokendistError(f"injection: the bursts after step {int(t)} bring {self.bursts[int(t)]:,} "
                                     f"tokens, more than {MAX_TOKENS_PER_STEP:,} a step")

    def reset(self, graph, rng: np.random.Generator) -> None:
        if self.nodes.min() < 0 or self.nodes.max() >= graph.n:
            raise TokendistError(f"injection: nodes must be in 0..{graph.n - 1}")
        self.n = graph.n
        self._targets = np.arange(graph.n, dtype=np.int64) if self.inject_at == "all" else self.nodes
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
        running = t >= self.start and (self.stop is None or t < self.stop)
        burst = self.bursts.get(t, 0)
        if not running and not burst:
            return loads, 0, 0
        w = np.array(loads, copy=True)
        k = (self._count(self.rate) if running else 0) + burst
        if k:
            if self.inject_at == "random":
                w += np.bincount(self.rng.integers(0, self.n, size=k), minlength=self.n).astype(w.dtype)
            elif self.inject_at in ("nodes", "all"):
                idx = self._targets[(self._turn_in + np.arange(k)) % self._targets.size]
                self._turn_in += k
                w += np.bincount(idx, minlength=self.n).astype(w.dtype)
            else:
                for _ in range(k):
                    w[int(np.argmax(w))] += 1
        c = self._count(self.consume) if running else 0
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
                "consume_from": self.consume_from, "nodes": self.nodes.tolist(), "start": self.start,
                "stop": self.stop, "bursts": sorted(self.bursts.items()),
                "injected": getattr(self, "injected", 0), "consumed": getattr(self, "consumed", 0)}


class InjectionSchedule:
    """Arrivals and departures read from a file: one ``step node tokens`` line per event.

    After step ``step``, ``tokens`` arrive at ``node`` (``tokens > 0``) or leave it (``tokens < 0``;
    at most what the node then holds: loads never go negative, and the run records what really
    left). Lines starting with ``#`` and blank lines are ignored; several lines may name one step.

    Examples
    --------
    >>> import tempfile, os
    >>> from tokendist.engine import simulate
    >>> with tempfile.NamedTemporaryFile("w", suffix=".txt", delete=False) as fh:
    ...     _ = fh.write("# step node tokens\\n0 0 10\\n5 3 -4\\n")
    >>> inj = InjectionSchedule(fh.name)
    >>> r = simulate("ring:8", "multi-port", "constant:2", injection=inj, max_steps=20)
    >>> int(r.initial_loads[3]), inj.injected, inj.consumed, r.tokens  # node 3 holds 2: only 2 of 4 leave
    (2, 10, 2, 24)
    >>> os.unlink(fh.name)
    """

    def __init__(self, path):
        self.path = str(path)
        # A regular text file only (read_text: /dev/zero or a pipe would never end), read line by
        # line so that each error names its line: ASCII integers within int64 (np.loadtxt took
        # '1_0', and an empty file with a warning on stderr as a schedule of nothing).
        rows = []
        for lineno, line in enumerate(read_text(self.path, "injection", DATA_FILE_LIMIT).splitlines(), 1):
            fields = line.split("#", 1)[0].split()
            if not fields:
                continue
            where = f"{self.path}:{lineno}"
            if len(fields) != 3 or not all(_SIGNED.match(f) for f in fields):
                raise TokendistError(f"{where}: expected 'step node tokens' (3 integers), got {line.strip()[:60]!r}")
            if any(len(f) > 21 or abs(int(f)) > _INT64_MAX for f in fields):
                raise TokendistError(f"{where}: a value beyond int64 (2**63 - 1)")
            step, node, tokens = (int(f) for f in fields)
            if step < 0:
                raise TokendistError(f"{where}: steps must be >= 0, got {step}")
            rows.append((step, node, tokens))
        if not rows:
            raise TokendistError(f"{self.path}: no 'step node tokens' line: the injection file schedules nothing")
        data = np.array(rows, dtype=np.int64)
        self.events = data[np.argsort(data[:, 0], kind="stable")]

    def reset(self, graph, rng) -> None:
        ev = self.events
        if ev.size and (ev[:, 1].min() < 0 or ev[:, 1].max() >= graph.n):
            raise TokendistError(f"{self.path}: nodes must be in 0..{graph.n - 1}")
        self.n = graph.n
        self.injected = 0
        self.consumed = 0
        self._starts = np.searchsorted(ev[:, 0], np.arange(0, int(ev[-1, 0]) + 2)) if ev.size else np.zeros(1, int)

    def apply(self, t: int, loads: np.ndarray):
        if t + 1 >= self._starts.size:
            return loads, 0, 0
        rows = self.events[self._starts[t]:self._starts[t + 1]]
        if rows.size == 0:
            return loads, 0, 0
        w = np.array(loads, copy=True)
        added = taken = 0
        for _, node, tokens in rows:
            if tokens >= 0:
                w[node] += tokens
                added += int(tokens)
            else:
                take = int(min(-tokens, max(w[node], 0)))
                w[node] -= take
                taken += take
        self.injected += added
        self.consumed += taken
        return w, added, taken

    def describe(self) -> dict:
        return {"file": self.path, "events": int(self.events.shape[0]),
                "injected": getattr(self, "injected", 0), "consumed": getattr(self, "consumed", 0)}


#: The grammar of ``--inject`` (and of a scenario's ``inject`` key), for help texts and errors.
INJECT_SPEC_HELP = ("KEY=VALUE,... with rate=R (tokens arriving per step), consume=C (leaving per step), "
                    "nodes=random|all|heaviest|I;J;K (where they arrive), consume_from=random|lightest|heaviest|"
                    "nodes|I;J;K, start=T, stop=T, burst=K@T[;K@T...]; or file:PATH (lines 'step node tokens')")

_NUMBER_KEYS = {"rate", "consume"}
_STEP_KEYS = {"start", "stop"}
_KEYS = _NUMBER_KEYS | _STEP_KEYS | {"nodes", "consume_from", "burst"}
# ASCII digits only: int() and float() also read '1_0' and non-ASCII digits ('\u0664' is 4).
_DIGITS = re.compile(r"^[0-9]+$")
_DECIMAL = re.compile(r"^[+]?([0-9]+[.]?[0-9]*|[.][0-9]+)([eE][+-]?[0-9]+)?$")
_INT64_MAX = 2**63 - 1
_SIGNED = re.compile(r"^[+-]?[0-9]+$")


def _step(spec: str, key: str, text: str) -> int:
    text = text.strip()
    if not _DIGITS.match(text):
        raise TokendistError(f"bad --inject {spec!r}: {key} must be a step (an integer >= 0), got {text!r}")
    if len(text) > 20 or int(text) > _INT64_MAX:
        raise TokendistError(f"bad --inject {spec!r}: {key} {text[:30]} is beyond the last step a run can have "
                             "(2**63 - 1)")
    return int(text)


def _node_list(spec: str, value: str) -> list[int]:
    items = [x.strip() for x in value.split(";")]
    if not any(items):
        raise TokendistError(f"bad --inject {spec!r}: empty node list")
    if not all(_DIGITS.match(x) and len(x) < 19 for x in items):
        raise TokendistError(f"bad --inject {spec!r}: nodes are integers separated by ';' (node ids >= 0), "
                             f"got {value!r}")
    return [int(x) for x in items]


def parse_injection(spec: str):
    """An :class:`Injection` (or :class:`InjectionSchedule`) from an ``--inject`` spec.

    Grammar (:data:`INJECT_SPEC_HELP`): ``rate=5,consume=4,nodes=random``; ``nodes=all``;
    ``nodes=0;3;7`` (a hot spot, in turn); ``burst=100@50`` (100 more tokens after step 50);
    ``consume_from=lightest``; ``start=10,stop=500``; or ``file:PATH``. Raises a one-line
    :class:`~tokendist.errors.TokendistError` on anything else.

    Examples
    --------
    >>> parse_injection("rate=2.5,consume=2,nodes=0;3,burst=100@50").describe()["bursts"]
    [(50, 100)]
    >>> parse_injection("rate=1,colour=3")
    Traceback (most recent call last):
    ...
    tokendist.errors.TokendistError: bad --inject 'rate=1,colour=3': unknown key 'colour' (keys: burst, consume, consume_from, nodes, rate, start, stop)
    """
    if not isinstance(spec, str) or not spec.strip():
        raise TokendistError(f"bad --inject {spec!r}: expected {INJECT_SPEC_HELP}")
    spec = spec.strip()
    if spec.startswith("file:"):
        if not spec[5:]:
            raise TokendistError("bad --inject 'file:': expected file:PATH")
        return InjectionSchedule(spec[5:])
    kw: dict = {}
    nodes = None
    for part in spec.split(","):
        key, sep, value = part.partition("=")
        key, value = key.strip(), value.strip()
        if not sep or not key:
            raise TokendistError(f"bad --inject {spec!r}: expected key=value, got {part!r}")
        if key not in _KEYS:
            raise TokendistError(f"bad --inject {spec!r}: unknown key {key!r} (keys: {', '.join(sorted(_KEYS))})")
        if key in kw or (key == "nodes" and nodes is not None):
            raise TokendistError(f"bad --inject {spec!r}: {key} given twice")
        if key in _NUMBER_KEYS:
            x = float(value) if _DECIMAL.match(value) else float("nan")
            if not np.isfinite(x) or x < 0:
                raise TokendistError(f"bad --inject {spec!r}: {key} must be a number >= 0, got {value!r}")
            if x > MAX_TOKENS_PER_STEP:
                raise TokendistError(f"bad --inject {spec!r}: {key}={value} tokens a step is more than the "
                                     f"{MAX_TOKENS_PER_STEP:,} an injection moves one by one")
            kw[key] = x
        elif key in _STEP_KEYS:
            kw[key] = _step(spec, key, value)
        elif key == "nodes":
            if value in ("random", "all", "heaviest"):
                kw["inject_at"] = value
                nodes = []
            else:
                kw["inject_at"] = "nodes"
                nodes = _node_list(spec, value)
        elif key == "consume_from":
            if value in ("random", "lightest", "heaviest", "nodes"):
                kw["consume_from"] = value
            else:
                kw["consume_from"] = "nodes"
                listed = _node_list(spec, value)
                if nodes and listed != nodes:
                    raise TokendistError(f"bad --inject {spec!r}: consume_from lists other nodes than nodes=; "
                                         "one node list serves both")
                nodes = listed
        else:  # burst
            bursts = []
            for item in value.split(";"):
                count, at, step = item.partition("@")
                if not at or not _DIGITS.match(count.strip()) or not _DIGITS.match(step.strip()):
                    raise TokendistError(f"bad --inject {spec!r}: burst expects COUNT@STEP, got {item!r}")
                if len(count.strip()) > 12 or int(count) > MAX_TOKENS_PER_STEP:
                    raise TokendistError(f"bad --inject {spec!r}: a burst of {count.strip()[:30]} tokens is more "
                                         f"than the {MAX_TOKENS_PER_STEP:,} an injection moves one by one")
                bursts.append((_step(spec, "a burst's step", step), int(count)))
            kw["bursts"] = bursts
    if kw.get("consume_from") == "nodes" and not nodes:
        raise TokendistError(f"bad --inject {spec!r}: consume_from=nodes needs nodes=I;J;K")
    if "stop" in kw and kw["stop"] < kw.get("start", 0):
        raise TokendistError(f"bad --inject {spec!r}: stop comes before start")
    if "rate" not in kw and "bursts" not in kw and "consume" not in kw:
        raise TokendistError(f"bad --inject {spec!r}: give rate=, consume= or burst= (nothing would arrive or leave)")
    kw.setdefault("rate", 0.0)
    return Injection(nodes=nodes or None, **kw)


def stream_summary(steps, totals, maxima, discrepancy) -> dict:
    """Metrics of a run with arrivals and departures, over its recorded states after step 0.

    * ``backlog_*``: tokens in the network (the work waiting, for a branch-and-bound code): at the
      end, at its peak and on average;
    * ``max_load_peak``: the heaviest any node got; ``max_load_mean``: the heaviest node on average;
    * ``discrepancy_time_average``: ``max - min`` averaged over time (a stream never settles, so the
      final discrepancy alone says little), and ``discrepancy_peak``.

    With ``record_every = k`` the averages are over every k-th step.
    """
    steps, totals, maxima, disc = (np.asarray(x, dtype=np.float64) for x in (steps, totals, maxima, discrepancy))
    sl = slice(1, None) if steps.size > 1 else slice(None)
    return {"backlog_final": _num(totals[-1]), "backlog_peak": _num(totals[sl].max()),
            "backlog_mean": float(totals[sl].mean()), "max_load_peak": _num(maxima[sl].max()),
            "max_load_mean": float(maxima[sl].mean()), "discrepancy_time_average": float(disc[sl].mean()),
            "discrepancy_peak": _num(disc[sl].max())}


def _num(x: float):
    return int(x) if float(x).is_integer() else float(x)
