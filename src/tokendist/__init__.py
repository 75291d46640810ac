"""tokendist: token distribution (discrete load balancing) on networks.

Quick start::

    >>> import tokendist as td
    >>> r = td.simulate("torus:8x8", "multi-port", "point:1000", seed=1)
    >>> r.tokens, r.stop_reason
    (1000, 'stable')

Sub-packages: :mod:`tokendist.graphs` (model, topologies, analysis), :mod:`tokendist.engine`
(protocol contract, executors, dynamics, metrics), :mod:`tokendist.protocols` (the algorithms of the
five papers), :mod:`tokendist.analysis` (theory: bounds, stable gaps, off-line optimum),
:mod:`tokendist.experiments` (compare, reproduce, sweeps), :mod:`tokendist.plotting`,
:mod:`tokendist.cli`.
"""

__version__ = "0.1.0"

from .graphs import Graph, make_graph
from .engine import PROTOCOLS, Param, Protocol, RunResult, Step, make_loads, make_protocol, simulate, run_node_rules
from . import protocols  # noqa: F401  (registers every protocol)
from . import analysis  # noqa: F401  (registers the bounds and the theory's worst-case loads)
from .errors import TokendistError
from .kernels._choice import allow_auto_threads

__all__ = ["Graph", "make_graph", "simulate", "run_node_rules", "make_loads", "make_protocol", "PROTOCOLS",
           "Protocol", "Step", "Param",
           "RunResult", "TokendistError", "allow_auto_threads", "__version__"]
