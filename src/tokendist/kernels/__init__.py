"""Paper-free machinery shared by the protocol families' compiled kernels.

* :mod:`._coins` -- the counter-based coin (:func:`tokendist._random.counter_uniform`) in numba;
* :mod:`._threads` -- the ``threads`` parameter and how a parallel kernel is called;
* :mod:`._choice` -- ``threads=auto``: the serial and threaded kernels raced on the run's own steps.

A family's rules decide which of its variants runs; these modules hold what every family shares,
so that no family imports another's private helpers.
"""

from ._choice import AUTO, MeasuredChoice, allow_auto_threads, auto_threads_allowed, auto_threads_param
from ._threads import THREADS_PARAM, check_threads, run_parallel, run_rows, use_threads

__all__ = ["AUTO", "MeasuredChoice", "allow_auto_threads", "auto_threads_allowed", "auto_threads_param",
           "THREADS_PARAM", "check_threads", "run_parallel", "run_rows", "use_threads"]
