"""Imports every command module so that their ``@command`` classes register (one module per area)."""

from . import _graph, _graph_info, _run, _compare, _bench, _reproduce, _tree, _offline, _bounds  # noqa: F401
from . import _sweep  # noqa: F401,E402  (tokendist sweep)
