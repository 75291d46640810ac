"""Compiled kernels of the heterogeneous family: variants of the rules in ``.._rules``."""
