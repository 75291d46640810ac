"""The token-distribution protocols, one package per protocol family.

Importing this package registers every protocol in :data:`tokendist.engine.PROTOCOLS`.

* :mod:`.dimension_exchange` -- Houle, Symvonis, Wood (2004): threshold1, threshold2, discrepancy1
* :mod:`.perfect_tree` -- Margara, Pistocchi, Vassura: perfect-tree
* :mod:`.diffusion` -- Subramanian, Scherson (1994): diffusion and its roundings
* :mod:`.heterogeneous` -- Elsässer, Monien, Schamberger (2006): fos, sos, fos-floor, sos-iou, random-walk
* :mod:`.local` -- Ghosh et al. (1995): single-port, multi-port, ds, async-multi-port
* :mod:`.modern` -- beyond the five papers (2009-2025): quasirandom, rotor-router, randomized-diffusion,
  random-matching, balancing-circuit, flow-imitation, stratified-diffusion, pairwise-averaging

In each family, ``_rules.py`` is where the rule as the paper states it lives.
"""

from ..engine import PROTOCOLS, load_plugins
from . import dimension_exchange, perfect_tree, diffusion, heterogeneous, local, modern  # noqa: F401  (registers them)

__all__ = ["PROTOCOLS", "dimension_exchange", "perfect_tree", "diffusion", "heterogeneous", "local", "modern"]

load_plugins()  # protocols that installed packages register (entry-point group tokendist.protocols)
