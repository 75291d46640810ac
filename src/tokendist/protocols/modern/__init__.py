"""Modern discrete load balancing (2009-2025): the schemes beyond the five papers.

Importing this package registers its protocols (one private module per algorithm):

* ``quasirandom`` -- Friedrich, Gairing, Sauerwald (SODA 2010; SIAM J. Comput. 2012)
* ``rotor-router`` -- Akbari, Berenbrink (SPAA 2013)
* ``randomized-diffusion`` -- Berenbrink, Cooper, Friedetzky, Friedrich, Sauerwald (SODA 2011)
"""

from ._quasirandom import Quasirandom
from ._rotor_router import RotorRouter
from ._randomized_diffusion import RandomizedDiffusion

__all__ = ["Quasirandom", "RotorRouter", "RandomizedDiffusion"]
