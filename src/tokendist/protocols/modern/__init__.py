"""Modern discrete load balancing (2009-2025): the schemes beyond the five papers.

Importing this package registers its protocols (one private module per algorithm):

* ``quasirandom`` -- Friedrich, Gairing, Sauerwald (SODA 2010; SIAM J. Comput. 2012)
* ``rotor-router`` -- Akbari, Berenbrink (SPAA 2013)
* ``randomized-diffusion`` -- Berenbrink, Cooper, Friedetzky, Friedrich, Sauerwald (SODA 2011)
* ``random-matching``, ``balancing-circuit`` -- Friedrich, Sauerwald (2009); Sauerwald, Sun (2012); Berenbrink et al. (2025)
* ``flow-imitation`` -- Akbari, Berenbrink, Sauerwald (PODC 2012)
* ``stratified-diffusion`` -- Shiraga (arXiv:1802.06532)
* ``pairwise-averaging`` -- Berenbrink, Friedetzky, Kaaser, Kling (IPDPS 2019)
"""

from ._quasirandom import Quasirandom
from ._rotor_router import RotorRouter
from ._randomized_diffusion import RandomizedDiffusion
from ._matching import BalancingCircuit, RandomMatching
from ._flow_imitation import FlowImitation
from ._stratified import StratifiedDiffusion
from ._pairwise_averaging import PairwiseAveraging
from . import _partitioned  # noqa: F401  (gives each protocol above its partitioned form, --backend mpi)

__all__ = ["Quasirandom", "RotorRouter", "RandomizedDiffusion", "RandomMatching", "BalancingCircuit", "FlowImitation", "StratifiedDiffusion", "PairwiseAveraging"]
