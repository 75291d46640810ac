"""Several steps of a protocol per compiled call: the engine's block loop.

On a small graph a protocol's step is a few microseconds of kernel, and the Python
around it (the protocol's ``step``, the :class:`~tokendist.engine.Step`, the engine's pass and
bookkeeping) costs as much again. So a block of
steps can run in one compiled call: the protocol's optional :meth:`Protocol.steps
<tokendist.engine.Protocol.steps>` writes the loads after each of up to ``k`` steps into the rows
of a buffer the engine owns, then one call of :func:`tokendist.engine._pass.block_pass` does for
every row what the engine's pass does for a step (the sum for conservation, the first node below
zero for feasibility, the trace metrics of the recorded steps), and Python checks and records the
block. The run is the same, step for step: the same loads, the same trace (the clock aside: a
step inside a block gets the time interpolated between the block's start and end), the same
errors at the same step, the same stop.

Where it applies (:func:`block_steps`): a static network, integer loads, no injection, no load
history, no stopping targets (they are checked after every step), no model check, a total below
the protocol's exact load limit if it has one, the engine's compiled pass (a small run on a cold
cache steps one at a time) and a small graph (``k n`` at most :data:`BLOCK_CELLS`). The protocol
may decline a block (it returns None: its numpy kernel was chosen, the loads do not suit its
block kernel); the run then goes on step by step.

Cycle detection inside a block. A deterministic protocol's run stops before a step at a period
boundary whose state (the loads and :meth:`Protocol.state_key`) it has seen before. A protocol
whose ``steps`` checks states (:attr:`Protocol.steps_find_cycles`) runs in blocks with detection
on: the visited states live in numpy arrays, an open-addressing table of the 128-bit keys with
the step and the tokens moved before it of each first visit (:class:`~._cycles.CycleTable`), and
the block kernel, before each step at a period boundary, hashes the loads' and the state's bytes
with the engine's own :func:`~._cycles.hash128` (so the key the step-by-step loop computes, lane
for lane) and probes and fills the table (:func:`~._cycles.seen_before`). On a state seen before
it returns before that step, the protocol exactly as after the steps done, and the engine stops
as the loop does: ``cycle_length`` from the first visit, ``fixed-point`` when no token moved
since, else ``cycle``. A run whose key function is not :func:`~._cycles.cycle_key` (sha256 keys
of a small run on a cold cache) gets no blocks. When the blocks end short of a stop (the
protocol declines one) the table becomes the loop's dict of visited states and the run goes on
step by step to the same stop. The tokens moved before a checked step are kept in int64 while
they stay within ``2**62``; past that the blocks end (:func:`~._cycles.add_moved`) and the run
goes on step by step.

Why a table the kernel fills, and not keys written out for Python to check with the protocol
rewound to the repeated step: the stop happens where the loop's does with no snapshot of the
protocol's state and no steps run twice, the check costs a probe in the kernel instead of a dict
look-up a step in Python (the Python a step is what blocks remove), and a protocol's state
(rotors, errors, continuous flows) needs no copy and restore.
"""

from __future__ import annotations

import time

import numpy as np

from ..errors import ConservationError, InfeasibleStepError
from ._cycles import CycleTable, cycle_key
from ._protocol import Protocol

__all__ = ["block_steps", "run_blocks", "BLOCK_STEPS", "BLOCK_CELLS"]

#: Steps per block: 64 makes the block's own Python (a few tens of microseconds) well under a
#: microsecond a step; larger blocks gain little and hold more rows.
BLOCK_STEPS = 64
#: At most this many loads in a block (``k n``: 512 kB of int64, in cache); larger graphs have
#: steps long enough for the per-step Python not to matter.
BLOCK_CELLS = 1 << 16
# Running totals of a block in int64 while they stay below this (else Python ints).
_SAFE = 1 << 62


def block_steps(protocol, graph, loads, fast, *, cycles, targets, check, history, limit, total, dynamics,
                injection, key_of=None) -> int:
    """Steps per block for this run, 0 when the run goes step by step (see the module).

    With ``cycles`` (the run detects cycles), only for a protocol whose ``steps`` checks states
    (:attr:`Protocol.steps_find_cycles`) and a run whose keys are :func:`~._cycles.cycle_key`'s
    (``key_of``: a small run on a cold cache takes sha256 keys, which no block kernel computes).
    """
    if BLOCK_STEPS < 1 or type(protocol).steps is Protocol.steps or fast is None:
        return 0
    if dynamics is not None or injection is not None or targets or check or history is not None:
        return 0
    if cycles and not (protocol.steps_find_cycles and key_of is cycle_key):
        return 0
    if limit is not None and total >= limit:
        return 0
    if protocol.divisible or loads.ndim != 1 or loads.dtype != np.int64 or graph.n == 0:
        return 0
    k = min(BLOCK_STEPS, BLOCK_CELLS // graph.n)
    return k if k >= 1 and fast.block_ready(loads) else 0


def _plain(x):
    return x.item() if isinstance(x, np.generic) else x


def run_blocks(protocol, graph, loads, fast, k, *, total, tol, max_steps, record_every, allow_infeasible, progress,
               columns, variants, limit_check=None, seen=None):
    """Run from step 0 in blocks of up to ``k`` steps, while the protocol takes them.

    ``columns`` are the lists of the clock, step, tokens_moved and messages columns, ``variants``
    the run's steps per kernel variant, ``limit_check(loads, low, step)`` the check of a protocol's
    exact load limit, made (as step by step) on the steps from the first infeasible one, ``seen``
    the run's :class:`~._cycles.CycleTable` when it detects cycles (None: it does not). Returns
    ``(t, loads, moved, messages, infeasible, ended)``: the steps run, the loads after them, the
    totals, and ``ended`` ``"stable"`` (stopped at a fixed point), ``"fixed-point"`` or ``"cycle"``
    (stopped before step ``t``, whose state was seen at step ``t - seen.cycle_length``),
    ``"max-steps"`` (all steps run) or None (the protocol declined a block: go on step by step,
    with ``seen.to_dict()`` as the visited states).
    """
    n = graph.n
    loads = np.ascontiguousarray(loads)
    block = np.empty((k, n), dtype=np.int64)
    moved = np.zeros(k, dtype=np.int64)
    messages = np.zeros(k, dtype=np.int64)
    sums = np.empty(k, dtype=np.int64)
    bads = np.empty(k, dtype=np.int64)
    # The engine asks is_stable after a step that moved nothing; a protocol that keeps the base
    # method (never stable) need not stop its block there.
    stop_idle = type(protocol).is_stable is not Protocol.is_stable
    clock_col, step_col, moved_col, messages_col = columns
    steps, clock_now = protocol.steps, time.perf_counter
    moved_total = messages_total = infeasible = 0
    t = 0
    began = clock_now()
    while t < max_steps:
        size = min(k, max_steps - t)
        if seen is None:
            got = steps(t, size, graph, loads, block, moved, messages, stop_idle)
            hit = None
        else:
            if not -_SAFE < moved_total < _SAFE:  # (the table keeps the totals in int64)
                return t, loads, moved_total, messages_total, infeasible, None
            seen.reserve(size)
            seen.start(moved_total)
            got = steps(t, size, graph, loads, block, moved, messages, stop_idle, seen)
            hit = seen.hit() if got is not None else None
        if got is None or (got[0] == 0 and hit is None):  # (0: the protocol stopped before a step it
            return t, loads, moved_total, messages_total, infeasible, None  # leaves to step())
        done, variant = got
        if done == 0:  # the state before step t was seen before
            return t, loads, moved_total, messages_total, infeasible, _cycle(seen, t, moved_total, hit)
        variants[variant] = variants.get(variant, 0) + done
        fast.check_block(block, done, loads, tol, t, record_every, max_steps, sums, bads)
        # The first step that broke a rule, in the per-step order: infeasibility, then conservation.
        bad_steps = bads[:done] >= 0
        broken = sums[:done] != total
        stops = broken | bad_steps if not allow_infeasible else broken
        first = int(stops.argmax()) if stops.any() else done
        if limit_check is not None and (infeasible or bad_steps[:first].any()):
            # A protocol exact below a load limit: after an infeasible step a load may pass it.
            so_far = infeasible
            for b in range(first):
                so_far += bool(bad_steps[b])
                if so_far:
                    limit_check(block[b], block[b].min(), t + b + 1)
        if first < done:
            b = first
            before = loads if b == 0 else block[b - 1]
            if bad_steps[b] and not allow_infeasible:
                node = int(bads[b])
                raise InfeasibleStepError(t + b, node, _plain(before[node]), "more", protocol.name)
            raise ConservationError(f"{protocol.name} broke token conservation at step {t + b}: "
                                    f"{total} tokens became {sums[b]}")
        infeasible += int(np.count_nonzero(bad_steps))
        ended = clock_now()
        # The recorded steps of the block (every record_every-th, and the run's last step), their
        # totals and clock (interpolated between the block's start and end): whole-block numpy
        # work, not a Python loop a step.
        rec = list(range((t // record_every + 1) * record_every, t + done + 1, record_every))
        if t < max_steps <= t + done and (not rec or rec[-1] != max_steps):
            rec.append(max_steps)
        at = np.array(rec, dtype=np.int64) - (t + 1)
        step_col.extend(rec)
        clock_col.extend((began + (ended - began) / done * (at + 1)).tolist())
        for col, per_step, before in ((moved_col, moved, moved_total), (messages_col, messages, messages_total)):
            if int(per_step[:done].max(initial=0)) < _SAFE // done and before < _SAFE:
                running = np.cumsum(per_step[:done])
                col.extend((running[at] + before).tolist())
                after = before + int(running[-1])
            else:  # (totals past int64: Python ints, as step by step)
                running, after = [], before
                for x in per_step[:done].tolist():
                    after += x
                    running.append(after)
                col.extend(running[b] for b in at.tolist())
            if col is moved_col:
                moved_total = after
            else:
                messages_total = after
        if progress is not None:
            for step_no in range(((t >> 6) + 1) << 6, t + done + 1, 64):
                progress(step_no, max_steps)
        began = ended
        loads = block[done - 1].copy()  # (the block is written over by the next call)
        t += done
        if stop_idle and moved[done - 1] == 0 and protocol.is_stable(graph, loads):
            if not (t % record_every == 0 or t == max_steps):  # (a stop is always recorded)
                clock_col.append(clock_now())
                step_col.append(t)
                moved_col.append(moved_total)
                messages_col.append(messages_total)
                fast.add(loads)
            return t, loads, moved_total, messages_total, infeasible, "stable"
        if hit is not None:  # (after the checks of the steps before it, as step by step)
            return t, loads, moved_total, messages_total, infeasible, _cycle(seen, t, moved_total, hit)
    return t, loads, moved_total, messages_total, infeasible, "max-steps"


def _cycle(seen, t, moved_total, hit) -> str:
    """The stop before step ``t`` on a state first seen at ``hit``: the loop's rule (_simulate)."""
    first, moved_then = hit
    seen.cycle_length = t - first
    return "fixed-point" if moved_total == moved_then else "cycle"
