"""What the local cluster's fork server loads once, so that every worker forked from it starts warm.

The local cluster's worker processes are forked from one multiprocessing fork server
(:func:`tokendist.experiments.sweep._run.start_fork_server`), which imports this module as it
starts. Importing it loads what every worker needs before its first task: Dask, tokendist, the
sweep's task runner (a task is ``_run.run_task``) and the engine's compiled pass (every run records
its trace through it; loading it from numba's on-disk cache costs a process about a fifth of a
second, see :func:`tokendist.engine._pass.summary_row`). It is paid once in the fork server, not in
each worker, and while the main process imports and validates.

Only the fork server imports this module: the import has that side effect on purpose. The pass is
loaded from the cache or not at all (``small=True``: on a cold cache the numpy form runs instead),
so the fork server never compiles. It runs no parallel kernel either: a process forked from one
that has started numba's GNU OpenMP threads dies when it runs a parallel kernel itself
(:mod:`tokendist.kernels._choice`, "Who may race threads"), and the pass is serial.
"""

from __future__ import annotations

import numpy as np

from ...engine._pass import summary_row
from ...graphs import make_graph
from . import _run, _worker  # noqa: F401  (what a worker imports: the task runner and its set-up)

__all__: list[str] = []


def _load_pass() -> None:
    graph = make_graph("ring:8")
    # int64 loads: the dtype of the integer initial distributions, the commonest pass signature.
    try:
        summary_row(graph, np.zeros(graph.n, dtype=np.int64), small=True)
    except Exception:  # noqa: BLE001  (a head start only: a worker whose pass is not loaded loads it
        pass           # on its first task, where a real error is reported in the task's row)


_load_pass()
