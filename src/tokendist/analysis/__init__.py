"""Theory made computable: stable gaps and MSD of trees, diffusion and conductance bounds, the
expansion bounds and off-line optimum of Ghosh et al."""

from ._bounds import BOUNDS, predict, register_bounds
from . import _stable_gaps, _diffusion_bounds, _heterogeneous_bounds, _ghosh_bounds, _worst_case, _tree_transport  # noqa: F401
from ._stable_gaps import *  # noqa: F401,F403
from ._diffusion_bounds import *  # noqa: F401,F403
from ._heterogeneous_bounds import *  # noqa: F401,F403
from ._ghosh_bounds import *  # noqa: F401,F403
from ._tree_transport import *  # noqa: F401,F403
from ._offline import OfflineResult, offline_feasible, offline_optimum

__all__ = ["BOUNDS", "predict", "register_bounds", "OfflineResult", "offline_feasible", "offline_optimum"]
for _m in (_stable_gaps, _diffusion_bounds, _heterogeneous_bounds, _ghosh_bounds, _tree_transport):
    __all__ += list(getattr(_m, "__all__", []))
del _m
