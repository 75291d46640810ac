"""The protocol contract: what every token-distribution algorithm tells the engine and does per step.

A protocol is a small class (PeerSim's *Protocol*): class attributes declare what it is (paper,
communication model, requirements, whether it is randomised, whether loads are real-valued), and
two methods run it on whole arrays:

* :meth:`Protocol.reset` prepares per-run state (a colouring, estimates, a spanning tree) from the
  graph, the initial loads and the protocol's random generator;
* :meth:`Protocol.step` performs one synchronous step: every node decides from the loads at the
  start of the step, then all transfers happen at once. It returns a :class:`Step`.

Where a paper gives a per-node rule, the protocol also implements the node form
(:meth:`Protocol.publish` / :meth:`Protocol.decide`), which :mod:`tokendist.engine._local` runs with
real messages on the message-passing executor; a test checks that both give the same trace.

Protocols register under one name with :func:`register_protocol`.
"""

from __future__ import annotations

import functools
import math
import numbers
import re
from dataclasses import dataclass, field
from typing import Any, Callable, ClassVar

import numpy as np

from ..errors import NotResetError, TokendistError
from ..registry import Registry

__all__ = ["Protocol", "Param", "Step", "PROTOCOLS", "register_protocol", "MODELS",
           "REQUIREMENTS", "parse_param_value"]
# make_protocol lives in ._user, which resolves users' own protocols too.

#: Communication models: single-port (at most one neighbour per node per step), multi-port (at most
#: one token per edge and direction per step), flow (any amount per edge: diffusion), message
#: (asynchronous message passing; the protocol runs on the executor, not in synchronous steps).
MODELS = ("single-port", "multi-port", "flow", "message")
#: What a protocol may require of the graph.
REQUIREMENTS = ("connected", "tree", "biconnected", "colouring")


@dataclass(frozen=True)
class Param:
    """A protocol parameter: name, type, default, help, optional choices and numeric bounds.

    ``minimum`` / ``maximum`` bound a numeric value (inclusive); every value is checked once, at
    construction, whether given as text (``--param``, a scenario) or as a Python value.
    """

    name: str
    type: Callable[[str], Any]
    default: Any
    help: str
    choices: tuple | None = None
    minimum: float | None = None
    maximum: float | None = None


@dataclass
class Step:
    """The outcome of one synchronous step.

    Attributes
    ----------
    loads : ndarray
        The loads after the step (a new array or the protocol's own buffer; the engine copies
        what it keeps).
    in_transit : int
        Tokens sent but not yet delivered (message-passing protocols whose step is one time unit
        of the executor); conservation counts them.
    moved : int or float
        Tokens (or load) that crossed an edge during the step.
    messages : int
        Messages sent during the step, as the protocol's per-node rule would send them.
    flows : ndarray or None
        Signed per-edge flows on the step's graph (positive from ``u`` to ``v``). When given, the
        engine checks feasibility (no node sends more than it holds) and the communication model.
    outflow : ndarray or None
        Tokens each node sent during the step, when the protocol computes it (used for the
        feasibility check when ``flows`` is not given).
    """

    loads: np.ndarray
    moved: float = 0
    messages: int = 0
    flows: np.ndarray | None = None
    outflow: np.ndarray | None = None
    in_transit: float = 0
    info: dict = field(default_factory=dict)


class Protocol:
    """Base class of every registered protocol.

    Subclasses set the class attributes and implement :meth:`reset` and :meth:`step`.

    Attributes
    ----------
    name : str
        Registry name (``threshold2``, ``diffusion``, ...).
    title : str
        Human name, e.g. ``"THRESHOLD-2 (dimension exchange)"``.
    paper : str
        Citation with section, e.g. ``"Houle, Symvonis, Wood 2004, Sec. 3"``.
    model : str
        One of :data:`MODELS`.
    requires : frozenset of str
        Subset of :data:`REQUIREMENTS`.
    randomized : bool
        Whether the rule draws random numbers (from the run's ``protocol`` sub-stream).
    divisible : bool
        Real-valued (float64) loads: the idealised continuous schemes.
    may_go_negative : bool
        Whether the rule as published can send more than a node holds (the engine then reports
        infeasible steps instead of stopping only with ``allow_infeasible``).
    dynamic : bool
        Whether the protocol supports a graph that changes every step (edge failures, mobility).
    static_reason : str
        When ``dynamic`` is false: why the rule needs the network of the start (one line).
    period : int
        Steps after which the schedule repeats (1; the number of colours for dimension exchange).
        The engine detects fixed points and cycles of states at multiples of the period.
    params : tuple of Param
        The parameters ``--param key=value`` accepts.
    uses_speeds : bool
        Whether the rule reads node speeds (heterogeneous networks); the engine refuses speeds
        given to a protocol that would ignore them.
    exact_load_limit : int or None
        Integer protocols whose rule is computed in float64 (real speeds, real estimates) give the
        rule's exact result only for loads of magnitude below this; the engine refuses larger
        loads in one line before the first step. None: exact for every int64 load.
    keeps_balance : bool
        Whether the rule leaves a balanced distribution (every node the same load) unchanged.
        False for the published rules that still move tokens at random from a balanced start (rotor
        walks, randomised roundings); the conformance checks then do not ask it.
    """

    name: ClassVar[str] = ""
    title: ClassVar[str] = ""
    paper: ClassVar[str] = ""
    model: ClassVar[str] = "flow"
    requires: ClassVar[frozenset] = frozenset({"connected"})
    randomized: ClassVar[bool] = False
    divisible: ClassVar[bool] = False
    may_go_negative: ClassVar[bool] = False
    dynamic: ClassVar[bool] = False
    static_reason: ClassVar[str] = ""
    params: ClassVar[tuple[Param, ...]] = ()
    uses_speeds: ClassVar[bool] = False
    exact_load_limit: ClassVar[int | None] = None
    keeps_balance: ClassVar[bool] = True

    def __init_subclass__(cls, **kwargs):
        super().__init_subclass__(**kwargs)
        # Note when a run's state exists, whatever reset() a subclass writes (see __getattr__).
        if "reset" in cls.__dict__:
            own_reset = cls.__dict__["reset"]

            @functools.wraps(own_reset)
            def reset(self, *args, **kw):
                result = own_reset(self, *args, **kw)
                self._reset_done = True
                return result

            cls.reset = reset

    def __getattr__(self, name):
        # Only reached for attributes that do not exist: no cost on the normal path. Before reset()
        # the missing attribute is per-run state, and the mistake is the call order.
        if name.startswith("__") or self.__dict__.get("_reset_done"):
            raise AttributeError(f"{type(self).__name__!r} object has no attribute {name!r}")
        raise NotResetError(f"{self.name}: call reset(graph, loads, rng) before step(); the protocol has no "
                            f"per-run state yet (no {name!r})")

    def __init__(self, **params):
        known = {p.name: p for p in self.params}
        for key in params:
            if key not in known:
                names = ", ".join(known) or "none"
                raise TokendistError(f"{self.name}: unknown parameter {key!r} (parameters: {names})")
        self.options: dict[str, Any] = {}
        #: The parameters the caller named (a named ``kernel`` is obeyed even on a small run).
        self.given = frozenset(params)
        for p in self.params:
            value = params.get(p.name, p.default)
            if isinstance(value, str) and p.type is not str:
                value = parse_param_value(self.name, p, value)
            if p.name in params:  # (the defaults are right by construction)
                value = checked_param_value(self.name, p, value)
            if p.choices is not None and value not in p.choices:
                raise TokendistError(f"{self.name}: parameter {p.name} must be one of {', '.join(map(str, p.choices))}")
            self.options[p.name] = value
        self.period = 1

    # ------------------------------------------------------------------ vectorised form
    def check_graph(self, graph) -> None:
        """Raise a clear :class:`TokendistError` when the protocol does not apply to ``graph``."""
        if "tree" in self.requires and not graph.is_tree:
            raise TokendistError(f"{self.name} needs a tree; {graph.spec or 'this graph'} is not one"
                                 " (see the protocol's parameters for a spanning-tree option)")
        if "connected" in self.requires and not graph.is_connected:
            raise TokendistError(f"{self.name} needs a connected graph; {graph.spec or 'this graph'} is not connected")

    def reset(self, graph, loads: np.ndarray, rng: np.random.Generator) -> None:
        """Prepare per-run state. Called once before the first step."""

    def step(self, t: int, graph, loads: np.ndarray) -> Step:
        """Perform synchronous step ``t`` (0-based) on ``graph`` from ``loads``; do not modify ``loads``."""
        raise NotImplementedError

    #: Whether :meth:`steps` takes the run's visited states (its ``seen``) and checks each state at
    #: a period boundary as the engine's loop does: a deterministic protocol then runs in blocks with
    #: cycle detection on.
    steps_find_cycles: ClassVar[bool] = False

    def steps(self, t: int, k: int, graph, loads: np.ndarray, block: np.ndarray, moved: np.ndarray,
              messages: np.ndarray, stop_idle: bool, seen=None) -> tuple[int, str] | None:
        """Optional: up to ``k`` steps from step ``t`` in one call (the engine's block loop,
        :mod:`tokendist.engine._batch`); None (the default) when the protocol cannot, for this call.

        Writes the loads after each step into the rows ``block[0..done-1]`` of the ``(k, n)`` int64
        buffer, each step's tokens moved and messages into ``moved[b]`` and ``messages[b]`` (what
        :meth:`step` would report), and stops right after a step that moved nothing when
        ``stop_idle`` (the engine then asks :meth:`is_stable`; a kernel that can tell
        :meth:`is_stable`'s answer itself may stop only where it would be true). Afterwards the protocol is exactly as
        after ``done`` calls of :meth:`step`. Only for steps whose feasibility the sign of the new
        loads tells (no flows or outflow needed: the engine checks that no load went below zero).
        Returns ``(done, variant)``, ``variant`` the kernel :meth:`step` would report for each step;
        ``done`` 0 (a protocol that stops before a step it leaves to :meth:`step`) declines as None does:
        the run goes on step by step.

        ``seen`` (only for a protocol with :attr:`steps_find_cycles`, on a run that detects cycles) is
        the run's :class:`~tokendist.engine._cycles.CycleTable`: before each step ``t + b`` at a
        multiple of :attr:`period` the kernel calls :func:`~tokendist.engine._cycles.seen_before` on
        the loads and on the bytes :meth:`state_key` would return, and returns ``done = b`` (0
        included) when the state was seen, the protocol exactly as after ``t + b`` steps.
        """
        return None

    def is_stable(self, graph, loads: np.ndarray) -> bool | None:
        """True when no future step can move a token (a fixed point of the rule); None if unknown."""
        return None

    def state_key(self) -> bytes | np.ndarray | tuple | None:
        """The protocol's internal state, for cycle detection (stateless: b"").

        ``bytes``, or a numpy array (or tuple of arrays, their bytes one after another) that the
        engine hashes at once where it lies, with no copy (:mod:`tokendist.engine._cycles`); one
        form for the whole run. None means a state that cannot repeat (e.g. one that includes the
        clock): not hashed.
        """
        return b""

    def report(self) -> dict:
        """Protocol-specific figures for the run's JSON (IOUs, marked tokens, phase times, ...)."""
        return {}

    # ------------------------------------------------------------------ per-node form
    #: Number of exchange rounds before a node decides (0: the protocol has no node form).
    exchange_rounds: ClassVar[int] = 0

    def contacts(self, t: int, node: int, neighbours: np.ndarray) -> np.ndarray:
        """The neighbours ``node`` talks to in step ``t`` (all of them by default)."""
        return neighbours

    def publish(self, rnd: int, t: int, node: int, view) -> Any:
        """The value ``node`` sends to each contact in exchange round ``rnd`` of step ``t``."""
        raise NotImplementedError

    def decide(self, t: int, node: int, view) -> dict:
        """Tokens ``node`` sends to each contact in step ``t``: ``{neighbour: count}``."""
        raise NotImplementedError

    # ------------------------------------------------------------------ description
    @classmethod
    def describe(cls) -> dict:
        return {
            "name": cls.name,
            "title": cls.title,
            "paper": cls.paper,
            "model": cls.model,
            "requires": sorted(cls.requires),
            "randomized": cls.randomized,
            "divisible": cls.divisible,
            "may_go_negative": cls.may_go_negative,
            "dynamic": cls.dynamic,
            "static_reason": "" if cls.dynamic else cls.static_reason,
            "uses_speeds": cls.uses_speeds,
            "node_rule": cls.exchange_rounds > 0,
            "summary": (cls.__doc__ or "").strip().splitlines()[0] if cls.__doc__ else "",
            "params": [{"name": p.name, "default": p.default, "help": p.help,
                        **({"choices": list(p.choices)} if p.choices else {})} for p in cls.params],
        }

    def __repr__(self) -> str:
        opts = ", ".join(f"{k}={v!r}" for k, v in self.options.items())
        return f"{type(self).__name__}({opts})"


PROTOCOLS: Registry[type[Protocol]] = Registry("algorithm")


def register_protocol(cls: type[Protocol]) -> type[Protocol]:
    """Class decorator: register ``cls`` under ``cls.name``."""
    if not cls.name:
        raise ValueError(f"{cls.__name__} has no name")
    if cls.model not in MODELS:
        raise ValueError(f"{cls.__name__}: unknown model {cls.model!r}")
    unknown = set(cls.requires) - set(REQUIREMENTS)
    if unknown:
        raise ValueError(f"{cls.__name__}: unknown requirements {unknown}")
    PROTOCOLS.add(cls.name, cls)
    return cls


def parse_param_value(algo: str, p: Param, text: str):
    """``text`` as a value of parameter ``p`` of protocol ``algo``; a one-line error if it is not one.

    A parser function may say what it expects in a ``description`` attribute (else its name is used).
    """
    if p.type is bool:
        low = text.strip().lower()
        if low in ("1", "true", "yes", "on"):
            return True
        if low in ("0", "false", "no", "off"):
            return False
        raise TokendistError(f"{algo}: parameter {p.name} expects true or false, got {text!r}")
    if p.type is int and not re.fullmatch(r"[+-]?[0-9]+", text.strip()):
        # ASCII digits only (int() also takes '1_0' and non-ASCII digits).
        raise TokendistError(f"{algo}: parameter {p.name} expects an integer, got {text!r}")
    if p.type is not str and (not text.isascii() or "_" in text):
        # Numbers (float and the numeric parsers) in ASCII too: float() read 'c=1_0' as 10, 'c=\u0664' as 4.
        expects = getattr(p.type, "description", "a number written in ASCII digits")
        raise TokendistError(f"{algo}: parameter {p.name} expects {expects}, got {text!r}")
    try:
        return p.type(text)
    except (TypeError, ValueError, OverflowError):
        expects = getattr(p.type, "description", getattr(p.type, "__name__", "a value"))
        raise TokendistError(f"{algo}: parameter {p.name} expects {expects}, got {text!r}") from None


#: Integer parameters beyond this magnitude are refused (numba kernels take int64; no threshold,
#: delay or step of a run needs more).
PARAM_INT_LIMIT = 2**62


def checked_param_value(algo: str, p: Param, value):
    """``value`` if it has the type and range parameter ``p`` takes, else a one-line TokendistError.

    Booleans only as booleans (``True`` is an int to Python: refused for an int parameter); ints
    within :data:`PARAM_INT_LIMIT`; floats finite; ``p.minimum`` / ``p.maximum`` respected.
    """
    def bad(expects):
        return TokendistError(f"{algo}: parameter {p.name} expects {expects}, got {value!r}")

    if p.type is bool:
        if not isinstance(value, (bool, np.bool_)):
            raise bad("true or false")
        return bool(value)
    if p.type is str:
        if not isinstance(value, str):
            raise bad("a string")
        return value
    if isinstance(value, str) and p.type not in (int, float):
        return value  # what a custom parser made of the text (threads=auto)
    if isinstance(value, (bool, np.bool_)) or not isinstance(value, numbers.Real):
        raise bad("an integer" if p.type is int else "a number")
    if p.type is int:
        if not isinstance(value, numbers.Integral):
            raise bad("an integer")
        value = int(value)
        if abs(value) > PARAM_INT_LIMIT:
            raise bad("an integer of magnitude at most 2**62")
    elif not math.isfinite(float(value)):
        raise bad("a finite number")
    if p.minimum is not None and value < p.minimum:
        raise bad(f"a value >= {p.minimum:g}")
    if p.maximum is not None and value > p.maximum:
        raise bad(f"a value <= {p.maximum:g}")
    return value

