"""The engine: the protocol contract, synchronous and message-passing executors, network dynamics,
initial distributions and metrics."""

from ._protocol import MODELS, PROTOCOLS, REQUIREMENTS, Param, Protocol, Step, register_protocol
from ._user import ENTRY_POINT_GROUP, load_plugins, make_protocol, resolve_protocol
from ._initial import INITIAL, InitialDistribution, initial, make_loads, read_loads_file
from ._metrics import METRICS, SUMMARY_METRICS, ideal_loads, measure
from ._dynamics import DYNAMICS, Dynamics, EdgeFailures, GraphSequence, register_dynamics
from ._messages import MessageExecutor, NodeContext
from ._simulate import DEFAULT_MAX_STEPS, TRACE_METRICS, RunResult, make_speeds, simulate, step_overhead
from ._local import NodeView, run_node_rules
from ._conformance import CONFORMANCE_GRAPHS, ConformanceCheck, check_protocol
from . import _mobility, _injection  # noqa: F401  (register their models)
from . import mpi  # noqa: F401  (registers simulate's backend="mpi"; mpi4py is imported only when used)
from ._mobility import *  # noqa: F401,F403
from ._injection import *  # noqa: F401,F403

__all__ = [
    "Protocol", "Param", "Step", "PROTOCOLS", "MODELS", "REQUIREMENTS", "register_protocol", "make_protocol",
    "resolve_protocol", "load_plugins", "ENTRY_POINT_GROUP",
    "INITIAL", "InitialDistribution", "initial", "make_loads", "read_loads_file",
    "METRICS", "SUMMARY_METRICS", "ideal_loads", "measure",
    "DYNAMICS", "Dynamics", "EdgeFailures", "GraphSequence", "register_dynamics",
    "MessageExecutor", "NodeContext", "simulate", "RunResult", "make_speeds", "DEFAULT_MAX_STEPS", "TRACE_METRICS",
    "step_overhead", "NodeView", "run_node_rules", "check_protocol", "ConformanceCheck", "CONFORMANCE_GRAPHS",
]
__all__ += list(getattr(_mobility, "__all__", [])) + list(getattr(_injection, "__all__", []))
