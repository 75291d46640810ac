"""Independent runs side by side on the machine's cores: ``tokendist compare --workers N``.

A comparison is a handful of independent runs, each seeded by the scenario alone, so the rows do not
depend on which process made them. On a machine with several cores they run in worker processes
forked from this one: the package, the graph and the loads are already in memory, so a worker starts
in milliseconds (a Dask cluster, the sweep engine, takes seconds to start and pays off over hours of
runs, not over a ten-second comparison). Where ``fork`` is not available the runs are made one after
the other, with the same rows.

Only the rows come back (pickled): the shared graph is left out and put back in this process. A
worker that compiles a numba kernel says so through a shared counter, so that the progress bar can
show "compiling kernels" although the compiling happens elsewhere.
"""

from __future__ import annotations

import multiprocessing
import os
import warnings
from concurrent.futures import FIRST_COMPLETED, ProcessPoolExecutor, wait

from numba.core import event as numba_event

__all__ = ["run_each", "default_workers"]

# The task of the forked workers: set just before the pool forks, read by the children only.
_TASK = None
_SHARED = None
_BUSY = None  # multiprocessing.Value: workers compiling right now


def default_workers() -> int:
    """The cores this process may use (``tokendist compare``'s default ``--workers``)."""
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except AttributeError:  # not on Linux
        return max(1, os.cpu_count() or 1)


def _forkable() -> bool:
    return "fork" in multiprocessing.get_all_start_methods()


def run_each(names, task, *, shared=None, workers: int = 1, progress=None, compiling=None) -> list:
    """``[task(name) for name in names]``, on up to ``workers`` processes; the same list for any number.

    ``shared`` (the graph every row's result refers to) is not sent back from the workers: a result
    whose ``graph`` is it gets it back here. ``progress(done, total, name)`` and ``compiling(bool)``
    as in :func:`tokendist.experiments.compare`.
    """
    names = list(names)
    total = len(names)
    workers = min(int(workers), total)
    if workers <= 1 or not _forkable():
        rows = []
        for i, name in enumerate(names):
            if progress is not None:
                progress(i, total, name)
            rows.append(task(name))
        if progress is not None:
            progress(total, total, "")
        return rows

    global _TASK, _SHARED, _BUSY
    ctx = multiprocessing.get_context("fork")
    busy = ctx.Value("i", 0)
    _TASK, _SHARED, _BUSY = task, shared, busy
    rows = [None] * total
    try:
        with warnings.catch_warnings():
            # Python 3.12+ warns about fork() in a process with threads (a progress bar's refresh
            # thread here): the children run only numpy and numba code and never touch them.
            warnings.filterwarnings("ignore", message=".*fork.*", category=DeprecationWarning)
            pool = ProcessPoolExecutor(max_workers=workers, mp_context=ctx, initializer=_listen)
            futures = {pool.submit(_run_one, name): i for i, name in enumerate(names)}
        if progress is not None:  # (the workers are forked by now)
            progress(0, total, "")
        try:
            pending, done_count, shown = set(futures), 0, None
            while pending:
                done, pending = wait(pending, timeout=0.2, return_when=FIRST_COMPLETED)
                for f in done:
                    rows[futures[f]] = f.result()
                    done_count += 1
                if progress is not None and done:
                    progress(done_count, total, "")
                now = busy.value > 0
                if compiling is not None and now != shown:
                    compiling(now)
                    shown = now
            if compiling is not None and shown:
                compiling(False)
        finally:
            pool.shutdown(wait=True, cancel_futures=True)
    finally:
        _TASK = _SHARED = _BUSY = None
    for row in rows:
        result = getattr(row, "result", None)
        if result is not None and getattr(result, "graph", True) is None:
            result.graph = shared
    return rows


def _run_one(name):
    """In a worker: one row, its result without the shared graph and with its trace as plain arrays."""
    row = _TASK(name)
    result = getattr(row, "result", None)
    if result is not None:
        result.trace = dict(result.trace)  # a lazily computed trace (event path) holds the executor
        if result.graph is _SHARED:
            result.graph = None
    return row


class _Compiling(numba_event.Listener):
    """In a worker: counts up the shared counter while a kernel compiles (nested compilations once)."""

    def __init__(self):
        self.depth = 0

    def on_start(self, event):
        self.depth += 1
        if self.depth == 1:
            with _BUSY.get_lock():
                _BUSY.value += 1

    def on_end(self, event):
        self.depth -= 1
        if self.depth == 0:
            with _BUSY.get_lock():
                _BUSY.value -= 1


def _listen():
    # The listeners this process inherited belong to the parent's progress bar, whose locks the fork
    # may have copied held: only the shared counter listens here.
    for listener in list(numba_event._registered.get("numba:compile", ())):
        numba_event.unregister("numba:compile", listener)
    numba_event.register("numba:compile", _Compiling())
