"""Running a sweep's tasks on Dask distributed: one task = one :func:`tokendist.simulate` call.

With no scheduler address the runner starts a :class:`distributed.LocalCluster` of worker
*processes* (``threads_per_worker=1``, numba held to one thread in each with ``NUMBA_NUM_THREADS=1``),
so that N workers run N tasks at once without oversubscribing the cores; with an address
(``tcp://host:port``) it submits the same tasks to an existing cluster. Dask does the scheduling,
the serialization and the re-running of tasks whose worker died; nothing here is a home-made pool.

The local workers are forked from a multiprocessing fork server (:func:`start_fork_server`) that
has imported Dask and tokendist and loaded the engine's compiled pass once (:mod:`._forkserver`),
instead of each worker being a fresh interpreter that imports them all and loads the pass on its
first task; a forked worker also exits without tearing its interpreter down, so the cluster closes
at once (0.3-0.4 s to 0.03 s here). Tasks start biggest first (:func:`biggest_first`). Measurements:
docs/guide/sweeps.md, "Start-up and shutdown".

A task's row is the ``tokendist run --json`` summary of the same graph, initial distribution,
algorithm, parameters and seed, flattened into columns by :func:`flatten_run_json`, plus the task's
key and settings, the steps to each discrepancy level (first reached, and settled) and the wall
time. A task that fails (the protocol does not apply to the graph, an infeasible step, any error)
becomes a row with its status and a one-line reason; the sweep goes on.
"""

from __future__ import annotations

import contextlib
import functools
import importlib
import json
import logging
import multiprocessing
import os
import signal
import threading
import time
from dataclasses import dataclass, field
from multiprocessing import forkserver

import numpy as np

from ... import __version__
from ...engine import SUMMARY_METRICS, make_protocol, simulate
from ...engine._metrics import at_most
from ...errors import InfeasibleStepError, TokendistError
from ...graphs import make_graph
from ._spec import Sweep, Task, level_name
from ._store import Store
from . import _worker

__all__ = ["run_sweep", "run_task", "open_client", "start_fork_server", "biggest_first", "flatten_run_json",
           "level_steps", "SweepOutcome"]

#: The module the fork server imports as it starts (only the fork server: see :mod:`._forkserver`).
FORK_SERVER_PRELOAD = f"{__package__}._forkserver"
#: Set in every local worker: numba kernels on one thread each, so N workers use N cores.
WORKER_ENV = {"NUMBA_NUM_THREADS": "1"}
_START_METHOD = "distributed.worker.multiprocessing-method"
#: Dask's defaults for ``distributed.nanny.pre-spawn-environ`` (its configuration has them only once
#: ``distributed`` is imported, which the fork server's start does not wait for).
_PRE_SPAWN_DEFAULTS = {"MALLOC_TRIM_THRESHOLD_": 65536, "OMP_NUM_THREADS": 1, "MKL_NUM_THREADS": 1,
                       "OPENBLAS_NUM_THREADS": 1}


def _extra(name: str):
    """A module of the ``sweep`` extra (``dask``, ``distributed``), imported when a cluster is used,
    not with this module: a worker runs :func:`run_task` without them, and the main process starts
    the fork server before it imports ``distributed`` (0.45 s here), so that the two overlap."""
    try:
        return importlib.import_module(name)
    except ImportError as exc:
        raise TokendistError(f"sweeps on Dask need dask[distributed] ({exc.name or exc} is missing): "
                             f"pip install 'tokendist[sweep]'") from None


def _plain(x):
    if isinstance(x, np.generic):
        return x.item()
    return x


def flatten_run_json(payload: dict) -> dict:
    """The columns of a sweep row from a ``tokendist run --json`` payload (``RunResult.to_json()``).

    ``graph.spec`` becomes ``graph``, ``graph.n`` ``n`` (and so on), ``initial.X`` and ``final.X``
    become ``initial_X`` and ``final_X``, the options become ``param_X`` columns and the JSON text
    ``params``; the protocol's report is kept as JSON text in ``report``.
    """
    g = payload["graph"]
    params = {k: _plain(v) for k, v in payload["params"].items()}
    row = {"graph": g["spec"], "n": g["n"], "m": g["m"], "heterogeneous": g["heterogeneous"],
           "algo": payload["algorithm"], "params": json.dumps(params, sort_keys=True)}
    row.update({f"param_{k}": v for k, v in sorted(params.items())})
    row.update({k: _plain(payload[k]) for k in ("seed", "steps", "stop_reason", "cycle_length", "tokens")})
    row.update({f"final_{k}": _plain(v) for k, v in payload["final"].items()})
    row.update({f"initial_{k}": _plain(v) for k, v in payload["initial"].items()})
    row.update({k: _plain(payload[k]) for k in ("tokens_moved", "messages", "infeasible_steps")})
    row["report"] = json.dumps(payload["report"], sort_keys=True, default=str)
    row["seconds"] = payload["seconds"]
    return row


def level_steps(steps: np.ndarray, discrepancy: np.ndarray, levels) -> dict:
    """Steps to each discrepancy level, from a run's per-step trace.

    ``steps_to_L`` is the first step at which the discrepancy is <= L; ``settled_L`` the first step
    from which it stays <= L to the end of the run. None where it never happens (a randomised rule
    may reach a level and leave it again, so the two differ).

    Examples
    --------
    >>> level_steps(np.arange(5), np.array([9.0, 3, 1, 2, 1]), [1, 0])
    {'steps_to_1': 2, 'settled_1': 4, 'steps_to_0': None, 'settled_0': None}
    """
    out = {}
    for lv in levels:
        name = level_name(lv)
        below = np.asarray(at_most(np.asarray(discrepancy), lv))  # (exact: int64 against a real level)
        hit = np.flatnonzero(below)
        out[f"steps_to_{name}"] = int(steps[hit[0]]) if hit.size else None
        above = np.flatnonzero(~below)
        if not above.size:
            out[f"settled_{name}"] = int(steps[0])
        elif above[-1] + 1 < steps.size:
            out[f"settled_{name}"] = int(steps[above[-1] + 1])
        else:
            out[f"settled_{name}"] = None
    return out


@functools.lru_cache(maxsize=8)
def _graph(spec: str, seed: int):
    # One build per (spec, seed) per worker process: the tasks of a graph differ in init, algorithm
    # and parameters, and a graph is immutable, so the workers share it between tasks instead of
    # receiving it with each one.
    return make_graph(spec, seed=seed)


def _task_row(task: Task) -> dict:
    """The columns every row has, whatever happened: the task's definition, results left empty."""
    opts = dict(task.options)
    row = {"key": task.key, "sweep": task.sweep, "status": None, "reason": None, "graph": task.graph,
           "n": None, "m": None, "heterogeneous": None, "init": task.init, "algo": task.algo,
           "variant": task.variant, "params": json.dumps(opts, sort_keys=True)}
    row.update({f"param_{k}": v for k, v in sorted(opts.items())})
    row.update({"seed": task.seed, "max_steps": task.max_steps, "steps": None, "stop_reason": None,
                "cycle_length": None, "tokens": None})
    row.update({f"final_{k}": None for k in SUMMARY_METRICS})
    row.update({f"initial_{k}": None for k in SUMMARY_METRICS})
    row.update({"tokens_moved": None, "messages": None, "infeasible_steps": None})
    for lv in task.levels:
        row[f"steps_to_{level_name(lv)}"] = None
    for lv in task.levels:
        row[f"settled_{level_name(lv)}"] = None
    row.update({"report": None, "seconds": None, "wall_seconds": None, "version": __version__})
    return row


def _one_line(exc: BaseException) -> str:
    text = str(exc).strip().splitlines()
    return text[0] if text else type(exc).__name__


def run_task(task: Task, traces: bool = False) -> tuple[dict, dict | None]:
    """Run one task; return its row and (with ``traces``) its per-step trace. Never raises on a
    failing run: the row says ``status`` (ok, skipped, infeasible, failed) and ``reason``."""
    started = time.perf_counter()
    row = _task_row(task)
    trace = None
    try:
        graph = _graph(task.graph, task.seed)
        row.update(n=graph.n, m=graph.m, heterogeneous=graph.speeds is not None)
        # As `tokendist run` does: the protocol from its name and the parameters as text.
        protocol = make_protocol(task.algo, dict(task.params))
        protocol.check_graph(graph)
    except TokendistError as exc:
        status, reason = "skipped", _one_line(exc)
    else:
        try:
            result = simulate(graph, protocol, task.init, seed=task.seed, max_steps=task.max_steps,
                              until_discrepancy=task.until_discrepancy, allow_infeasible=task.allow_infeasible)
        except InfeasibleStepError as exc:
            status, reason = "infeasible", _one_line(exc).split(" (pass")[0]
        except Exception as exc:  # noqa: BLE001  (a sweep records any failure and goes on)
            status = "failed"
            reason = _one_line(exc) if isinstance(exc, TokendistError) else f"{type(exc).__name__}: {_one_line(exc)}"
        else:
            status, reason = "ok", None
            row.update(flatten_run_json(result.to_json()))
            row.update(level_steps(result.trace["step"], result.trace["discrepancy"], task.levels))
            if traces:
                trace = {k: np.asarray(v) for k, v in result.trace.items()}
    row["status"], row["reason"] = status, reason
    row["wall_seconds"] = time.perf_counter() - started
    return row, trace


@contextlib.contextmanager
def _deferred_interrupt():
    """Hold Ctrl-C while a cluster starts or stops, then raise it: Dask cannot close a cluster
    interrupted half way through its start (its exit hook fails with a traceback)."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    caught = []
    previous = signal.signal(signal.SIGINT, lambda signum, frame: caught.append(signum))
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, previous)
    if caught:
        raise KeyboardInterrupt


@contextlib.contextmanager
def _environment(values: dict):
    """``os.environ`` with ``values`` set, restored after (for a child process started inside)."""
    saved = {k: os.environ.get(k) for k in values}
    os.environ.update(values)
    try:
        yield
    finally:
        for k, v in saved.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v


@contextlib.contextmanager
def _sigint_ignored():
    """SIGINT ignored (SIG_IGN) for a child started inside: an ignored signal stays ignored across
    exec, and Python then leaves it ignored instead of raising KeyboardInterrupt."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    previous = signal.signal(signal.SIGINT, signal.SIG_IGN)
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, previous)


def start_fork_server() -> bool:
    """Start the fork server the local cluster's workers are forked from, if it is not running yet.

    The fork server (:mod:`multiprocessing.forkserver`, one per process) imports :mod:`._forkserver`
    as it starts: Dask, tokendist and the engine's compiled pass, once, in a process of its own, so
    it can be started early and load while the caller goes on (the caller's Ctrl-C does not reach
    it: it starts with SIGINT ignored, as do the workers forked from it). It runs until the calling
    process exits, with the code it loaded: in a long-lived process (a notebook), the workers of a
    later cluster run the tokendist it imported, not one edited since.

    Returns
    -------
    bool
        Whether local clusters fork their workers from it (:func:`open_client`): not on a platform
        without a fork server, nor when the Dask configuration
        (``distributed.worker.multiprocessing-method``) chooses another method than its default
        ``spawn``.
    """
    dask = _extra("dask")
    if (dask.config.get(_START_METHOD, default="spawn") != "spawn"
            or "forkserver" not in multiprocessing.get_all_start_methods()):
        return False
    # Only the first start of the fork server reads the list (and the environment): a fork server
    # already running is kept as it is.
    multiprocessing.get_context("forkserver").set_forkserver_preload([FORK_SERVER_PRELOAD])
    with _environment(_fork_server_env(dask)), _sigint_ignored():
        forkserver.ensure_running()
    return True


def _fork_server_env(dask) -> dict:
    """The environment the fork server starts in, so that the workers forked from it have it from
    their start, as spawned ones do: Dask's ``distributed.nanny.pre-spawn-environ`` (one OpenMP/BLAS
    thread, glibc's memory trimming; read by a library as it loads or by a process as it starts,
    where the fork server loads them) and :data:`WORKER_ENV` (numba reads it as it is imported)."""
    pre = dask.config.get("distributed.nanny.pre-spawn-environ", default=_PRE_SPAWN_DEFAULTS) or {}
    # As the nanny takes them: a variable already in the environment wins over the configuration.
    env = {k: os.environ.get(k, str(v)) for k, v in pre.items() if v is not None}
    env.update(WORKER_ENV)
    return env


class InterruptedSyncFilter(logging.Filter):
    """Drops the one record distributed's ``sync`` leaves behind when Ctrl-C interrupts a wait.

    On KeyboardInterrupt, ``distributed.utils.sync`` schedules a ``cancel`` callback on the client's
    event loop; if the interrupted call had not started its coroutine yet, that callback reads a
    variable not yet assigned, and tornado logs the NameError with its traceback ("Exception in
    callback ... sync.<locals>.cancel"). The interrupt itself is handled (the rows saved, exit
    130); the record would only put a traceback under the command's one line.
    """

    def filter(self, record: logging.LogRecord) -> bool:
        exc = record.exc_info[1] if record.exc_info else None
        return not (isinstance(exc, NameError) and "sync.<locals>.cancel" in record.getMessage())


@contextlib.contextmanager
def open_client(workers: int | None = None, scheduler: str | None = None, *, while_starting=None):
    """A Dask client: to ``scheduler`` if given, else to a new local cluster of ``workers`` processes.

    The local cluster's worker processes are forked from the fork server of :func:`start_fork_server`
    (where the platform and the Dask configuration allow), each with a nanny that restarts it if it
    dies (Dask then re-runs its tasks, or reports them as ``KilledWorker``). ``while_starting()``,
    if given, is called once the fork server is loading and before the cluster is waited for: the
    caller's own work then overlaps the workers' start.
    """
    quiet = logging.getLogger("distributed")
    level = quiet.level
    quiet.setLevel(logging.ERROR)  # shutdown chatter ("stream closed") is not the user's business
    loop_log, interrupted_sync = logging.getLogger("tornado.application"), InterruptedSyncFilter()
    loop_log.addFilter(interrupted_sync)
    try:
        if scheduler is not None:
            if while_starting is not None:
                while_starting()
            Client = _extra("distributed").Client
            try:
                client = Client(scheduler, timeout="10s")
            except (OSError, TimeoutError, ValueError) as exc:
                raise TokendistError(f"cannot reach the dask scheduler at {scheduler} ({_one_line(exc)})") from None
            with client:
                yield client
            return
        with contextlib.ExitStack() as stack:
            closing = []
            try:
                with _deferred_interrupt():
                    forked = start_fork_server()
                    if while_starting is not None:
                        while_starting()
                    dask, distributed = _extra("dask"), _extra("distributed")
                    if forked:
                        # For the cluster's lifetime: a nanny also restarts a dead worker this way.
                        stack.enter_context(dask.config.set({_START_METHOD: "forkserver"}))
                    cluster = distributed.LocalCluster(
                        n_workers=workers, threads_per_worker=1, processes=True, host="127.0.0.1",
                        dashboard_address=":0", silence_logs=logging.ERROR, env=dict(WORKER_ENV),
                        preload=[_worker.__name__])
                    closing.append(cluster)
                    client = distributed.Client(cluster)
                    closing.insert(0, client)
                yield client
            finally:
                with _deferred_interrupt():
                    for thing in closing:
                        with contextlib.suppress(Exception):
                            thing.close(timeout=10)
    finally:
        quiet.setLevel(level)
        loop_log.removeFilter(interrupted_sync)


def biggest_first(tasks: list, sizes: dict) -> list:
    """``tasks`` by decreasing estimated cost, ``(n + m) * max_steps`` (``sizes``: ``{graph: (n, m)}``),
    ties and graphs of unknown size in their order (a task's cost is known only when it has run:
    the steps a rule takes, its kernel's cost per edge; a bigger graph and more steps cost more).

    Examples
    --------
    >>> from types import SimpleNamespace as T
    >>> ts = [T(graph="a", max_steps=10), T(graph="b", max_steps=10), T(graph="a", max_steps=50)]
    >>> [(t.graph, t.max_steps) for t in biggest_first(ts, {"a": (4, 4), "b": (16, 32)})]
    [('b', 10), ('a', 50), ('a', 10)]
    """
    def cost(task):
        n, m = sizes.get(task.graph, (0, 0))
        return -(n + m) * task.max_steps

    return sorted(tasks, key=cost)


@dataclass
class SweepOutcome:
    """What :func:`run_sweep` did."""

    sweep: str
    total: int
    already_done: int
    rerun: int = 0
    ran: int = 0
    failures: int = 0
    interrupted: bool = False
    seconds: float = 0.0
    files: list = field(default_factory=list)

    def to_json(self) -> dict:
        return dict(self.__dict__)


def run_sweep(sweep: Sweep, out, *, workers: int | None = None, scheduler: str | None = None,
              client=None, force: bool = False, traces: bool = False, progress=None,
              batch_seconds: float = 2.0, while_starting=None) -> SweepOutcome:
    """Run the tasks of ``sweep`` not yet in ``out/runs.parquet`` and add their rows.

    Parameters
    ----------
    sweep : Sweep
        A validated sweep (:func:`load_sweep`).
    out : path
        The results folder.
    workers, scheduler, client
        Where to run: an existing ``client``, else a scheduler address, else a local cluster of
        ``workers`` processes (default: one per core).
    force : bool
        Re-run tasks whose key is already stored (their rows are replaced).
    traces : bool
        Also write each run's per-step trace to ``out/traces/KEY.parquet``.
    progress : callable, optional
        ``progress(done, total, failures)`` after each finished task (``total`` counts only the
        tasks this call runs).
    batch_seconds : float
        Rows are written at most this often (and at the end, and on Ctrl-C).
    while_starting : callable, optional
        Called once, with no argument, while the workers of a local cluster start (see
        :func:`open_client`), or before the first task is submitted to a ``client`` or a scheduler:
        work of the caller's that then overlaps the workers' start.

    Returns
    -------
    SweepOutcome
        On Ctrl-C (``KeyboardInterrupt``) the rows finished so far are saved and
        ``interrupted`` is set.
    """
    started = time.perf_counter()
    store = Store(out)
    done = store.keys
    todo = list(sweep.tasks) if force else [t for t in sweep.tasks if t.key not in done]
    outcome = SweepOutcome(sweep.name, len(sweep.tasks), len(sweep.tasks) - len(todo),
                           rerun=sum(t.key in done for t in todo))
    order = {t.key: i for i, t in enumerate(sweep.tasks)}
    if progress is not None:
        progress(0, len(todo), 0)
    if not todo:
        outcome.seconds = time.perf_counter() - started
        outcome.files = [str(store.path)] if store.path.exists() else []
        return outcome
    pending: list[dict] = []
    saved: dict[str, str] = {}  # the status of each row this call has written, by key
    done = failed = 0
    last = time.monotonic()

    def flush():
        nonlocal last
        store.add(pending, order)
        # The outcome counts the rows written: Ctrl-C can fall between any two statements, and a
        # row written twice (pending not yet cleared) is counted once, by its key.
        saved.update((r["key"], r["status"]) for r in pending)
        pending.clear()
        last = time.monotonic()

    with contextlib.ExitStack() as stack:
        if client is None:
            client = stack.enter_context(open_client(workers, scheduler, while_starting=while_starting))
        elif while_starting is not None:
            while_starting()
        # Dask starts a map's tasks in the order given: the biggest first, so that the workers do not
        # end on a few big runs one after another while the others wait (the rows do not depend on it).
        todo = biggest_first(todo, sweep.sizes)
        futures = client.map(run_task, todo, traces=traces, pure=False)
        by_key = {f.key: t for f, t in zip(futures, todo)}
        try:
            for fut in _extra("distributed").as_completed(futures):
                try:
                    row, trace = fut.result()
                except Exception as exc:  # noqa: BLE001  (e.g. KilledWorker: the task killed its workers)
                    row, trace = _task_row(by_key[fut.key]), None
                    row.update(status="failed", reason=f"{type(exc).__name__}: {_one_line(exc)}")
                fut.release()
                if trace is not None:
                    store.add_trace(row["key"], trace)
                pending.append(row)
                done += 1
                failed += row["status"] != "ok"
                if progress is not None:
                    progress(done, len(todo), failed)
                if time.monotonic() - last >= batch_seconds:
                    flush()
        except KeyboardInterrupt:
            outcome.interrupted = True
            with contextlib.suppress(Exception):
                client.cancel(futures)
        finally:
            flush()
    outcome.ran = len(saved)
    outcome.failures = sum(status != "ok" for status in saved.values())
    outcome.seconds = time.perf_counter() - started
    outcome.files = [str(store.path)]
    return outcome
