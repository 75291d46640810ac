"""Compiled kernels of the modern family: variants of the rules in ``.._quasirandom`` and ``.._rotor_router``."""
