"""Graphs: the immutable array model, the topology zoo, conversions, files and graph analysis.

The names below are the public API; implementation modules are private.
"""

from ._model import Graph
from ._specs import TOPOLOGIES, Topology, make_graph, topology
from ._convert import from_networkx, from_scipy
from ._generators import (complete_graph, grid_graph, hypercube_graph, kary_tree, path_graph, random_tree,
                          ring_graph, star_graph, torus_graph)
from . import _interconnect, _random_graphs, _io, _lower_bound  # noqa: F401  (register their families)
from ._interconnect import *  # noqa: F401,F403
from ._random_graphs import *  # noqa: F401,F403
from ._io import *  # noqa: F401,F403
from ._properties import *  # noqa: F401,F403
from ._spectrum import *  # noqa: F401,F403
from ._expansion import *  # noqa: F401,F403
from ._colouring import *  # noqa: F401,F403
from ._trees import *  # noqa: F401,F403
from ._orientation import *  # noqa: F401,F403
from ._lower_bound import *  # noqa: F401,F403
from ._summary import *  # noqa: F401,F403
from . import _summary as _su

from . import _interconnect as _ic, _random_graphs as _rg, _io as _fio, _properties as _pr, _spectrum as _sp
from . import _expansion as _ex, _colouring as _co, _trees as _tr, _orientation as _or, _lower_bound as _lb

__all__ = [
    "Graph", "Topology", "TOPOLOGIES", "topology", "make_graph", "from_networkx", "from_scipy",
    "path_graph", "ring_graph", "star_graph", "complete_graph", "kary_tree", "random_tree", "grid_graph",
    "torus_graph", "hypercube_graph",
]
for _m in (_ic, _rg, _fio, _pr, _sp, _ex, _co, _tr, _or, _lb, _su):
    __all__ += list(getattr(_m, "__all__", []))
del _m
