"""Sweeps: graphs x initial loads x protocols x parameters x seeds, on Dask, into tidy Parquet.

:func:`load_sweep` reads and validates a TOML sweep file into tasks with stable keys
(:mod:`._spec`); :func:`run_sweep` runs the tasks not yet stored on a Dask cluster (:mod:`._run`)
and appends their rows to ``DIR/runs.parquet`` (:mod:`._store`); :func:`write_report` computes the
per-group statistics and draws the plots (:mod:`._report`). Needs the ``sweep`` extra
(``dask[distributed]`` and ``pyarrow``).
"""

from ._spec import SWEEP_KEYS, Sweep, Task, level_name, load_sweep, sweep_from_dict
from ._store import Store
from ._run import SweepOutcome, flatten_run_json, level_steps, open_client, run_sweep, run_task
from ._report import Report, describe, summarize, wins, write_report

__all__ = ["SWEEP_KEYS", "Sweep", "Task", "level_name", "load_sweep", "sweep_from_dict", "Store", "SweepOutcome",
           "flatten_run_json", "level_steps", "open_client", "run_sweep", "run_task", "Report", "summarize",
           "wins", "describe", "write_report"]
