"""Sweeps: graphs x initial loads x protocols x parameters x seeds, on Dask, into tidy Parquet.

:func:`load_sweep` reads and validates a TOML sweep file into tasks with stable keys
(:mod:`._spec`); :func:`run_sweep` runs the tasks not yet stored on a Dask cluster (:mod:`._run`)
and appends their rows to ``DIR/runs.parquet`` (:mod:`._store`); :func:`write_report` computes the
per-group statistics and draws the plots (:mod:`._report`). Needs the ``sweep`` extra
(``dask[distributed]`` and ``pyarrow``).

The report's names are loaded on first use (or by :func:`prepare_report`): its statistics import
:mod:`scipy.stats` (0.8 s here), which the workers of a sweep never need, and which the main
process can import while its workers start. Dask itself is imported when a cluster is used
(:func:`open_client`).
"""

import importlib

from ._spec import SWEEP_KEYS, Sweep, Task, level_name, load_sweep, sweep_from_dict
from ._store import Store
from ._run import (SweepOutcome, biggest_first, flatten_run_json, level_steps, open_client, run_sweep, run_task,
                   start_fork_server)

__all__ = ["SWEEP_KEYS", "Sweep", "Task", "level_name", "load_sweep", "sweep_from_dict", "Store", "SweepOutcome",
           "biggest_first", "flatten_run_json", "level_steps", "open_client", "run_sweep", "run_task",
           "start_fork_server", "Report", "summarize", "wins", "describe", "write_report", "prepare_report"]

_REPORT_NAMES = {"Report", "summarize", "wins", "describe", "write_report"}


def prepare_report():
    """Import the report's module (:mod:`._report`) now, e.g. while the workers of a sweep start
    (``run_sweep(..., while_starting=prepare_report)``); :func:`write_report` does it otherwise."""
    return importlib.import_module("._report", __name__)


def __getattr__(name):
    # PEP 562: ``sweep.write_report`` (and ``from ... import write_report``) import the report module
    # then, not with the package.
    if name in _REPORT_NAMES:
        return getattr(prepare_report(), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
