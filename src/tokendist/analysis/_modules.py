"""Imports every analysis module that registers bounds providers."""

from . import _stable_gaps, _diffusion_bounds, _heterogeneous_bounds, _ghosh_bounds  # noqa: F401
from . import _tree_transport  # noqa: F401  (perfect-tree bounds)
