"""Sweeps: graphs x initial loads x protocols x parameters x seeds, on Dask, into tidy Parquet.

:func:`load_sweep` reads and validates a TOML sweep file into tasks with stable keys
(:mod:`._spec`); :func:`run_sweep` runs the tasks not yet stored on a Dask cluster (:mod:`._run`)
and appends their rows to ``DIR/runs.parquet`` (:mod:`._store`); :func:`write_report` computes the
per-group statistics and draws the plots (:mod:`._report`). Needs the ``sweep`` extra
(``dask[distributed]`` and ``pyarrow``).

The runner (:mod:`._run`) is imported on first use of one of its names, so ``tokendist sweep
report DIR`` does not pay for it; the runner itself imports dask.distributed (a third of a second)
only when it uses a cluster, after it has started the fork server its workers come from.
:func:`prepare_report` imports what the report draws with (matplotlib, half a second), e.g. while
the workers start.
"""

from importlib import import_module

from ._spec import SWEEP_KEYS, Sweep, Task, level_name, load_sweep, sweep_from_dict
from ._store import Store
from ._report import Report, describe, summarize, wins, write_report

_RUN_NAMES = ("SweepOutcome", "biggest_first", "flatten_run_json", "level_steps", "open_client", "run_sweep",
              "run_task", "start_fork_server")

__all__ = ["SWEEP_KEYS", "Sweep", "Task", "level_name", "load_sweep", "sweep_from_dict", "Store", "SweepOutcome",
           "biggest_first", "flatten_run_json", "level_steps", "open_client", "run_sweep", "run_task",
           "start_fork_server", "Report", "summarize", "wins", "describe", "write_report", "prepare_report"]


def prepare_report() -> None:
    """Import the modules :func:`write_report` draws with (:mod:`._plots`, matplotlib) now rather
    than when it draws: ``run_sweep(..., while_starting=prepare_report)`` does it while the workers
    start, when the main process has a core to spare."""
    import_module("._plots", __name__)


def __getattr__(name):
    # PEP 562: the names of ._run, imported when first asked for (dask is the sweep extra).
    if name not in _RUN_NAMES:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    # (._run imports dask itself only when it uses a cluster, with a one-line error if it is missing)
    run = import_module("._run", __name__)
    globals().update((n, getattr(run, n)) for n in _RUN_NAMES)  # later look-ups do not come here
    return globals()[name]


def __dir__():
    return sorted(set(globals()) | set(_RUN_NAMES))
