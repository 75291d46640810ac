"""Compiled kernels of the diffusion family: variants of the rules in ``.._rules``."""
