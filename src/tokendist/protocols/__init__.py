"""The token-distribution protocols, one private module per paper family.

Importing this package registers every protocol in :data:`tokendist.engine.PROTOCOLS`.

* ``_dimension_exchange`` -- Houle, Symvonis, Wood (2004): threshold1, threshold2, discrepancy1
* ``_perfect_tree`` -- Margara, Pistocchi, Vassura: perfect-tree
* ``_diffusion`` -- Subramanian, Scherson (1994): diffusion and its roundings
* ``_heterogeneous`` -- Elsässer, Monien, Schamberger (2006): fos, sos, fos-floor, sos-iou, random-walk
* ``_local_balancing`` -- Ghosh et al. (1995): single-port, multi-port, ds, async-multi-port
"""

from . import _dimension_exchange, _perfect_tree, _diffusion, _heterogeneous, _local_balancing  # noqa: F401
from . import modern  # noqa: F401
from ..engine import PROTOCOLS

__all__ = ["PROTOCOLS"]
