"""The engine's event-driven path for message-passing protocols: no O(n) work per time unit.

A message protocol (``model = "message"``, e.g. ``perfect-tree``, ``async-multi-port``) runs on the
:class:`~tokendist.engine.MessageExecutor`, and one engine step is one time unit of the executor.
Most time units touch a handful of nodes, so the synchronous loop of :func:`~tokendist.engine.simulate`
(a copy of the loads, a sum, a minimum and nine metrics of every node, every time unit) cost far
more than the messages themselves. :func:`run_event_steps` is the same loop, with the same stop
rules in the same order and the same results, doing per time unit only what that time unit changed:

* a time unit with no event due is skipped without calling the executor (its loads, moved tokens
  and messages are those of the previous one);
* the trace is recorded lazily: each recorded step keeps a position in the executor's load log
  (``(node, change)`` pairs, one per token that leaves or reaches a node), and the metrics are
  computed when the trace is first read (:class:`EventTrace`), replaying the log from the initial
  loads with the same fused metric kernel as :func:`~tokendist.engine.simulate`;
* the stop rules ``until_discrepancy``/``until_local_discrepancy`` are evaluated only on the time
  units whose loads changed (on the others the answer cannot have changed);
* conservation (``held + in transit``) is checked over all nodes every :data:`CONSERVATION_EVERY`
  time units and at the end. Between two checks the executor is the only code that moves tokens,
  and it refuses a send of tokens the sender does not hold, so the feasibility check of the
  synchronous loop (no negative load) holds by construction;
* cycle detection hashes the state only where :meth:`Protocol.state_key` can repeat (it returns
  None while messages are in flight: the clock is part of that state).

A protocol with a compiled form of its handlers (``kernel_run``: perfect-tree's
``protocols/perfect_tree/kernels``) runs here as that compiled program instead, in chunks of time
units (:func:`_run_compiled`): the same stop rules, records and results, read off one row per time
unit with events; conservation is checked after every chunk.

The command ``python benchmarks/probes/message_executor.py`` measures it; ``tests/engine/test_event_path.py``
checks it against the synchronous loop, run by run and column by column.
"""

from __future__ import annotations

import hashlib
import time
from collections.abc import Mapping

import numba
import numpy as np

from ..errors import ConservationError
from ._metrics import SUMMARY_METRICS, _share_args, _speed_ratios, _summary_kernel, measure, target_reached
from ._pass import StepPass, small_run

__all__ = ["run_event_steps", "EventTrace", "event_driven", "event_source", "CONSERVATION_EVERY"]

#: Time units between two full conservation checks of the event-driven path.
CONSERVATION_EVERY = 1024

#: Recorded steps times nodes above which the trace replay runs as one numba kernel; below it, the
#: replay calls :func:`~tokendist.engine.measure` per changed step (no kernel to compile or load:
#: ``tokendist compare``'s message protocols on its 256-node torus replay in well under 0.1 s).
REPLAY_KERNEL_MIN_WORK = 20_000_000


#: Time units per call of a compiled run (the progress bar and the conservation check run in between).
COMPILED_CHUNK = 1 << 16


def _compiled(protocol):
    # A protocol that offers a compiled form of its handlers (``kernel_run``, e.g. perfect-tree's
    # kernels.PerfectTreeKernelRun) and has not run yet.
    kr = getattr(protocol, "kernel_run", None)
    return kr if kr is not None and not kr.started else None


def event_source(protocol):
    """What holds the loads of an event-driven run: the compiled run, or the protocol's executor."""
    kr = getattr(protocol, "kernel_run", None)
    return kr if kr is not None and kr.started else protocol.executor


def event_driven(protocol, *, dynamics, injection, keep_loads_every) -> bool:
    """Whether :func:`run_event_steps` can run ``protocol`` (a message protocol on a static network)."""
    if not (protocol.model == "message" and getattr(protocol, "event_driven", False) and dynamics is None
            and injection is None and keep_loads_every is None):
        return False
    if _compiled(protocol) is not None:
        return True
    ex = getattr(protocol, "executor", None)
    return ex is not None and not ex.allow_negative


def run_event_steps(protocol, graph, *, max_steps, until_discrepancy, until_local_discrepancy, record_every,
                    cycles, progress, names):
    """The step loop of :func:`~tokendist.engine.simulate` for an event-driven message protocol.

    Returns ``(steps, stop_reason, cycle_length, moved_total, messages_total, trace, clock)``; the
    loads are the executor's (``protocol.executor.loads``); ``clock`` holds the wall-clock time at
    each recorded step, as the synchronous loop's.
    """
    if _compiled(protocol) is not None and max_steps >= 1:
        return _run_compiled(protocol, graph, max_steps=max_steps, until_discrepancy=until_discrepancy,
                             until_local_discrepancy=until_local_discrepancy, record_every=record_every,
                             cycles=cycles, progress=progress, names=names)
    ex = protocol.executor
    ex.load_log = log = []
    loads = ex.loads
    total = ex.total
    initial = loads.copy()
    trace = EventTrace(graph, initial, log, tuple(names))
    rec = trace._records
    stop_targets = until_discrepancy is not None or until_local_discrepancy is not None

    def reached() -> bool:
        return target_reached(graph, loads, until_discrepancy, until_local_discrepancy)

    moved_total = messages_total = 0
    rec.append((0, 0, 0, 0))
    clock = [time.perf_counter()]
    seen: dict[bytes, tuple[int, int]] = {}
    stop_reason, cycle_length, t = "max-steps", None, 0
    times = ex._times  # the executor's heap of event times (its calendar queue)
    period = protocol.period
    if stop_targets and reached():
        stop_reason = "target-reached"
    else:
        for t in range(max_steps):
            if cycles and t % period == 0:
                key = protocol.state_key()
                if key is not None:  # None: a state that cannot have been seen (messages in flight)
                    digest = hashlib.blake2b(loads.tobytes() + key, digest_size=16).digest()
                    if digest in seen:
                        first, moved_then = seen[digest]
                        cycle_length = t - first
                        stop_reason = "fixed-point" if moved_total == moved_then else "cycle"
                        break
                    seen[digest] = (t, moved_total)
            step_no = t + 1
            before, moved0, messages0 = len(log), ex.tokens_moved, ex.messages
            if not ex._started:
                ex.start()  # inside step 0, after its cycle check, as the synchronous loop does
            if times and times[0] <= step_no:
                ex.run(until=step_no)
            else:
                ex.now = step_no  # nothing due in this time unit: the clock moves, nothing else
            moved = ex.tokens_moved - moved0
            moved_total += moved
            messages_total += ex.messages - messages0
            changed = len(log) != before
            if step_no % CONSERVATION_EVERY == 0:
                _check_conservation(protocol, loads, ex.in_transit, total, t)
            done = stop_targets and changed and reached()
            if not done and moved == 0 and ex.in_transit == 0:
                if protocol.is_stable(graph, loads):
                    stop_reason = "stable"
                    done = True
            elif done:
                stop_reason = "target-reached"
            if step_no % record_every == 0 or done or step_no == max_steps:
                rec.append((step_no, moved_total, messages_total, len(log)))
                clock.append(time.perf_counter())
            if progress is not None and (step_no & 63) == 0:
                progress(step_no, max_steps)
            if done:
                t = step_no
                break
        else:
            t = max_steps
        if stop_reason == "max-steps" and protocol.is_stable(graph, loads):
            stop_reason = "stable"
    _check_conservation(protocol, loads, ex.in_transit, total, t)
    return t, stop_reason, cycle_length, moved_total, messages_total, trace, clock


def _run_compiled(protocol, graph, *, max_steps, until_discrepancy, until_local_discrepancy, record_every, cycles,
                  progress, names):
    """:func:`run_event_steps` on the protocol's compiled run: the same stop rules, records and results.

    The compiled run executes time units in chunks of :data:`COMPILED_CHUNK` (one unit at a time
    when a discrepancy target must be checked after every unit whose loads changed) and returns one
    row per time unit with events; the records at multiples of ``record_every`` are read off those
    rows (an idle unit repeats the row before it). Conservation is checked after every chunk; the
    wall clock of a record is interpolated between chunk ends.
    """
    kr = protocol.kernel_run
    loads, total = kr.loads, kr.total
    initial = loads.copy()
    stop_targets = until_discrepancy is not None or until_local_discrepancy is not None

    def reached() -> bool:
        return target_reached(graph, loads, until_discrepancy, until_local_discrepancy)

    marks = [(0, time.perf_counter())]
    cycle_length = None
    if stop_targets and reached():
        return _finish(protocol, graph, initial, names, kr, 0, "target-reached", None, record_every, max_steps,
                       True, marks)
    # Step 0's cycle check sees every node in "start" with nothing in flight: a state no later step repeats.
    kr.start()
    stop_reason, last, done = "max-steps", max_steps, False
    chunk_end = 0
    while True:
        chunk_end = min(max_steps, max(chunk_end, kr.now) + COMPILED_CHUNK)
        status = kr.advance(chunk_end, one_unit=stop_targets)
        unit = int(kr.unit_rows()[-1, 0]) if len(kr.unit_rows()) else 0
        if status == _k_status("RUN_UNIT"):
            rows = kr.unit_rows()
            changed = len(rows) and rows[-1, 3] != (rows[-2, 3] if len(rows) > 1 else 0)
            if changed and reached():
                stop_reason, last, done = "target-reached", unit, True
                break
            continue
        marks.append((kr.now, time.perf_counter()))
        _check_conservation(protocol, loads, kr.in_transit, total, kr.now)
        if progress is not None:
            progress(kr.now, max_steps)
        if status == _k_status("RUN_STABLE"):
            rows = kr.unit_rows()
            at = kr.now
            if stop_targets and len(rows) and rows[-1, 0] == at:
                changed = rows[-1, 3] != (rows[-2, 3] if len(rows) > 1 else 0)
                if changed and reached():
                    stop_reason, last, done = "target-reached", at, True
                    break
            stop_reason, last, done = "stable", at, True
            break
        if status == _k_status("RUN_UNTIL") and chunk_end < max_steps:
            continue
        if status == _k_status("RUN_IDLE") and kr.all_final() and chunk_end < max_steps:
            continue  # stable at the next time unit, past this chunk
        if status == _k_status("RUN_IDLE") and not kr.all_final():
            # Nothing will ever happen again (a deadlock): the synchronous loop's cycle check finds
            # the idle state at its first two checks after the last event; else max-steps.
            first = -(-unit // protocol.period) * protocol.period
            second = first + protocol.period
            if cycles and second < max_steps:
                stop_reason, last, cycle_length = "fixed-point", second, protocol.period
            break
        break  # RUN_UNTIL at max_steps, or RUN_IDLE with every node final at max_steps
    if stop_reason == "max-steps" and protocol.is_stable(graph, loads):
        stop_reason = "stable"
    return _finish(protocol, graph, initial, names, kr, last, stop_reason, cycle_length, record_every, max_steps,
                   done, marks)


def _k_status(name: str) -> int:
    return _STATUS[name]


_STATUS = {"RUN_UNTIL": 0, "RUN_STABLE": 1, "RUN_IDLE": 2, "RUN_FULL": 3, "RUN_UNIT": 4, "RUN_ERROR": 5}


def _finish(protocol, graph, initial, names, kr, last, stop_reason, cycle_length, record_every, max_steps, done,
            marks):
    # The records of the synchronous loop: step 0, every multiple of record_every up to the last
    # step, the step the run stopped at (done) and max_steps if it was reached.
    steps = np.arange(record_every, last + 1, record_every, dtype=np.int64)
    extra = [s for s in ((last,) if done else ()) + ((max_steps,) if last == max_steps else ()) if s >= 1]
    if extra:
        steps = np.union1d(steps, np.asarray(extra, dtype=np.int64))
    rows = kr.unit_rows()
    at = np.searchsorted(rows[:, 0], steps, side="right") - 1
    values = np.zeros((steps.size, 3), dtype=np.int64)
    hit = at >= 0
    values[hit] = rows[at[hit], 1:4]
    records = np.zeros((steps.size + 1, 4), dtype=np.int64)
    records[1:, 0], records[1:, 1:] = steps, values
    trace = EventTrace(graph, initial, kr.load_log(), tuple(names))
    trace._records = records
    mark_steps, mark_times = zip(*marks) if len(marks) > 1 else ((0, max(last, 1)), (marks[0][1], time.perf_counter()))
    clock = np.interp(records[:, 0], mark_steps, mark_times)
    # The compiled run never goes past the last step: its totals are the run's.
    moved_total, messages_total = kr.tokens_moved, kr.messages
    kr.settle(last)
    _check_conservation(protocol, kr.loads, kr.in_transit, kr.total, last)
    return last, stop_reason, cycle_length, moved_total, messages_total, trace, list(clock)


def _check_conservation(protocol, loads, in_transit, total, t) -> None:
    held = loads.sum() + in_transit
    if held != total:
        raise ConservationError(f"{protocol.name} broke token conservation by step {t}: {total} tokens became {held}")


class EventTrace(Mapping):
    """The per-step trace of an event-driven run, computed when first read.

    Holds the initial loads, the executor's load log and, per recorded step, ``(step, tokens moved,
    messages, log position)``. Reading any column replays the log once and evaluates
    :data:`~tokendist.engine.TRACE_METRICS` at every recorded step whose loads changed (the fused
    kernel of :func:`~tokendist.engine.measure`, so the values are the synchronous loop's, bit for
    bit); a step whose loads did not change repeats the row before it.
    """

    def __init__(self, graph, initial: np.ndarray, log: list, names: tuple):
        self._graph = graph
        self._names = names
        self._initial = initial
        self._log = log
        self._records: list[tuple[int, int, int, int]] = []
        self._columns: dict | None = None

    def _materialise(self) -> dict:
        if self._columns is None:
            self._columns = _replay(self._graph, self._initial, self._log, self._records, self._names)
            self._log = None  # the log is no longer needed (it can be long)
        return self._columns

    def __getitem__(self, key):
        return self._materialise()[key]

    def __iter__(self):
        return iter(self._materialise())

    def __len__(self):
        return len(self._materialise())

    def __getstate__(self):  # pickled (sweep workers) as plain columns
        return {"_columns": self._materialise()}

    def __setstate__(self, state):
        self._columns = state["_columns"]
        self._log = self._records = self._graph = self._initial = None


def _replay(graph, initial, log, records, names) -> dict:
    rec = np.array(records, dtype=np.int64).reshape(-1, 4)
    pairs = np.array(log, dtype=np.int64).reshape(-1, 2)
    columns = {"step": rec[:, 0].copy(), "tokens_moved": rec[:, 1].copy(), "messages": rec[:, 2].copy()}
    big = rec.shape[0] * graph.n >= REPLAY_KERNEL_MIN_WORK
    if big and initial.dtype.kind in "iu" and graph.n > 0 and set(names) <= set(SUMMARY_METRICS):
        speeds = np.empty(0) if graph.speeds is None else graph.speeds
        speed_sum = 1.0 if graph.speeds is None else float(graph.speeds.sum())
        rh, rl = _speed_ratios(graph.speeds)
        ints, floats = _replay_kernel(initial.astype(np.int64), pairs[:, 0].copy(), pairs[:, 1].copy(),
                                      rec[:, 3], graph.u, graph.v, speeds, speed_sum, rh, rl)
        hi, lo, local = ints
        l1, sq, linf, wmax = floats
        metrics = {"discrepancy": hi - lo, "max": hi, "min": lo, "local_discrepancy": local, "l1_error": l1,
                   "l2_error": np.sqrt(sq), "linf_error": linf, "max_weighted_load": wmax, "potential": sq}
    else:  # the engine's metric call itself (its pass when it applies), at each recorded step
        loads = initial.copy()
        fast = (StepPass(graph, loads.dtype, len(records), small_run(graph, len(records)))
                if graph.n and loads.ndim == 1 and set(names) <= set(SUMMARY_METRICS) else None)
        rows, pos = [], 0
        for _, _, _, end in records:
            if rows and end == pos:
                rows.append(rows[-1])
                if fast is not None:
                    fast.add(loads)
                continue
            for node, change in pairs[pos // 2:end // 2].tolist():
                loads[node] += change
            pos = end
            if fast is not None:
                fast.add(loads)
                rows.append(True)
            else:
                rows.append(measure(graph, loads, names))
        if fast is not None:
            metrics = fast.columns()
        else:
            metrics = {k: np.asarray([r[k] for r in rows]) for k in names}
    columns.update({k: metrics[k] for k in names})
    return columns


@numba.njit(cache=True, nogil=True)
def _replay_kernel(initial, nodes, changes, ends, u, v, speeds, speed_sum, rh, rl):
    # ends[r]: the length of the (flat, node then change) log when step r was recorded.
    loads = initial.copy()
    k = ends.shape[0]
    n = loads.shape[0]
    ints = np.empty((3, k), dtype=np.int64)
    floats = np.empty((4, k), dtype=np.float64)
    pos = 0
    for r in range(k):
        end = ends[r] // 2
        if r > 0 and end == pos:
            ints[:, r] = ints[:, r - 1]
            floats[:, r] = floats[:, r - 1]
            continue
        while pos < end:
            loads[nodes[pos]] += changes[pos]
            pos += 1
        total = loads.sum()
        base, frac, wa, wb = _share_args(total, n)  # (the exact error terms: engine._metrics.errors)
        hi, lo, local, l1, sq, linf, wmax = _summary_kernel(loads, u, v, base, frac, wa, wb, speeds, speed_sum, rh, rl)
        ints[0, r], ints[1, r], ints[2, r] = hi, lo, local
        floats[0, r], floats[1, r], floats[2, r], floats[3, r] = l1, sq, linf, wmax
    return ints, floats
