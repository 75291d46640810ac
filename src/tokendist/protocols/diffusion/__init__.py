"""Diffusive load balancing and its roundings: Subramanian, Scherson (SPAA 1994).

Registered protocols: diffusion, diffusion-floor, diffusion-ceil, diffusion-random, diffusion-oriented.

``_rules.py`` holds the protocol classes, each with the rule as the paper states it and its plain
numpy reference step; the per-node forms and the paper's mathematics sit in their own modules
beside it; ``kernels/`` holds the compiled variants (one job per module) that
the rules choose among, each tested against the reference step.
"""

from ._rules import Diffusion, DiffusionFloor, DiffusionCeil, DiffusionRandom, DiffusionOriented, default_diffusivity, rounded_flows, ROUNDINGS
from ._diffusivity import diffusivity, diffusion_matrix, validate_diffusivity, MATRIX_SPECS

__all__ = ['Diffusion', 'DiffusionFloor', 'DiffusionCeil', 'DiffusionRandom', 'DiffusionOriented', 'default_diffusivity', 'rounded_flows', 'ROUNDINGS', 'diffusivity', 'diffusion_matrix', 'validate_diffusivity', 'MATRIX_SPECS']
