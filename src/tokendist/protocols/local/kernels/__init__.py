"""Compiled kernels of the local family: variants of the rules in ``.._rules``."""
