"""Running a sweep's tasks on Dask distributed: one task = one :func:`tokendist.simulate` call.

With no scheduler address the runner starts a :class:`distributed.LocalCluster` of worker
*processes* (``threads_per_worker=1``, numba held to one thread in each with ``NUMBA_NUM_THREADS=1``),
so that N workers run N tasks at once without oversubscribing the cores; with an address
(``tcp://host:port``) it submits the same tasks to an existing cluster. Dask does the scheduling,
the serialization and the re-running of tasks whose worker died; nothing here is a home-made pool.

A task's row is the ``tokendist run --json`` summary of the same graph, initial distribution,
algorithm, parameters and seed, flattened into columns by :func:`flatten_run_json`, plus the task's
key and settings, the steps to each discrepancy level (first reached, and settled) and the wall
time. A task that fails (the protocol does not apply to the graph, an infeasible step, any error)
becomes a row with its status and a one-line reason; the sweep goes on.
"""

from __future__ import annotations

import contextlib
import functools
import json
import logging
import signal
import threading
import time
from dataclasses import dataclass, field

import numpy as np
from distributed import Client, LocalCluster, as_completed

from ... import __version__
from ...engine import SUMMARY_METRICS, make_protocol, simulate
from ...errors import InfeasibleStepError, TokendistError
from ...graphs import make_graph
from ._spec import Sweep, Task, level_name
from ._store import Store
from . import _worker

__all__ = ["run_sweep", "run_task", "open_client", "flatten_run_json", "level_steps", "SweepOutcome"]


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
        below = discrepancy <= lv
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
def open_client(workers: int | None = None, scheduler: str | None = None):
    """A Dask client: to ``scheduler`` if given, else to a new local cluster of ``workers`` processes."""
    quiet = logging.getLogger("distributed")
    level = quiet.level
    quiet.setLevel(logging.ERROR)  # shutdown chatter ("stream closed") is not the user's business
    try:
        if scheduler is not None:
            try:
                client = Client(scheduler, timeout="10s")
            except (OSError, TimeoutError, ValueError) as exc:
                raise TokendistError(f"cannot reach the dask scheduler at {scheduler} ({_one_line(exc)})") from None
            with client:
                yield client
            return
        closing = []
        try:
            with _deferred_interrupt():
                cluster = LocalCluster(n_workers=workers, threads_per_worker=1, processes=True, host="127.0.0.1",
                                       dashboard_address=":0", silence_logs=logging.ERROR,
                                       env={"NUMBA_NUM_THREADS": "1"}, preload=[_worker.__name__])
                closing.append(cluster)
                client = Client(cluster)
                closing.insert(0, client)
            yield client
        finally:
            with _deferred_interrupt():
                for thing in closing:
                    with contextlib.suppress(Exception):
                        thing.close(timeout=10)
    finally:
        quiet.setLevel(level)


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
              client: Client | None = None, force: bool = False, traces: bool = False,
              progress=None, batch_seconds: float = 2.0) -> SweepOutcome:
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
    last = time.monotonic()

    def flush():
        nonlocal last
        store.add(pending, order)
        pending.clear()
        last = time.monotonic()

    with contextlib.ExitStack() as stack:
        if client is None:
            client = stack.enter_context(open_client(workers, scheduler))
        futures = client.map(run_task, todo, traces=traces, pure=False)
        by_key = {f.key: t for f, t in zip(futures, todo)}
        try:
            for fut in as_completed(futures):
                try:
                    row, trace = fut.result()
                except Exception as exc:  # noqa: BLE001  (e.g. KilledWorker: the task killed its workers)
                    row, trace = _task_row(by_key[fut.key]), None
                    row.update(status="failed", reason=f"{type(exc).__name__}: {_one_line(exc)}")
                fut.release()
                if trace is not None:
                    store.add_trace(row["key"], trace)
                pending.append(row)
                outcome.ran += 1
                outcome.failures += row["status"] != "ok"
                if progress is not None:
                    progress(outcome.ran, len(todo), outcome.failures)
                if time.monotonic() - last >= batch_seconds:
                    flush()
        except KeyboardInterrupt:
            outcome.interrupted = True
            with contextlib.suppress(Exception):
                client.cancel(futures)
        finally:
            flush()
    outcome.seconds = time.perf_counter() - started
    outcome.files = [str(store.path)]
    return outcome
