"""The lower-bound loads of Ghosh et al. (1995), Sec. 4, as init specs.

* ``ghosh-4.1[:M]`` -- the Sec. 4.1 loads on ``ghosh-lower-bound`` (multi-port; needs m >= 2kd);
* ``ghosh-4.2[:M]`` -- the Sec. 4.2 loads on ``ghosh-lower-bound`` (single-port; needs m >= k).

The graph and the loads are built by :func:`tokendist.graphs.lower_bound_loads`.
"""

from __future__ import annotations

from ...engine import initial
from ...errors import SpecError
from ...graphs import lower_bound_loads

__all__: list[str] = []


def _m(spec, arg):
    if not arg:
        return None
    if not arg.strip().isdigit():
        raise SpecError(f"bad initial distribution {spec!r}: M must be a non-negative integer")
    return int(arg)


@initial("ghosh-4.1", "ghosh-4.1[:M]", "Ghosh et al. Sec. 4.1 loads on ghosh-lower-bound (multi-port; m >= 2kd)")
def _init41(arg, graph, rng):
    return lower_bound_loads(graph, "4.1", _m(f"ghosh-4.1:{arg}", arg))


@initial("ghosh-4.2", "ghosh-4.2[:M]", "Ghosh et al. Sec. 4.2 loads on ghosh-lower-bound (single-port; m >= k)")
def _init42(arg, graph, rng):
    return lower_bound_loads(graph, "4.2", _m(f"ghosh-4.2:{arg}", arg))
