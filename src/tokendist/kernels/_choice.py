"""The faster of two kernels that give the same results, chosen by timing the run's own steps.

Parallel kernels are opt-in or chosen by a measured check, since a 2-core machine's second core
is often busy (docs/design/kernels.md). :class:`MeasuredChoice` is that check. A protocol
hands it a serial and a threaded kernel that give the same results bit for bit; it runs one or
the other, times every call and settles on the faster. The choice changes what a step costs,
never what it computes, so a run stays reproducible from its seed whatever the machine is doing.
The timings stay inside the object: they never reach a trace, a report or a cycle key.

The schedule of calls:

1. a trial: the two kernels alternate, serial first, until each has run ``1 + window`` times.
   The first call of each compiles it (numba) and fills its caches, so its time is not counted;
2. then the kernel with the smaller median of its last ``window`` timings runs, except that every
   ``explore_every``-th call runs the other one, whose timings would otherwise go stale. When
   another process takes the second core while the threaded kernel is chosen, its own timings
   grow and the choice moves to the serial kernel; when the core is free again, an exploring
   call finds the threaded kernel faster and the choice moves back.

The trial runs whole steps of the run itself, so it costs only the difference between the two
kernels on ``window`` steps, plus the compilation of both.

Who may race threads. Numba's threading layer on this Linux machine is GNU OpenMP, which is not
fork-safe: once a process has run a parallel kernel, a child it forks afterwards is terminated
as soon as the child runs one ("fork() called from a process already using GNU OpenMP"; numba's
threading-layer docs). A pool of workers forked after a large run, each running protocols,
would die. A library must not set that trap in its host program unasked. So ``threads=auto``
races kernels only in a process that allows it (:func:`allow_auto_threads`): the ``tokendist``
command does, for the length of the command (it forks, for ``tokendist bench``, only before a
kernel runs); a program using the library calls ``tokendist.allow_auto_threads()`` when it
will not fork afterwards. Everywhere else ``auto`` runs the serial kernel, as ``threads=1`` does.
"""

from __future__ import annotations

import os

import statistics
import time
from collections import deque

from ..engine import Param

__all__ = ["MeasuredChoice", "SERIAL", "THREADED", "AUTO", "AUTO_MIN_NODES", "threads_or_auto", "auto_threads_param",
           "allow_auto_threads", "auto_threads_allowed", "reference_is_cheaper", "reference_seconds", "why_reference",
           "avoided_compiling",
           "COMPILE_SECONDS", "REFERENCE_STEP_SECONDS", "REFERENCE_NODE_SECONDS"]

SERIAL, THREADED = 0, 1

#: The ``threads`` value that asks for a measured choice.
AUTO = "auto"

#: Below this many nodes ``threads=auto`` runs the serial kernel without a trial: a step is then
#: well under a millisecond, and the threaded kernel's first compilation (about 30 s with a cold
#: numba cache) would outweigh anything the run could gain.
AUTO_MIN_NODES = 1 << 18


_auto_allowed = False

# Compiled kernels or the reference step: the crossover (docs/design/kernels.md, "Small runs").
# A run spends at most max_steps * (REFERENCE_STEP_SECONDS + n * REFERENCE_NODE_SECONDS) on the
# numpy reference, engine included (measured on torus:16x16 and torus:64x64, every integer protocol
# with a kernel parameter: at most 150 us a step at n = 256, 190-610 us at n = 4096). A kernel that is
# neither compiled in this process nor in numba's on-disk cache costs at least COMPILE_SECONDS of
# CPU to compile (the cheapest step kernel measured cold here; most take 5-40 s). Below that, a run
# whose kernel would compile runs the reference instead.

#: Upper bound of the reference's cost per step, engine included, besides the per-node part.
REFERENCE_STEP_SECONDS = 150e-6
#: Upper bound of the reference's cost per node and step.
REFERENCE_NODE_SECONDS = 120e-9
#: Lower bound of the cold compilation of one step kernel (CPU seconds on this machine).
COMPILE_SECONDS = 2.0
#: ``TOKENDIST_SMALL_RUN_REFERENCE=0`` keeps the kernels on every run (the test suite sets it, so
#: that what a test sees does not depend on which kernels numba's cache holds).
SMALL_RUN_ENV = "TOKENDIST_SMALL_RUN_REFERENCE"


def reference_seconds(n: int, max_steps: int) -> float:
    """Upper bound of a run's time on the numpy reference step (the constants above)."""
    return max_steps * (REFERENCE_STEP_SECONDS + n * REFERENCE_NODE_SECONDS)


def reference_is_cheaper(protocol, graph, max_steps: int, *, dynamics=None) -> bool:
    """Whether a run should avoid compiling kernels: True when the run would take less time on
    the reference step than compiling one kernel costs.

    Only where the reference gives the same run bit for bit: an integer protocol unless it says
    otherwise (``reference_exact = False``, or a method ``reference_exact(graph)`` for the graphs
    where it is), a real-valued one only where it says so (``diffusion``, ``fos``, ``sos``: their
    numpy steps add the floats in the serial kernels' order, :mod:`tokendist.kernels._rows`) and the protocol runs its compiled kernels by default
    (``kernel=numba`` with ``numpy`` as its other choice). Whether a kernel would in fact compile is
    seen at its first call (:func:`tokendist.kernels._report.avoid_compiling`): with a warm cache the
    run keeps its kernels.
    """
    if os.environ.get(SMALL_RUN_ENV, "1") == "0":
        return False
    # Integer protocols are exact unless they say otherwise; a real-valued one only where it says so.
    exact = getattr(protocol, "reference_exact", not protocol.divisible)
    exact = exact(graph) if callable(exact) else exact
    if not exact or protocol.options.get("kernel") != "numba":
        return False
    param = next((p for p in protocol.params if p.name == "kernel"), None)
    if param is None or "numpy" not in (param.choices or ()):
        return False
    return reference_seconds(graph.n, max_steps) <= COMPILE_SECONDS


_AVOIDED = ", a small run, instead of compiling "


def why_reference(kernel: str, reference: str = "numpy") -> str:
    """The note on a run's reference variant when ``reference`` (the numpy step, or a message
    protocol's per-node handlers) ran instead of compiling ``kernel``."""
    return reference + _AVOIDED + kernel


def avoided_compiling(variants: dict) -> bool:
    """Whether a run's ``variants`` (``RunResult.variants``) say it took the reference instead of
    compiling a kernel (:func:`why_reference`)."""
    return any(_AVOIDED in name for name in variants)


def allow_auto_threads(allowed: bool = True) -> bool:
    """Let ``threads=auto`` run threaded kernels in this process (or stop it); returns the previous setting.

    Call it in a program that will not fork workers after running a protocol: once numba's GNU
    OpenMP layer has run a parallel kernel, a child forked by the process is terminated when it
    runs one too (later pools: the ``spawn`` or ``forkserver`` start method of
    :mod:`multiprocessing`). Results do not depend on it: the raced kernels give the same bits.

    Examples
    --------
    >>> import tokendist as td
    >>> previous = td.allow_auto_threads()
    >>> r = td.simulate("torus:8x8", "sos-iou", "point:1000", seed=1)   # small: serial anyway
    >>> td.allow_auto_threads(previous)
    True
    """
    global _auto_allowed
    previous, _auto_allowed = _auto_allowed, bool(allowed)
    return previous


def auto_threads_allowed() -> bool:
    """Whether ``threads=auto`` may run threaded kernels in this process (:func:`allow_auto_threads`)."""
    return _auto_allowed


def threads_or_auto(text) -> int | str:
    """A ``threads`` value: ``auto``, or an integer (checked to be positive by the protocol)."""
    if isinstance(text, str) and text.strip().lower() == AUTO:
        return AUTO
    return int(text)


threads_or_auto.description = "a positive integer or auto"  # (parse_param_value's error message)


def auto_threads_param(where: str) -> Param:
    """The ``threads`` parameter, default ``auto``; ``where`` says what ``auto`` does for the protocol."""
    return Param("threads", threads_or_auto, AUTO, f"auto: {where}, where threads are allowed (the tokendist "
                 "command, or a program after tokendist.allow_auto_threads()), else serial; 1: the serial kernel; "
                 "k > 1: a numba parallel kernel on min(k, NUMBA_NUM_THREADS) threads; the same results in all cases")


class MeasuredChoice:
    """Chooses between a serial and a threaded kernel of the same step by their measured times.

    Parameters
    ----------
    window : int
        Timings kept per kernel, the latest ones; a kernel's cost is their median.
    explore_every : int
        After the trial, every ``explore_every``-th call runs the kernel not chosen.
    clock : callable
        Seconds as a float (``time.perf_counter``; tests pass a fake clock).

    Examples
    --------
    >>> ticks = iter([0.0, 1.0, 1.0, 1.5] * 20)   # each serial call takes 1 s, each threaded 0.5 s
    >>> choice = MeasuredChoice(window=2, explore_every=4, clock=lambda: next(ticks))
    >>> [choice.run(lambda: "serial", lambda: "threaded") for _ in range(9)]
    ['serial', 'threaded', 'serial', 'threaded', 'serial', 'threaded', 'threaded', 'threaded', 'threaded']
    >>> choice.calls
    [3, 6]
    """

    def __init__(self, window: int = 3, explore_every: int = 16, clock=time.perf_counter):
        if window < 1 or explore_every < 2:
            raise ValueError("window must be at least 1 and explore_every at least 2")
        self.window = window
        self.explore_every = explore_every
        self._clock = clock
        self.timings = (deque(maxlen=window), deque(maxlen=window))
        #: Calls of each kernel so far, ``[serial, threaded]``.
        self.calls = [0, 0]
        self._after_trial = 0

    def in_trial(self) -> bool:
        """True while a kernel still lacks its warm-up call or ``window`` timings."""
        return min(self.calls) <= self.window

    def faster(self) -> int:
        """:data:`SERIAL` or :data:`THREADED`: the smaller median of the kept timings (ties: serial)."""
        serial, threaded = (statistics.median(t) if t else float("inf") for t in self.timings)
        return THREADED if threaded < serial else SERIAL

    def pick(self) -> int:
        """Which kernel the next call runs (see the module's schedule)."""
        if self.in_trial():
            return SERIAL if self.calls[SERIAL] <= self.calls[THREADED] else THREADED
        self._after_trial += 1
        best = self.faster()
        return 1 - best if self._after_trial % self.explore_every == 0 else best

    def record(self, which: int, seconds: float) -> None:
        """Count a call of kernel ``which`` that took ``seconds``; the first call of each is not timed."""
        self.calls[which] += 1
        if self.calls[which] > 1:
            self.timings[which].append(seconds)

    def run(self, serial, threaded):
        """Call ``serial()`` or ``threaded()`` as :meth:`pick` says, time it, and return its result."""
        which = self.pick()
        start = self._clock()
        result = (threaded if which == THREADED else serial)()
        self.record(which, self._clock() - start)
        return result
