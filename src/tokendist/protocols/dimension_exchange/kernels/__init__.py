"""Compiled kernels of the dimension exchange family: variants of the rules in ``.._rules``."""
