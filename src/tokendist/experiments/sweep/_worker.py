"""Set-up of the worker processes of a sweep's local cluster (a Dask preload module).

Ctrl-C in a terminal reaches the whole process group. The sweep's own process handles it: it saves
the rows finished so far and then closes the cluster. The workers ignore it, so that they do not
die first (and print their tracebacks) while the sweep is saving.
"""

from __future__ import annotations

import signal

__all__ = ["dask_setup"]


def dask_setup(worker) -> None:
    """Called by Dask in each worker process as it starts (``preload``)."""
    try:
        signal.signal(signal.SIGINT, signal.SIG_IGN)
    except ValueError:  # not the main thread of the process (a worker inside a test process)
        pass
