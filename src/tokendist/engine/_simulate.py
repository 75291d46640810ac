"""The synchronous executor: run a protocol step by step, check the model, record the metrics.

:func:`simulate` is the engine behind ``tokendist run`` and ``tokendist compare``. Each step every
node decides from the loads at the start of the step and all transfers happen at once (the model
of every synchronous algorithm in the five papers). The engine, not the protocol, guarantees:

* tokens are conserved (checked every step; a violation is a :class:`ConservationError`);
* no node sends more tokens than it holds: by default such a step stops the run with an
  :class:`InfeasibleStepError` naming step, node and rule; with ``allow_infeasible=True`` it is
  counted in ``infeasible_steps`` and the run goes on with negative loads;
* with ``check=True``, the communication model (single-port: the edges used form a matching;
  multi-port: at most one token per edge per step) on every step where the protocol reports flows.

Stopping: ``max_steps``, ``until_discrepancy``, ``until_local_discrepancy``, the protocol's own
fixed point (``is_stable``) and, for deterministic protocols on static networks, a repeated state at
a period boundary, reported as ``fixed-point`` or ``cycle`` (never looped on forever); a real-valued
scheme whose float64 state repeats with load still moving reports ``rounding-cycle``.
"""

from __future__ import annotations

import math
import numbers
import time
from dataclasses import dataclass, field
from typing import Callable

import numpy as np

from .._files import DATA_FILE_LIMIT, read_text
from .._random import stream
from ..errors import ConservationError, InfeasibleStepError, TokendistError
from ..kernels._choice import reference_is_cheaper, why_reference
from ..kernels._report import _last as _report_last
from ..kernels._report import REFERENCE, CompileAvoided, avoid_compiling
from ..graphs import Graph, make_graph
from ._cycles import CycleTable, key_function
from ._initial import make_loads, parse_range
from ._injection import stream_summary
from ._metrics import SUMMARY_METRICS, at_most, exact_total, measure, sum_min, target_reached
from ._pass import FLOWS as _FLOWS
from ._pass import OUTFLOW as _OUTFLOW
from ._pass import SIGN as _SIGN
from ._pass import StepPass, outflow_of, small_run, summary_row
from ._batch import block_steps, run_blocks
from ._protocol import PROTOCOLS, Protocol
from ._simulate_events import event_driven, event_source, run_event_steps
from ._user import make_protocol

__all__ = ["simulate", "RunResult", "make_speeds", "DEFAULT_MAX_STEPS", "TRACE_METRICS", "BACKENDS", "register_backend",
           "step_overhead", "prepare_run"]

DEFAULT_MAX_STEPS = 10_000
#: Metrics recorded in the per-step trace.
TRACE_METRICS = ("discrepancy", "max", "min", "local_discrepancy", "l1_error", "l2_error", "linf_error",
                 "max_weighted_load", "potential")
# Cycle detection hashes the whole state at each period boundary; beyond this size the O(n) hash
# would cost as much as the step itself, so large runs rely on is_stable and the stopping rules.
_CYCLE_DETECTION_MAX_N = 200_000
#: Executors other than this module's loop, by ``backend`` name (``mpi``: :mod:`tokendist.engine.mpi`).
BACKENDS: dict[str, Callable] = {}


def register_backend(name: str, run: Callable) -> None:
    """Make ``simulate(..., backend=name)`` call ``run`` with simulate's arguments."""
    BACKENDS[name] = run


_INT64_MAX = 2**63 - 1
_NO_NODES = np.zeros(0, dtype=np.int64)


def _check_integer_range(protocol: Protocol, loads: np.ndarray) -> None:
    """One line, before the first step, for loads whose total int64 cannot hold or that lie beyond
    the protocol's declared exact range (:attr:`Protocol.exact_load_limit`)."""
    if loads.size == 0:
        return
    top = max(int(loads.max()), -int(loads.min()))
    limit = protocol.exact_load_limit
    if limit is not None and top >= limit:
        raise TokendistError(f"{protocol.name} rounds flows computed in float64, exact for loads below "
                             f"2**{limit.bit_length() - 1}; a load is {top} (scale the loads down)")
    total = exact_total(loads)
    if not -_INT64_MAX <= total <= _INT64_MAX:
        raise TokendistError(f"the loads total {total} tokens, more than int64 holds (2**63 - 1 = {_INT64_MAX})")


def _check_load_limit(protocol, loads, low, limit, t):
    top = max(int(loads.max()), -int(low))
    if top >= limit:
        raise TokendistError(f"{protocol.name} rounds flows computed in float64, exact for loads below "
                             f"2**{limit.bit_length() - 1}; a load reached {top} after step {t} (scale the loads down)")


@dataclass
class RunResult:
    """Everything one run produced.

    ``trace`` maps column names (``step``, ``tokens_moved``, ``messages`` and each of
    :data:`TRACE_METRICS`) to arrays, one entry per recorded step (step 0 is the initial state).
    """

    graph: Graph
    algorithm: str
    params: dict
    seed: int | None
    steps: int
    stop_reason: str
    tokens: float
    initial: dict
    final: dict
    tokens_moved: float
    messages: int
    infeasible_steps: int
    loads: np.ndarray
    initial_loads: np.ndarray
    trace: dict
    report: dict = field(default_factory=dict)
    variants: dict = field(default_factory=dict)
    dynamics: dict | None = None
    seconds: float = 0.0
    cycle_length: int | None = None
    load_history: np.ndarray | None = None
    #: Wall-clock seconds of stepping at each recorded step of the trace (0 at step 0: building the
    #: graph, ``reset`` and compilation are in ``seconds`` only); kept apart from ``trace`` so that a
    #: trace stays the same for the same seed.
    clock: np.ndarray | None = None
    #: With an injection: what arrived and left (``injection``) and the stream's metrics
    #: (:func:`tokendist.engine._injection.stream_summary`: backlog, peak load, time-averaged discrepancy).
    stream: dict | None = None
    #: Partitioned runs (``backend="mpi"``): ranks, partition, edge cut, halo bytes, time per step.
    ranks: dict | None = None
    #: Tokens sent but not yet delivered when the run stopped (message-passing protocols); ``loads``
    #: holds the others: ``loads.sum() + in_transit == tokens``.
    in_transit: int = 0

    def steps_to(self, metric: str, level: float) -> int | None:
        """First recorded step at which ``metric <= level`` (None if never)."""
        col = self.trace[metric]
        hit = np.flatnonzero(at_most(col, level))  # (exact for an int64 column against a float level)
        return int(self.trace["step"][hit[0]]) if hit.size else None

    def to_json(self) -> dict:
        """The run summary as plain JSON-able data (the ``--json`` output of ``tokendist run``)."""
        g = self.graph
        return {
            "graph": {"spec": g.spec, "n": g.n, "m": g.m, "heterogeneous": g.speeds is not None},
            "algorithm": self.algorithm,
            "params": {k: (v if isinstance(v, (int, float, str, bool)) or v is None else str(v))
                       for k, v in self.params.items()},
            "seed": self.seed,
            "steps": self.steps,
            "stop_reason": self.stop_reason,
            "cycle_length": self.cycle_length,
            "tokens": _plain(self.tokens),
            # Conservation: tokens == sum(final loads) + in_transit (tokens in flight at the stop).
            "in_transit": _plain(self.in_transit),
            "initial": self.initial,
            "final": self.final,
            "tokens_moved": _plain(self.tokens_moved),
            "messages": int(self.messages),
            "infeasible_steps": int(self.infeasible_steps),
            "dynamics": self.dynamics,
            "stream": self.stream,
            "report": self.report,
            "variants": self.variants,
            "seconds": round(self.seconds, 4),
            **({} if self.ranks is None else {"ranks": self.ranks}),
        }


def _plain(x):
    if isinstance(x, np.generic):
        return x.item()
    if isinstance(x, float) and x.is_integer() and abs(x) < 2**53:
        return int(x)
    return x


def _column(values) -> np.ndarray:
    # A trace column of Python ints past int64 (tokens moved over a long run of loads near 2**62):
    # np.asarray made it float64, losing the last digits; it stays exact as Python ints.
    col = np.asarray(values)
    if col.dtype.kind == "f" and values and not any(isinstance(x, (float, np.floating)) for x in values):
        return np.array(values, dtype=object)
    return col


def make_speeds(spec, graph, seed=None) -> np.ndarray:
    """Node speeds from ``uniform:A..B`` (drawn from the run's ``speeds`` stream) or ``file:PATH``.

    Every speed must be a finite positive number (one per node); anything else, a spec that is not
    a string or an array, is refused in one line naming the argument.
    """
    if not isinstance(spec, str):
        if isinstance(spec, (bool, numbers.Number)) or spec is None:
            raise TokendistError(f"speeds must be a spec string (uniform:A..B, file:PATH) or one number per node, "
                                 f"got {spec!r}")
        try:
            values = np.asarray(spec, dtype=np.float64)
        except (TypeError, ValueError):
            raise TokendistError(f"speeds must be numbers, one per node, got {type(spec).__name__}") from None
        return _checked_speeds(values, graph, "speeds")
    name, _, arg = spec.partition(":")
    if name == "uniform":
        try:
            lo, hi = parse_range(spec, arg, float)
        except TokendistError as exc:
            raise TokendistError(f"bad speeds {spec!r}: expected uniform:A..B with numbers A <= B") from exc
        if not (np.isfinite(lo) and np.isfinite(hi)):
            raise TokendistError(f"bad speeds {spec!r}: A and B must be finite")
        if lo <= 0:
            raise TokendistError(f"bad speeds {spec!r}: speeds must be positive")
        return stream(seed, "speeds").uniform(lo, hi, size=graph.n)
    if name == "file":
        values = []
        for lineno, line in enumerate(read_text(arg, "speeds", DATA_FILE_LIMIT).splitlines(), 1):
            text = line.split("#", 1)[0].strip()
            if not text:
                continue
            try:
                if not text.isascii() or "_" in text:  # float() also reads non-ASCII digits, and '1_0' as 10
                    raise ValueError(text)
                values.append(float(text))
            except ValueError:
                raise TokendistError(f"{arg}:{lineno}: {text[:40]!r} is not a number") from None
        return _checked_speeds(np.array(values, dtype=np.float64), graph, arg)
    raise TokendistError(f"bad speeds {spec!r}: expected uniform:A..B or file:PATH")


def _checked_speeds(values: np.ndarray, graph, where: str) -> np.ndarray:
    if values.shape != (graph.n,):
        raise TokendistError(f"{where}: {values.size} speeds for a graph of {graph.n} nodes")
    bad = np.flatnonzero(~(np.isfinite(values) & (values > 0)))
    if bad.size:
        raise TokendistError(f"{where}: speed {float(values[bad[0]])!r} of node {bad[0]}: speeds must be finite "
                             "and positive")
    return values


def _outflow(graph: Graph, flows: np.ndarray) -> np.ndarray:
    # Only the edges that carry something (a single-port step uses a small fraction of them), summed
    # exactly for integer flows (float64 sums missed a node sending one token more than 2**54 it held).
    return outflow_of(graph.u, graph.v, graph.n, flows)


def _check_model(protocol: Protocol, graph: Graph, flows: np.ndarray, t: int) -> None:
    used = flows != 0
    if protocol.model == "single-port":
        deg = np.bincount(np.concatenate([graph.u[used], graph.v[used]]), minlength=graph.n)
        if deg.size and deg.max() > 1:
            node = int(np.argmax(deg))
            raise ConservationError(f"{protocol.name} broke the single-port model at step {t}: node {node} "
                                    f"exchanged with {int(deg[node])} neighbours")
    elif protocol.model == "multi-port":
        if np.abs(flows).max(initial=0) > 1:
            e = int(np.argmax(np.abs(flows)))
            raise ConservationError(f"{protocol.name} broke the multi-port model at step {t}: "
                                    f"{flows[e]} tokens on edge ({graph.u[e]}, {graph.v[e]})")


def step_overhead(graph: Graph, loads: np.ndarray, out, *, record: bool = True, tol=0):
    """The engine's own work on one step of :func:`simulate`, for ``tokendist bench``.

    What the loop below does on a step of a static run with no stopping rule, without raising:
    one call of the engine's pass (:mod:`tokendist.engine._pass`): the conservation sum, the
    feasibility check (from the flows or outflow the step reports, else the sign of the new
    loads) and, with ``record``, the trace metrics of the new loads. Returns the sum of the new loads.
    """
    new = out.loads
    if graph.n == 0 or new.ndim != 1:
        return new.sum()
    cached = _OVERHEAD_PASS[0]
    if cached is None or cached.graph is not graph or cached.kind != new.dtype.kind:
        cached = _OVERHEAD_PASS[0] = StepPass(graph, new.dtype, 2, small=False)
    cached.count = 0
    sent, flows = out.outflow, out.flows
    mode = _OUTFLOW if sent is not None else _FLOWS if flows is not None else _SIGN
    new_sum, _, _ = cached.check(new, loads, mode, sent if sent is not None else flows, tol, record)
    return new_sum


# step_overhead's buffers (two float64 per node), made once per graph, not once per step.
_OVERHEAD_PASS: list = [None]


def _summary(graph, loads, max_steps):
    # measure(graph, loads): the same values, through the engine's pass when it applies.
    if graph.n == 0 or loads.ndim != 1:
        return measure(graph, loads)
    return summary_row(graph, loads, small_run(graph, max_steps))


def _check_count(name, value, minimum):
    # An int (numpy's too), not a bool or a float: a clear error rather than a TypeError deep in
    # the step loop (simulate(..., max_steps=1.5) was one).
    if not isinstance(value, numbers.Integral) or isinstance(value, bool) or value < minimum:
        raise TokendistError(f"{name} must be an integer >= {minimum}, got {value!r}")
    if value > _INT64_MAX:  # steps are counted in int64 (max_steps=2**63 ran as if it fitted)
        raise TokendistError(f"{name} must be at most 2**63 - 1, got {value}")


def prepare_run(graph, algo, init, *, seed, params, speeds, dynamics, max_steps, record_every, until_discrepancy,
                until_local_discrepancy, refuse=None):
    """The graph, the protocol, the initial loads and the step limit of a run, every argument checked.

    Shared by :func:`simulate` and the partitioned executor (:mod:`tokendist.engine.mpi`), so that
    both refuse the same inputs with the same line. ``refuse(protocol)`` may return a reason (one
    line) for an executor that cannot run that protocol.
    """
    graph = make_graph(graph, seed=seed)
    if speeds is not None:
        graph = graph.with_speeds(make_speeds(speeds, graph, seed))
    protocol = make_protocol(algo, params)
    why = refuse(protocol) if refuse is not None else None
    if why is not None:
        raise TokendistError(why)
    if speeds is not None and not protocol.uses_speeds:
        users = ", ".join(n for n in PROTOCOLS.names() if PROTOCOLS.get(n).uses_speeds)
        raise TokendistError(f"{protocol.name} does not use node speeds (speeds apply to {users})")
    protocol.check_graph(graph)
    if dynamics is not None and not protocol.dynamic:
        why = f": {protocol.static_reason}" if protocol.static_reason else ""
        raise TokendistError(f"{protocol.name} does not run on dynamic networks{why}")
    loads = make_loads(init, graph, seed)
    if protocol.divisible:
        loads = loads.astype(np.float64)
    elif loads.dtype.kind == "f":
        raise TokendistError(f"{protocol.name} moves indivisible tokens; initial loads must be integers")
    else:
        _check_integer_range(protocol, loads)
    if max_steps is None:
        max_steps = DEFAULT_MAX_STEPS
    _check_count("max_steps", max_steps, 0)
    _check_count("record_every", record_every, 1)
    for name, level in (("until_discrepancy", until_discrepancy), ("until_local_discrepancy", until_local_discrepancy)):
        if level is not None and not (isinstance(level, numbers.Real) and not isinstance(level, bool) and level >= 0
                                      and math.isfinite(level)):
            raise TokendistError(f"{name} must be a finite number >= 0, got {level!r}")

    return graph, protocol, loads, max_steps


def simulate(graph, algo, init, *, seed: int | None = None, params: dict | None = None,
             max_steps: int | None = None, until_discrepancy: float | None = None,
             until_local_discrepancy: float | None = None, record_every: int = 1,
             allow_infeasible: bool = False, check: bool = False, dynamics=None, injection=None,
             speeds=None, progress: Callable[[int, int], None] | None = None,
             detect_cycles: bool = True, keep_loads_every: int | None = None, backend: str = "local",
             partition: str = "contiguous", event_path: bool | None = None) -> RunResult:
    """Run one protocol on one graph from one initial distribution.

    Parameters
    ----------
    graph : str or Graph
        A topology spec (built with the run's seed) or a graph.
    algo : str or Protocol
        A registered algorithm name (see ``tokendist algos``) or an instance.
    init : str or array_like
        An initial-distribution spec (``point:1000``) or the loads.
    seed : int, optional
        The one seed of the run; sub-streams for topology, loads, speeds, protocol, dynamics.
    params : dict, optional
        Protocol parameters (values may be strings, parsed by the protocol).
    max_steps : int, optional
        Step limit (default :data:`DEFAULT_MAX_STEPS`).
    until_discrepancy, until_local_discrepancy : float, optional
        Stop as soon as the (local) discrepancy is at most this.
    record_every : int
        Record the trace every k steps (and always the first and the last).
    allow_infeasible : bool
        Record steps where a node sends more than it holds and go on (loads may go negative).
    check : bool
        Verify the communication model on every step that reports flows.
    dynamics : Dynamics, optional
        Changes the network every step (edge failures, mobility, a graph sequence).
    injection : optional
        Token injection/consumption (an object with ``reset(graph, rng)`` and
        ``apply(t, loads) -> (loads, injected, consumed)``).
    speeds : str or array_like, optional
        Node speeds (``uniform:0.8..1.2``, ``file:PATH`` or an array).
    progress : callable, optional
        ``progress(step, max_steps)`` called now and then.
    keep_loads_every : int, optional
        Keep a copy of the loads every k steps in ``RunResult.load_history`` (row 0: initial).
    backend : str
        ``local`` (this process) or ``mpi``: the graph partitioned over the ranks of
        ``MPI.COMM_WORLD`` (call on every rank; see :mod:`tokendist.engine.mpi`). Same result.
    partition : str
        With ``backend="mpi"``: ``contiguous`` node ranges or ``metis``.
    event_path : bool, optional
        Run a message protocol on the event-driven path (:mod:`._simulate_events`: same results,
        no per-time-unit work over all nodes; the trace is computed when first read). Default:
        whenever it applies (static network, no injection, no load history); False forces the
        synchronous loop (the reference the tests compare it with).

    Returns
    -------
    RunResult

    Examples
    --------
    >>> r = simulate("ring:8", "diffusion", "point:80", max_steps=200)
    >>> r.tokens, round(r.final["discrepancy"], 6) < 1e-3  # real loads: the total is a float
    (80.0, True)
    """
    if backend != "local":
        if backend not in BACKENDS:
            raise TokendistError(f"unknown backend {backend!r}; choose one of local, {', '.join(BACKENDS)}")
        return BACKENDS[backend](graph, algo, init, seed=seed, params=params, max_steps=max_steps,
                                 until_discrepancy=until_discrepancy, until_local_discrepancy=until_local_discrepancy,
                                 record_every=record_every, allow_infeasible=allow_infeasible, check=check,
                                 dynamics=dynamics, injection=injection, speeds=speeds, progress=progress,
                                 detect_cycles=detect_cycles, keep_loads_every=keep_loads_every,
                                 partition_method=partition)
    started = time.perf_counter()
    # The arguments' types, once, at the boundary (a string for dynamics= was an AttributeError
    # deep in the loop, keep_loads_every=0 was accepted).
    if dynamics is not None and not all(hasattr(dynamics, a) for a in ("reset", "graph_at", "describe")):
        raise TokendistError(f"dynamics must be a Dynamics object (EdgeFailures, Mobility, GraphSequence), "
                             f"got {dynamics!r}")
    if injection is not None and not all(hasattr(injection, a) for a in ("reset", "apply")):
        raise TokendistError(f"injection must be an object with reset(graph, rng) and apply(t, loads), "
                             f"got {injection!r}")
    if keep_loads_every is not None:
        _check_count("keep_loads_every", keep_loads_every, 1)
    for name, flag in (("allow_infeasible", allow_infeasible), ("check", check)):
        if not isinstance(flag, (bool, np.bool_)):  # allow_infeasible="no" was true
            raise TokendistError(f"{name} must be True or False, got {flag!r}")
    graph, protocol, loads, max_steps = prepare_run(
        graph, algo, init, seed=seed, params=params, speeds=speeds, dynamics=dynamics, max_steps=max_steps,
        record_every=record_every, until_discrepancy=until_discrepancy, until_local_discrepancy=until_local_discrepancy)
    options = dict(seed=seed, max_steps=max_steps, until_discrepancy=until_discrepancy,
                   until_local_discrepancy=until_local_discrepancy, record_every=record_every,
                   allow_infeasible=allow_infeasible, check=check, dynamics=dynamics, injection=injection,
                   progress=progress, detect_cycles=detect_cycles, keep_loads_every=keep_loads_every,
                   event_path=event_path, started=started)
    explicit = "kernel" in protocol.__dict__.get("given", ())  # (vars: no per-run __getattr__ before reset)
    if explicit or not reference_is_cheaper(protocol, graph, max_steps, dynamics=dynamics):
        return _run(graph, protocol, loads, **options)
    # A small run with kernels not compiled yet: compiling would cost more than the whole run on
    # the reference step, which gives the same loads (tokendist.kernels._choice). The first call
    # of a kernel that would compile stops the attempt; the run is then made again from its start.
    avoid_compiling(True)
    try:
        return _run(graph, protocol, loads.copy(), **options)
    except CompileAvoided as exc:
        avoided = exc.label
    finally:
        avoid_compiling(False)
    chosen = protocol.options["kernel"]
    protocol.options["kernel"] = "numpy"
    try:
        result = _run(graph, protocol, loads, **options)
    finally:
        protocol.options["kernel"] = chosen
    result.params = dict(protocol.options)
    result.variants = {f"{name}: {why_reference(avoided)}" if name == REFERENCE or name.startswith("numpy") else name:
                       count for name, count in result.variants.items()}
    return result


def _run(graph, protocol, loads, *, seed, max_steps, until_discrepancy, until_local_discrepancy, record_every,
         allow_infeasible, check, dynamics, injection, progress, detect_cycles, keep_loads_every, event_path,
         started) -> RunResult:
    """The run itself, on arguments :func:`prepare_run` checked (see :func:`simulate`)."""

    initial_loads = loads.copy()
    protocol.reset(graph, loads.copy(), stream(seed, "protocol"))
    if dynamics is not None:
        dynamics.reset(graph, stream(seed, "dynamics"))
    if injection is not None:
        # Its own sub-stream: arrivals independent of edge failures drawn from "dynamics".
        injection.reset(graph, stream(seed, "injection"))

    total = loads.sum() if loads.dtype.kind == "f" else exact_total(loads)  # (a Python int: no wrap below)
    tol = 1e-9 * (abs(float(total)) + graph.n) if protocol.divisible else 0
    # A protocol exact only below a limit was checked on the initial loads; a load can still grow
    # past it during the run (sos-iou overshoots: 6 leaves of 2**53 - 1 on star:6 put 2**53 + 9e14 on
    # the centre). Only a total (or an infeasible run's load) at the limit can get there.
    limit = None if protocol.divisible else protocol.exact_load_limit
    trace = {k: [] for k in ("step", "tokens_moved", "messages", *TRACE_METRICS)}
    clock = []
    totals = [] if injection is not None else None  # tokens in the network at each record (the backlog)
    moved_total, messages_total, infeasible = 0, 0, 0
    variants: dict[str, int] = {}  # which kernel ran how many steps (tokendist.kernels._report)
    in_transit = 0

    # On a static network the engine's checks and the metrics of every record come from one
    # compiled call a step (engine._pass): a small graph's step then costs the engine a few
    # microseconds, not a dozen numpy and numba calls.
    static = dynamics is None and loads.ndim == 1 and graph.n > 0
    fast = (StepPass(graph, loads.dtype, max_steps // record_every + 2, small_run(graph, max_steps))
            if static and set(TRACE_METRICS) <= set(SUMMARY_METRICS) else None)

    def record(t, g, w, w_sum=None):
        clock.append(time.perf_counter())
        if totals is not None:
            totals.append(w.sum() if w_sum is None else w_sum)
        trace["step"].append(t)
        trace["tokens_moved"].append(moved_total)
        trace["messages"].append(messages_total)
        if fast is not None:
            fast.add(w, w_sum)
            return
        for k, v in measure(g, w, TRACE_METRICS, w_sum).items():
            trace[k].append(v)

    def reached(g, w) -> bool:
        return target_reached(g, w, until_discrepancy, until_local_discrepancy)

    cycles = (detect_cycles and not protocol.randomized and dynamics is None and injection is None
              and graph.n <= _CYCLE_DETECTION_MAX_N)
    if event_path is not False and event_driven(protocol, dynamics=dynamics, injection=injection,
                                                keep_loads_every=keep_loads_every):
        # A message protocol: the same loop doing per time unit only what that time unit changed.
        t, stop_reason, cycle_length, moved_total, messages_total, lazy_trace, ev_clock = run_event_steps(
            protocol, graph, max_steps=max_steps, until_discrepancy=until_discrepancy,
            until_local_discrepancy=until_local_discrepancy, record_every=record_every, cycles=cycles,
            progress=progress, names=TRACE_METRICS)
        if progress is not None:
            progress(t, max_steps)
        source = event_source(protocol)  # the compiled run or the handlers' executor
        loads = source.loads.copy()
        return RunResult(
            graph=graph, algorithm=protocol.name, params=dict(protocol.options), seed=seed, steps=t,
            stop_reason=stop_reason, tokens=_plain(total), initial=_summary(graph, initial_loads, max_steps),
            final=_summary(graph, loads, max_steps), tokens_moved=moved_total, messages=messages_total,
            infeasible_steps=0,
            loads=loads, initial_loads=initial_loads, trace=lazy_trace, report=protocol.report(), dynamics=None,
            seconds=time.perf_counter() - started, cycle_length=cycle_length, load_history=None,
            # the per-node handlers (as on the synchronous loop), or their compiled form
            variants={getattr(source, "variant", REFERENCE): t} if t else {},
            in_transit=_plain(source.in_transit),
            clock=np.asarray(ev_clock) - ev_clock[0])
    seen: dict[tuple[int, int] | bytes, tuple[int, float]] = {}
    record(0, graph, loads)
    history = [loads.copy()] if keep_loads_every else None
    stop_reason, cycle_length, t = "max-steps", None, 0
    current_graph = graph
    # Looked up once: the loop below runs up to max_steps times for a few microseconds of kernel.
    step, last, divisible = protocol.step, _report_last, protocol.divisible
    targets = until_discrepancy is not None or until_local_discrepancy is not None
    # The fused pass needs the loads' type to stay the run's, and sees the loads before injection.
    fused = fast is not None and injection is None
    fast_check = fast.check if fused else None
    run_dtype = loads.dtype
    static_run = dynamics is None and injection is None  # (stability is a stop only on a static run)
    clock_now = time.perf_counter
    key_of = key_function(small_run(graph, max_steps)) if cycles else None
    steps_clock, steps_col, moved_col, messages_col = clock.append, trace["step"].append, \
        trace["tokens_moved"].append, trace["messages"].append
    if targets and reached(graph, loads):
        stop_reason = "target-reached"
    else:
        # A protocol with `steps` on a small static graph: blocks of steps, one compiled call each
        # (engine._batch), for as long as the protocol takes them; then step by step.
        t0, ended = 0, None
        if k := block_steps(protocol, graph, loads, fast, cycles=cycles, targets=targets, check=check,
                            history=history, limit=limit, total=total, dynamics=dynamics, injection=injection,
                            key_of=key_of):
            # (cycle detection: the visited states in a table the block kernels fill, the `seen`
            # below if the run goes on step by step)
            table = CycleTable(protocol.period, min(max_steps // protocol.period + 1, 1 << 14)) if cycles else None
            t0, loads, moved_total, messages_total, infeasible, ended = run_blocks(
                protocol, graph, loads, fast, k, total=total, tol=tol, max_steps=max_steps, record_every=record_every,
                allow_infeasible=allow_infeasible, progress=progress,
                columns=(clock, trace["step"], trace["tokens_moved"], trace["messages"]), variants=variants,
                limit_check=None if limit is None else
                lambda w, low, at: _check_load_limit(protocol, w, low, limit, at), seen=table)
            if ended in ("stable", "fixed-point", "cycle"):
                stop_reason = ended
                cycle_length = None if ended == "stable" else table.cycle_length
            elif ended is None and table is not None:
                seen = table.to_dict()  # (the rest of the run goes step by step)
        for t in range(t0, max_steps if ended is None else t0):
            g = dynamics.graph_at(t) if dynamics is not None else graph
            current_graph = g
            if cycles and t % protocol.period == 0 and (state := protocol.state_key()) is not None:
                key = key_of(loads, state)  # (128 bits of the loads and the state, or sha256: _cycles)
                if key in seen:
                    first, moved_then = seen[key]
                    cycle_length = t - first
                    if moved_total == moved_then:
                        stop_reason = "fixed-point"
                    else:
                        # A real-valued scheme that revisits a state is cycling through rounding
                        # errors of float64, not through loads the mathematics would visit.
                        stop_reason = "rounding-cycle" if divisible else "cycle"
                    break
                seen[key] = (t, moved_total)
            last[0] = None  # (begin_step)
            out = step(t, g, loads)
            variant = last[0] or REFERENCE  # (step_variant)
            variants[variant] = variants.get(variant, 0) + 1
            new = out.loads
            step_no = t + 1
            # Feasibility: nobody may send more than it held at the start of the step.
            sent, flows = out.outflow, out.flows
            if sent is None and flows is not None and check:
                _check_model(protocol, g, flows, t)
            if fused and new.dtype == run_dtype and new.ndim == 1:
                # One compiled call: the sum (conservation, below), the first node that sent more
                # than it held and, on a step recorded for sure, the trace metrics.
                recorded = step_no % record_every == 0 or step_no == max_steps
                mode = _OUTFLOW if sent is not None else _FLOWS if flows is not None else _SIGN
                new_sum, new_min, bad_node = fast_check(new, loads, mode, sent if sent is not None else flows, tol,
                                                        recorded)
                if bad_node >= 0 and sent is None and flows is not None:
                    sent = _outflow(g, flows)  # (for the message only)
            else:
                recorded = False
                if sent is None and flows is not None:
                    sent = _outflow(g, flows)
                # One pass gives the sum (conservation, below) and the minimum (feasibility).
                new_sum, new_min = sum_min(new)
                if sent is not None:
                    over = sent > (loads + tol if tol else loads)
                    bad = np.flatnonzero(over) if over.any() else _NO_NODES  # (any(): no index array per step)
                else:
                    bad = (np.flatnonzero(new < -tol) if new_min is not None and new_min < -tol
                           else _NO_NODES)
                bad_node = int(bad[0]) if bad.size else -1
            if bad_node >= 0:
                if not allow_infeasible:
                    raise InfeasibleStepError(t, bad_node, _plain(loads[bad_node]),
                                              _plain(sent[bad_node]) if sent is not None else "more", protocol.name)
                infeasible += 1
            if injection is not None:
                new, added, removed = injection.apply(t, new)
                if divisible:
                    total = total + added - removed
                else:  # Python ints: int64 wrapped, and the run reported -2**63 + 4192 tokens
                    total = int(total) + int(added) - int(removed)
                    if not -_INT64_MAX <= total <= _INT64_MAX:
                        raise TokendistError(f"the injection brings the tokens to {total} at step {t}, more than "
                                             f"int64 holds (2**63 - 1 = {_INT64_MAX})")
                new_sum = new.sum()
            in_transit = out.in_transit
            held = new_sum + in_transit
            if (abs(held - total) > tol) if divisible else held != total:
                raise ConservationError(f"{protocol.name} broke token conservation at step {t}: "
                                        f"{total} tokens became {held}")
            loads = new if new is not loads else new.copy()
            if limit is not None and (held >= limit or infeasible) and new_min is not None:
                _check_load_limit(protocol, loads, new_min, limit, step_no)
            moved_total += out.moved
            messages_total += out.messages
            done = targets and reached(g, loads)
            if not done and out.moved == 0 and in_transit == 0 and static_run:
                if protocol.is_stable(g, loads):
                    stop_reason = "stable"
                    done = True
            elif done:
                stop_reason = "target-reached"
            if history is not None and step_no % keep_loads_every == 0:
                history.append(loads.copy())
            if recorded:  # the metrics are in; the columns the pass does not write
                steps_clock(clock_now())
                steps_col(step_no)
                moved_col(moved_total)
                messages_col(messages_total)
            elif step_no % record_every == 0 or done or step_no == max_steps:
                record(step_no, g, loads, new_sum)
            if progress is not None and (step_no & 63) == 0:
                progress(step_no, max_steps)
            if done:
                t = step_no
                break
        else:
            t = max_steps if ended is None else t0
        # A run that used up its steps in a stable state says so, on a static network only: with
        # dynamics (or injection) stability holds for the last graph, not for the next, and the
        # loop above never stops on it (a run with edge failures once reported 'stable' after
        # all of its max_steps).
        if (stop_reason == "max-steps" and dynamics is None and injection is None
                and protocol.is_stable(current_graph, loads)):
            stop_reason = "stable"
    if progress is not None:
        progress(t, max_steps)
    steps = t
    trace_arrays = {k: _column(v) for k, v in trace.items()}
    initial = final = None
    if fast is not None:
        columns = fast.columns()
        trace_arrays.update((k, v) for k, v in columns.items() if k in TRACE_METRICS)
        # The first and last records are summary() of the initial and final loads, the same values
        # (no metric kernel to compile for them on a cold cache).
        initial = {name: columns[name][0].item() for name in SUMMARY_METRICS}
        if trace["step"][-1] == steps:
            final = {name: columns[name][-1].item() for name in SUMMARY_METRICS}
    stream_metrics = None
    if injection is not None:
        stream_metrics = {"injection": injection.describe(),
                  **stream_summary(trace_arrays["step"], totals, trace_arrays["max"], trace_arrays["discrepancy"])}
    return RunResult(
        graph=graph, algorithm=protocol.name, params=dict(protocol.options), seed=seed, steps=steps,
        stop_reason=stop_reason, tokens=_plain(total),
        initial=_summary(graph, initial_loads, max_steps) if initial is None else initial,
        final=_summary(graph, loads, max_steps) if final is None else final, tokens_moved=moved_total,
        messages=messages_total,
        infeasible_steps=infeasible, loads=loads, initial_loads=initial_loads, trace=trace_arrays,
        report=protocol.report(), variants=variants, dynamics=None if dynamics is None else dynamics.describe(),
        seconds=time.perf_counter() - started, cycle_length=cycle_length,
        load_history=None if history is None else np.array(history), clock=np.asarray(clock) - clock[0],
        stream=stream_metrics, in_transit=_plain(in_transit),
    )
